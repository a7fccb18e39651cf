"""The registry of named invariants, and the two ways to run them: `check` returns the
violations, `assert_invariants` raises them as one `InvariantViolation`.

Scenario files name invariants by their key in `CHECKERS` (`expect: invariants: [...]`); a
checker module registers its functions with `@invariant("name")` when it is imported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from sim.checkers.core import CheckContext, Checker, InvariantViolation, Violation, context_from

if TYPE_CHECKING:
    from sim.simulation import Simulation

__all__ = ["CHECKERS", "assert_invariants", "check", "invariant", "register"]

CHECKERS: dict[str, Checker] = {}
"""Invariant name -> checker, in registration order (the order `check` runs them in)."""


def register(name: str, checker: Checker) -> Checker:
    """Add `checker` under `name`; a name is registered once."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"an invariant name is a snake_case identifier, got {name!r}")
    if not callable(checker):
        raise TypeError(
            f"checker {name!r} must be callable (CheckContext -> list), got {checker!r}"
        )
    if name in CHECKERS and CHECKERS[name] is not checker:
        raise ValueError(
            f"invariant {name!r} is already registered by {CHECKERS[name].__module__}."
            f"{CHECKERS[name].__qualname__}; pick another name"
        )
    CHECKERS[name] = checker
    return checker


def invariant(name: str) -> Callable[[Checker], Checker]:
    """Decorator: register the function as the checker of invariant `name`."""

    def decorate(checker: Checker) -> Checker:
        return register(name, checker)

    return decorate


def check(context: CheckContext, names: Iterable[str] | None = None) -> list[Violation]:
    """Run the named checkers (all of them by default) and return every violation found."""
    chosen = list(CHECKERS) if names is None else list(names)
    unknown = [n for n in chosen if n not in CHECKERS]
    if unknown:
        raise ValueError(f"unknown invariant(s) {unknown}; known invariants: {sorted(CHECKERS)}")
    found: list[Violation] = []
    for name in chosen:
        found.extend(CHECKERS[name](context))
    return found


def assert_invariants(
    sim: Simulation,
    names: Iterable[str] | None = None,
    scenario: str | None = None,
    replay: str | None = None,
) -> CheckContext:
    """Check `sim` as it is now; raise `InvariantViolation` if any invariant is broken. Returns
    the context it checked (handy for further assertions)."""
    context = context_from(sim, scenario)
    violations = check(context, names)
    if violations:
        raise InvariantViolation.from_context(context, violations, replay)
    return context
