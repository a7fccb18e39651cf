"""Seeds per second of a sweep (`scenarios.cli.sweeps`) on 1 and on 2 local worker processes.

Run: `python -m pytest tests/bench/test_sweep_speed.py -m bench --benchmark-enable -s`.
Deselected by default. Each round sweeps SEEDS seeds of a small library-like scenario (a counter
that works, is evicted for idleness and wakes to its alarm) and the printed figure is seeds per
second, with the speed-up of 2 workers over 1 (at most 2, less the pool's start-up and the
other processes on the machine). Both sweeps must give the same digests.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from scenarios.cli.sweeps import SweepSettings, sweep
from scenarios.language.loader import load_scenario

pytestmark = pytest.mark.bench

SEEDS = 200
SCENARIO = """\
name: sweep-bench
description: A counter works, is left alone until it is evicted, and wakes to its alarm.
seed: 0
agents:
  counter: {class: "scenarios.workloads:Counter"}
steps:
  - call: {agent: counter, method: work, args: [5]}
  - call: {agent: counter, method: arm, args: [300000]}
  - run_for: 10m
expect:
  - invariants: all
"""


def _seeds_per_second(path: Path, workers: int) -> tuple[float, list[str]]:
    scenario = load_scenario(path)
    runs = [(scenario, seed) for seed in range(SEEDS)]
    start = time.perf_counter()
    digests = [result.digest for result in sweep(runs, SweepSettings(), workers=workers)]
    return SEEDS / (time.perf_counter() - start), digests


def test_seeds_per_second_on_one_and_two_workers(enabled_benchmark, tmp_path: Path) -> None:
    benchmark = enabled_benchmark
    path = tmp_path / "sweep-bench.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    one, one_digests = benchmark.pedantic(_seeds_per_second, args=(path, 1), rounds=1, iterations=1)
    two, two_digests = _seeds_per_second(path, 2)
    benchmark.extra_info.update(
        seeds=SEEDS, seeds_per_s_1_worker=round(one, 1), seeds_per_s_2_workers=round(two, 1)
    )
    print(
        f"\nsweep of {SEEDS} seeds: 1 worker {one:,.1f} seeds/s, 2 workers {two:,.1f} seeds/s "
        f"({two / one:.2f}x)"
    )
    assert one_digests == two_digests
