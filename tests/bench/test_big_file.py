"""A 5 MB scenario file validates in under 5 s and 300 MB of peak memory.

Run: `python -m pytest tests/bench/test_big_file.py -m bench -s`. Deselected by default.

The file is a long story of 120,000 steps (calls, timed calls, waits), the shape a generated
scenario takes; `agentsim validate` reads it in a child process, whose wall time, CPU time and
peak resident memory (`wait4`'s rusage) are printed. The targets of the scenario language's
size limit (docs/scenario-language.md) are held on CPU time, which other work on a shared
machine does not inflate, and on peak memory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench

TARGET_BYTES = 5 * 1024 * 1024
TARGET_S = 5.0
TARGET_MB = 300

HEAD = """\
name: big
description: A long generated story.
seed: 1
agents:
  counter: {class: "scenarios.workloads:Counter"}
  worker:
    workload: fibers
    fibers: [{name: ingest, steps: 5, step: 30s}]
steps:
"""


def big_scenario(target: int = TARGET_BYTES) -> str:
    parts, size, index = [HEAD], len(HEAD), 0
    while size < target:
        index += 1
        chunk = (
            "  - call: {agent: counter, method: increment}\n"
            "  - after: 1s\n    call:\n      agent: worker\n      method: status\n"
            f"  - run_for: {index % 50 + 1}s\n"
        )
        parts.append(chunk)
        size += len(chunk)
    parts.append("expect:\n  - state: {agent: counter, equals: {count: 1}}\n")
    return "".join(parts)


def test_a_5_mb_file_validates_in_under_5_s_and_300_mb(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(big_scenario(), encoding="utf-8")
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "scenarios.cli", "validate", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.monotonic() - started
    out = child.stdout.read().decode() if child.stdout else ""
    peak_mb = usage.ru_maxrss / 1024  # KB on Linux
    cpu_s = usage.ru_utime + usage.ru_stime
    size_mb = path.stat().st_size / (1024 * 1024)
    print(
        f"\nvalidate {size_mb:.1f} MB: {elapsed:.2f} s wall, {cpu_s:.2f} s CPU, "
        f"peak {peak_mb:.0f} MB"
    )
    assert os.waitstatus_to_exitcode(status) == 0 and out.startswith("ok "), out
    assert cpu_s < TARGET_S
    assert peak_mb < TARGET_MB
