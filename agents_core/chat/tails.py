"""The live tail of a child run, and the broadcast snoop that feeds it (spec agent-tools §3.3).

The SDK's tail is one byte stream; across our RPC boundary it is three calls:
`open_agent_tool_tail(run_id, after_sequence)` registers a forwarder *before* draining the stored
backlog (live chunks landing during the drain are parked, then flushed), and returns a tail id;
`read_agent_tool_tail(tail_id)` waits for at least one record or the close and returns the
records (`{"sequence", "body", "chunkSequence"}`), or None once the tail is closed and drained;
`close_agent_tool_tail(tail_id)` detaches the reader and never cancels the run. Each tail emits a
record at most once, by a high-water mark on `sequence`. A tail closes when its run settles.

The snoop runs on every broadcast while any tail or live sequence exists: a chat-response frame
whose request id maps to an active run advances that run's live sequence and is handed to its
tails; an `error: true` frame only records the run's last error. Anything else (other types,
non-string ids, unmapped requests, unparseable or binary frames, empty bodies) passes untouched.
The frame itself always reaches the child's own clients unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from agents_core.chat.self_type import ChatSelf
from agents_core.chat.turns import CHAT_RESPONSE_TYPE

__all__ = ["AgentToolTailsMixin"]


@dataclass
class _Tail:
    run_id: str
    high_water: int
    draining: bool = True
    parked: list[dict[str, Any]] = field(default_factory=list)
    queue: list[dict[str, Any]] = field(default_factory=list)
    closed: bool = False
    waiter: Any = None

    def offer(self, record: dict[str, Any]) -> None:
        if record["sequence"] <= self.high_water:
            return
        self.high_water = record["sequence"]
        self.queue.append(record)
        self._wake()

    def offer_live(self, record: dict[str, Any]) -> None:
        if self.draining:
            self.parked.append(record)
        else:
            self.offer(record)

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None:
            waiter, self.waiter = self.waiter, None
            waiter.resolve(None)


if TYPE_CHECKING:
    from agents_core.agent import Agent

    # Mixed in before Agent (ChatHost's bases): its `super()` calls reach Agent's methods.
    _TailsBase = Agent
else:
    _TailsBase = object


class AgentToolTailsMixin(_TailsBase):
    # -- the tail (RPC) ----------------------------------------------------------------------------
    async def open_agent_tool_tail(self: ChatSelf, run_id: str, after_sequence: int = -1) -> str:
        """Attach a reader to the run: stored chunks after `after_sequence`, then live ones."""
        tail = _Tail(run_id, after_sequence)
        tail_id = f"tail_{self.host.entropy.nanoid(12)}"
        self._agent_tool_tails[tail_id] = tail
        if run_id not in self._agent_tool_live_seq:
            # A cold counter starts after what storage shows, so live chunks parked during the
            # drain are never mistaken for backlog by the high-water mark.
            self._agent_tool_live_seq[run_id] = self._visible_chunk_count(run_id)
        backlog = await self._read_agent_tool_backlog(run_id, after_sequence)
        for chunk in backlog:
            tail.offer({**chunk, "chunkSequence": chunk["sequence"]})
        tail.draining = False
        parked, tail.parked = tail.parked, []
        for record in parked:
            tail.offer(record)
        row = self._agent_tool_row(run_id)
        if row is None or row["status"] not in self._agent_tool_active_statuses:
            tail.close()
            self._drop_idle_live_sequence(run_id)
        elif tail.high_water > after_sequence:
            current = self._agent_tool_live_seq.get(run_id, 0)
            self._agent_tool_live_seq[run_id] = max(current, tail.high_water + 1)
        return tail_id

    async def read_agent_tool_tail(self: ChatSelf, tail_id: str) -> list[dict[str, Any]] | None:
        """The next records (waits for at least one), or None once the tail closed."""
        tail = self._agent_tool_tails.get(tail_id)
        if tail is None:
            raise LookupError(
                f"no agent-tool tail {tail_id!r} on {self.host.agent_path}: it was closed and "
                f"fully read, or this isolate restarted since it was opened (open a new one)"
            )
        if tail.waiter is not None:
            raise RuntimeError(f"agent-tool tail {tail_id!r} already has a pending read")
        while not tail.queue and not tail.closed:
            tail.waiter = self.host.tasks.deferred()
            await tail.waiter
        if tail.queue:
            records: list[dict[str, Any]] = tail.queue
            tail.queue = []
            return records
        self._agent_tool_tails.pop(tail_id, None)
        return None

    async def close_agent_tool_tail(self: ChatSelf, tail_id: str) -> None:
        """Detach the reader (a pending read returns None); the run goes on."""
        tail = self._agent_tool_tails.pop(tail_id, None)
        if tail is not None:
            tail.queue.clear()
            tail.close()
            self._drop_idle_live_sequence(tail.run_id)

    async def _read_agent_tool_backlog(
        self: ChatSelf, run_id: str, after_sequence: int
    ) -> list[dict[str, Any]]:
        """The stored backlog a new tail drains (a seam: tests land chunks inside the drain)."""
        return await self.get_agent_tool_chunks(run_id, after_sequence)

    def _visible_chunk_count(self: ChatSelf, run_id: str) -> int:
        row = self._agent_tool_row(run_id)
        if row is None:
            return 0
        chunks = self._stream.chunks(self._agent_tool_stream_id(row))
        return chunks[-1]["sequence"] + 1 if chunks else 0

    def _close_agent_tool_tails(self: ChatSelf, run_id: str) -> None:
        for tail in self._agent_tool_tails.values():
            if tail.run_id == run_id:
                tail.close()
        self._agent_tool_live_seq.pop(run_id, None)

    def _drop_idle_live_sequence(self: ChatSelf, run_id: str) -> None:
        row = self._agent_tool_row(run_id)
        active = row is not None and row["status"] in self._agent_tool_active_statuses
        has_reader = any(
            t.run_id == run_id and not t.closed for t in self._agent_tool_tails.values()
        )
        if not active and not has_reader:
            self._agent_tool_live_seq.pop(run_id, None)

    # -- the snoop ---------------------------------------------------------------------------------
    # self is left unannotated here, so that super() resolves through the class (its
    # type-checking base is Agent; a Protocol self type would put the Protocol's own bases
    # there); the agent is read through the Protocol it is mixed into.
    def broadcast(self, frame: Any, exclude: tuple[str, ...] = ()) -> None:
        cast("ChatSelf", self)._snoop_agent_tool_frame(frame, None)
        super().broadcast(frame, exclude)

    def _broadcast_chat_frame(self, frame: Any, chunk_index: int | None = None) -> None:
        cast("ChatSelf", self)._snoop_agent_tool_frame(frame, chunk_index)
        super().broadcast(frame)

    def _snoop_agent_tool_frame(self: ChatSelf, frame: Any, chunk_index: int | None) -> None:
        if not self._agent_tool_tails and not self._agent_tool_live_seq:
            return
        try:
            self._forward_agent_tool_frame(frame, chunk_index)
        except Exception as exc:  # noqa: BLE001 - the snoop never breaks a broadcast
            self._log("error", f"agent-tool broadcast snoop failed: {exc}")

    def _forward_agent_tool_frame(self: ChatSelf, frame: Any, chunk_index: int | None) -> None:
        if isinstance(frame, str):
            try:
                frame = json.loads(frame)
            except ValueError:
                return
        if not isinstance(frame, Mapping) or frame.get("type") != CHAT_RESPONSE_TYPE:
            return
        request_id = frame.get("id")
        if not isinstance(request_id, str):
            return
        run_id = self._agent_tool_run_for_request(request_id)
        if run_id is None:
            return
        body = frame.get("body")
        if frame.get("error") is True:
            if isinstance(body, str):
                self._agent_tool_last_errors[run_id] = body
            return
        if not isinstance(body, str) or not body:
            return
        sequence = self._agent_tool_live_seq.get(run_id, 0)
        self._agent_tool_live_seq[run_id] = sequence + 1
        record = {"sequence": sequence, "body": body, "chunkSequence": chunk_index}
        for tail in list(self._agent_tool_tails.values()):
            if tail.run_id == run_id and not tail.closed:
                tail.offer_live(record)

    def _agent_tool_run_for_request(self: ChatSelf, request_id: str) -> str | None:
        """The active run a request id belongs to (cached, "none" included)."""
        if request_id in self._agent_tool_request_runs:
            return self._agent_tool_request_runs[request_id]
        run_id = None
        if self._agent_tool_tables_exist():
            statuses = self._agent_tool_active_statuses
            rows = self.sql(
                f"SELECT run_id FROM {self._agent_tool_runs_table} WHERE request_id = ? AND "
                f"status IN ({', '.join('?' for _ in statuses)}) ORDER BY started_at DESC LIMIT 1",
                request_id,
                *statuses,
            )
            run_id = rows[0]["run_id"] if rows else None
        self._agent_tool_request_runs[request_id] = run_id
        return run_id
