"""`InvalidScenario`: the one error a malformed scenario file (or a bad command line) raises.

Its message is a single line a person can act on without opening a debugger: where (file and
line), which part of the scenario (`step 3 (evict)`, `agents.counter`, `expect 2 (event)`), the
field and the bad value, then what would have been valid:

    library/evict.yaml:14: step 3 (evict): unknown agent 'b'; known agents: ['a', 'planner']

The parts are kept as attributes too, so tests and tools need not parse the text. A file with
several mistakes raises one `InvalidScenario` whose `errors` holds each of them, in line order
(`InvalidScenario.many`); its text is the first, with a count of the others, and `agentsim
validate` prints them all, one per line. `Skipped` is the error of a part that only fails
because another part already did (a step naming an agent whose declaration was wrong): it is
never reported. `printable` escapes what a terminal would obey rather than show (BEL, ESC,
other control characters, bidirectional overrides): every line the harness prints goes
through it.
"""

from __future__ import annotations

import re

__all__ = ["MAX_REPORTED", "InvalidScenario", "Skipped", "printable"]

MAX_REPORTED = 50
"""At most this many errors of one file are listed (then a count of the rest)."""

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with control characters (but newline and tab) written as escapes: `\\x07` for
    BEL, `\\x1b` for ESC, `\\u202e` for a right-to-left override."""
    return _CONTROL.sub(_escape, text)


class InvalidScenario(ValueError):
    """A scenario that cannot be run as written: names the file, line, part, value and fix."""

    def __init__(
        self, path: str, line: int | None, where: str, problem: str, allowed: str = ""
    ) -> None:
        self.path = path
        self.line = line
        self.where = where
        self.problem = problem
        self.allowed = allowed
        location = f"{path}:{line}" if line is not None else path
        message = f"{location}: {where}: {problem}" if where else f"{location}: {problem}"
        if allowed:
            message = f"{message}; {allowed}"
        # One line, always: the CLI prints one error per line, and YAML's own messages span
        # several.
        self.errors: tuple[InvalidScenario, ...] = (self,)
        """Every error of the file (this one alone, unless made by `many`)."""
        super().__init__(printable(" ".join(message.split())))

    @classmethod
    def many(cls, errors: list[InvalidScenario]) -> InvalidScenario:
        """One error standing for all of `errors` (each flattened; at least one), in line
        order: its text is the first one's, and `(and N more errors)` when there are more."""
        flat = list({str(one): one for error in errors for one in error.errors}.values())
        flat.sort(key=lambda error: -1 if error.line is None else error.line)
        first = flat[0]
        combined = cls(first.path, first.line, first.where, first.problem, first.allowed)
        combined.errors = tuple(flat)
        if len(flat) > 1:
            more = len(flat) - 1
            combined.args = (f"{first} (and {more} more error{'s' if more > 1 else ''})",)
        return combined

    def lines(self) -> list[str]:
        """One line per error, at most `MAX_REPORTED` and a line counting the rest."""
        shown = [str(error) for error in self.errors]
        if len(shown) > MAX_REPORTED:
            rest = len(shown) - MAX_REPORTED
            shown = [*shown[:MAX_REPORTED], f"{self.path}: ... and {rest} more errors"]
        return shown

    def __reduce__(self) -> tuple[type, tuple[str, int | None, str, str, str]]:
        return (type(self), (self.path, self.line, self.where, self.problem, self.allowed))


class Skipped(InvalidScenario):
    """A part that cannot be read only because an earlier part was wrong: not reported."""

    def __init__(self, path: str, line: int | None, where: str, problem: str = "") -> None:
        super().__init__(path, line, where, problem or "skipped after an earlier error")
        self.errors = ()
