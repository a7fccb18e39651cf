"""An agent whose constructor raises: the failure says it was the construction (class and
name) and gives the user's line, while the caller still sees the constructor's own error."""

from __future__ import annotations

import inspect

import pytest

from scenarios import parse_scenario, run_scenario
from sim import Simulation
from sim.errors import construction_of
from tests.scenarios.user_agents import BrokenConstructor

SCENARIO = """\
name: broken
description: An agent that cannot be constructed.
seed: 1
faults: none
agents:
  a: {class: "tests.scenarios.user_agents:BrokenConstructor"}
steps:
  - call: {agent: a, method: ping}
"""


def _raise_line() -> int:
    lines, first = inspect.getsourcelines(BrokenConstructor.__init__)
    return first + next(i for i, line in enumerate(lines) if "raise RuntimeError" in line)


def test_the_failure_names_the_construction_and_the_users_line() -> None:
    """Not `a.ping() failed with RuntimeError`: the sentence says whose constructor raised."""
    (failure,) = run_scenario(parse_scenario(SCENARIO, "broken.yaml")).failures
    assert failure.startswith(
        "broken.yaml:8: step 1 (call): a.ping() failed: constructing agent 'a' "
        "(tests.scenarios.user_agents.BrokenConstructor) raised RuntimeError: "
        "missing setting: API_URL, at "
    ), failure
    assert failure.endswith(f"user_agents.py:{_raise_line()}")


def test_the_error_keeps_its_type_and_carries_the_construction() -> None:
    """`expect_error: RuntimeError` still matches; the error notes the agent and the line."""
    sim = Simulation(seed=1)
    ref = sim.agent(BrokenConstructor, "b")
    with pytest.raises(RuntimeError, match="missing setting") as caught:
        sim.call(ref, "ping")
    construction = construction_of(caught.value)
    assert construction is not None
    assert (construction.cls, construction.name) == (
        "tests.scenarios.user_agents.BrokenConstructor",
        "b",
    )
    assert construction.place is not None
    assert construction.place.endswith(f"user_agents.py:{_raise_line()}")
    assert any("constructing agent 'b'" in note for note in caught.value.__notes__)


def test_an_error_of_a_method_is_not_called_a_construction() -> None:
    """Only the constructor's errors are marked."""
    text = SCENARIO.replace("BrokenConstructor", "Tally").replace("ping}", "add, args: [0]}")
    (failure,) = run_scenario(parse_scenario(text, "t.yaml")).failures
    assert "constructing" not in failure and "a.add(0) failed with ValueError" in failure, failure
