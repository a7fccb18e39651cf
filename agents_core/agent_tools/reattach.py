"""Re-attach: following a child's run to its terminal after the parent lost its live view of it
(spec agent-tools §7.2–7.6, §2.4), and the re-issue of a run id whose row is not terminal.

The parent tails the child again, keyed on progress rather than wall time: the wait ends when the
child reaches a terminal inspection, when a whole no-progress window (the static option
`agent_tool_reattach_no_progress_timeout_ms`, default 120 s) passes with nothing forwarded, or at
an optional ceiling across re-arms (`agent_tool_reattach_max_window_ms`, default none). A tail
that closes cleanly after forwarding something is opened again (the child was re-evicted
mid-recovery). Only a `window-exceeded` give-up tears the child down; every other give-up leaves
it running, so that a later re-issue of the same run id can still collect it (soft sealing).
Each tail starts after the child's last stored chunk; the sequence its first forwarded chunk
takes is the release's (`StoredChunkReplay.reattach_sequence`).

Every call to the child is raced against a timer or the ceiling, so nothing here waits forever
unless the user asked for it (an infinite no-progress budget and no ceiling). The startup sweep
after a parent restart (`recovery_sweep.py`) and a re-issue (`runs.py`) call it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents_core.agent_tools.bounded_calls import RECOVERY_TIMEOUT_MS, call, sleep_then, within
from agents_core.agent_tools.give_up_reasons import ACTIVE_CHILD_STATUSES, interrupted_result
from agents_core.agent_tools.registry import RunAgentToolResult
from agents_core.agent_tools.run_store import result_from_inspection
from agents_core.probes import probe
from agents_core.signals import AbortController, AbortSignal

if TYPE_CHECKING:
    from agents_core.agent_tools.forward import StreamForwarder
    from agents_core.agent_tools.hooks import AgentToolHooks
    from agents_core.agent_tools.ledger import DeliveryLedger
    from agents_core.agent_tools.run_store import RunStore
    from agents_core.agent_tools.stored_replay import StoredChunkReplay
    from agents_core.context import AgentContext

__all__ = ["Reattach", "ReattachOutcome"]

WINDOW_EXCEEDED_CANCEL_REASON = "agent tool run given up by parent recovery: window-exceeded"


@dataclass(frozen=True)
class ReattachOutcome:
    """How a re-attach ended: a terminal `result` (with the child's `completed_at`), or the
    `reason` the parent gave up. `sequence` is the parent's next frame sequence."""

    sequence: int
    result: RunAgentToolResult | None = None
    completed_at: int | None = None
    reason: str | None = None


class Reattach:
    """Re-attaching to a child still running: its tail under the no-progress budget and the
    ceiling, collecting its terminal, and the teardown of a child given up."""

    __slots__ = ("_ctx", "_agent", "_store", "_ledger", "_forwarder", "_replay")

    def __init__(
        self,
        ctx: AgentContext,
        agent: AgentToolHooks,
        store: RunStore,
        ledger: DeliveryLedger,
        forwarder: StreamForwarder,
        replay: StoredChunkReplay,
    ) -> None:
        self._ctx = ctx
        self._agent = agent
        self._store = store
        self._ledger = ledger
        self._forwarder = forwarder
        self._replay = replay

    def budgets(self) -> tuple[float, float]:
        """(no-progress budget, ceiling) in ms, from the static options (§7.4)."""
        options = self._ctx.options
        return (
            options.agent_tool_reattach_no_progress_timeout_ms,
            options.agent_tool_reattach_max_window_ms,
        )

    @staticmethod
    def _reattach_call_timeout_ms(no_progress_ms: float) -> float:
        """How long one control call of a re-attach may take: its no-progress budget, or the
        recovery timeout when that budget is 0 (do not wait) or NaN; no timer when infinite."""
        if math.isnan(no_progress_ms) or no_progress_ms <= 0:
            return RECOVERY_TIMEOUT_MS
        return no_progress_ms

    async def to_terminal(
        self,
        child: Any,
        row: dict[str, Any],
        sequence: int,
        no_progress_ms: float,
        max_window_ms: float,
    ) -> ReattachOutcome:
        """Follow the child's run until it is terminal, or give up with a reason."""
        run_id, agent_type = row["run_id"], row["agent_type"]
        if not self._store.can_tail(child):
            return ReattachOutcome(sequence, reason="not-tailable")
        self._ctx.emit(
            "agent_tool:recovery:reattach",
            runId=run_id,
            agentType=agent_type,
            budgetMs=no_progress_ms,
        )
        call_timeout = self._reattach_call_timeout_ms(no_progress_ms)
        if math.isnan(no_progress_ms) or no_progress_ms <= 0:
            # "Don't wait": collect an already-terminal child, never tail.
            terminal = await self._collect_agent_tool_terminal(child, row, call_timeout)
            if terminal is None:
                return ReattachOutcome(sequence, reason="no-progress")
            return ReattachOutcome(sequence, terminal[0], terminal[1])
        ceiling = AbortController() if math.isfinite(max_window_ms) and max_window_ms > 0 else None
        stop = self._ctx.host.tasks.deferred()
        if ceiling is not None:
            self._ctx.host.tasks.wait_until(
                self._arm_reattach_ceiling(ceiling, max_window_ms, stop)
            )
        signal = ceiling.signal if ceiling is not None else None
        try:
            while signal is None or not signal.aborted:
                ended, forwarded = "aborted", 0
                tag, marks = await within(
                    self._ctx.host, self._stored_chunk_marks(child, run_id), call_timeout, signal
                )
                if tag != "aborted":
                    after, stored = marks if tag == "ok" else (-1, 0)
                    sequence = self._replay.reattach_sequence(sequence, stored)
                    sequence, ended, forwarded = await self._tail_once(
                        child, row, sequence, after, no_progress_ms, signal
                    )
                fired = signal is not None and signal.aborted
                # Past the ceiling, the last look at the child may not take long either.
                timeout = min(call_timeout, RECOVERY_TIMEOUT_MS) if fired else call_timeout
                terminal = await self._collect_agent_tool_terminal(child, row, timeout)
                if terminal is not None:
                    return ReattachOutcome(sequence, terminal[0], terminal[1])
                if fired:
                    break
                if ended != "done" or forwarded == 0:
                    return ReattachOutcome(sequence, reason="no-progress")
                # A clean close after progress (the child was re-evicted mid-flight): re-arm.
                probe(self._ctx.host, "agent_tool.reattach_rearmed")
            probe(self._ctx.host, "agent_tool.reattach_window_exceeded")
            return ReattachOutcome(sequence, reason="window-exceeded")
        finally:
            stop.resolve(("stop", None))

    async def _arm_reattach_ceiling(
        self, ceiling: AbortController, max_window_ms: float, stop: Any
    ) -> None:
        tag, _ = await self._ctx.host.tasks.race(
            sleep_then(self._ctx.host.clock, int(max_window_ms), "fire"), stop
        )
        if tag == "fire":
            ceiling.abort("window-exceeded")

    async def _stored_chunk_marks(self, child: Any, run_id: str) -> tuple[int, int]:
        """The child's last stored chunk index (or -1) and how many chunks it stored (or 0):
        the tail starts after the first, so the client is not sent again what connect replay
        already gave it; the release may number on from the second."""
        try:
            chunks = await child.call("get_agent_tool_chunks", run_id, -1)
        except Exception:  # noqa: BLE001 - a failed probe tails from the start
            return -1, 0
        last = chunks[-1] if chunks else None
        stored = len(chunks) if isinstance(chunks, list) else 0
        if isinstance(last, dict) and isinstance(last.get("sequence"), int):
            sequence: int = last["sequence"]
            return sequence, stored
        return -1, stored

    async def _tail_once(
        self,
        child: Any,
        row: dict[str, Any],
        sequence: int,
        after_sequence: int,
        no_progress_ms: float,
        signal: AbortSignal | None,
    ) -> tuple[int, str, int]:
        """One tail attempt: (next sequence, how it ended, chunks forwarded). A tail that
        throws (the child died, the adapter cannot tail) is a non-clean end."""
        forward = self._forwarder.forward(
            child,
            row["run_id"],
            row["parent_tool_call_id"],
            sequence,
            after_sequence=after_sequence,
            signal=signal,
            idle_ms=no_progress_ms,
        )
        # The ceiling also bounds the tail's open call, which the forward loop does not race.
        tag, outcome = await within(self._ctx.host, forward, None, signal)
        if tag != "ok":
            return sequence, "aborted" if tag == "aborted" else "threw", 0
        return outcome.sequence, outcome.ended, outcome.forwarded

    async def _collect_agent_tool_terminal(
        self, child: Any, row: dict[str, Any], timeout_ms: float | None
    ) -> tuple[RunAgentToolResult, int | None] | None:
        """The run's terminal result and the child's completion time, or None while the child
        is still running, has no record of the run, or cannot be inspected."""
        tag, inspection = await within(
            self._ctx.host, call(child, "inspect_agent_tool_run", row["run_id"]), timeout_ms
        )
        if tag != "ok" or not isinstance(inspection, dict):
            return None
        if inspection.get("status") in ACTIVE_CHILD_STATUSES:
            return None
        result = result_from_inspection(row["run_id"], row["agent_type"], inspection)
        return result, inspection.get("completedAt")

    async def teardown_given_up_child(
        self, child: Any, row: dict[str, Any], reason: str | None
    ) -> bool:
        """Cancel the child after a `window-exceeded` give-up (the only one that tears down,
        §7.5); True if the cancel succeeded."""
        if reason != "window-exceeded":
            return False
        tag, _ = await within(
            self._ctx.host,
            call(child, "cancel_agent_tool_run", row["run_id"], WINDOW_EXCEEDED_CANCEL_REASON),
            RECOVERY_TIMEOUT_MS,
        )
        return tag == "ok"

    async def rebroadcast_stored_chunks(
        self, row: dict[str, Any], child: Any, timeout_ms: float | None
    ) -> int:
        """Broadcast the child's stored chunks live (not replay), numbered from 1, as the
        release sends them again; the next sequence. A failed or slow read sends nothing."""
        return await self._replay.rebroadcast(row, child, timeout_ms)

    async def on_reissue(self, cls: type, row: dict[str, Any]) -> RunAgentToolResult:
        """Collect the run from its child: its terminal result if it reaches one, else a soft
        `interrupted` after the child's stored chunks are sent again. Never a second turn."""
        probe(self._ctx.host, "agent_tool.reissue_reattached")
        no_progress_ms, max_window_ms = self.budgets()
        call_timeout = self._reattach_call_timeout_ms(no_progress_ms)
        tag, child = await within(
            self._ctx.host, self._store.child(cls, row["run_id"]), call_timeout
        )
        if tag != "ok":
            result = interrupted_result(row, None, child_still_running=True)
            await self._ledger.finish_run(row, result, 1)
            return result
        outcome = await self.to_terminal(child, row, 1, no_progress_ms, max_window_ms)
        if outcome.result is not None:
            await self._ledger.finish_run(
                row, outcome.result, outcome.sequence, outcome.completed_at
            )
            return outcome.result
        torn_down = await self.teardown_given_up_child(child, row, outcome.reason)
        sequence = await self.rebroadcast_stored_chunks(row, child, call_timeout)
        result = interrupted_result(row, outcome.reason, child_still_running=not torn_down)
        await self._ledger.finish_run(row, result, sequence)
        return result
