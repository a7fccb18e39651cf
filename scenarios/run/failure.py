"""`Failure`: one thing that went wrong in a run, as a value, with its sentence derived from it.

A failure knows what it is: its kind (an expectation, an invariant, the liveness rule, a budget,
a step, a step that raised, a step that ran late, a client no longer connected, a
nondeterminism), the file and line, the label of the step or expectation (`step 3 (call)`,
`expect 2 (state)`) and its number, the invariant it names, the error that was raised (its
class and message) and, for a call that was expected to fail otherwise, the class it expected.
The hunts read those fields; nothing parses the sentence back.

Its text is the sentence `agentsim run` has always printed: `PATH:LINE: LABEL: DETAIL` (a
run-level invariant `PATH: invariant DETAIL`, the liveness rule and budgets `PATH: DETAIL`, a
nondeterminism its own sentence), with control characters escaped (`printable`) and cut after
`MAX_SENTENCE` characters. A `Failure` *is* that text: it is a `str`, so it prints, compares,
hashes, joins and serialises (JSON, reports, JUnit, failure files) as the sentence does, and
code that treated `ScenarioResult.failures` as strings keeps working. Two failures are equal
when their sentences are. What counts as a finding for the hunts is
`scenarios.hunt.findings.is_finding`, one function for all of them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from scenarios.language.errors import printable

__all__ = [
    "BUDGET",
    "EXPECTATION",
    "FAILURE_KINDS",
    "INVARIANT",
    "LATE_STEP",
    "LIVENESS",
    "MAX_SENTENCE",
    "NONDETERMINISM",
    "NO_CONNECTION",
    "STEP",
    "STEP_ERROR",
    "Failure",
    "RaisedError",
]

EXPECTATION = "expectation"
"""An item of the file's `expect` list did not hold (an `invariants:` item names its invariant)."""
INVARIANT = "invariant"
"""A named invariant checked after the expectations (`--invariants`) found a violation."""
LIVENESS = "liveness"
"""The liveness phase did not settle, or raised."""
BUDGET = "budget"
"""The run used up a budget and was stopped (worded as the liveness rule's failure)."""
STEP = "step"
"""A step's own check: its call failed or returned something else than the step says, a
request answered another status, a call never finished, an agent to evict is not there."""
STEP_ERROR = "step error"
"""A step raised rather than judged its call: the step itself, or the agent's constructor."""
LATE_STEP = "late step"
"""A step's time (`at:`, `run_until:`) had already passed when it came to run."""
NO_CONNECTION = "no connection"
"""A client step named a client that was never connected, or is no longer."""
NONDETERMINISM = "nondeterminism"
"""Two runs of the same scenario and seed diverged (`--check-determinism`)."""
FAILURE_KINDS = (
    EXPECTATION,
    INVARIANT,
    LIVENESS,
    BUDGET,
    STEP,
    STEP_ERROR,
    LATE_STEP,
    NO_CONNECTION,
    NONDETERMINISM,
)

MAX_SENTENCE = 4_000
"""A failure sentence is cut after this many characters (an agent's exception can quote a
value of millions of items)."""


@dataclass(frozen=True)
class RaisedError:
    """An error a run raised where it failed: its class name and message."""

    type: str
    message: str

    @classmethod
    def of(cls, error: BaseException) -> RaisedError:
        return cls(type(error).__name__, str(error))


@dataclass(frozen=True, eq=False)
class Failure(str):
    """One failure of a run (see the module docstring); `str(failure)` is its sentence."""

    kind: str
    path: str
    detail: str
    """The sentence after the file, line and label: what was expected and what was found."""
    line: int | None = None
    label: str = ""
    """`step 3 (call)`, `expect 2 (state)`; '' for a failure of the whole run."""
    number: int | None = None
    """The step's or expectation's number (the N of its label)."""
    invariant: str = ""
    """The invariant that broke ('' when none did)."""
    error: RaisedError | None = None
    """The error raised where it failed: a call's, a step's, a constructor's, the liveness
    phase's, or an expectation's that could not be checked."""
    expected_error: str = ""
    """The class a failing call was expected to fail with, when it failed with another."""

    def __new__(
        cls,
        kind: str,
        path: str,
        detail: str,
        line: int | None = None,
        label: str = "",
        *rest: Any,
        **fields: Any,
    ) -> Failure:
        # The text is made here, from the fields it shows (the dataclass `__init__` then sets
        # all of them): a `str`'s value is fixed when it is made.
        if kind not in FAILURE_KINDS:
            raise ValueError(f"unknown failure kind {kind!r}; known: {list(FAILURE_KINDS)}")
        return super().__new__(cls, _sentence(kind, path, line, label, detail))

    def __getnewargs__(self) -> tuple[Any, ...]:
        # Pickled (worker processes, Dask) and copied by its fields, not by its text.
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self))

    @property
    def text(self) -> str:
        """The sentence, as a plain `str`."""
        return str.__str__(self)

    @property
    def subject(self) -> str:
        """What the failure is about, with its line left out (a header moves lines):
        `invariant NAME` (whether the run or an expectation checked it), `liveness` (a budget
        too), `nondeterminism`, or the label of the step or expectation."""
        if self.invariant:
            return f"invariant {self.invariant}"
        if self.kind in (LIVENESS, BUDGET, NONDETERMINISM):
            return LIVENESS if self.kind == BUDGET else self.kind
        return self.label or self.detail[:60]

    def fields(self) -> dict[str, Any]:
        """The failure's fields as JSON values (what a failure file keeps beside the sentence)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values["error"] = None if self.error is None else dataclasses.asdict(self.error)
        return values

    @classmethod
    def from_fields(cls, values: dict[str, Any]) -> Failure:
        """The failure `fields()` gave (a ValueError for an unknown kind or a missing field)."""
        known = {f.name for f in dataclasses.fields(cls)}
        error = values.get("error")
        args = {key: value for key, value in values.items() if key in known}
        args["error"] = None if error is None else RaisedError(error["type"], error["message"])
        return cls(**args)

    @classmethod
    def of_step(
        cls,
        path: str,
        step: Any,
        detail: str,
        kind: str = STEP,
        error: BaseException | None = None,
        expected_error: str = "",
    ) -> Failure:
        """A failure of `step` (a `scenarios.language.schema.Step` or an expectation: its
        `line`, `label` and `index`)."""
        return cls(
            kind,
            path,
            detail,
            step.line,
            step.label,
            step.index,
            error=None if error is None else RaisedError.of(error),
            expected_error=expected_error,
        )


def _sentence(kind: str, path: str, line: int | None, label: str, detail: str) -> str:
    if kind == NONDETERMINISM:
        return detail  # the check's own sentence, which names the scenario and the seed
    where = path if line is None else f"{path}:{line}"
    if label:
        where += f": {label}"
    if kind == INVARIANT:
        detail = f"invariant {detail}"
    # Sentences quote agents' exception texts: no control character of theirs reaches a
    # terminal, a failure file or a report raw.
    return _bounded(printable(f"{where}: {detail}"))


def _bounded(sentence: str) -> str:
    if len(sentence) <= MAX_SENTENCE:
        return sentence
    return f"{sentence[:MAX_SENTENCE]}... ({len(sentence) - MAX_SENTENCE:,} more characters)"
