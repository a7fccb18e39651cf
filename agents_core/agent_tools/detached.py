"""Detached (background) agent-tool runs: the `detached` option, dispatch, the warm fast path,
the delivery of their terminals and `cancel_agent_tool` (spec agent-tools §4.1–4.4, §4.7,
§4.13). The reconcile backbone and budgets are in `backbone.py`, chat notifications in
`notify.py`.

A detached run returns its handle right after the child started. Its terminal is delivered
through the ledger (`ledger.py`): by the warm fast path while the isolate lives, else by the
backbone, exactly once normally and at least once across a crash (seed decision S8). The
per-run callback is a method NAME stored on the row, so it survives eviction; `notify` makes it
the chat host's notify hook.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agents_core.agent_tools.registry import (
    HARD_TERMINAL,
    DetachedRunAgentToolResult,
    RunAgentToolResult,
)
from agents_core.agent_tools.run_store import result_from_inspection
from agents_core.probes import probe

if TYPE_CHECKING:
    from agents_core.agent_tools.backbone import DetachedBackbone
    from agents_core.agent_tools.detached_option import DetachedConfig
    from agents_core.agent_tools.forward import StreamForwarder
    from agents_core.agent_tools.hooks import AgentToolHooks
    from agents_core.agent_tools.ledger import DeliveryLedger
    from agents_core.agent_tools.notify import MilestoneNotifier
    from agents_core.agent_tools.run_store import RunStore
    from agents_core.context import AgentContext

__all__ = ["DETACHED_LIVE_COUNT_WARN_THRESHOLD", "DetachedConfig", "DetachedRuns"]

DETACHED_LIVE_COUNT_WARN_THRESHOLD = 50


class DetachedRuns:
    """The dispatch of a detached run, its warm fast path, and `cancel_agent_tool`."""

    __slots__ = (
        "_ctx",
        "_agent",
        "_store",
        "_ledger",
        "_backbone",
        "_forwarder",
        "_notifier",
        "_live_count_warned",
    )

    def __init__(
        self,
        ctx: AgentContext,
        agent: AgentToolHooks,
        store: RunStore,
        ledger: DeliveryLedger,
        backbone: DetachedBackbone,
        forwarder: StreamForwarder,
        notifier: MilestoneNotifier,
    ) -> None:
        self._ctx = ctx
        self._agent = agent
        self._store = store
        self._ledger = ledger
        self._backbone = backbone
        self._forwarder = forwarder
        self._notifier = notifier
        self._live_count_warned = False

    async def dispatch(
        self,
        cls: type,
        run_id: str,
        agent_type: str,
        config: DetachedConfig,
        signal: Any,
    ) -> DetachedRunAgentToolResult:
        if signal is not None:
            self._ctx.log(
                "warn",
                "run_agent_tool: signal is ignored for detached runs: a detached run outlives "
                "the turn that started it. Cancel it with cancel_agent_tool(run_id).",
            )
        # Armed (again, keeping the tick the row's turn armed) before the fast path starts.
        await self._backbone.arm(reset_cadence=False)
        self._check_detached_live_count()
        self._ctx.host.tasks.wait_until(self._detached_fast_path(cls, run_id))
        return DetachedRunAgentToolResult(run_id, agent_type, "running")

    def _check_detached_live_count(self) -> None:
        """Warn once when live detached runs reach 50; re-armed when they fall below."""
        live = self._ctx.sql(
            "SELECT count(*) AS n FROM cf_agent_tool_runs WHERE detached = 1 "
            "AND status IN ('starting', 'running')"
        )[0]["n"]
        if live < DETACHED_LIVE_COUNT_WARN_THRESHOLD:
            self._live_count_warned = False
            return
        if self._live_count_warned:
            return
        self._live_count_warned = True
        self._ctx.emit(
            "agent_tool:detached:live_count_warning",
            liveCount=live,
            threshold=DETACHED_LIVE_COUNT_WARN_THRESHOLD,
        )
        self._ctx.log(
            "warn",
            f"{live} detached agent-tool runs are live on this agent (threshold "
            f"{DETACHED_LIVE_COUNT_WARN_THRESHOLD}). Detached runs hold a concurrency slot until "
            "they finish: make sure they complete or are cancelled.",
        )

    async def _detached_fast_path(self, cls: type, run_id: str) -> None:
        """Forward the child's stream while this isolate lives and deliver its terminal; best
        effort, every failure is left to the backbone."""
        try:
            row = self._store.read(run_id)
            if row is None:
                return
            child = await self._store.child(cls, run_id)
            sequence = 1
            if self._store.can_tail(child):
                outcome = await self._forwarder.forward(
                    child, run_id, row["parent_tool_call_id"], sequence
                )
                sequence = outcome.sequence
            inspection = await child.call("inspect_agent_tool_run", run_id)
            if not isinstance(inspection, Mapping) or inspection.get("status") not in HARD_TERMINAL:
                return
            row = self._store.read(run_id) or row
            self._notifier.notify_all(row, inspection.get("milestones"))
            result = result_from_inspection(run_id, row["agent_type"], dict(inspection))
            await self._backbone.deliver_terminal(
                run_id,
                "finish",
                result,
                sequence=sequence,
                completed_at=inspection.get("completedAt"),
                serialize=True,
                from_child=True,
            )
        except Exception:  # noqa: BLE001 - the backbone is the guarantee
            return

    async def cancel(self, run_id: str, reason: Any = None) -> None:
        """Cancel a run's child. A detached run is delivered `aborted` (its `on_finish` fires);
        an awaited one is finished by its awaiting call. Idempotent: an unknown or hard-terminal
        run is left alone."""
        row = self._store.read(run_id)
        if row is None or row["status"] in HARD_TERMINAL:
            probe(self._ctx.host, "agent_tool.cancel_ignored_settled_run")
            return
        message = str(reason) if isinstance(reason, BaseException) else None
        if message is None:
            message = str(reason if reason is not None else "cancelled by parent")
        try:
            child = await self._store.child(row["agent_type"], run_id)
            await child.call("cancel_agent_tool_run", run_id, reason)
        except Exception as exc:  # noqa: BLE001 - best effort
            self._ctx.log("warn", f"cancelling agent tool run {run_id} failed: {exc}")
        if not row["detached"]:
            return
        result = RunAgentToolResult(run_id, row["agent_type"], "aborted", error=message)
        await self._ledger.deliver(run_id, "finish", result)
