"""The checks every workload factory makes of what it is given, each in one place.

`fiber_workload`, `schedule_workload`, `tools_workload` and `chat_workload` take plans and a few
named choices; a wrong one is a `ValueError` of one sentence naming the value and what is
allowed (the loader has checked scenario files already; these guard tests and Python users).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["one_of", "unique_plans"]

Plan = TypeVar("Plan")


def unique_plans(
    values: Sequence[Any], kind: type[Plan], factory: str, key: Callable[[Plan], str], what: str
) -> tuple[Plan, ...]:
    """`values` as a tuple of one or more `kind` plans whose `key`s (`what`) differ."""
    plans = tuple(values)
    if not plans or not all(isinstance(plan, kind) for plan in plans):
        raise ValueError(f"{factory} takes one or more {kind.__name__} values, got {values!r}")
    keys = [key(plan) for plan in plans]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{what} must be unique, got {keys}")
    return plans


def one_of(name: str, value: str, allowed: Sequence[str]) -> None:
    """A named choice (`host`, `start`, ...) that must be one of `allowed`."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")
