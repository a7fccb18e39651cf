"""Sending a child's stored chunks again, and where a re-attach starts numbering (spec
agent-tools §3.4, §7.3).

A parent sends a run's stored chunks again in two places: to a client that connects (replay on
connect, each frame marked `replay` and sent to that connection only), and to every client when
it gives a run up or settles it from its child's inspection (the re-issue of a run id, the
startup sweep), numbered from 1. A re-attach then tails the child and forwards its chunks on
from a sequence of the caller's choosing.

0.21.0, this class: every stored chunk takes the next sequence (a chunk the run's delivery does
not show still takes its place), nothing else is sent, and a re-attach numbers on from the
sequence it was given, across its re-arms. The release passes this class, or one of its own, to
`AgentTools` (0.32.0's, which sends the child's milestones again and restarts a re-attach's
numbering from the stored count: `agents_core/releases/v0_32/replay_numbering.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agents_core.agent_tools.bounded_calls import call, within
from agents_core.agent_tools.frames import chunk_event, frame
from agents_core.probes import probe

if TYPE_CHECKING:
    from agents_core.agent_tools.delivery_policy import EventDeliveryPolicy
    from agents_core.agent_tools.hooks import AgentToolHooks
    from agents_core.agent_tools.run_store import RunStore
    from agents_core.context import AgentContext

__all__ = ["Send", "StoredChunkReplay"]

Send = Callable[[dict[str, Any]], None]
"""Where a replayed frame goes: one connection, or every client."""


class StoredChunkReplay:
    """0.21.0's replay of stored chunks: each at the next sequence, and nothing after them."""

    __slots__ = ("_ctx", "_agent", "_store", "_delivery")

    def __init__(
        self,
        ctx: AgentContext,
        agent: AgentToolHooks,
        store: RunStore,
        delivery: EventDeliveryPolicy,
    ) -> None:
        self._ctx = ctx
        self._agent = agent
        self._store = store
        self._delivery = delivery

    async def to_connection(self, row: dict[str, Any], connection: Any) -> int:
        """A run's stored chunks, sent to a connection that just connected, after the run's
        `started` frame (sequence 0); the sequence its terminal frame takes. The child and its
        chunks are read within the recovery inspection timeout: a child whose facet hangs must
        not hang a client's connect (the SDK waits without a bound)."""
        outcome, chunks = await within(
            self._ctx.host,
            self._fetch_stored_chunks(row),
            self._agent._agent_tool_recovery_timeout_ms,
        )
        if outcome != "ok":
            return 1  # a run whose child cannot be reached replays no chunks
        return self._send_stored(row, chunks, 1, connection.send, replay=True)

    async def rebroadcast(self, row: dict[str, Any], child: Any, timeout_ms: float | None) -> int:
        """The child's stored chunks broadcast live (not replay), numbered from 1; the next
        sequence. A failed or slow read broadcasts nothing."""
        tag, chunks = await within(
            self._ctx.host, call(child, "get_agent_tool_chunks", row["run_id"], -1), timeout_ms
        )
        return self._send_stored(
            row, chunks if tag == "ok" else None, 1, self._agent.broadcast, replay=False
        )

    def reattach_sequence(self, sequence: int, stored: int) -> int:
        """The sequence a re-attach's next tail forwards from, given the one it holds and how
        many chunks the child has stored: on from the one it holds."""
        return sequence

    async def _fetch_stored_chunks(self, row: dict[str, Any]) -> Any:
        child = await self._store.child(row["agent_type"], row["run_id"])
        return await child.call("get_agent_tool_chunks", row["run_id"], -1)

    def _send_stored(
        self, row: dict[str, Any], chunks: Any, sequence: int, send: Send, *, replay: bool
    ) -> int:
        """Send each stored chunk the run's delivery shows, every one at its own sequence; the
        next sequence. `chunks` that are not a list send nothing."""
        run_id, parent = row["run_id"], row["parent_tool_call_id"]
        delivery = self._delivery
        terminal_only = delivery.row_terminal_only(row)
        stored = [
            c
            for c in (chunks if isinstance(chunks, list) else [])
            if isinstance(c, dict) and isinstance(c.get("body"), str)
        ]
        for index, chunk in enumerate(stored):
            if index == 0 and replay:
                probe(self._ctx.host, "agent_tool.replayed_stored_chunks")
            body = chunk["body"]
            if delivery.shows(body, terminal_only):
                event = chunk_event(run_id, body, chunk.get("sequence"))
                send(frame(parent, sequence, event, replay=replay))
            sequence += 1
        return sequence
