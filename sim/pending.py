"""Which pending events still do something: the difference between busy and merely not empty.

simpy cannot take an event back out of its queue, so the platform leaves timers behind that
have nothing left to do when they fire: the alarm that was replaced by a later one, the idle
check of an incarnation that had activity since (or died), the 15-minute limit of a handler
that ended, the deploy plan of a liveness phase (faults stop there), the sleep of a task whose
incarnation died. `event_is_live` tells them apart, so that a liveness phase is quiet when only
such timers remain, and so that same-instant interleavings count only the events that act. A
platform timer says whether it is still live through the predicate `Kernel.call_at` stores on
it; a task's wait is live while its incarnation is; anything else with a callback is live.

A timer that is re-armed lazily (one idle timer per incarnation, one handler-limit timer per
agent) can be live and still do nothing at its own instant but arm itself again for a later
one: `event_acts_now` tells, and same-instant groups (`sim.interleave`) count only the events
that act, as they would have counted a timer scheduled for each deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["ACTS", "LIVE", "event_acts_now", "event_is_live", "mark_live"]

LIVE = "agentsim_live"
"""The attribute holding a platform timer's liveness predicate."""
ACTS = "agentsim_acts"
"""The attribute holding whether a lazily re-armed timer acts at its own instant."""


def mark_live(event: Any, live: Callable[[], bool]) -> None:
    """Say how to tell whether `event` (a platform timer) will still do something."""
    setattr(event, LIVE, live)


def event_is_live(event: Any) -> bool:
    """Whether processing `event` would do anything."""
    live = getattr(event, LIVE, None)
    if live is not None:
        return bool(live())
    callbacks = event.callbacks
    if not callbacks:
        return False
    for callback in callbacks:
        task = getattr(callback, "__self__", None)
        owner = getattr(task, "owner", None) if hasattr(task, "coro") else None
        if owner is None or getattr(owner, "alive", True):
            return True
    return False


def event_acts_now(event: Any) -> bool:
    """Whether processing `event` at its instant does something there (not only arm a later
    timer): live, and not a lazily re-armed timer whose deadline moved on."""
    acts = getattr(event, ACTS, None)
    if acts is not None:
        return bool(acts())
    return event_is_live(event)
