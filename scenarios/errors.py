"""`InvalidScenario`: the one error a malformed scenario file (or a bad command line) raises.

Its message is a single line a person can act on without opening a debugger: where (file and
line), which part of the scenario (`step 3 (evict)`, `agents.counter`, `expect 2 (event)`), the
field and the bad value, then what would have been valid:

    library/evict.yaml:14: step 3 (evict): unknown agent 'b'; known agents: ['a', 'planner']

The parts are kept as attributes too, so tests and tools need not parse the text.
"""

from __future__ import annotations

__all__ = ["InvalidScenario"]


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
        super().__init__(" ".join(message.split()))

    def __reduce__(self) -> tuple[type, tuple[str, int | None, str, str, str]]:
        return (type(self), (self.path, self.line, self.where, self.problem, self.allowed))
