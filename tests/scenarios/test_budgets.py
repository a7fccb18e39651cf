"""Run budgets: a runaway run is stopped by its events or records budget, deterministically, with
one sentence naming the budget, the busiest agent and its records, and the replay command; the
budget is set by the defaults, the file's `limits:` and the command line, in that order."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from scenarios import InvalidScenario, parse_scenario
from scenarios.run.runner import budget_for, budget_overrides, run_scenario
from scenarios.workloads import Counter
from sim import Simulation
from sim.budget import DEFAULT_BUDGET, BudgetExceeded, RunBudget, rss_bytes
from tests.scenarios.helpers import library_files, without_release_notes
from tests.scenarios.test_cli import run_cli

RUNAWAY = """\
name: runaway
description: A 1 ms heartbeat beside a fiber step of a year.
seed: 1
agents:
  worker:
    workload: fibers
    keep_alive_interval: 1ms
    fibers: [{name: ingest, steps: 2, step: 366d}]
steps:
  - call: {agent: worker, method: status}
  - run_for: 366d
"""


def test_a_runaway_is_stopped_by_its_events_budget_with_a_sentence_saying_why() -> None:
    scenario = parse_scenario(RUNAWAY + "limits: {events: 3000}\n", "runaway.yaml")
    result = run_scenario(scenario)
    assert not result.passed
    (failure,) = result.failures
    assert failure.startswith(
        "runaway.yaml: liveness: the run did not settle during its steps (before any liveness "
        "phase): it used up its budget of 3,000 simulated events (its events budget) and was "
        "stopped at 00:00:00."
    )
    assert "the busiest agent was FiberWorkload/worker" in failure
    assert "alarm:fired x" in failure
    assert "raise it with `limits: {events: N}` or --max-events N" in failure
    again = run_scenario(scenario)
    assert (again.failures, again.digest) == (result.failures, result.digest)


def test_a_spinning_run_is_stopped_early_by_its_rate_in_simulated_time() -> None:
    """A 1 ms heartbeat steps thousands of events per simulated second: it is stopped after
    a few thousand events as spinning, long before its events budget, deterministically."""
    scenario = parse_scenario(RUNAWAY, "runaway.yaml")
    result = run_scenario(scenario)
    (failure,) = result.failures
    assert "its budget of 2,000 simulated events per simulated second" in failure
    assert "(its events_per_second budget)" in failure
    assert "`limits: {events_per_second: N}` or --max-events-per-second N" in failure
    assert result.events < 20_000
    calm = parse_scenario(
        RUNAWAY + "limits: {events_per_second: 1000000, events: 30000}\n", "r.yaml"
    )
    assert "its events budget" in run_scenario(calm).failures[0]


def test_the_records_budget_stops_a_run_that_writes_too_much() -> None:
    scenario = parse_scenario(RUNAWAY + "limits: {records: 2000}\n", "runaway.yaml")
    (failure,) = run_scenario(scenario).failures
    assert "its budget of 2,000 trace records (its records budget)" in failure
    assert "`limits: {records: N}` or --max-records N" in failure


def test_the_command_line_overrides_the_file_and_names_its_flags_in_the_replay() -> None:
    scenario = parse_scenario(RUNAWAY + "limits: {events: 3000}\n", "runaway.yaml")
    assert budget_for(scenario) == dataclasses.replace(DEFAULT_BUDGET, events=3000)
    with budget_overrides(events=1500, records=None):
        assert budget_for(scenario).events == 1500
        result = run_scenario(scenario)
    assert "budget of 1,500 simulated events" in result.failures[0]
    assert result.replay == "agentsim run runaway.yaml --seed 1 --max-events 1500"
    assert budget_for(scenario).events == 3000


def test_agentsim_run_fails_a_runaway_with_exit_1_and_its_replay_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runaway.yaml"
    path.write_text(RUNAWAY, encoding="utf-8")
    failures = tmp_path / "failures"
    code, out, err = run_cli(
        capsys, "run", str(path), "--max-events", "2000", "--failures", str(failures)
    )
    assert code == 1 and without_release_notes(err).startswith(
        "agentsim run: warning: "
    )  # it has no expectation
    assert "its events budget" in out
    assert f"replay: agentsim run {path} --seed 1 --max-events 2000" in out
    assert out.splitlines()[-1] == "0 passed, 1 failed"
    assert (failures / "runaway-1.json").is_file()


def test_every_library_story_runs_far_inside_the_default_budget() -> None:
    """The defaults are generous: the largest story uses under a tenth of each."""
    for path in library_files():
        scenario = parse_scenario(path.read_text(encoding="utf-8"), str(path))
        with budget_overrides(
            events=DEFAULT_BUDGET.events // 10, records=DEFAULT_BUDGET.records // 10
        ):
            result = run_scenario(scenario)
        assert result.passed, result.failures


def test_a_plain_simulation_counts_events_and_stops_at_its_budget() -> None:
    with Simulation(budget=RunBudget(events=50, records=None, wall_s=None, memory_mb=None)) as sim:
        ref = sim.agent(Counter, "c")
        sim.call(ref, "increment")
        used = sim.events
        assert 0 < used < 50
        with pytest.raises(BudgetExceeded) as caught:
            for _ in range(100):
                sim.call(ref, "increment")
        assert caught.value.budget == "events" and sim.events == 50
        with pytest.raises(BudgetExceeded):  # it stays stopped
            sim.run_for(1)
    with Simulation() as unlimited:
        unlimited.call(unlimited.agent(Counter, "c"), "increment")
        assert unlimited.events > 0


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ("{events: 0}", "limits: events: 0; expected a whole number from 1 to 1000000000"),
        ("{wall_clock: 500ms}", "limits: wall_clock: '500ms'; expected at least 1s"),
        ("{memory_mb: 1}", "limits: memory_mb: 1; expected a whole number from 16 to"),
        ("{event: 5}", "limits: unknown key 'event'; did you mean 'events'?"),
    ],
)
def test_limits_are_checked_at_their_line(limits: str, message: str) -> None:
    with pytest.raises(InvalidScenario) as caught:
        parse_scenario(RUNAWAY + f"limits: {limits}\n", "r.yaml")
    assert str(caught.value).startswith(f"r.yaml:12: {message}")


def test_limits_set_every_budget() -> None:
    text = RUNAWAY + "limits: {events: 10, records: 20, wall_clock: 1m, memory_mb: 64}\n"
    scenario = parse_scenario(text, "r.yaml")
    assert budget_for(scenario) == RunBudget(events=10, records=20, wall_s=60.0, memory_mb=64)


@pytest.mark.parametrize(
    "command",
    [["fuzz", "--examples", "2"], ["explore", "--crash-points", "1", "--interleavings", "0"]],
    ids=["fuzz", "explore"],
)
def test_fuzz_and_explore_run_under_the_budget_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """The flags reach every run a hunt makes: here the base run itself is stopped."""
    story = library_files()[0]
    code, out, err = run_cli(
        capsys, command[0], str(story), *command[1:], "--max-events", "5", "--out", str(tmp_path)
    )
    assert code in (1, 2) and "Traceback" not in out + err
    assert "its events budget" in out
    assert "--max-events 5" in out


def test_replaying_a_failure_file_runs_under_the_budget_flags_it_was_found_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runaway.yaml"
    path.write_text(RUNAWAY, encoding="utf-8")
    failures = tmp_path / "failures"
    run_cli(capsys, "run", str(path), "--max-events", "2000", "--failures", str(failures))
    code, out, _ = run_cli(capsys, "replay", str(failures / "runaway-1.json"))
    assert code == 1
    assert out.splitlines()[-1].startswith("REPRODUCED runaway seed=1")


@pytest.mark.parametrize(
    ("budget", "name"),
    [(RunBudget(None, None, 0.0, None), "wall_s"), (RunBudget(None, None, None, -1), "memory_mb")],
    ids=["wall-clock", "memory"],
)
def test_the_machine_budgets_stop_a_run_and_say_they_depend_on_the_machine(
    budget: RunBudget, name: str
) -> None:
    """(Limits no run can stay under, so that the test does not depend on the machine.)"""
    if name == "memory_mb" and rss_bytes() is None:
        pytest.skip("no /proc/self/statm here")
    with Simulation(budget=budget) as sim:
        ref = sim.agent(Counter, "c")
        with pytest.raises(BudgetExceeded) as caught:
            sim.call(ref, "work", 10_000)
    assert caught.value.budget == name and not caught.value.deterministic
    assert caught.value.sentence().endswith(
        "(this budget depends on the machine: the same run may pass elsewhere)"
    )
