"""The resumable stream: every UI chunk a turn streams, stored with a 0-based index per stream.

One stream per turn (request id), in `cf_ai_chat_stream_metadata`; its chunks in
`cf_ai_chat_stream_chunks` with `chunk_index` contiguous from 0. Chunks are written in the same
synchronous step as their broadcast, so a chunk a client saw is a chunk storage has (the output
gate commits them together). A stream left `streaming` by a dead incarnation is what chat
recovery reads to rebuild the interrupted answer. The one exception to "one stream per turn":
a recovered turn that serves an agent-tool run continues the stream of the turn it recovers
(`_adopt_stream`), so the run's chunk indices, its chunks' identity on the wire, never start
over (seed decision S5; `docs/divergences.md` T9).
"""

from __future__ import annotations

from typing import Any

from agents_core.chat.self_type import ChatSelf

__all__ = ["StreamStoreMixin"]

STREAM_DDL = (
    "CREATE TABLE IF NOT EXISTS cf_ai_chat_stream_metadata ("
    "id TEXT PRIMARY KEY NOT NULL, request_id TEXT NOT NULL, status TEXT NOT NULL, "
    "created_at INTEGER NOT NULL, completed_at INTEGER)",
    "CREATE INDEX IF NOT EXISTS cf_ai_chat_stream_metadata_request "
    "ON cf_ai_chat_stream_metadata (request_id)",
    "CREATE TABLE IF NOT EXISTS cf_ai_chat_stream_chunks ("
    "id TEXT PRIMARY KEY NOT NULL, stream_id TEXT NOT NULL, body TEXT NOT NULL, "
    "chunk_index INTEGER NOT NULL, created_at INTEGER NOT NULL)",
    "CREATE UNIQUE INDEX IF NOT EXISTS cf_ai_chat_stream_chunks_order "
    "ON cf_ai_chat_stream_chunks (stream_id, chunk_index)",
)


class StreamStoreMixin:
    def _init_stream_store(self: ChatSelf) -> None:
        for statement in STREAM_DDL:
            self.host.sql.execute(statement)

    def _start_stream(self: ChatSelf, request_id: str) -> str:
        stream_id = self.host.entropy.nanoid()
        self.sql(
            "INSERT INTO cf_ai_chat_stream_metadata (id, request_id, status, created_at) "
            "VALUES (?, ?, 'streaming', ?)",
            stream_id,
            request_id,
            self.host.clock.now_ms(),
        )
        return stream_id

    def _adopt_stream(self: ChatSelf, stream_id: str, request_id: str) -> bool:
        """Continue an existing stream under a new turn: it becomes that turn's stream (its
        request id is the new one's, its status `streaming` again), and its chunks go on from
        the next index. False when the stream is gone."""
        return bool(
            self.host.sql.execute(
                "UPDATE cf_ai_chat_stream_metadata SET request_id = ?, status = 'streaming', "
                "completed_at = NULL WHERE id = ?",
                (request_id, stream_id),
            )
        )

    def _stream_length(self: ChatSelf, stream_id: str) -> int:
        """How many chunks the stream holds (its next chunk index)."""
        rows = self.sql(
            "SELECT COALESCE(MAX(chunk_index), -1) + 1 AS next FROM cf_ai_chat_stream_chunks "
            "WHERE stream_id = ?",
            stream_id,
        )
        return int(rows[0]["next"])

    def _append_stream_chunk(self: ChatSelf, stream_id: str, body: str) -> int:
        """Store one chunk (JSON text); its index in the stream."""
        rows = self.sql(
            "SELECT COALESCE(MAX(chunk_index), -1) + 1 AS next FROM cf_ai_chat_stream_chunks "
            "WHERE stream_id = ?",
            stream_id,
        )
        index = int(rows[0]["next"])
        self.sql(
            "INSERT INTO cf_ai_chat_stream_chunks (id, stream_id, body, chunk_index, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            f"{stream_id}:{index}",
            stream_id,
            body,
            index,
            self.host.clock.now_ms(),
        )
        return index

    def _finish_stream(self: ChatSelf, stream_id: str, status: str) -> None:
        self.sql(
            "UPDATE cf_ai_chat_stream_metadata SET status = ?, completed_at = ? WHERE id = ?",
            status,
            self.host.clock.now_ms(),
            stream_id,
        )

    def _stream_for_request(self: ChatSelf, request_id: str | None) -> str | None:
        """The (latest) stream of a turn."""
        if request_id is None:
            return None
        rows = self.sql(
            "SELECT id FROM cf_ai_chat_stream_metadata WHERE request_id = ? "
            "ORDER BY created_at DESC, rowid DESC LIMIT 1",
            request_id,
        )
        return rows[0]["id"] if rows else None

    def stream_chunks(
        self: ChatSelf, stream_id: str | None, after: int = -1
    ) -> list[dict[str, Any]]:
        """Stored chunks of a stream with index > `after`, as {"sequence", "body"}."""
        if stream_id is None:
            return []
        rows = self.sql(
            "SELECT chunk_index, body FROM cf_ai_chat_stream_chunks "
            "WHERE stream_id = ? AND chunk_index > ? ORDER BY chunk_index",
            stream_id,
            after,
        )
        return [{"sequence": r["chunk_index"], "body": r["body"]} for r in rows]
