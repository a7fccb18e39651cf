"""Reproducers the Hypothesis API writes fail when run as written, with the test's failure; a
failure a file cannot state, or one that does not come back, writes no file and says so."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import invariant, rule

from scenarios.hunt.fault_draws import Fault, Schedule
from scenarios.hunt.reproducers import FlakyFinding
from scenarios.language.loader import load_scenario
from scenarios.workloads import Counter
from sim import AgentEvicted, Simulation, StorageError
from sim.checkers import InvariantViolation, assert_invariants
from sim.kernel import IncarnationKilled
from sim.strategies import (
    AgentMachine,
    ExpectationFailed,
    FaultDriver,
    UnstatedFailure,
    run_machine,
    write_reproducer,
)
from tests.strategies.agents import Careful, Grumpy, HastyResearcher

ROOT = Path(__file__).resolve().parents[2]
FAULT_ERRORS = (AgentEvicted, StorageError, IncarnationKilled)
DEPLOY_AFTER_FIRST_STASH = Schedule(0, (Fault(60_000, "deploy"),))


def agentsim_run(path: Path) -> subprocess.CompletedProcess[str]:
    """`agentsim run PATH` as a user runs it, from another folder."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "scenarios.cli", "run", str(path)],
        capture_output=True,
        text=True,
        cwd=path.parent,
        env=env,
        timeout=300,
    )


def hasty_run(cls: type = HastyResearcher) -> tuple[FaultDriver, BaseException | None]:
    """The planted bug's story: research, a deploy after the first stash, time for recovery;
    then `assert_invariants`, as a user's test ends."""
    sim = Simulation(seed=0)
    driver = FaultDriver(sim, {"r": cls})
    driver.arm(DEPLOY_AFTER_FIRST_STASH)
    driver.call("r", "research")
    driver.run_until(100_000)
    try:
        assert_invariants(sim, ["no_lost_stash"])
    except InvariantViolation as exc:
        return driver, exc
    finally:
        sim.close()
    return driver, None


def test_an_assert_invariants_failure_is_written_as_a_file_that_fails(tmp_path: Path) -> None:
    """An invariant broken under the user's own `assert_invariants(...)` goes into the file's
    `expect`, and `agentsim run` of the written file fails with it (exit 1)."""
    driver, failure = hasty_run()
    assert failure is not None
    target = tmp_path / "hasty.yaml"
    write_reproducer(driver.script, target, failure=failure)
    kinds = [item.label for item in load_scenario(target).expect]
    assert any("invariants" in kind for kind in kinds), kinds
    done = agentsim_run(target)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no_lost_stash" in done.stdout and "the stash was lost" in done.stdout


def test_a_reproducer_that_does_not_fail_again_is_flaky_and_not_written(tmp_path: Path) -> None:
    """Told that the sound agent's run broke an invariant, the writer runs the file, sees it
    pass, and raises FlakyFinding naming what did not come back; nothing is written."""
    driver, failure = hasty_run(Careful)
    assert failure is None
    driver.script.broken = ["no_lost_stash"]  # a failure the steps do not hold
    target = tmp_path / "careful.yaml"
    with pytest.raises(FlakyFinding, match=r"invariant no_lost_stash did not fail again"):
        write_reproducer(driver.script, target, failure="the count was off")
    assert not target.exists()


def test_a_failure_of_the_test_s_own_assert_writes_no_passing_file(tmp_path: Path) -> None:
    """A plain `assert` cannot be said in a scenario file: UnstatedFailure says how to state
    the check through the driver, and no file claims the bug is there."""
    with Simulation(seed=1) as sim:
        driver = FaultDriver(sim, {"r": Careful})
        driver.call("r", "research")
        try:
            assert sim.now_ms > 10**9, "not late enough"
        except AssertionError as exc:
            failure = exc
    target = tmp_path / "own.yaml"
    with pytest.raises(UnstatedFailure, match=r"driver.expect_query\(alias, sql, rows\)"):
        write_reproducer(driver.script, target, failure=failure)
    assert not target.exists()


def test_an_expectation_stated_through_the_driver_is_written_and_fails(tmp_path: Path) -> None:
    """`driver.expect_query` asserts now and writes a `query` expectation the file checks."""
    with Simulation(seed=2) as sim:
        driver = FaultDriver(sim, {"counter": Counter})
        driver.call("counter", "increment")
        driver.call("counter", "increment")
        sql = "SELECT count(*) AS n FROM counts"
        with pytest.raises(ExpectationFailed, match=r"returned \[\{'n': 2\}\], expected") as caught:
            driver.expect_query("counter", sql, [{"n": 1}])
    target = tmp_path / "query.yaml"
    write_reproducer(driver.script, target, failure=caught.value)
    done = agentsim_run(target)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "expect 1 (query)" in done.stdout


def test_a_call_whose_error_failed_the_test_is_not_expected_to_fail(tmp_path: Path) -> None:
    """The driver writes `expect_error` for a call that raised; when that error is the test's
    failure, the file drops it, so the file fails with the call."""
    with Simulation(seed=3) as sim:
        driver = FaultDriver(sim, {"g": Grumpy})
        driver.call("g", "greet")
        with pytest.raises(TypeError) as caught:
            driver.call("g", "greet")
    target = tmp_path / "grumpy.yaml"
    write_reproducer(driver.script, target, failure=caught.value)
    done = agentsim_run(target)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "g.greet() failed with TypeError" in done.stdout


class HastyMachine(AgentMachine):
    """The planted recovery bug under the machine's faults and time."""

    agents = {"r": HastyResearcher}
    checked_invariants = ("no_lost_stash",)
    fault_kinds = ("evict", "deploy")

    @rule()
    def research(self) -> None:
        with contextlib.suppress(FAULT_ERRORS):
            self.rpc("r", "research")


SHRINKING = settings(
    max_examples=200,
    stateful_step_count=12,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


def test_run_machine_shrinks_the_planted_bug_to_a_few_steps(tmp_path: Path) -> None:
    """The shrunk example is a handful of steps (research, a pause to the first stash, a
    deploy, then a call that starts the agent and its recovery: on 0.32.0, the default, an
    async RPC starts a cold agent, sdk-0.32 §1.3, where 0.21.0 needed a pause for its recovery
    alarm), and its file fails when run as written."""
    target = tmp_path / "hasty-machine.yaml"
    with pytest.raises(InvariantViolation, match="no_lost_stash") as caught:
        run_machine(HastyMachine, reproducer=target, settings=SHRINKING)
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert f"agentsim reproducer: {target}" in notes, notes
    kinds = [step.kind for step in load_scenario(target).steps]
    assert kinds[0] == "call" and kinds.count("call") <= 2 and len(kinds) <= 5, kinds
    assert "deploy" in kinds or "evict" in kinds, kinds
    done = agentsim_run(target)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no_lost_stash" in done.stdout


def test_an_invariant_the_machine_s_own_code_asserts_is_written(tmp_path: Path) -> None:
    """A machine whose own code calls `assert_invariants` (not the machine's named check)
    still gets a reproducer that breaks that invariant."""

    target = tmp_path / "in-rule.yaml"
    with pytest.raises(InvariantViolation, match="no_lost_stash"):
        run_machine(CheckingMachine, reproducer=target, settings=SHRINKING)
    done = agentsim_run(target)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no_lost_stash" in done.stdout


class CheckingMachine(HastyMachine):
    """Checks with `sim.checkers.assert_invariants` in an invariant of its own."""

    checked_invariants = "none"

    @invariant()
    def stashes_kept(self) -> None:
        assert_invariants(self.sim, ["no_lost_stash"])
