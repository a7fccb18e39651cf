"""Agent code that never yields is stopped (issue 19, part 1): the per-turn limit `turn_s` and
the wall-clock budget stop `while True: pass` in a step, in any thread, from a scenario, the
command line, worker processes and the pytest plugin, with a sentence naming the agent, the
method and the line. A plain `Simulation()` has no other limit, and a budget's sentence says
which phase of the run it stopped."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import ClassVar

import hypothesis
import pytest
from hypothesis.stateful import rule

import sim.budget
from scenarios import InvalidScenario, parse_scenario
from scenarios.cli import main
from scenarios.run.runner import run_scenario
from sim import Simulation
from sim.budget import BudgetExceeded, RunBudget
from sim.strategies import AgentMachine, run_machine
from tests.unit import runaway_agents
from tests.unit.runaway_agents import SPIN_LINES, Spinner

AGENTS_FILE = runaway_agents.__file__
SPINNER = """\
name: spinner
description: A method whose body loops without awaiting.
seed: 0
agents:
  spinner: {class: "tests.unit.runaway_agents:Spinner"}
steps:
  - call: {agent: spinner, method: spin}
"""


def _names_the_loop(text: str) -> bool:
    return any(f"{AGENTS_FILE}:{line}" in text for line in SPIN_LINES)


def _stopped(budget: RunBudget, method: str = "spin") -> BudgetExceeded:
    with Simulation(budget=budget) as sim, pytest.raises(BudgetExceeded) as caught:
        sim.call(sim.agent(Spinner, "s"), method)
    return caught.value


def test_a_loop_without_await_is_stopped_by_the_turn_limit_naming_agent_method_and_line() -> None:
    stop = _stopped(RunBudget.unlimited(turn_s=0.2))
    assert stop.budget == "turn_s"
    text = str(stop)
    assert "Spinner/s was running in Spinner.spin at " in text
    assert _names_the_loop(text), text
    assert "(its turn_s budget)" in text
    assert "`limits: {turn_s: N}` or --max-turn N" in text


def test_agent_code_that_catches_exception_does_not_swallow_the_stop() -> None:
    stop = _stopped(RunBudget.unlimited(turn_s=0.2), "spin_and_swallow")
    assert stop.budget == "turn_s"
    assert "Spinner.spin_and_swallow" in str(stop)


def test_the_wall_clock_budget_stops_a_step_that_never_yields() -> None:
    stop = _stopped(RunBudget.unlimited(wall_s=0.3))
    assert stop.budget == "wall_s"
    assert _names_the_loop(str(stop))


def test_a_simulation_run_in_another_thread_is_stopped_there() -> None:
    """As in a Dask worker's thread, where no signal reaches."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(_stopped(RunBudget.unlimited(turn_s=0.2)))
        except BaseException as exc:  # noqa: BLE001 - the test reads whatever came out
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    (stop,) = outcome
    assert isinstance(stop, BudgetExceeded) and _names_the_loop(str(stop)), stop


def test_the_same_simulation_runs_on_after_a_step_that_yields() -> None:
    """The limit is per stretch of code: a run of many short steps is never stopped by it."""
    with Simulation(budget=RunBudget.unlimited(turn_s=0.2)) as sim:
        ref = sim.agent(Spinner, "s")
        assert [sim.call(ref, "ping") for _ in range(50)] == ["pong"] * 50


def test_a_plain_simulation_is_unlimited_but_for_the_turn_limit() -> None:
    """`RunBudget.unlimited()` leaves no field set; `Simulation()` keeps only the turn limit
    (a loop at one instant of 20,000 events is not stopped as spinning)."""
    unlimited = RunBudget.unlimited()
    assert all(getattr(unlimited, f.name) is None for f in dataclasses.fields(RunBudget))
    with Simulation() as sim:
        assert sim.call(sim.agent(Spinner, "s"), "zero_sleeps", 20_000) == 20_000
        assert sim._meter.budget == RunBudget.unlimited(turn_s=RunBudget().turn_s)


