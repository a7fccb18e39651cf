"""Forwarding a child's stream to the parent's clients (spec agent-tools §3.3, §5.5).

The child's tail crosses an RPC boundary, so it is three calls on the child's stub: open (the
child registers its forwarder, then drains its backlog), read (waits for at least one record or
the close; None once closed) and close (detaches; never cancels the run). Each record is
`{sequence, body, chunkSequence}`. The parent broadcasts every record as a `chunk` event with its
own next sequence, observes progress and milestone chunks, and ends on the close (`done`), on an
idle window with nothing forwarded (`idle`) or on the caller's abort signal (`aborted`). On idle or
abort the pending read is abandoned, never cancelled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents_core.agent_tools.delivery_policy import FULL_DELIVERY, EventDeliveryPolicy
from agents_core.agent_tools.frames import chunk_event, frame
from agents_core.agent_tools.registry import AgentToolRunInfo

if TYPE_CHECKING:
    from agents_core.agent_tools.hooks import AgentToolHooks
    from agents_core.agent_tools.notify import MilestoneNotifier
    from agents_core.agent_tools.run_store import RunStore
    from agents_core.context import AgentContext

__all__ = ["ForwardOutcome", "StreamForwarder"]

PROGRESS_TYPES = ("data-agent-progress", "data-agent-milestone")


@dataclass(frozen=True)
class ForwardOutcome:
    sequence: int
    """The parent's next sequence after the forwarded chunks."""
    ended: str
    """`done` (the tail closed), `idle` or `aborted`."""
    forwarded: int


async def _tagged(tag: str, awaitable: Any) -> tuple[str, Any]:
    return tag, await awaitable


class StreamForwarder:
    """Forwards a child's tail to the parent's clients and observes its progress."""

    __slots__ = ("_ctx", "_agent", "_store", "_notifier", "_delivery")

    def __init__(
        self,
        ctx: AgentContext,
        agent: AgentToolHooks,
        store: RunStore,
        notifier: MilestoneNotifier,
        delivery: EventDeliveryPolicy = FULL_DELIVERY,
    ) -> None:
        self._ctx = ctx
        self._agent = agent
        self._store = store
        self._notifier = notifier
        self._delivery = delivery

    async def forward(
        self,
        child: Any,
        run_id: str,
        parent_tool_call_id: str | None,
        sequence: int,
        *,
        after_sequence: int = -1,
        signal: Any = None,
        idle_ms: float | None = None,
    ) -> ForwardOutcome:
        host = self._ctx.host
        forwarded = 0
        aborted = host.tasks.deferred()
        if signal is not None:
            signal.add_listener(lambda _reason: aborted.resolve(("aborted", None)))

        def race(call: Any) -> Any:
            racers = [call]
            if signal is not None:
                racers.append(aborted)
            if idle_ms is not None and 0 < idle_ms < float("inf"):
                racers.append(_tagged("idle", host.clock.sleep(int(idle_ms))))
            return host.tasks.race(*racers)

        # Opening is bounded like every read: a child whose open hangs ends the wait as idle.
        opened = host.tasks.deferred()

        async def open_tail() -> None:
            try:
                opened.resolve(
                    ("open", await child.call("open_agent_tool_tail", run_id, after_sequence))
                )
            except Exception as exc:  # noqa: BLE001 - handed to whoever awaits `opened`
                opened.reject(exc)

        host.tasks.wait_until(open_tail())
        tag, tail_id = await race(opened)
        if tag != "open":
            host.tasks.wait_until(self._close_tail_once_open(child, opened))
            return ForwardOutcome(sequence, tag, forwarded)
        delivery = self._delivery
        terminal_only = delivery.terminal_only(self._store, run_id)
        broken = False
        try:
            while True:
                try:
                    tag, batch = await race(
                        _tagged("read", child.call("read_agent_tool_tail", tail_id))
                    )
                except BaseException:
                    broken = True
                    raise
                if tag != "read":
                    return ForwardOutcome(sequence, tag, forwarded)
                if batch is None:
                    return ForwardOutcome(sequence, "done", forwarded)
                sent = 0
                for record in batch:
                    body = record.get("body") if isinstance(record, dict) else None
                    if not isinstance(body, str) or not body:
                        continue  # blank or body-less records are skipped, as malformed lines are
                    if delivery.shows(body, terminal_only):
                        event = chunk_event(run_id, body, record.get("chunkSequence"))
                        unstored = delivery.unstored_id(record)
                        if unstored is not None:
                            event["unstoredId"] = unstored
                        self._agent.broadcast(frame(parent_tool_call_id, sequence, event))
                    if delivery.takes_position(body, record):
                        sequence += 1
                    sent += 1
                    self._observe_forwarded_progress(run_id, body)
                forwarded += sent
                if sent:
                    self._agent._on_agent_tool_stream_progress()
        finally:
            # A tail whose read failed died with what it read (the child's incarnation, as the
            # SDK's stream errors with it): there is nothing to close, and a close sent to an
            # evicted child would start a new incarnation of it, which cancelling the SDK's
            # errored stream never does (on 0.32.0 that start runs its startup, §1.3).
            if not broken:
                host.tasks.wait_until(self._close_tail_quietly(child, tail_id))

    async def _close_tail_once_open(self, child: Any, opening: Any) -> None:
        """A tail whose open lost the race: close it if it ever opens."""
        try:
            _, tail_id = await opening
        except Exception:  # noqa: BLE001 - it never opened: nothing to close
            return
        await self._close_tail_quietly(child, tail_id)

    async def _close_tail_quietly(self, child: Any, tail_id: str) -> None:
        try:
            await child.call("close_agent_tool_tail", tail_id)
        except Exception:  # noqa: BLE001 - closing only detaches; a dead child has nothing to detach
            return

    def _observe_forwarded_progress(self, run_id: str, body: str) -> None:
        try:
            chunk = json.loads(body)
        except ValueError:
            return
        if not isinstance(chunk, dict) or chunk.get("type") not in PROGRESS_TYPES:
            return
        raw = chunk.get("data")
        data = raw if isinstance(raw, dict) else {}
        snapshot: dict[str, Any] = {}
        for key, kind in (("fraction", (int, float)), ("message", str), ("phase", str)):
            if isinstance(data.get(key), kind) and not isinstance(data.get(key), bool):
                snapshot[key] = data[key]
        if chunk["type"] == "data-agent-milestone" and isinstance(data.get("name"), str):
            snapshot["milestone"] = data["name"]
        if "data" in data:
            snapshot["data"] = data["data"]
        now = self._ctx.host.clock.now_ms()
        snapshot["at"] = now
        row = self._store.read(run_id)
        if row is None:
            return
        if row["detached"]:
            self._ctx.sql(
                "UPDATE cf_agent_tool_runs SET last_progress_at = ? WHERE run_id = ?", now, run_id
            )
        info = AgentToolRunInfo.from_row(row)
        self._ctx.host.tasks.wait_until(self._call_on_progress(info, snapshot))
        if chunk["type"] == "data-agent-milestone":
            # S3: the live path notifies as soon as the milestone is reached.
            self._notifier.on_forwarded(row, data)

    async def _call_on_progress(self, info: AgentToolRunInfo, snapshot: dict[str, Any]) -> None:
        try:
            await self._agent.on_progress(info, snapshot)
        except Exception as exc:  # noqa: BLE001 - best effort: logged, never propagated
            self._ctx.log("warn", f"on_progress failed for run {info.run_id}: {exc}")
