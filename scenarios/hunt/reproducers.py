"""Writing a hunt's reproducer: the failing file, with a header saying how it was found, checked
by running it once more before it is written.

`fuzz` and `explore` both end a finding the same way. The invariants the run broke go into the
file's own `expect` list (so a plain `agentsim run` checks them); a header of comment lines says
which tool found it, what it did and which failure it shows, and ends with the command that
runs it. The header has as many lines whatever the failure sentence, so the file is run once
with a placeholder sentence: its line numbers are then the written file's, and a run that does
not fail the same way (another digest, or no finding) is `FlakyFinding`, never written. Agents
whose modules sit beside the base scenario are found from the reproducer's folder through a
`python_path:` line (`with_python_path`). A call or request of the story that the injected
fault itself makes fail (`PLATFORM_ERRORS`: the platform telling the caller the truth) gets
`expect_error` with that class (`with_fault_errors_expected`), so the file fails only with its
finding, and passes once the bug is fixed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from scenarios.hunt.emit import add_expectation, expect_errors, remove_top_level, with_header
from scenarios.language import agents as agent_classes
from scenarios.language.loader import parse_scenario
from scenarios.run.runner import ScenarioResult, run_scenario

__all__ = [
    "FAULT_FAILED",
    "PLATFORM_ERRORS",
    "FlakyFinding",
    "with_broken_invariants",
    "with_fault_errors_expected",
    "with_python_path",
    "write_reproducer",
]

PLATFORM_ERRORS = ("AgentEvicted", "StorageError", "IncarnationKilled")
"""What a call gets when a fault kills or fails what it called: the platform's truth, not a bug."""
FAULT_FAILED = re.compile(rf"failed with ({'|'.join(PLATFORM_ERRORS)})\b")
"""A step's sentence for a call that failed with one of `PLATFORM_ERRORS` (group 1: which)."""


class FlakyFinding(AssertionError):
    """A finding that did not come back when run again: the failure depended on something
    outside the scenario, the seed and the code (as Hypothesis's `Flaky`)."""


def with_broken_invariants(text: str, path: str, violated: Sequence[str]) -> str:
    """`text` with one more expectation, `invariants: [the names]` (unchanged when none)."""
    if not violated:
        return text
    item = "invariants: [" + ", ".join(violated) + "]"
    out = add_expectation(text, parse_scenario(text, path), item)
    parse_scenario(out, path)  # an InvalidScenario here is a bug of the emitter: loud
    return out


def with_python_path(text: str, out_path: str) -> str:
    """`text` with a `python_path:` naming, relative to `out_path`, the folders its agents'
    modules were imported from (beside the base scenario, say), so that the reproducer runs
    from its own folder as printed; unchanged when every module is an installed one."""
    scenario = parse_scenario(text, out_path)  # the modules are imported already
    dirs = agent_classes.origins(spec.cls for spec in scenario.agents)
    if not dirs:
        return text
    here = Path(out_path).parent.resolve()
    shown = json.dumps([os.path.relpath(directory, here) for directory in dirs])
    text = remove_top_level(text, "python_path", "python_path: below, relative to this file")
    lines = text.split("\n")
    at = next((i for i, line in enumerate(lines) if re.match(r"^agents:(\s|$)", line)), 0)
    lines.insert(at, f"python_path: {shown}  # where the agents' modules are")
    return "\n".join(lines)


def with_fault_errors_expected(
    text: str, path: str, failures: Sequence[str], offset: int = 0
) -> str:
    """`text` with `expect_error: CLASS` on each call or request that `failures` (of a run of
    `text` behind `offset` header lines) say failed with one of `PLATFORM_ERRORS`, unless it
    expects something already; unchanged when none did."""
    errors: dict[int, str] = {}
    for failure in failures:
        line = re.match(rf"{re.escape(path)}:(\d+): ", failure)
        error = FAULT_FAILED.search(failure)
        if line and error and "but was expected" not in failure:
            errors[int(line.group(1)) - offset] = error.group(1)
    if not errors:
        return text
    out = expect_errors(text, parse_scenario(text, path), errors)
    parse_scenario(out, path)  # an InvalidScenario here is a bug of the emitter: loud
    return out


def write_reproducer(
    text: str,
    out_path: str,
    header: Callable[[str, str], list[str]],
    findings: Callable[[ScenarioResult], list[str]],
    digest: str,
) -> tuple[str, ScenarioResult]:
    """Run `text` (headed by `header(first_failure, run_command)`) once more as `out_path`; if
    it fails the same way (the same trace `digest`, and `findings` of it), write it there.
    Returns the written text and that run."""
    run = f"agentsim run {shlex.quote(out_path)}"
    text = with_python_path(text, out_path)

    def headed(first_failure: str) -> str:
        lines = header(" ".join(first_failure.split())[:300], run)
        return with_header(text, [*lines, f"Run it: {run}", ""])

    check = run_scenario(parse_scenario(headed("..."), out_path))
    offset = headed("...").count("\n") - text.count("\n")
    expecting = with_fault_errors_expected(text, out_path, check.failures, offset)
    if expecting != text:  # run once more: the calls' new keys may move lines
        text = expecting
        check = run_scenario(parse_scenario(headed("..."), out_path))
    found = findings(check)
    if not found or check.digest != digest:
        raise FlakyFinding(
            f"the reproducer {out_path} did not fail the same way when run again (digest "
            f"{check.digest[:12]}, was {digest[:12]})"
        )
    written = headed(found[0])
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(written, encoding="utf-8")
    return written, check
