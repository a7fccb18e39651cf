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
fault itself makes fail (`scenarios.hunt.findings.PLATFORM_ERRORS`: the platform telling the
caller the truth, as the failure's `error` says) gets
`expect_error` with that class (`with_fault_errors_expected`); one that checks what it returns,
and each other call the inserted fault can refuse (`refusable_calls`), gets `may_fail_with`, so
the file fails only with its finding, on this code and on code that runs a call more or less,
and passes once the bug is fixed. The run before writing must break what the finding broke
(`failure_kinds`: each failure's `subject`, lines aside), not merely give the same digest.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from scenarios.hunt.emit import add_expectation, expect_errors, remove_top_level, with_header
from scenarios.hunt.findings import PLATFORM_ERRORS, refused_by_platform
from scenarios.language import agents as agent_classes
from scenarios.language.loader import parse_scenario
from scenarios.language.schema import (
    ArmStorageFaultStep,
    CallStep,
    ConnectStep,
    DeployStep,
    EvictStep,
    RequestStep,
    Scenario,
)
from scenarios.run.failure import STEP, STEP_ERROR, Failure
from scenarios.run.runner import ScenarioResult, run_scenario

__all__ = [
    "PLATFORM_ERRORS",
    "FlakyFinding",
    "failure_kinds",
    "refusable_calls",
    "with_broken_invariants",
    "with_fault_errors_expected",
    "with_python_path",
    "write_reproducer",
]


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
    text: str,
    path: str,
    failures: Sequence[Failure],
    offset: int = 0,
    refusable: Mapping[int, str] | None = None,
) -> str:
    """`text` with `expect_error: CLASS` on each call or request that `failures` (of a run of
    `text` behind `offset` header lines) say failed with one of `PLATFORM_ERRORS`, unless it
    expects something already; `may_fail_with: CLASS` on such a call that checks what it
    returns, and on each other step of `refusable` (its line: the class the inserted fault
    would refuse it with), so that the file fails only with its finding whichever of those
    calls the fault refuses when it runs on other code. Unchanged when there is none."""
    errors: dict[int, str] = {}
    for failure in failures:
        # A call the fault refused, not one that failed with another class than it expected.
        refused = refused_by_platform(failure) and not failure.expected_error
        stepped = failure.kind in (STEP, STEP_ERROR)  # a call refused, or one whose agent
        # could not even be constructed for it (a fault in its constructor's statements)
        if stepped and failure.line is not None and failure.error and refused:
            errors[failure.line - offset] = failure.error.type
    if not errors and not refusable:
        return text
    scenario = parse_scenario(text, path)
    returns = {s.line for s in scenario.steps if getattr(s, "checks_return", False)}
    maybe = {line: cls for line, cls in (refusable or {}).items() if line not in errors}
    maybe.update({line: cls for line, cls in errors.items() if line in returns})
    out = expect_errors(text, scenario, {k: v for k, v in errors.items() if k not in returns})
    if maybe:
        out = expect_errors(out, parse_scenario(out, path), maybe, "may_fail_with")
    parse_scenario(out, path)  # an InvalidScenario here is a bug of the emitter: loud
    return out


def refusable_calls(scenario: Scenario, inserted: Iterable[int]) -> dict[int, str]:
    """The call, request and connect steps of `scenario` that the fault steps numbered
    `inserted` (as `step.index`) can refuse, by line, with the class the caller would get: a
    call started without waiting before the fault, on an agent it strikes (an eviction's, a
    storage fault's, every agent for a deploy), and every later call, request or connection on
    a storage fault's agent (which statement it strikes depends on the code that runs)."""
    out: dict[int, str] = {}
    steps = scenario.steps
    for fault in (s for s in steps if s.index in set(inserted)):
        if isinstance(fault, ArmStorageFaultStep):
            agents: set[str] | None = {fault.agent}
            error = "StorageError" if fault.fault == "error" else "AgentEvicted"
        elif isinstance(fault, EvictStep):
            agents, error = {fault.agent}, "AgentEvicted"
        elif isinstance(fault, DeployStep):
            agents, error = None, "AgentEvicted"
        else:
            continue
        for step in steps:
            if not isinstance(step, CallStep | RequestStep | ConnectStep):
                continue
            if agents is not None and step.agent not in agents:
                continue
            unawaited = isinstance(step, CallStep) and not step.wait and step.index < fault.index
            later = isinstance(fault, ArmStorageFaultStep) and step.index > fault.index
            if unawaited or later:
                out.setdefault(step.line, error)
    return out


def failure_kinds(failures: Iterable[Failure]) -> set[str]:
    """What the failures are about, their lines left out (a header moves lines): each one's
    `subject`, `invariant NAME` (whether the run or an expectation checked it), `liveness`, or
    the label of the step or expectation (`step 3 (call)`, `expect 1 (event)`)."""
    return {failure.subject for failure in failures}


def write_reproducer(
    text: str,
    out_path: str,
    header: Callable[[str, str], list[str]],
    findings: Callable[[ScenarioResult], list[Failure]],
    digest: str,
    found: Sequence[Failure] = (),
    inserted: Iterable[int] = (),
) -> tuple[str, ScenarioResult]:
    """Run `text` (headed by `header(first_failure, run_command)`) once more as `out_path`; if
    it fails the same way (the same trace `digest`, and `findings` of it about what the
    finding's failures `found` were about: `failure_kinds`), write it
    there. The calls the fault steps numbered `inserted` can refuse say so
    (`with_fault_errors_expected`). Returns the written text and that run."""
    run = f"agentsim run {shlex.quote(out_path)}"
    text = with_python_path(text, out_path)
    refusable = refusable_calls(parse_scenario(text, out_path), inserted)

    def headed(first_failure: str) -> str:
        lines = header(" ".join(first_failure.split())[:300], run)
        return with_header(text, [*lines, f"Run it: {run}", ""])

    check = run_scenario(parse_scenario(headed("..."), out_path))
    offset = headed("...").count("\n") - text.count("\n")
    expecting = with_fault_errors_expected(text, out_path, check.failures, offset, refusable)
    if expecting != text:  # run once more: the calls' new keys may move lines
        text = expecting
        check = run_scenario(parse_scenario(headed("..."), out_path))
    again = findings(check)
    if not again or check.digest != digest:
        raise FlakyFinding(
            f"the reproducer {out_path} did not fail the same way when run again (digest "
            f"{check.digest[:12]}, was {digest[:12]})"
        )
    # The file must fail for the finding's reason alone: nothing else may make it fail.
    wanted = failure_kinds(found or again)
    got = failure_kinds(again)
    if got != wanted:
        raise FlakyFinding(
            f"the reproducer {out_path} fails for another reason than its finding: it breaks "
            f"{sorted(got)}, the finding broke {sorted(wanted)}"
        )
    written = headed(again[0])
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(written, encoding="utf-8")
    return written, check
