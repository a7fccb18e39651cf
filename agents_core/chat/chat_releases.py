"""The chat components each SDK release builds a chat host with, by release name.

A chat host runs the release its agent runs (`Agent._release`); this table is where that
release picks the chat components that differ between releases, so a release adds or swaps a
component here and nowhere else (the runtime's own components are picked in
`agents_core/releases`, which imports nothing of chat). 0.21.0: `ChatRecovery`, every chunk
stored, every run's chunks shown to the host's own clients, progress counted in credits
(`RecoveryCredit`). 0.32.0: `InterruptedAttemptsRecovery` (always on, with 0.32.0's budget, the
recovering flag and the last terminal outcome, spec sdk-0.32 §8.1–8.2), progress counted in
stream segments (`SegmentProgress`), chunks too large to store kept
out of the stream (`ChunkSizeLimit`, §7.2) and a terminal-delivery run's chunks kept from the
host's own clients (`TerminalRunsHidden`, §7.1), and a top-level agent's turns run as Task
runs instead of fibers (`TaskTurns`, §8.3; 0.21.0's `FiberTurns`), and so do its recovery
continuations instead of schedules (`TaskContinuations`, §8.3; 0.21.0's
`ScheduledContinuations`), and its turns hand a transient read error of the model stream to
chat recovery and mark their continuation frames (`RECOVERING_READING`, §8.2; 0.21.0's
`PLAIN_READING`).
"""

from __future__ import annotations

from dataclasses import dataclass

from agents_core.chat.chat_recovery import ChatRecovery
from agents_core.chat.chunk_limit import ChunkSizeLimit, StoreEveryChunk
from agents_core.chat.continuation_runners import ScheduledContinuations, TaskContinuations
from agents_core.chat.interrupted_attempts import InterruptedAttemptsRecovery
from agents_core.chat.recovery_credit import RecoveryCredit
from agents_core.chat.segment_progress import SegmentProgress
from agents_core.chat.stream_watchdog import PLAIN_READING, RECOVERING_READING, StreamReading
from agents_core.chat.terminal_runs import EveryRunShown, TerminalRunsHidden
from agents_core.chat.turn_runners import FiberTurns, TaskTurns

__all__ = ["CHAT_RELEASES", "ChatComponents", "chat_components"]


@dataclass(frozen=True, slots=True)
class ChatComponents:
    """The chat components of one release."""

    recovery: type[ChatRecovery]
    progress: type[RecoveryCredit]
    """The progress marker chat recovery reads (0.21.0 credits, 0.32.0 stream segments)."""
    chunk_limit: StoreEveryChunk
    """Which chunks the stream stores, and which of a run's chunks its tails mark unstored."""
    run_delivery: EveryRunShown
    """Which runs' chunks the host keeps from its own clients."""
    turn_runner: type[FiberTurns]
    """What a chat turn runs in (0.21.0 a fiber; 0.32.0 a Task run at the top level)."""
    continuation_runner: type[ScheduledContinuations]
    """What a recovery continuation runs as (0.21.0 a schedule; 0.32.0 a Task run at the top
    level)."""
    stream_reading: StreamReading
    """What a turn does with its UI stream beyond streaming it (0.32.0: a transient read error
    goes to chat recovery, continuation frames are marked; `stream_watchdog.py`)."""


CHAT_RELEASES: dict[str, ChatComponents] = {
    "0.21.0": ChatComponents(
        recovery=ChatRecovery,
        progress=RecoveryCredit,
        chunk_limit=StoreEveryChunk(),
        run_delivery=EveryRunShown(),
        turn_runner=FiberTurns,
        continuation_runner=ScheduledContinuations,
        stream_reading=PLAIN_READING,
    ),
    "0.32.0": ChatComponents(
        recovery=InterruptedAttemptsRecovery,
        progress=SegmentProgress,
        chunk_limit=ChunkSizeLimit(),
        run_delivery=TerminalRunsHidden(),
        turn_runner=TaskTurns,
        continuation_runner=TaskContinuations,
        stream_reading=RECOVERING_READING,
    ),
}
"""Every release the runtime models, with its chat components (a test holds the names equal)."""


def chat_components(release: str) -> ChatComponents:
    """The chat components of `release` (a release the runtime models)."""
    return CHAT_RELEASES[release]
