"""Determinism checks: run a (scenario, seed) twice and name the first trace record that differs.

A run must be a function of the scenario, the seed and the code. `check_determinism` runs it a
second time in a fresh `Simulation` (or, with `in_subprocess=True`, in a child Python under
another `PYTHONHASHSEED`, which catches an order decided by iterating a set or a dict of
strings) and compares the traces line by line; on a mismatch it raises `NondeterminismDetected`
naming the first divergent record, both versions of it, and the command that replays the check.
`run_checked` returns that finding as a failed `ScenarioResult` instead, for the CLI.

`python -m scenarios.run.determinism PATH SEED [INVARIANTS]` is the child's side: it prints the
run's trace as JSON lines.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from scenarios.language.loader import load_scenario
from scenarios.language.schema import Scenario
from scenarios.run.failure import NONDETERMINISM, Failure
from scenarios.run.runner import ScenarioResult, run_scenario
from sim.checkers import render_record
from sim.trace import Trace, TraceRecord

__all__ = ["NondeterminismDetected", "check_determinism", "first_divergence", "run_checked"]

ROOT = Path(__file__).resolve().parents[2]
FRESH = "the second in a fresh Simulation"
SUBPROCESS = "the second in a child process with PYTHONHASHSEED={hash_seed}"


class NondeterminismDetected(AssertionError):
    """Two runs of one scenario with one seed diverged: names the first divergent record (its
    `seq` and both versions), both digests, and the command that replays the check."""

    def __init__(
        self,
        *,
        scenario: str,
        seed: int,
        seq: int,
        first: TraceRecord | None,
        second: TraceRecord | None,
        first_digest: str,
        second_digest: str,
        how: str,
        replay: str,
    ) -> None:
        self.scenario = scenario
        self.seed = seed
        self.seq = seq
        self.first = first
        self.second = second
        self.first_digest = first_digest
        self.second_digest = second_digest
        self.replay = replay
        self.sentence = (
            f"NondeterminismDetected: two runs of {scenario!r} with seed {seed} diverged at trace "
            f"record #{seq} ({how}); first run: {_shown(first, seq)}; second run: "
            f"{_shown(second, seq)}; digests {first_digest[:12]} vs {second_digest[:12]}"
        )
        super().__init__(f"{self.sentence}\nreplay: {replay}")


def _shown(record: TraceRecord | None, seq: int) -> str:
    if record is None:
        return f"no record #{seq} (the run ended before it)"
    return render_record(record)


def first_divergence(first: Sequence[TraceRecord], second: Sequence[TraceRecord]) -> int | None:
    """The index of the first record that differs (or that one run lacks); None if equal."""
    for index, (a, b) in enumerate(zip(first, second, strict=False)):
        if a.to_json() != b.to_json():
            return index
    if len(first) != len(second):
        return min(len(first), len(second))
    return None


def check_determinism(
    scenario: Scenario,
    seed: int | None = None,
    *,
    invariants: Sequence[str] = (),
    in_subprocess: bool = False,
) -> ScenarioResult:
    """Run twice; the first run's result if both traces are identical, else raise
    `NondeterminismDetected`."""
    first, finding = _twice(scenario, seed, invariants, in_subprocess)
    if finding is not None:
        raise finding
    return first


def run_checked(
    scenario: Scenario,
    seed: int | None = None,
    *,
    invariants: Sequence[str] = (),
    in_subprocess: bool = False,
) -> ScenarioResult:
    """`check_determinism`, with a divergence reported as a failed result (its sentence last,
    its replay command the check's) rather than raised."""
    first, finding = _twice(scenario, seed, invariants, in_subprocess)
    if finding is None:
        return first
    failure = Failure(NONDETERMINISM, first.path, finding.sentence)
    return dataclasses.replace(
        first, passed=False, failures=(*first.failures, failure), replay=finding.replay
    )


def _twice(
    scenario: Scenario, seed: int | None, invariants: Sequence[str], in_subprocess: bool
) -> tuple[ScenarioResult, NondeterminismDetected | None]:
    first = run_scenario(scenario, seed, invariants=invariants)
    if in_subprocess:
        hash_seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
        second_records = _run_in_child(scenario, first.seed, first.invariants, hash_seed)
        how = SUBPROCESS.format(hash_seed=hash_seed)
        flag = " --check-determinism-subprocess"
    else:
        second = run_scenario(scenario, seed, invariants=invariants)
        if second.digest == first.digest:
            return first, None  # both digests hash lines each run made once: equal traces
        second_records = list(second.trace)
        how, flag = FRESH, " --check-determinism"
    records = list(first.trace)
    index = first_divergence(records, second_records)
    if index is None:
        return first, None
    return first, NondeterminismDetected(
        scenario=scenario.name,
        seed=first.seed,
        seq=index,
        first=records[index] if index < len(records) else None,
        second=second_records[index] if index < len(second_records) else None,
        first_digest=first.digest,
        second_digest=_digest(second_records),
        how=how,
        replay=first.replay + flag,
    )


def _digest(records: Sequence[TraceRecord]) -> str:
    trace = Trace()
    trace.records.extend(records)
    return trace.digest()


def _run_in_child(
    scenario: Scenario, seed: int, invariants: Sequence[str], hash_seed: str
) -> list[TraceRecord]:
    if not Path(scenario.path).is_file():
        raise ValueError(
            f"{scenario.path}: a determinism check in a child process needs the scenario in a "
            f"file; use the in-process check (--check-determinism) for a scenario given as text"
        )
    paths = [str(ROOT), os.getcwd(), os.environ.get("PYTHONPATH", "")]
    env = dict(
        os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=os.pathsep.join(filter(None, paths))
    )
    argv = [sys.executable, "-m", "scenarios.run.determinism", scenario.path, str(seed)]
    done = subprocess.run(
        [*argv, ",".join(invariants), scenario.sdk],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"the child run of {scenario.path} (seed {seed}) exited {done.returncode}: "
            f"{done.stderr.strip()[-2000:]}"
        )
    return [TraceRecord.from_dict(json.loads(line)) for line in done.stdout.splitlines() if line]


def _main(argv: Sequence[str]) -> int:
    path, seed, *rest = argv
    invariants = [name for name in (rest[0] if rest else "").split(",") if name]
    scenario = load_scenario(path).on_release(rest[1] if len(rest) > 1 else None)
    result = run_scenario(scenario, int(seed), invariants=invariants)
    for line in result.trace.lines():
        sys.stdout.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
