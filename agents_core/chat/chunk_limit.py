"""Which chunks a chat host's stream stores, by release (spec sdk-0.32 §7.2).

0.21.0 (`StoreEveryChunk`): every chunk a turn streams is stored, whatever its size.

0.32.0 (`ChunkSizeLimit`): a chunk whose stored encoding is over `CHUNK_MAX_BYTES` (1 800 000
bytes, measured as the SDK's `storedChunkBytes` does) is not stored: it is broadcast live, takes
no index in the stream and is absent from every replay (the SDK's `ResumableStream.storeChunk`).
A chat child's snoop marks such a chunk, when it belongs to an agent-tool run and is not a
progress or milestone part, with a random `unstoredId` on its tail record and gives it the run's
next live sequence without consuming it (the SDK's `interceptAgentToolBroadcast`); its parent
forwards it positionless (`agents_core/releases/v0_32/event_delivery.py`).
"""

from __future__ import annotations

from agents_core.agent_tools.chunk_kinds import (
    CHUNK_MAX_BYTES,
    is_lifecycle_chunk,
    too_large_to_store,
)

__all__ = ["CHUNK_MAX_BYTES", "ChunkSizeLimit", "StoreEveryChunk"]


class StoreEveryChunk:
    """0.21.0: every chunk is stored."""

    __slots__ = ()

    def stores(self, body: str) -> bool:
        """Whether the stream stores this chunk body."""
        return True

    def unstored(self, body: str) -> bool:
        """Whether a run's chunk is one too large to store (its record gets an `unstoredId`)."""
        return False


class ChunkSizeLimit(StoreEveryChunk):
    """0.32.0: a chunk over `CHUNK_MAX_BYTES` is broadcast but not stored."""

    __slots__ = ()

    def stores(self, body: str) -> bool:
        return not too_large_to_store(body)

    def unstored(self, body: str) -> bool:
        return too_large_to_store(body) and not is_lifecycle_chunk(body)
