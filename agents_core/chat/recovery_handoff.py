"""A 0.32.0 recovery continuation runs up to its turn's hand-off, and no further (spec sdk-0.32
§8.3; the SDK's `dispatchChatRecoveryToHandoff` and `waitUntilStable`).

Before its turn, a continuation waits for the host to be stable (`wait_until_stable`): no turn
running or queued, for at most `stable_timeout_ms`.

The continuation (a Task run's step, or a sub-agent's schedule) calls `dispatch_to_handoff`
with the recovery attempt, which it starts in the background. The call returns when the attempt
signals that its turn starts (`started`) or when the attempt ends without one (a complete answer
settled, a skip, a stable-state timeout). A failure before the hand-off is the continuation's:
the call raises it, so the step's retries (or the schedule's) run the attempt again. At the
hand-off the continuation hands the attempt to `track` (the Lifecycle's `track_alarm_work`), so
that the turn stays in the alarm's memory-limit breaker domain: a memory-limit reset of the turn
is a strike against the continuation's job (spec sdk-0.32 §2.5, §8.3). After the hand-off the
turn belongs to the background: a platform failure (`is_platform_failure`: a
platform transient or a memory-limit reset) re-enqueues the continuation through `redefer`,
tried three times 50–500 ms apart (full jitter) with one run id shared by the tries, because no
continuation owns the incident any longer and it would be left behind; any other failure is
reported to `on_detached_error`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from agents_core.agent_tools.chunk_kinds import random_uuid
from agents_core.options import jitter_backoff_ms
from agents_core.schedule_dispatch import is_memory_limit_reset, is_platform_transient

if TYPE_CHECKING:
    from agents_core.host import Host

__all__ = [
    "REDEFER_BASE_DELAY_MS",
    "REDEFER_MAX_DELAY_MS",
    "REDEFER_TRIES",
    "dispatch_to_handoff",
    "is_platform_failure",
    "wait_until_stable",
]

REDEFER_TRIES = 3
REDEFER_BASE_DELAY_MS = 50
REDEFER_MAX_DELAY_MS = 500


def is_platform_failure(error: BaseException) -> bool:
    """The SDK's `isPlatformFailure`: a platform transient or a memory-limit reset."""
    return is_platform_transient(error) or is_memory_limit_reset(error)


async def dispatch_to_handoff(
    host: Host,
    attempt: Callable[[Callable[[], None]], Awaitable[None]],
    *,
    track: Callable[[Any], bool],
    redefer: Callable[[str], Awaitable[Any]],
    on_detached_error: Callable[[BaseException], None],
) -> None:
    """Start `attempt(started)` in the background and return once it calls `started()` or
    ends; raise what it raised before `started()`; at the hand-off, give the attempt (a
    deferred settled as it ends) to `track` (module docstring)."""
    handoff = host.tasks.deferred()
    turn = host.tasks.deferred()
    handed_off = False

    def started() -> None:
        nonlocal handed_off
        if not handed_off:
            handed_off = True
            handoff.resolve(None)

    async def detached() -> None:
        try:
            await attempt(started)
        except Exception as error:  # noqa: BLE001 - settled here: raised, re-enqueued or reported
            turn.reject(error)
            if not handed_off:
                handoff.reject(error)
            elif is_platform_failure(error):
                await _redefer(host, redefer, on_detached_error)
            else:
                on_detached_error(error)
            return
        turn.resolve(None)
        handoff.resolve(None)  # it ended without a hand-off: nothing goes on to track

    host.tasks.wait_until(detached())
    await handoff
    if handed_off:
        # Tracked even when the turn has already settled (it may fail in the instant it
        # starts): its memory-limit reset is still this continuation's strike.
        track(turn)


async def _redefer(
    host: Host,
    redefer: Callable[[str], Awaitable[Any]],
    on_error: Callable[[BaseException], None],
) -> None:
    run_id = random_uuid(host.entropy)
    for tried in range(1, REDEFER_TRIES + 1):
        try:
            await redefer(run_id)
            return
        except Exception as error:  # noqa: BLE001 - tried again, then reported
            if tried == REDEFER_TRIES:
                on_error(error)
                return
        wait_ms = jitter_backoff_ms(
            host.entropy, tried, REDEFER_BASE_DELAY_MS, REDEFER_MAX_DELAY_MS
        )
        await host.clock.sleep(wait_ms)


class _Turns(Protocol):
    tail: Any

    def queue_busy(self) -> bool: ...


async def wait_until_stable(
    host: Host,
    turns: _Turns,
    keep_alive: Callable[[], Awaitable[Callable[[], None]]],
    timeout_ms: int,
    awaiting_client: Callable[[], bool],
) -> bool:
    """Wait, at most `timeout_ms` and under a keepAlive lease, for no turn to run or be queued;
    whether that came. A turn waiting on a client interaction never counts as stable: the port's
    client cannot answer one while the recovery waits, so the wait runs out."""
    clock = host.clock
    deadline = clock.now_ms() + timeout_ms
    if not turns.queue_busy() and not awaiting_client():
        return True
    dispose = await keep_alive()
    try:
        while turns.queue_busy():
            remaining = deadline - clock.now_ms()
            if remaining <= 0:
                return False
            await host.tasks.race(turns.tail, clock.sleep(remaining))
        if awaiting_client():
            remaining = deadline - clock.now_ms()
            if remaining > 0:
                await clock.sleep(remaining)
            return False
        return True
    finally:
        dispose()
