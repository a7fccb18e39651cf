"""The live tail of a child run, and the broadcast snoop that feeds it (spec agent-tools §3.3).

The SDK's tail is one byte stream; across our RPC boundary it is three calls:
`open_agent_tool_tail(run_id, after_sequence)` registers a forwarder *before* draining the stored
backlog (live chunks landing during the drain are parked, then flushed), and returns a tail id;
`read_agent_tool_tail(tail_id)` waits for at least one record or the close and returns the
records (`{"sequence", "body", "chunkSequence"}`), or None once the tail is closed and drained;
`close_agent_tool_tail(tail_id)` detaches the reader and never cancels the run. Each tail emits a
record at most once, by a high-water mark on `sequence` (a record with an `unstoredId`, below,
is not stored, so it is emitted once as it comes and moves no mark). A tail closes when its run
settles.

The snoop runs on every broadcast while any tail or live sequence exists: a chat-response frame
whose request id maps to an active run advances that run's live sequence and is handed to its
tails; an `error: true` frame only records the run's last error. Anything else (other types,
non-string ids, unmapped requests, unparseable or binary frames, empty bodies) passes untouched.
The snoop answers the run a frame is a chunk of (None for anything else); the frame reaches
the child's own clients unchanged, unless the release keeps that run's chunks from them
(`terminal_runs.py`). A chunk the release does not store (`chunk_limit.py`, 0.32.0: too large)
gets the run's next live sequence without consuming it, and a random `unstoredId` on its record.

`AgentToolTails` is the component (owned by the child adapter, `AgentToolChild`): it holds the
tails and the live sequences; the host's `broadcast` and `_broadcast_chat_frame` hand every
frame to its snoop. The SDK's counterpart is the chat hosts' agent-tool tail stream.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agents_core.agent_tools.chunk_kinds import random_uuid
from agents_core.chat.chunk_limit import StoreEveryChunk
from agents_core.chat.turns import CHAT_RESPONSE_TYPE

if TYPE_CHECKING:
    from agents_core.chat.stream_store import ResumableStream
    from agents_core.context import AgentContext

__all__ = ["AgentToolTails", "ChildRuns", "TailHooks"]


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
        if "unstoredId" not in record:
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


class TailHooks(Protocol):
    """What the tails read of their chat host: its agent-tool table, a row's stream, and the
    seam a new tail drains its stored backlog through. The host passes itself."""

    @property
    def _agent_tool_runs_table(self) -> str: ...
    @property
    def _agent_tool_active_statuses(self) -> tuple[str, ...]: ...
    def _agent_tool_tables_exist(self) -> bool: ...
    def _agent_tool_stream_id(self, row: dict[str, Any]) -> str | None: ...
    async def _read_agent_tool_backlog(
        self, run_id: str, after_sequence: int
    ) -> list[dict[str, Any]]: ...


class ChildRuns(Protocol):
    """What the tails use of the child adapter (`AgentToolChild`): its rows and the memory of
    which request serves which run, of the last error each run streamed, and of the runs kept
    from the host's clients (`note_row` learns one from its row)."""

    request_runs: dict[str, str | None]
    last_errors: dict[str, str]
    terminal_only: set[str]

    def row(self, run_id: str) -> dict[str, Any] | None: ...
    def note_row(self, row: Mapping[str, Any]) -> None: ...


