"""Trace records rendered for people through structlog, stamped with sim time (never wall time).

`render(record)` gives one line; `follow(trace, write)` prints each record as it is appended,
which is how a scenario run shows its log live. The processors are plain structlog callables, so
a user can put the same pipeline in front of their own logger.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import structlog

from sim.trace import Trace, TraceRecord, format_sim_time

__all__ = ["follow", "render", "render_all", "sim_time_stamper"]


def sim_time_stamper(_logger: Any, _method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: replace the integer `t` (sim ms) by a readable `timestamp`."""
    t_ms = event_dict.pop("t", None)
    if t_ms is not None:
        event_dict["timestamp"] = format_sim_time(int(t_ms))
    return event_dict


def _where(_logger: Any, _method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    agent = event_dict.pop("agent", "")
    inc = event_dict.pop("inc", 0)
    event_dict.pop("seq", None)
    if agent:
        event_dict["event"] = f"{agent}#{inc} {event_dict['event']}"
    return event_dict


_renderer = structlog.dev.ConsoleRenderer(colors=False, pad_event_to=48, sort_keys=True)
_PIPELINE: tuple[Callable[[Any, str, dict[str, Any]], Any], ...] = (
    sim_time_stamper,
    _where,
    _renderer,
)


def render(record: TraceRecord) -> str:
    event_dict: Any = record.to_dict()
    for processor in _PIPELINE:
        event_dict = processor(None, "info", event_dict)
    return str(event_dict)


def render_all(records: Iterable[TraceRecord]) -> str:
    return "\n".join(render(record) for record in records)


def follow(trace: Trace, write: Callable[[str], Any]) -> Callable[[], None]:
    """Write each new record as a line; returns the function that stops following."""
    return trace.subscribe(lambda record: write(render(record)))
