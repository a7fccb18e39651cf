"""The fuzzer: over a healthy agent it finds nothing; over an agent whose recovery loses a stash
it finds the bug by itself, shrinks it, and writes a reproducer that `agentsim run` fails the
same way; the same seed gives the same reproducer."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from scenarios.cli import main
from scenarios.hunt.fuzz import FlakyFinding, fuzz_scenario
from tests.fuzz import agents
from tests.scenarios.helpers import LIBRARY

STEADY = """\
name: steady-worker
description: >
  A worker runs a background fiber of four ten-second steps, stashing after each; whatever
  kills it, its recovery resumes from the last stash.
seed: 1
faults: none
agents:
  w: {class: "tests.fuzz.agents:Steady"}
steps:
  - call: {agent: w, method: work, args: [4]}
  # let the work run
  - run_for: 1m
"""
FORGETFUL = STEADY.replace("steady-worker", "forgetful-worker").replace("Steady", "Forgetful")
EXAMPLES = 25
KILLS = ("evict", "deploy")
"""The fault kinds the forgetful agent's bug needs: these tests are about what the fuzzer does
with a finding, so they keep the search to the faults that make one."""


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reproducers and failure files go under the working directory: keep them in tmp."""
    monkeypatch.chdir(tmp_path)


def scenario(tmp_path: Path, text: str, name: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_healthy_agent_survives_every_drawn_schedule(tmp_path: Path) -> None:
    """Evictions, deploys, storage faults at drawn times: no invariant breaks, nothing is
    written."""
    outcome = fuzz_scenario(scenario(tmp_path, STEADY, "steady.yaml"), examples=EXAMPLES)
    assert outcome.base_result.passed
    assert not outcome.found and outcome.finding is None, outcome.report()
    assert outcome.runs >= EXAMPLES // 2
    assert outcome.report().startswith(f"no failure found in {tmp_path / 'steady.yaml'} (")
    assert not (tmp_path / "agentsim-fuzz").exists()


def test_a_recovery_that_loses_its_stash_is_found_and_written_as_a_runnable_reproducer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shrunk schedule is one death after the first stash; the YAML written for it says how
    it was found, and `agentsim run` with the printed command fails with the same invariant and
    the same trace."""
    outcome = fuzz_scenario(
        scenario(tmp_path, FORGETFUL, "forgetful.yaml"), examples=EXAMPLES, kinds=KILLS
    )
    assert outcome.found and outcome.finding is not None
    assert len(outcome.steps) == 1
    (step,) = outcome.steps
    assert step.action in {"evict", "deploy"} and 10_000 <= step.at_ms < 40_000
    assert any(
        "invariant no_lost_stash" in f or "no_lost_stash" in f for f in outcome.finding.failures
    )
    text = Path(outcome.path).read_text()
    assert outcome.path == "agentsim-fuzz/forgetful-worker-fuzz-0.yaml"
    assert text.startswith(
        f"# Found by `agentsim fuzz {tmp_path / 'forgetful.yaml'} --seed 0 --examples {EXAMPLES}`"
    )
    assert f"# Run it: {outcome.command}\n" in text
    assert "name: forgetful-worker-fuzz-0\n" in text
    assert f"seed: {outcome.finding.seed}\n" in text
    assert "  # inserted by agentsim fuzz\n  - at: " in text
    assert "  # let the work run\n  - run_for: 1m" in text
    assert text.endswith("expect:\n  - invariants: [no_lost_stash]\n")
    argv = shlex.split(outcome.command)
    assert argv == ["agentsim", "run", outcome.path]
    capsys.readouterr()
    code = main(argv[1:])
    out = capsys.readouterr().out
    assert code == 1
    assert "no_lost_stash" in out and "the stash was lost" in out
    record = json.loads(Path("agentsim-failures/forgetful-worker-fuzz-0-1.json").read_text())
    assert record["digest"] == outcome.finding.digest


def test_the_same_seed_finds_the_same_reproducer(tmp_path: Path) -> None:
    """No example database and a fixed Hypothesis seed: a fuzz run is repeatable."""
    path = scenario(tmp_path, FORGETFUL, "forgetful.yaml")
    first = fuzz_scenario(path, examples=EXAMPLES, seed=3)
    second = fuzz_scenario(path, examples=EXAMPLES, seed=3)
    assert first.reproducer == second.reproducer and first.runs == second.runs


def test_the_fuzz_command_exits_1_with_the_run_command_or_0_with_nothing_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`agentsim fuzz`: a finding ends with the command that runs its reproducer."""
    broken = scenario(tmp_path, FORGETFUL, "forgetful.yaml")
    healthy = scenario(tmp_path, STEADY, "steady.yaml")
    assert (
        main(["fuzz", broken, "--examples", "15", "--faults", "evict,deploy", "--out", "found"])
        == 1
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"FOUND a failure in {broken} (")
    assert lines[-2] == "  reproducer: found/forgetful-worker-fuzz-0.yaml"
    assert lines[-1].startswith("  run it: agentsim run found/forgetful-worker-fuzz-0.yaml")
    assert main(["fuzz", healthy, "--examples", "10", "--faults", "evict,deploy"]) == 0
    assert capsys.readouterr().out.startswith(f"no failure found in {healthy} (")


def test_the_expectations_of_the_file_are_checked_unless_invariants_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A story scenario pins exact times: a drawn fault breaks an expectation (a finding), and
    `--invariants-only` checks the invariants alone."""
    story = str(LIBRARY / "idle-eviction.yaml")
    outcome = fuzz_scenario(story, examples=10, invariants=[])
    assert outcome.finding is not None
    assert any(": expect " in failure for failure in outcome.finding.failures)
    assert not fuzz_scenario(story, examples=10, invariants_only=True).found


def test_a_base_scenario_that_already_fails_is_reported_not_fuzzed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fuzzing needs a passing base: exit 1 with its failures and replay command."""
    text = FORGETFUL + "  - at: 15s\n    deploy: {}\n"
    path = scenario(tmp_path, text.replace("  - run_for: 1m\n", ""), "broken.yaml")
    assert main(["fuzz", path, "--invariants", "no_lost_stash"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"FAIL {path}: the base scenario fails without any drawn fault")
    assert f"replay: agentsim run {path} --seed 1 --invariants no_lost_stash" in out


def test_a_failure_that_does_not_come_back_is_flaky_never_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that loses its stash only on its first recoveries in the process: the fuzzer
    says FLAKY and exits 1 rather than writing a reproducer that would pass."""
    monkeypatch.setattr(agents, "_FORGETS", iter(range(1_000_000)))
    text = FORGETFUL.replace("Forgetful", "SometimesForgetful")
    path = scenario(tmp_path, text, "sometimes.yaml")
    with pytest.raises(FlakyFinding, match="failed once and passed when Hypothesis ran it again"):
        fuzz_scenario(path, examples=EXAMPLES, kinds=KILLS)
    monkeypatch.setattr(agents, "_FORGETS", iter(range(1_000_000)))
    assert main(["fuzz", path, "--examples", str(EXAMPLES), "--faults", "evict,deploy"]) == 1
    assert capsys.readouterr().out.startswith(f"FLAKY: {path}: a drawn schedule failed once")
    assert not (tmp_path / "agentsim-fuzz").exists()
