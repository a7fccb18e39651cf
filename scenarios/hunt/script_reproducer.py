"""A `sim.strategies` script written as a scenario file: the reproducer of a Python property.

A `FaultDriver` writes down what it did as scenario steps (calls, evictions, deploys, storage
faults, reconnects, time passing); `write_script` turns that into a scenario file and writes it
the way `agentsim fuzz` and `explore` write theirs (`scenarios.hunt.reproducers`): when the script
broke named invariants, they go into the file's `expect`, the file is run once, and it is
written only if that run breaks them again and a second run gives the same trace (else
`FlakyFinding`). A failure of the test's own assertions cannot be said in the file; the steps
are written all the same, with a header that says which check failed, so that the run can be
replayed and watched (`agentsim run FILE --trace DIR`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from scenarios.hunt.emit import with_header
from scenarios.hunt.reproducers import FlakyFinding, with_broken_invariants, write_reproducer
from scenarios.language.loader import parse_scenario
from scenarios.language.parse_agents import NAME_PATTERN
from scenarios.run.runner import ScenarioResult, run_scenario

if TYPE_CHECKING:
    from sim.strategies import Script

__all__ = ["script_text", "write_script"]

_EXPECTED = re.compile(r"\.ya?ml:\d+: expect \d+ \(")


def script_text(script: Script, name: str, description: str) -> str:
    """The scenario file of `script` (no header, no `expect`)."""
    if not script.steps:
        raise ValueError("the script has no step: nothing to replay")
    lines = [
        f"name: {name}",
        f"description: {json.dumps(description)}",
        f"seed: {script.seed}",
        "agents:",
        *(
            f"  {json.dumps(alias)}: {{class: {json.dumps(path)}}}"
            for alias, path in script.agents.items()
        ),
        "steps:",
        *(f"  - {json.dumps(step, ensure_ascii=False)}" for step in script.steps),
    ]
    return "\n".join(lines) + "\n"


def write_script(
    script: Script, path: str | Path, *, failure: str = "", found_by: str = ""
) -> Path:
    """Write `script` as a scenario file at `path` (see the module docstring); its path."""
    out_path = str(path)
    stem = Path(out_path).stem
    name = stem if NAME_PATTERN.fullmatch(stem) else "reproducer"
    text = script_text(
        script, name, f"The shrunk failing example of {found_by or 'a Hypothesis property'}."
    )
    first_failure = " ".join(failure.split())[:300]
    if not script.broken:
        parse_scenario(text, out_path)  # a ValueError here is a bug of this writer: loud
        lines = [
            f"Found by {found_by or 'a Hypothesis property'} (sim.strategies).",
            "The check that failed is the test's own, which a scenario file cannot say:",
            f"  {first_failure or '(no message)'}",
            "These steps replay the run; watch it with --trace DIR.",
            f"Run it: agentsim run {out_path}",
            "",
        ]
        Path(out_path).parent.mkdir(parents=True, exist_ok=True)
        Path(out_path).write_text(with_header(text, lines), encoding="utf-8")
        return Path(out_path)
    text = with_broken_invariants(text, out_path, script.broken)
    first = run_scenario(parse_scenario(text, out_path))
    if not _findings(first):
        raise FlakyFinding(
            f"the steps of the failing example, run as the scenario {out_path}, did not break "
            f"{script.broken}; the failure depended on something the script does not hold"
        )

    def header(first_sentence: str, run: str) -> list[str]:
        return [
            f"Found by {found_by or 'a Hypothesis property'} (sim.strategies): the steps of",
            "the shrunk failing example, with the invariants it broke added to expect.",
            f"It fails with: {first_sentence}",
        ]

    write_reproducer(text, out_path, header, _findings, first.digest)
    return Path(out_path)


def _findings(result: ScenarioResult) -> list[str]:
    return [failure for failure in result.failures if _EXPECTED.search(failure)]
