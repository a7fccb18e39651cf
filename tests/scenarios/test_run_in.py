"""`Simulation.run_in(ref, fn)` and the `run_in` step, the counterpart of the real test pool's
`runInDurableObject(stub, fn)`: a function run against the live instance as a delivery, under
the input gate, its writes committed as a turn, its result returned."""

from __future__ import annotations

import pytest

from scenarios import parse_scenario, run_scenario
from scenarios.diff.plan import compile_plan
from scenarios.language.errors import InvalidScenario
from sim import AgentEvicted, AgentRef, Simulation
from tests.scenarios.user_agents import SlowStart, Tally, is_ready, read_tally, reset_tally


def test_a_function_reads_the_live_instance_and_returns_its_result() -> None:
    sim = Simulation(seed=1)
    ref = sim.agent(Tally, "t")
    sim.call(ref, "add", 2)
    assert sim.run_in(ref, read_tally) == 2
    assert sim.run_in(ref, lambda agent: agent is sim.instance_of(ref)) is True
    assert [r.fields for r in sim.trace if r.event == "run_in"][0] == {"function": "read_tally"}


def test_an_async_function_is_awaited_and_its_writes_commit_as_a_turn() -> None:
    """The write before the function's first await is committed: it survives an eviction
    that kills the function while it sleeps, which the caller sees as AgentEvicted."""
    sim = Simulation(seed=1)
    ref = sim.agent(Tally, "t")
    sim.call(ref, "add", 2)
    pending = sim.start_run_in(ref, reset_tally)
    sim.run_for(500)
    sim.evict(ref)
    with pytest.raises(AgentEvicted):
        sim.wait(pending)
    assert sim.run_in(ref, read_tally) == 40
    assert sim.run_in(ref, reset_tally) == "t" and sim.now_ms == 1_500


def test_it_waits_at_the_input_gate_while_startup_runs() -> None:
    """Started while startup is under way (a request woke the agent), it runs after it."""
    sim = Simulation(seed=1)
    ref = AgentRef(SlowStart, "s")
    request = sim.start_fetch(ref)
    assert sim.wait(sim.start_run_in(ref, is_ready)) is True
    assert sim.now_ms == 5_000
    sim.wait(request)


def test_it_wakes_an_evicted_agent_without_startup_as_a_call_on_a_stub() -> None:
    sim = Simulation(seed=1)
    ref = sim.agent(SlowStart, "s")
    sim.run_for(5_000)
    sim.evict(ref)
    assert sim.run_in(ref, is_ready) is False
    after = [r.event for r in sim.trace if r.inc == 2]
    assert after[:2] == ["incarnation:start", "run_in"] and "startup:begin" not in after


def test_an_error_of_the_function_is_raised_to_the_caller() -> None:
    sim = Simulation(seed=1)
    ref = sim.agent(Tally, "t")
    with pytest.raises(ZeroDivisionError):
        sim.run_in(ref, lambda agent: 1 // 0)
    assert any(r.event == "run_in:error" for r in sim.trace)


STEPS = """\
name: run-in
description: A run_in step reads and writes the live instance.
seed: 1
faults: none
agents:
  t: {class: "tests.scenarios.user_agents:Tally"}
steps:
  - call: {agent: t, method: add, args: [2], returns: 2}
  - run_in: {agent: t, function: "tests.scenarios.user_agents:read_tally", returns: 2}
  - run_in: {agent: t, function: "tests.scenarios.user_agents:reset_tally", returns: t}
  - evict: {agent: t}
  - run_in: {agent: t, function: "tests.scenarios.user_agents:read_tally", returns: 40}
  - run_in: {agent: t, function: "tests.scenarios.user_agents:count_of", expect_error: TypeError}
"""


def test_the_run_in_step_runs_returns_and_expects_errors() -> None:
    result = run_scenario(parse_scenario(STEPS, "r.yaml"))
    assert result.passed, result.report()
    wrong = STEPS.replace("returns: 40", "returns: 41")
    (failure,) = run_scenario(parse_scenario(wrong, "r.yaml")).failures
    assert failure == (
        "r.yaml:12: step 5 (run_in): run_in tests.scenarios.user_agents:read_tally on t "
        "returned 40, expected 41"
    )


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("read", "function: 'read'; expected 'package.module:function'"),
        (
            "tests.scenarios.user_agents:read_tall",
            "function: tests.scenarios.user_agents has no 'read_tall'; functions there: "
            "['count_of', 'is_ready', 'read_tally', 'reset_tally']",
        ),
        ("tests.scenarios.user_agents:Tally", "is not a function"),
    ],
)
def test_a_function_that_cannot_be_imported_is_refused_at_its_line(
    function: str, message: str
) -> None:
    text = STEPS.replace("tests.scenarios.user_agents:read_tally", function, 1)
    with pytest.raises(InvalidScenario, match="r.yaml:9: step 2 \\(run_in\\): ") as caught:
        parse_scenario(text, "r.yaml")
    assert message in str(caught.value)


def test_the_differential_stage_does_not_play_a_run_in_step() -> None:
    text = STEPS.replace("tests.scenarios.user_agents:Tally", "scenarios.workloads:Counter")
    text = text.split("  - call:")[0] + (
        '  - run_in: {agent: t, function: "tests.scenarios.user_agents:count_of"}\n'
    )
    compiled = compile_plan(parse_scenario(text, "r.yaml"))
    assert compiled.plan is None and compiled.skip is not None
    assert "step kind run_in is not played" in compiled.skip.sentence()