def test_a_budget_s_sentence_names_the_phase_it_stopped_in() -> None:
    with Simulation(budget=RunBudget.unlimited(events=200)) as sim:
        ref = sim.agent(Spinner, "s")
        with pytest.raises(BudgetExceeded) as steps:
            sim.call(ref, "zero_sleeps", 1_000)
    assert "did not settle during its steps (before any liveness phase)" in str(steps.value)
    assert "liveness phase:" not in str(steps.value)
    with Simulation(budget=RunBudget.unlimited(events=200)) as sim:
        ref = sim.agent(Spinner, "s")
        sim.start_call(ref, "zero_sleeps", 1_000)
        with pytest.raises(BudgetExceeded) as liveness:
            sim.quiesce()
    assert "did not settle in its liveness phase: it used up its budget of 200 simulated " in (
        str(liveness.value)
    )


def test_a_scenario_sets_the_turn_limit_and_agentsim_run_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("spinner.yaml").write_text(SPINNER + "limits: {turn_s: 0.2}\n", encoding="utf-8")
    code = main(["run", "spinner.yaml"])
    out = capsys.readouterr().out
    assert code == 1
    assert "(its turn_s budget)" in out and _names_the_loop(out), out
    assert "replay: agentsim run spinner.yaml --seed 0" in out


def test_the_command_line_flag_sets_the_turn_limit_and_is_in_the_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("spinner.yaml").write_text(SPINNER, encoding="utf-8")
    code = main(["run", "spinner.yaml", "--max-turn", "200ms"])
    out = capsys.readouterr().out
    assert code == 1 and "budget of 0.2 wall-clock seconds" in out, out
    assert "replay: agentsim run spinner.yaml --seed 0 --max-turn 200ms" in out


def test_worker_processes_report_the_stop_as_one_process_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("spinner.yaml").write_text(SPINNER + "limits: {turn_s: 0.2}\n", encoding="utf-8")
    code = main(["run", "spinner.yaml", "--seeds", "0..1", "--workers", "2"])
    out = capsys.readouterr().out
    assert code == 1
    assert re.search(r"^0 passed, 2 failed$", out, re.M), out
    assert "FAIL spinner seed=0 " in out and "FAIL spinner seed=1 " in out
    assert "(its turn_s budget)" in out and _names_the_loop(out)


def test_the_turn_limit_is_checked_by_the_file_s_validation() -> None:
    with pytest.raises(InvalidScenario, match=r"x\.yaml:8: .*turn_s.*0\.01 to 86400"):
        parse_scenario(SPINNER + "limits: {turn_s: 0}\n", "x.yaml")
    scenario = parse_scenario(SPINNER + "limits: {turn_s: 0.2}\n", "x.yaml")
    assert scenario.limits == {"turn_s": 0.2}
    assert not run_scenario(scenario).passed


INNER_TEST = """
import sim.budget
from tests.unit.runaway_agents import Spinner

sim.budget.DEFAULT_TURN_S = 0.2


def test_spins(sim):
    sim.call(sim.agent(Spinner, "s"), "spin")
"""


def test_the_pytest_plugin_s_sim_fixture_stops_a_spinning_test(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER_TEST, encoding="utf-8")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_inner.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout
    assert "(its turn_s budget)" in done.stdout and _names_the_loop(done.stdout), done.stdout


def test_a_local_dask_cluster_reports_the_stop_as_one_process_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Dask runs a task in a worker's thread pool, never its main thread: the stop lands there
    and is reported as a serial run reports it."""
    pytest.importorskip("distributed")
    monkeypatch.chdir(tmp_path)
    Path("spinner.yaml").write_text(SPINNER + "limits: {turn_s: 0.2}\n", encoding="utf-8")
    code = main(["run", "spinner.yaml", "--seeds", "0..1", "--dask", "local", "--workers", "2"])
    out = capsys.readouterr().out
    assert code == 1
    assert re.search(r"^0 passed, 2 failed$", out, re.M), out
    assert "(its turn_s budget)" in out and _names_the_loop(out), out


class _SpinningMachine(AgentMachine):
    agents: ClassVar[dict[str, type]] = {"s": Spinner}

    @rule()
    def spin(self) -> None:
        self.rpc("s", "spin")


def test_run_machine_stops_a_rule_whose_agent_code_never_yields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stateful test over an agent that spins ends with the stop, naming the loop's line,
    instead of hanging Hypothesis's search."""
    monkeypatch.setattr(sim.budget, "DEFAULT_TURN_S", 0.2)
    with pytest.raises(BudgetExceeded) as caught:
        run_machine(
            _SpinningMachine,
            settings=hypothesis.settings(max_examples=5, database=None, deadline=None),
        )
    assert caught.value.budget == "turn_s"
    assert _names_the_loop(str(caught.value)), str(caught.value)
