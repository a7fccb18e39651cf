"""The resumable stream: every UI chunk a turn streams, stored with a 0-based index per stream.

One stream per turn (request id), in `cf_ai_chat_stream_metadata`; its chunks in
`cf_ai_chat_stream_chunks` with `chunk_index` contiguous from 0. Chunks are written in the same
synchronous step as their broadcast, so a chunk a client saw is a chunk storage has (the output
gate commits them together). A stream left `streaming` by a dead incarnation is what chat
recovery reads to rebuild the interrupted answer. The one exception to "one stream per turn":
a recovered turn that serves an agent-tool run continues the stream of the turn it recovers
(`ResumableStream.adopt`), so the run's chunk indices, its chunks' identity on the wire, never start
over (seed decision S5; `docs/divergences.md` T9). Which chunks are stored at all is the
release's (`chunk_limit.py`): 0.32.0 keeps a chunk too large to store out of the stream, so it
takes no index and no replay has it; 0.21.0 stores every chunk.

`ResumableStream` is the component: it owns both tables and sees the agent through its
`AgentContext` only. The SDK's counterpart is `ResumableStream` of AIChatAgent and Think (its
`start`, `storeChunk`, `complete`/`markError`, `getStreamChunks`); the chunk frames a client
receives are the turn engine's (`turns.py`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agents_core.agent_tools.chunk_kinds import stored_chunk_bytes
from agents_core.chat.chunk_limit import StoreEveryChunk

if TYPE_CHECKING:
    from agents_core.context import AgentContext

__all__ = ["STREAM_DDL", "ResumableStream"]

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


class ResumableStream:
    """One chat host's stored streams: one per turn, its chunks indexed from 0."""

    __slots__ = ("_ctx", "_limit")

    def __init__(self, ctx: AgentContext, limit: StoreEveryChunk | None = None) -> None:
        self._ctx = ctx
        self._limit = StoreEveryChunk() if limit is None else limit
        for statement in STREAM_DDL:
            ctx.host.sql.execute(statement)

    def start(self, request_id: str) -> str:
        """Open the stream of a turn; its id."""
        ctx = self._ctx
        stream_id = ctx.host.entropy.nanoid()
        ctx.sql(
            "INSERT INTO cf_ai_chat_stream_metadata (id, request_id, status, created_at) "
            "VALUES (?, ?, 'streaming', ?)",
            stream_id,
            request_id,
            ctx.host.clock.now_ms(),
        )
        return stream_id

    def adopt(self, stream_id: str, request_id: str) -> bool:
        """Continue an existing stream under a new turn: it becomes that turn's stream (its
        request id is the new one's, its status `streaming` again), and its chunks go on from
        the next index. False when the stream is gone."""
        return bool(
            self._ctx.host.sql.execute(
                "UPDATE cf_ai_chat_stream_metadata SET request_id = ?, status = 'streaming', "
                "completed_at = NULL WHERE id = ?",
                (request_id, stream_id),
            )
        )

    def length(self, stream_id: str) -> int:
        """How many chunks the stream holds (its next chunk index)."""
        rows = self._ctx.sql(
            "SELECT COALESCE(MAX(chunk_index), -1) + 1 AS next FROM cf_ai_chat_stream_chunks "
            "WHERE stream_id = ?",
            stream_id,
        )
        return int(rows[0]["next"])

    def append(self, stream_id: str, body: str) -> int | None:
        """Store one chunk (JSON text); its index in the stream, or None when the release keeps
        a chunk of its size out of the stream (it is still broadcast live)."""
        ctx = self._ctx
        if not self._limit.stores(body):
            ctx.log(
                "warn",
                f"skipping an oversized chunk ({stored_chunk_bytes(body)} bytes) of stream "
                f"{stream_id}: live clients still receive it, replays do not",
            )
            return None
        rows = ctx.sql(
            "SELECT COALESCE(MAX(chunk_index), -1) + 1 AS next FROM cf_ai_chat_stream_chunks "
            "WHERE stream_id = ?",
            stream_id,
        )
        index = int(rows[0]["next"])
        ctx.sql(
            "INSERT INTO cf_ai_chat_stream_chunks (id, stream_id, body, chunk_index, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            f"{stream_id}:{index}",
            stream_id,
            body,
            index,
            ctx.host.clock.now_ms(),
        )
        return index

    def finish(self, stream_id: str, status: str) -> None:
        """End the stream with the turn's status (`completed`, `error`, `aborted`), or with
        `recovering` for a request that stalled while recovery continues its turn (0.32.0; the
        SDK keeps that outcome beside a `completed` status)."""
        ctx = self._ctx
        ctx.sql(
            "UPDATE cf_ai_chat_stream_metadata SET status = ?, completed_at = ? WHERE id = ?",
            status,
            ctx.host.clock.now_ms(),
            stream_id,
        )

    def is_streaming(self, stream_id: str) -> bool:
        """The stream is still open: its turn neither ended it nor lived to (the SDK's
        active stream, which a restart restores from the `streaming` row)."""
        rows = self._ctx.sql(
            "SELECT status FROM cf_ai_chat_stream_metadata WHERE id = ?", stream_id
        )
        return bool(rows) and rows[0]["status"] == "streaming"

    def for_request(self, request_id: str | None) -> str | None:
        """The (latest) stream of a turn."""
        if request_id is None:
            return None
        rows = self._ctx.sql(
            "SELECT id FROM cf_ai_chat_stream_metadata WHERE request_id = ? "
            "ORDER BY created_at DESC, rowid DESC LIMIT 1",
            request_id,
        )
        return rows[0]["id"] if rows else None

    def chunks(self, stream_id: str | None, after: int = -1) -> list[dict[str, Any]]:
        """Stored chunks of a stream with index > `after`, as {"sequence", "body"}."""
        if stream_id is None:
            return []
        rows = self._ctx.sql(
            "SELECT chunk_index, body FROM cf_ai_chat_stream_chunks "
            "WHERE stream_id = ? AND chunk_index > ? ORDER BY chunk_index",
            stream_id,
            after,
        )
        return [{"sequence": r["chunk_index"], "body": r["body"]} for r in rows]

    def parsed_chunks(self, stream_id: str | None, after: int = -1) -> list[dict[str, Any]]:
        """The stored chunks of `chunks` whose body is a JSON object, parsed (others left out)."""
        out = []
        for chunk in self.chunks(stream_id, after):
            try:
                parsed = json.loads(chunk["body"])
            except ValueError:
                continue
            if isinstance(parsed, dict):
                out.append(parsed)
        return out