class AgentToolTails:
    """The live tails of one chat host's child runs, and the runs' live sequences."""

    __slots__ = ("_ctx", "_stream", "_child", "_hooks", "_limit", "_tails", "live_seq")

    def __init__(
        self,
        ctx: AgentContext,
        stream: ResumableStream,
        child: ChildRuns,
        hooks: TailHooks,
        limit: StoreEveryChunk | None = None,
    ) -> None:
        self._ctx = ctx
        self._stream = stream
        self._child = child
        self._hooks = hooks
        self._limit = StoreEveryChunk() if limit is None else limit
        self._tails: dict[str, _Tail] = {}
        self.live_seq: dict[str, int] = {}
        """The next live sequence of each run whose chunks a tail may forward."""

    @property
    def tails(self) -> dict[str, _Tail]:
        """The open tails by id."""
        return self._tails

    # -- the tail (RPC) ----------------------------------------------------------------------------
    async def open(self, run_id: str, after_sequence: int = -1) -> str:
        """Attach a reader to the run: stored chunks after `after_sequence`, then live ones."""
        tail = _Tail(run_id, after_sequence)
        tail_id = f"tail_{self._ctx.host.entropy.nanoid(12)}"
        self._tails[tail_id] = tail
        if run_id not in self.live_seq:
            # A cold counter starts after what storage shows, so live chunks parked during the
            # drain are never mistaken for backlog by the high-water mark.
            self.live_seq[run_id] = self._visible_chunk_count(run_id)
        backlog = await self._hooks._read_agent_tool_backlog(run_id, after_sequence)
        for chunk in backlog:
            tail.offer({**chunk, "chunkSequence": chunk["sequence"]})
        tail.draining = False
        parked, tail.parked = tail.parked, []
        for record in parked:
            tail.offer(record)
        row = self._child.row(run_id)
        if row is None or row["status"] not in self._hooks._agent_tool_active_statuses:
            tail.close()
            self._drop_idle_live_sequence(run_id)
        elif tail.high_water > after_sequence:
            current = self.live_seq.get(run_id, 0)
            self.live_seq[run_id] = max(current, tail.high_water + 1)
        return tail_id

    async def read(self, tail_id: str) -> list[dict[str, Any]] | None:
        """The next records (waits for at least one), or None once the tail closed."""
        tail = self._tails.get(tail_id)
        if tail is None:
            raise LookupError(
                f"no agent-tool tail {tail_id!r} on {self._ctx.host.agent_path}: it was closed and "
                f"fully read, or this isolate restarted since it was opened (open a new one)"
            )
        if tail.waiter is not None:
            raise RuntimeError(f"agent-tool tail {tail_id!r} already has a pending read")
        while not tail.queue and not tail.closed:
            tail.waiter = self._ctx.host.tasks.deferred()
            await tail.waiter
        if tail.queue:
            records: list[dict[str, Any]] = tail.queue
            tail.queue = []
            return records
        self._tails.pop(tail_id, None)
        return None

    async def close(self, tail_id: str) -> None:
        """Detach the reader (a pending read returns None); the run goes on."""
        tail = self._tails.pop(tail_id, None)
        if tail is not None:
            tail.queue.clear()
            tail.close()
            self._drop_idle_live_sequence(tail.run_id)

    def _visible_chunk_count(self, run_id: str) -> int:
        row = self._child.row(run_id)
        if row is None:
            return 0
        chunks = self._stream.chunks(self._hooks._agent_tool_stream_id(row))
        return chunks[-1]["sequence"] + 1 if chunks else 0

    def close_run(self, run_id: str) -> None:
        for tail in self._tails.values():
            if tail.run_id == run_id:
                tail.close()
        self.live_seq.pop(run_id, None)

    def _drop_idle_live_sequence(self, run_id: str) -> None:
        row = self._child.row(run_id)
        active = row is not None and row["status"] in self._hooks._agent_tool_active_statuses
        has_reader = any(t.run_id == run_id and not t.closed for t in self._tails.values())
        if not active and not has_reader:
            self.live_seq.pop(run_id, None)

    # -- the snoop ---------------------------------------------------------------------------------
    def snoop(self, frame: Any, chunk_index: int | None) -> str | None:
        """Hand a run's chunk to its tails (or note its error); the run a chunk frame belongs
        to, None for any other frame."""
        if not self._tails and not self.live_seq and not self._child.terminal_only:
            return None
        try:
            return self._forward(frame, chunk_index)
        except Exception as exc:  # noqa: BLE001 - the snoop never breaks a broadcast
            self._ctx.log("error", f"agent-tool broadcast snoop failed: {exc}")
            return None

    def _forward(self, frame: Any, chunk_index: int | None) -> str | None:
        if isinstance(frame, str):
            try:
                frame = json.loads(frame)
            except ValueError:
                return None
        if not isinstance(frame, Mapping) or frame.get("type") != CHAT_RESPONSE_TYPE:
            return None
        request_id = frame.get("id")
        if not isinstance(request_id, str):
            return None
        run_id = self._run_for_request(request_id)
        if run_id is None:
            return None
        body = frame.get("body")
        if frame.get("error") is True:
            if isinstance(body, str):
                self._child.last_errors[run_id] = body
            return None
        if not isinstance(body, str) or not body:
            return None
        sequence = self.live_seq.get(run_id, 0)
        unstored = self._limit.unstored(body)
        self.live_seq[run_id] = sequence if unstored else sequence + 1
        record: dict[str, Any] = {"sequence": sequence, "body": body, "chunkSequence": chunk_index}
        if unstored:
            record["unstoredId"] = random_uuid(self._ctx.host.entropy)
        for tail in list(self._tails.values()):
            if tail.run_id == run_id and not tail.closed:
                tail.offer_live(record)
        return run_id

    def _run_for_request(self, request_id: str) -> str | None:
        """The active run a request id belongs to (cached, "none" included)."""
        if request_id in self._child.request_runs:
            return self._child.request_runs[request_id]
        run_id = None
        if self._hooks._agent_tool_tables_exist():
            statuses = self._hooks._agent_tool_active_statuses
            rows = self._ctx.sql(
                f"SELECT * FROM {self._hooks._agent_tool_runs_table} WHERE request_id = ? AND "
                f"status IN ({', '.join('?' for _ in statuses)}) ORDER BY started_at DESC LIMIT 1",
                request_id,
                *statuses,
            )
            run_id = rows[0]["run_id"] if rows else None
            if rows:
                self._child.note_row(rows[0])
        self._child.request_runs[request_id] = run_id
        return run_id
