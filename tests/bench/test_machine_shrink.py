"""How long `run_machine` takes to find and shrink a planted recovery bug, and how short the
shrunk reproducer is.

Run: `python -m pytest tests/bench/test_machine_shrink.py -m bench --benchmark-enable -s`.
The machine is `tests.strategies.test_reproducers.HastyMachine`: a researcher whose recovery
hook throws its first step's stash away (`tests.strategies.agents.HastyResearcher`), checked
with `no_lost_stash` after every step, under Hypothesis's default budget (100 examples of up
to 50 steps) without a database. Each round draws with another seed (`random.seed(round)`: the
seed Hypothesis takes when it is not derandomized). It prints, and writes to the results file
(`machine_shrink`), the seconds of each round from the start to the written reproducer, their
median, and the number of steps of each shrunk reproducer. Deselected by default; the default
suite checks the shrunk length with a fixed seed (`test_run_machine_shrinks_the_planted_bug`).
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from scenarios.language.loader import load_scenario
from sim.checkers import InvariantViolation
from sim.strategies import run_machine, without_explain
from tests.strategies.test_reproducers import HastyMachine

pytestmark = pytest.mark.bench

ROUNDS = 5
BUDGET = settings(
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def test_run_machine_finds_and_shrinks_the_planted_bug(
    enabled_benchmark: Any, bench_results: dict[str, Any]
) -> None:
    seconds: list[float] = []
    steps: list[int] = []

    def one_round() -> None:
        random.seed(len(seconds))
        with tempfile.TemporaryDirectory() as folder:
            target = Path(folder) / "hasty.yaml"
            started = time.perf_counter()
            with pytest.raises(InvariantViolation):
                run_machine(HastyMachine, reproducer=target, settings=without_explain(BUDGET))
            seconds.append(time.perf_counter() - started)
            steps.append(len(load_scenario(target).steps))

    enabled_benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    figure = {
        "rounds": ROUNDS,
        "seconds": [round(s, 2) for s in seconds],
        "median_s": round(statistics.median(seconds), 2),
        "steps": steps,
    }
    bench_results["machine_shrink"] = figure
    print(
        f"\nrun_machine on the planted recovery bug: found and shrunk in "
        f"{figure['median_s']} s (median of {ROUNDS}; rounds {figure['seconds']} s), "
        f"shrunk reproducers of {steps} steps"
    )
