"""How a chat turn reads its UI stream on each release: the stall watchdog, the transient read
errors it hands to chat recovery, and the continuation flag on its frames (spec sdk-0.32 §8.2,
divergence T16).

`StreamReading` is what a release picks (`chat_releases.py`): 0.21.0 reads the model stream
plainly (a read error fails the turn, frames carry no `continuation`); 0.32.0, as
`@cloudflare/ai-chat` 0.12.2 does, routes a platform-transient read error of the model stream
into chat recovery with a backoff (`is_recoverable_stream_read_error`,
`transient_backoff_seconds`) and marks every response frame of a continuation turn
`continuation: true`.

`StallWatchdog` is one turn's inactivity clock (the window is the host's
`chat_stream_stall_timeout_ms`, which only 0.32.0 reads). The SDK wraps the whole UI stream, so
the time a tool call runs between its `tool-input-available` chunk and its output chunk counts
as silence, as the time a model read waits does: every chunk read from the model and every
tool output restarts the clock (`touch`), and `expired` settles once the clock has run a whole
window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents_core.chat.turn_types import STALLED
from agents_core.schedule_dispatch import is_code_update_reset, is_platform_transient

if TYPE_CHECKING:
    from agents_core.host import Clock

__all__ = [
    "PLAIN_READING",
    "RECOVERING_READING",
    "TRANSIENT_BACKOFF_MAX_S",
    "StallWatchdog",
    "StreamReading",
    "is_recoverable_stream_read_error",
    "transient_backoff_seconds",
]

TRANSIENT_BACKOFF_MAX_S = 30
"""The cap of the backoff before a transient read error's recovery (the SDK's
`chatRecoveryBackoffSeconds`)."""

# The platform's wording of a storage reset (SDK `retries.ts`); a deploy reset is
# `is_code_update_reset`. Either means the isolate is going away, and its restart's own
# recovery owns the turn.
_STORAGE_RESET = re.compile(
    r"Internal error in Durable Object storage caused object to be reset", re.IGNORECASE
)
_CAUSE_DEPTH_MAX = 8


@dataclass(frozen=True, slots=True)
class StreamReading:
    """What a release's turns do with their UI stream beyond streaming it."""

    routes_transient_read_errors: bool
    """A platform-transient read error of the model stream goes to chat recovery, with a
    backoff, instead of failing the turn."""
    marks_continuation_frames: bool
    """Every response frame of a turn that continues an answer carries `continuation: true`."""


PLAIN_READING = StreamReading(routes_transient_read_errors=False, marks_continuation_frames=False)
"""0.21.0."""
RECOVERING_READING = StreamReading(
    routes_transient_read_errors=True, marks_continuation_frames=True
)
"""0.32.0 (`@cloudflare/ai-chat` 0.12.2's `_reply`)."""


def _is_storage_reset(error: BaseException) -> bool:
    current: BaseException | None = error
    for _ in range(_CAUSE_DEPTH_MAX):
        if current is None:
            return False
        if _STORAGE_RESET.search(str(current)):
            return True
        current = current.__cause__
    return False


def is_recoverable_stream_read_error(error: BaseException) -> bool:
    """A read error of the model stream that bounded chat recovery retries: a platform
    transient, but not a deploy or storage reset (the SDK's `isRecoverableStreamReadError`)."""
    if not is_platform_transient(error):
        return False
    return not (is_code_update_reset(error) or _is_storage_reset(error))


def transient_backoff_seconds(retries: int) -> int:
    """The delay before the `retries`-th transient recovery of an incident: 1, 2, 4, ... s,
    at most 30 (the SDK's `chatRecoveryBackoffSeconds`, with no `Retry-After`: the simulated
    provider sends no headers)."""
    return int(min(2 ** max(retries - 1, 0), TRANSIENT_BACKOFF_MAX_S))


class StallWatchdog:
    """One turn's inactivity clock over its UI stream (module docstring)."""

    __slots__ = ("_clock", "window_ms", "_last_ms", "_phase", "fired")

    def __init__(self, clock: Clock, window_ms: int) -> None:
        self._clock = clock
        self.window_ms = window_ms
        self._last_ms = clock.now_ms()
        self._phase = 0
        self.fired = False
        """The window ran out and the turn stalled (a tool finishing later sends nothing);
        set by the reader whose race `expired` won."""

    @property
    def armed(self) -> bool:
        """A window is set (0: no watchdog, the stream is waited for)."""
        return self.window_ms > 0

    def touch(self) -> None:
        """The stream showed activity: the window starts again."""
        self._last_ms = self._clock.now_ms()

    async def expired(self) -> Any:
        """`STALLED` once a whole window passes with no `touch`; None if the phase it watches
        ended first (`settle`)."""
        phase = self._phase
        while True:
            wait_ms = self._last_ms + self.window_ms - self._clock.now_ms()
            if wait_ms <= 0:
                return STALLED
            await self._clock.sleep(wait_ms)
            if phase != self._phase:
                return None

    def settle(self, outcome: Any) -> Any:
        """The read or tool round being watched is over with `outcome` (`STALLED`: the
        window ran out): its `expired` stops waiting; `outcome`."""
        self._phase += 1
        if outcome is STALLED:
            self.fired = True
        return outcome
