"""A `FaultDriver` script written as a scenario file: the reproducer of a Python property.

A `FaultDriver` writes down what it did as scenario steps (calls, evictions, deploys, storage
faults, reconnects, time passing); `write_script` turns that into a scenario file that fails as
the test failed, and writes it the way `agentsim fuzz` and `explore` write theirs
(`scenarios.hunt.reproducers`). What failed goes into the file: broken invariants (the driver's
own checks, and any `InvariantViolation` in the failure) as an `invariants:` expectation, the
driver's stated expectations (`expect_query`), and a call whose error is the failure (that call
then loses its `expect_error`). The file is run once: unless that run fails in each of those
ways, it is `FlakyFinding`; a second run must give the same trace. A failure that no part of the
file can state (a test's own `assert`) is `UnstatedFailure`: a file that passes is never written.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scenarios.hunt.reproducers import FlakyFinding, write_reproducer
from scenarios.language.loader import parse_scenario
from scenarios.language.parse_agents import NAME_PATTERN
from scenarios.run.failure import EXPECTATION, STEP, Failure
from scenarios.run.runner import ScenarioResult, run_scenario
from sim.checkers import InvariantViolation

if TYPE_CHECKING:
    from scenarios.hunt.fault_driver import Script

__all__ = ["UnstatedFailure", "script_text", "write_script"]


class UnstatedFailure(ValueError):
    """A failure a scenario file cannot check (a test's own `assert`): no reproducer is written,
    since a file that passes would claim the bug is gone."""


def script_text(
    script: Script,
    name: str,
    description: str,
    steps: list[dict[str, Any]] | None = None,
    expect: list[dict[str, Any]] | None = None,
) -> str:
    """The scenario file of `script` (no header), with `steps` and `expect` in place of its own
    steps and none."""
    steps = script.steps if steps is None else steps
    if not steps:
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
        *(f"  - {json.dumps(step, ensure_ascii=False)}" for step in steps),
    ]
    if expect:
        lines += ["expect:", *(f"  - {json.dumps(item, ensure_ascii=False)}" for item in expect)]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class _Wanted:
    """How the reproducer must fail: each broken invariant, each failed expectation (1-based, as
    failures number them), and the call step whose error was the failure."""

    invariants: tuple[str, ...]
    expectations: tuple[int, ...]
    call: tuple[int, str, str] | None  # (step index, error class, `alias.method`)

    def __bool__(self) -> bool:
        return bool(self.invariants or self.expectations or self.call)


def write_script(
    script: Script, path: str | Path, *, failure: str | BaseException = "", found_by: str = ""
) -> Path:
    """Write `script` as a scenario file at `path` (see the module docstring); its path."""
    out_path = str(path)
    found_by = found_by or "a Hypothesis property"
    stem = Path(out_path).stem
    name = stem if NAME_PATTERN.fullmatch(stem) else "reproducer"
    broken = list(dict.fromkeys([*script.broken, *_violated(failure)]))
    steps = copy.deepcopy(script.steps)
    call = _failing_call(script, failure)
    if call is not None:
        steps[call[0]]["call"].pop("expect_error", None)
    expect = [*script.expect, *([{"invariants": broken}] if broken else [])]
    wanted = _Wanted(
        tuple(broken),
        tuple(i + 1 for i in script.failed_expect),
        call,
    )
    said = _said(failure)
    if not wanted:
        raise UnstatedFailure(
            f"no reproducer written to {out_path}: the failure ({said or 'no message'}) is the "
            f"test's own check, which a scenario file cannot state, so the file would pass. "
            f"State the check through the driver and the file checks it too: "
            f"driver.expect_query(alias, sql, rows), driver.assert_invariants(names), or an "
            f"invariant registered with sim.checkers.register in the agents' module"
        )
    text = script_text(script, name, f"The shrunk failing example of {found_by}.", steps, expect)
    scenario = parse_scenario(text, out_path)  # an InvalidScenario here is a bug of this writer
    first = run_scenario(scenario)
    missing = _missing(first, wanted)
    if missing:
        shown = "; ".join(first.failures)[:600] or "nothing (it passed)"
        raise FlakyFinding(
            f"the steps of the failing example, run as the scenario {out_path}, did not fail the "
            f"same way: {', '.join(missing)} did not fail again. It failed with: {shown}. The "
            f"failure depended on something the script does not hold (state kept outside the "
            f"simulation, or a check at another time than the end of the run)"
        )

    def header(first_sentence: str, run: str) -> list[str]:
        return [
            f"Found by {found_by} (sim.strategies): the steps of the shrunk failing",
            "example, with what failed (invariants, expectations, a call's error) in the file.",
            f"The test failed with: {said or '(no message)'}",
            f"It fails with: {first_sentence}",
        ]

    def findings(result: ScenarioResult) -> list[Failure]:
        return [] if _missing(result, wanted) else list(result.failures)

    write_reproducer(text, out_path, header, findings, first.digest)
    return Path(out_path)


def _said(failure: str | BaseException) -> str:
    if isinstance(failure, BaseException):
        failure = f"{type(failure).__name__}: {failure}"
    first = failure.strip().splitlines()[0] if failure.strip() else ""
    return " ".join(first.split())[:200]


def _chain(failure: str | BaseException) -> Iterator[BaseException]:
    """`failure`, the errors of an exception group, and their causes and contexts."""
    todo = [failure] if isinstance(failure, BaseException) else []
    seen: set[int] = set()
    while todo:
        error = todo.pop(0)
        if id(error) in seen:
            continue
        seen.add(id(error))
        yield error
        if isinstance(error, BaseExceptionGroup):
            todo += list(error.exceptions)
        todo += [e for e in (error.__cause__, error.__context__) if e is not None]


def _violated(failure: str | BaseException) -> list[str]:
    return [
        violation.invariant
        for error in _chain(failure)
        if isinstance(error, InvariantViolation)
        for violation in error.violations
    ]


def _failing_call(script: Script, failure: str | BaseException) -> tuple[int, str, str] | None:
    errors = {id(error) for error in _chain(failure)}
    for index, error in reversed(script.raised):
        if id(error) in errors:
            value = script.steps[index]["call"]
            return index, type(error).__name__, f"{value['agent']}.{value['method']}"
    return None


def _missing(result: ScenarioResult, wanted: _Wanted) -> list[str]:
    """What of `wanted` the run's failures do not show."""
    expected = [f for f in result.failures if f.kind == EXPECTATION]
    missing = [
        f"invariant {name}"
        for name in wanted.invariants
        if not any(f.invariant == name for f in expected)
    ]
    missing += [
        f"expectation {number}"
        for number in wanted.expectations
        if not any(f.number == number for f in expected)
    ]
    if wanted.call is not None:
        index, error, who = wanted.call
        if not any(_failed_with(f, index + 1, error) for f in result.failures):
            missing.append(f"the call {who}() of step {index + 1} (failed with {error})")
    return missing


def _failed_with(failure: Failure, number: int, error: str) -> bool:
    """Whether `failure` says the call of step `number` failed with `error` (not merely with
    another class than it expected)."""
    raised = failure.error
    return (
        failure.kind == STEP
        and failure.number == number
        and raised is not None
        and raised.type == error
        and not failure.expected_error
    )
