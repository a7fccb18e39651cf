"""One hunt segment in a subprocess: run `agentsim <tool> ...` over stories and count probes.

`run.py` copies this file into each scratch tree and runs it there, with PYTHONPATH pointing at
that tree: `python _bugzoo_hunt.py SPEC.json`. SPEC holds `report` (a file to append to) and
`runs`, one `agentsim` argument list per story. The stories run one after another in this one
process (so that a hunt over thirty stories does not pay thirty interpreter starts), each
through the tool's own command-line entry, until one exits 1 (a finding: the runner decides
whether it is the bug's, and starts a new segment for the stories left if not). After each
story a JSON line goes to the report: the exit code, what the tool printed, the tool's time,
the probes its simulations hit (counted by wrapping `sim.probes.Probes.hit`, which the tool does
not see) and where `scenarios` and `agents_core` were imported from, so that the runner can
check that the planted tree is what ran. A line per story, written as it ends, means a segment
killed at the end of its budget still says what it did.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
import traceback
from typing import Any


def _count_probes(counts: dict[str, int]) -> None:
    try:
        from sim.probes import Probes
    except ImportError:  # a tree without probes: nothing to count
        return
    hit = Probes.hit

    def counting(self: Any, name: str) -> None:
        hit(self, name)
        counts[name] = counts.get(name, 0) + 1

    Probes.hit = counting  # type: ignore[method-assign]


def main(spec_path: str) -> int:
    with open(spec_path, encoding="utf-8") as spec_file:
        spec = json.load(spec_file)
    counts: dict[str, int] = {}
    _count_probes(counts)
    import agents_core
    import scenarios
    from scenarios.cli import main as agentsim

    for argv in spec["runs"]:
        counts.clear()
        printed = io.StringIO()
        started = time.monotonic()
        try:
            with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
                code = agentsim(argv)
        except BaseException:  # noqa: BLE001 - a crash of the tool is an outcome to report
            code = -1
            printed.write(traceback.format_exc())
        line = {
            "argv": argv,
            "code": code,
            "output": printed.getvalue(),
            "seconds": time.monotonic() - started,
            "probes": dict(counts),
            "scenarios": scenarios.__file__,
            "agents_core": agents_core.__file__,
        }
        with open(spec["report"], "a", encoding="utf-8") as report:
            report.write(json.dumps(line) + "\n")
        if code == 1:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
