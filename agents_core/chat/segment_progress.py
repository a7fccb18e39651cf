"""0.32.0's progress marker for chat recovery: stream segments (spec sdk-0.32 §8.1).

0.21.0 counts progress in credits (`RecoveryCredit`: a chunk that starts a segment or settles
a tool, a streaming delta at most once per 5 s). 0.32.0 writes nothing per chunk: its marker is
read off the stream log, as the number of *segments* the chat streams hold, plus one per
explicit credit for a forwarded agent-tool child's output (still at most once per 5 s per
isolate). Its streams pack chunks into stored segments: a segment takes at most 10 chunks,
closes after a settled tool result (`tool-output-available`, `-error`, `-denied`), and a chunk
that would take it over 512 000 bytes (the chunk's stored encoding) starts the next one. Chat
recovery's no-progress window and its work budget (`max_recovery_work`, 10 000 segments) both
read this marker.

The port's stream stores every chunk on its own, as it comes, so a segment here is the group
of chunks 0.32.0 would pack into one; it counts from its first chunk on (the chunks of a group
the SDK still buffers are already durable here). That keeps the marker monotonic: appending a
chunk never lowers it, and nothing else changes it (the port never deletes a stream). The
explicit credits live in `cf_agents_chat_progress` (`retired`), created on the first credit.
A count 0.21.0 left in KV `cf:chat-recovery:progress` is folded in (it is never written on
0.32.0), so an incident opened before an upgrade never reads the marker lower.
"""

from __future__ import annotations

import json
from typing import Any

from agents_core.agent_tools.chunk_kinds import stored_chunk_bytes
from agents_core.chat.recovery_credit import RecoveryCredit

__all__ = [
    "CHUNKS_PER_SEGMENT",
    "SEGMENT_MAX_BYTES",
    "SegmentProgress",
    "stream_segments",
]

CHUNKS_PER_SEGMENT = 10
SEGMENT_MAX_BYTES = 512_000
SEGMENT_CLOSING_CHUNKS = frozenset(
    {"tool-output-available", "tool-output-error", "tool-output-denied"}
)
"""A settled tool result is flushed at once: its segment ends with it."""
PROGRESS_TABLE_DDL = (
    "CREATE TABLE IF NOT EXISTS cf_agents_chat_progress (key TEXT PRIMARY KEY, "
    "retired INTEGER NOT NULL, legacy INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID"
)


def _chunk_type(body: str) -> Any:
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    return parsed.get("type") if isinstance(parsed, dict) else None


def stream_segments(bodies: list[str]) -> int:
    """How many segments 0.32.0 packs one stream's chunk bodies (in order) into; a group
    counts from its first chunk."""
    segments = 0
    in_segment = 0
    size = 0
    for body in bodies:
        body_bytes = stored_chunk_bytes(body)
        if in_segment and size + body_bytes > SEGMENT_MAX_BYTES:
            in_segment, size = 0, 0
        if in_segment == 0:
            segments += 1
        in_segment += 1
        size += body_bytes
        if in_segment >= CHUNKS_PER_SEGMENT or _chunk_type(body) in SEGMENT_CLOSING_CHUNKS:
            in_segment, size = 0, 0
    return segments


class SegmentProgress(RecoveryCredit):
    """The 0.32.0 marker: segments in the stream log, plus explicit credits."""

    __slots__ = ()

    def stored_chunk(self, chunk_type: Any) -> None:
        """Nothing is written per chunk: the log is the marker."""

    def bump(self) -> None:
        """One explicit credit (a forwarded child's output)."""
        sql = self._ctx.host.sql
        sql.execute(PROGRESS_TABLE_DDL)
        sql.execute(
            "INSERT INTO cf_agents_chat_progress (key, retired, legacy) VALUES ('chat', 1, 0) "
            "ON CONFLICT(key) DO UPDATE SET retired = retired + excluded.retired"
        )

    def count(self) -> int:
        return self._segments() + self._credits() + super().count()

    def _credits(self) -> int:
        exists = self._ctx.sql(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cf_agents_chat_progress'"
        )
        if not exists:
            return 0
        rows = self._ctx.sql("SELECT retired FROM cf_agents_chat_progress WHERE key = 'chat'")
        return int(rows[0]["retired"]) if rows else 0

    def _segments(self) -> int:
        rows = self._ctx.sql(
            "SELECT stream_id, body FROM cf_ai_chat_stream_chunks ORDER BY stream_id, chunk_index"
        )
        total = 0
        stream: Any = None
        bodies: list[str] = []
        for row in rows:
            if row["stream_id"] != stream:
                total += stream_segments(bodies)
                stream, bodies = row["stream_id"], []
            bodies.append(row["body"])
        return total + stream_segments(bodies)
