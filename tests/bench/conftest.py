"""What every benchmark shares: skipping cleanly when benchmarks are disabled, and the results
file the speed benchmarks write (`bench-results.json`, or `$AGENTSIM_BENCH_RESULTS`)."""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def enabled_benchmark(benchmark: Any) -> Any:
    """The `benchmark` fixture, or a skip when pytest-benchmark is disabled (the default
    `--benchmark-disable`): a benchmark run without `--benchmark-enable` measures nothing."""
    if benchmark.disabled:
        pytest.skip("benchmarks are disabled: run with -m bench --benchmark-enable")
    return benchmark


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": model or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "system": f"{platform.system()} {platform.release()}",
    }


@pytest.fixture(scope="session")
def bench_results() -> Iterator[dict[str, Any]]:
    """Figures by name; written to the results file when the session ends (if any)."""
    figures: dict[str, Any] = {}
    yield figures
    if not figures:
        return
    path = Path(os.environ.get("AGENTSIM_BENCH_RESULTS", ROOT / "bench-results.json"))
    previous: dict[str, Any] = {}
    if path.is_file():
        try:
            previous = json.loads(path.read_text(encoding="utf-8")).get("figures", {})
        except ValueError:
            previous = {}
    # A run of some of the benchmarks keeps the figures of the others from the last run.
    merged = {**previous, **figures}
    body = {"machine": machine(), "figures": dict(sorted(merged.items()))}
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    print(f"\nbenchmark figures written to {path}")
