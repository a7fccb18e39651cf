"""What Hypothesis prints for a failing property over agentsim: a falsifying example that is
Python building the same schedule (it pastes into `@example`), and explanations that name the
user's lines, not agentsim's."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from hypothesis import Phase, given, settings

from scenarios.hunt.explanations import AGENTSIM_FOLDERS
from sim import Simulation
from sim.checkers import InvariantViolation, assert_invariants
from sim.strategies import Fault, FaultDriver, Schedule, fault_schedules, without_explain
from tests.strategies.agents import HastyResearcher

ROOT = Path(__file__).resolve().parents[2]
EXPLAINING = settings(
    database=None,
    derandomize=True,
    deadline=None,
    max_examples=60,
    phases=[Phase.generate, Phase.shrink, Phase.explain],
)
seen: list[Schedule] = []


@given(schedule=fault_schedules(["r"], kinds=["deploy", "evict"], horizon_ms=200_000))
@EXPLAINING
def stash_kept_under_faults(schedule: Schedule) -> None:
    """The planted recovery bug under drawn faults, checked with `assert_invariants`."""
    seen.append(schedule)
    with Simulation(seed=schedule.seed) as sim:
        driver = FaultDriver(sim, {"r": HastyResearcher})
        driver.arm(schedule)
        driver.call("r", "research")
        driver.run_until(400_000)
        assert_invariants(sim, ["no_lost_stash"])


@pytest.fixture(scope="module")
def report() -> str:
    """The notes Hypothesis attached to the failure (what pytest prints under it)."""
    seen.clear()
    with pytest.raises(InvariantViolation) as caught:
        stash_kept_under_faults()
    return "\n".join(getattr(caught.value, "__notes__", []))


def test_the_falsifying_example_is_python_that_builds_the_schedule(report: str) -> None:
    """The printed `schedule=...` evaluates, with only `Fault` and `Schedule` imported, to the
    schedule of the failing run (Hypothesis runs the shrunk example last)."""
    block = re.search(r"Failing test case: stash_kept_under_faults\((.*?)\n\)", report, re.S)
    assert block, report
    assert "lambda" not in block.group(1)
    arguments = eval(f"dict({block.group(1)})", {"Fault": Fault, "Schedule": Schedule})
    assert arguments["schedule"] == seen[-1]
    assert isinstance(arguments["schedule"].faults, tuple)


@pytest.mark.skipif(
    sys.gettrace() is not None, reason="Hypothesis skips its explain phase under a tracer"
)
def test_explanations_name_the_user_s_lines_not_agentsim_s(report: str) -> None:
    """The explain phase's lines point at the agent's planted bug, never into agentsim."""
    assert "Explanation:" in report, report
    source = (ROOT / "tests/strategies/agents.py").read_text(encoding="utf-8").splitlines()
    planted = next(i for i, line in enumerate(source, 1) if "the planted bug: the first" in line)
    assert f"tests/strategies/agents.py:{planted}" in report, report
    for folder in AGENTSIM_FOLDERS:
        assert folder not in report, report


def test_run_machine_leaves_the_explain_phase_out_by_default() -> None:
    """Without settings, run_machine runs the active profile minus the explain phase."""
    phases = list(Phase)
    assert Phase.explain not in without_explain(settings(phases=phases)).phases
    assert [p for p in without_explain(settings(phases=phases)).phases] == [
        p for p in phases if p != Phase.explain
    ]
