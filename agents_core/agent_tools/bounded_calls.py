"""Calls on a child that a parent bounds in time (spec agent-tools §7.1, §7.4).

`within` races an awaitable against a timer and an abort signal; the loser is abandoned, never
cancelled, as the SDK abandons a pending read. Recovery, re-attach and the replay of stored
chunks use it, so that a hung child never hangs its parent.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents_core.host import Host

__all__ = [
    "RECOVERY_TIMEOUT_MS",
    "RECOVERY_TOTAL_TIMEOUT_MS",
    "call",
    "settled",
    "sleep_then",
    "within",
]

RECOVERY_TIMEOUT_MS = 2_000
"""Per-child inspection timeout of pass 1; it also bounds the re-attach calls that no finite
no-progress budget bounds (a collect under a 0 budget, a teardown cancel)."""

RECOVERY_TOTAL_TIMEOUT_MS = 5_000
"""Pass-1 deadline: a row reached after it is sealed `recovery-deadline` without an inspect."""


async def settled(awaitable: Awaitable[Any]) -> tuple[str, Any]:
    try:
        return "ok", await awaitable
    except Exception as exc:  # noqa: BLE001 - a failed child call is an outcome, not a crash
        return "error", exc


async def sleep_then(clock: Any, ms: int, tag: str) -> tuple[str, Any]:
    await clock.sleep(ms)
    return tag, None


async def call(child: Any, method: str, *args: Any) -> Any:
    """A child RPC as a coroutine, so that a stub refusing the call synchronously fails it."""
    return await child.call(method, *args)


async def within(
    host: Host, awaitable: Awaitable[Any], timeout_ms: float | None, signal: Any = None
) -> tuple[str, Any]:
    """Await `awaitable` for at most `timeout_ms` (None or infinite: no timer) or until
    `signal` aborts: `("ok", value)`, `("error", exc)`, `("timeout", None)` or
    `("aborted", None)`."""
    racers: list[Any] = [settled(awaitable)]
    if timeout_ms is not None and math.isfinite(timeout_ms):
        racers.append(sleep_then(host.clock, max(0, int(timeout_ms)), "timeout"))
    if signal is not None:
        aborted = host.tasks.deferred()
        signal.add_listener(lambda _reason: aborted.resolve(("aborted", None)))
        racers.append(aborted)
    outcome: tuple[str, Any]
    if len(racers) == 1:
        outcome = await racers[0]
    else:
        outcome = await host.tasks.race(*racers)
    return outcome
