"""Errors the simulated platform raises to callers, and what it notes on an agent's own error.

An error raised by an agent's constructor reaches the caller unchanged (on the platform the
call that woke the Durable Object rejects with it), so `expect_error: RuntimeError` still
matches it. The platform notes on that error which agent was being constructed and the line
of the user's code that raised (`construction_of`), for failure sentences and tracebacks.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from dataclasses import dataclass

from agents_core.errors import AgentReset

__all__ = ["AgentEvicted", "Construction", "construction_of"]


class AgentEvicted(AgentReset):
    """The incarnation handling a call died before the call finished (or the sub-agent it was
    for has been deleted)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.args = (f"{path} was evicted ({reason}) before the call finished",)


@dataclass(frozen=True)
class Construction:
    """An agent's constructor raised: which class, which name, and the user's line."""

    cls: str
    """`module.Class`."""
    name: str
    place: str | None
    """`file.py:12`, the innermost frame of user code (not of the harness or the stdlib)."""

    def sentence(self) -> str:
        where = "" if self.place is None else f" at {self.place}"
        return f"constructing agent {self.name!r} ({self.cls}) raised{where}"


_ATTRIBUTE = "_agentsim_construction"
_HARNESS_DIRS = tuple(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep + package + os.sep
    for package in ("agents_core", "sim")
)
_STDLIB_DIRS = tuple(
    os.path.abspath(sysconfig.get_paths()[key]) + os.sep for key in ("stdlib", "platstdlib")
)


def _user_place(error: BaseException) -> str | None:
    place = None
    for frame in traceback.extract_tb(error.__traceback__):
        filename = os.path.abspath(frame.filename)
        if filename.startswith(_HARNESS_DIRS) or filename.startswith(_STDLIB_DIRS):
            continue
        place = f"{os.path.relpath(filename) if _inside_cwd(filename) else filename}:{frame.lineno}"
    return place


def _inside_cwd(filename: str) -> bool:
    return filename.startswith(os.getcwd() + os.sep)


def note_construction(error: BaseException, cls: type, name: str) -> None:
    """Mark `error` as raised by the constructor of agent `name` of class `cls`."""
    construction = Construction(f"{cls.__module__}.{cls.__qualname__}", name, _user_place(error))
    setattr(error, _ATTRIBUTE, construction)
    error.add_note(f"agentsim: {construction.sentence()}")


def construction_of(error: BaseException) -> Construction | None:
    """The agent construction that raised `error`, or None if it came from elsewhere."""
    found = getattr(error, _ATTRIBUTE, None)
    return found if isinstance(found, Construction) else None
