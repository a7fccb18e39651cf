"""What an area draws: its agents, clients and timed steps, and the API/option pairs they use.

An area (`schedules`, `fibers`, `tools`, `chat`) draws a `Part`; the whole scenario is the
parts of the areas asked for, side by side, with the platform's faults drawn over them
(`scenarios.generate.strategy`). Every step has an absolute time (`at:`), so parts and faults
interleave by time alone. A call is started without waiting (`wait: false`) and judged after
the liveness phase, so a long call never pushes a later step into the past.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Part", "TimedStep", "Use", "call"]


@dataclass(frozen=True)
class TimedStep:
    """One step at `at_ms`: `action` with `args` (a step of the scenario language)."""

    at_ms: int
    action: str
    args: Mapping[str, Any]
    note: str = ""


@dataclass(frozen=True)
class Use:
    """An (API call, option) pair a part's agent uses, and the trace record that shows a run
    reached it (`event`, written by the agent `alias` or one of its sub-agents)."""

    api: str
    option: str
    alias: str
    event: str

    @property
    def pair(self) -> str:
        return f"{self.api} {self.option}"


@dataclass(frozen=True)
class Part:
    """An area's share of a scenario."""

    agents: Mapping[str, Mapping[str, Any]]
    """alias -> the agent's description, as the `agents:` section takes it."""
    steps: tuple[TimedStep, ...] = ()
    clients: Mapping[str, str] = field(default_factory=dict)
    """client name -> the alias it connects to."""
    uses: tuple[Use, ...] = ()
    horizon_ms: int = 0
    """How long after the start the part may still be busy with what it was asked to do."""
    settles_ms: int = 0
    """How long after the start a drawn fault may leave the part busy at worst (a detached run
    whose child a fault stalls ends at its absolute budget); the liveness limit covers it."""
    faults: tuple[TimedStep, ...] = ()
    """Platform faults the area draws itself (a sub-agent evicted alone), beside those drawn
    over the whole scenario: they are marked and judged as faults."""


def call(at_ms: int, alias: str, method: str, *args: Any) -> TimedStep:
    """A call of `alias.method(*args)` at `at_ms`, not waited for."""
    shown: dict[str, Any] = {"agent": alias, "method": method}
    if args:
        shown["args"] = list(args)
    shown["wait"] = False
    return TimedStep(at_ms, "call", shown)
