"""One hunt in a subprocess: run `agentsim <tool> ...` from the scratch tree and count probes.

`run.py` copies this file into each scratch tree and runs it there, with PYTHONPATH pointing at
that tree: `python _bugzoo_hunt.py REPORT.json fuzz PATH --invariants-only ...`. It counts every
probe hit of every simulation the tool runs (by wrapping `sim.probes.Probes.hit`, which the tool
does not see), calls the tool's own command-line entry, and writes to REPORT.json the probe
counts and where `scenarios` and `agents_core` were imported from, so that the runner can check
that the hunt really ran the planted tree. The exit code is the tool's.
"""

from __future__ import annotations

import json
import sys
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


def main(argv: list[str]) -> int:
    report, tool_argv = argv[0], argv[1:]
    counts: dict[str, int] = {}
    _count_probes(counts)
    import agents_core
    import scenarios
    from scenarios.cli import main as agentsim

    try:
        code = agentsim(tool_argv)
    finally:
        with open(report, "w", encoding="utf-8") as out:
            json.dump(
                {
                    "probes": counts,
                    "scenarios": scenarios.__file__,
                    "agents_core": agents_core.__file__,
                },
                out,
            )
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
