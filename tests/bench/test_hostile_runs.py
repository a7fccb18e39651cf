"""10,000 valid but hostile scenario files, each run to its end: the job behind the promise that
no input hangs the harness or ends in a traceback.

Run: `python -m pytest tests/bench/test_hostile_runs.py -m bench -s` (about 15 minutes;
`AGENTSIM_HOSTILE_FILES=N` for another count, `AGENTSIM_HOSTILE_SEED=S` for other files).
Deselected by default; the default suite runs a few dozen of the same files
(tests/scenarios/test_hostile_runs.py). Each file is run through `agentsim run` in this process
under small budgets (`--max-events 20000 --max-records 20000 --max-wall-clock 20s`) and a
60-second watchdog: a traceback, a hang, or an exit code other than 0, 1 or 2 fails the job.
At the end it prints how many files there were, their exit codes, which budgets stopped runs,
and the slowest run.
"""

from __future__ import annotations

import collections
import os
import re
import time

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests.scenarios.hostile import hostile_files
from tests.scenarios.test_hostile_runs import check_hostile_run

pytestmark = pytest.mark.bench

FILES = int(os.environ.get("AGENTSIM_HOSTILE_FILES", "10000"))
SEED = int(os.environ.get("AGENTSIM_HOSTILE_SEED", "9"))
_BUDGET = re.compile(r"its (\w+) budget")

TALLY: collections.Counter[str] = collections.Counter()
SLOWEST: list[float] = [0.0]


@pytest.fixture(scope="module", autouse=True)
def report() -> object:
    started = time.monotonic()
    yield
    elapsed = time.monotonic() - started
    print(
        f"\nhostile runs: {TALLY['files']} files in {elapsed:.0f} s, "
        f"exit codes {{0: {TALLY['exit 0']}, 1: {TALLY['exit 1']}, 2: {TALLY['exit 2']}}}, "
        f"stopped by a budget: {dict((k, v) for k, v in TALLY.items() if k.startswith('budget'))}, "
        f"slowest run {SLOWEST[0]:.1f} s, no traceback, no hang"
    )


@seed(SEED)
@settings(
    max_examples=FILES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(hostile_files())
def test_ten_thousand_hostile_files(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    started = time.monotonic()
    tmp_path = tmp_path_factory.mktemp("hostile", numbered=True)
    code = check_hostile_run(text, tmp_path)
    SLOWEST[0] = max(SLOWEST[0], time.monotonic() - started)
    TALLY["files"] += 1
    TALLY[f"exit {code}"] += 1
    out = (tmp_path / "failures").exists()
    for budget in _BUDGET.findall(
        "".join(p.read_text() for p in (tmp_path / "failures").glob("*.json")) if out else ""
    ):
        TALLY[f"budget {budget}"] += 1
    for child in tmp_path.rglob("*"):
        if child.is_file():
            child.unlink()
