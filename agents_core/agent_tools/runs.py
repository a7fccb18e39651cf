"""`run_agent_tool`: dispatch a run to a child sub-agent, awaited or detached, idempotent by run
id (spec agent-tools §2.2–2.6, §1.5–1.6).

New run: cap check (synchronous, before any await) and insert `starting` (both `admission.py`),
`on_agent_tool_start`, `started`@0, resolve the child facet named by the run id,
`start_agent_tool_run`, `running`.
Awaited: tail and forward the child's chunks, inspect, finish (guarded terminal update, terminal
frame, `on_agent_tool_finish`). Detached: hand over to `detached.py`. An existing run id never
starts a second child turn: it returns the stored result, or re-attaches.

Seed decision S6: a child reset (evicted, redeployed) while the parent lives makes the run
`interrupted` and retryable, not the SDK's non-retryable `error`. Seed decision S8: finishing goes
through the delivery ledger (`ledger.py`), so `on_agent_tool_finish` fires once per run and slot
even when two observers finish one run or the hook throws (the SDK re-finishes as `error`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from agents_core.agent_tools.delivery_policy import FULL_DELIVERY, EventDeliveryPolicy
from agents_core.agent_tools.detached_option import parse_detached_option
from agents_core.agent_tools.frames import frame, started_event
from agents_core.agent_tools.registry import (
    HARD_TERMINAL,
    AgentToolRunInfo,
    DetachedRunAgentToolResult,
    RunAgentToolResult,
    default_input_preview,
)
from agents_core.agent_tools.run_store import CLEAR_REASON, result_from_inspection
from agents_core.errors import AgentReset
from agents_core.jsontext import to_json_text
from agents_core.probes import probe

if TYPE_CHECKING:
    from agents_core.agent_tools.admission import Admission
    from agents_core.agent_tools.backbone import DetachedBackbone
    from agents_core.agent_tools.detached import DetachedRuns
    from agents_core.agent_tools.forward import StreamForwarder
    from agents_core.agent_tools.hooks import AgentToolHooks
    from agents_core.agent_tools.ledger import DeliveryLedger
    from agents_core.agent_tools.reattach import Reattach
    from agents_core.agent_tools.run_store import RunStore
    from agents_core.context import AgentContext

__all__ = ["AgentToolRuns"]


def _abort_message(reason: Any) -> str:
    if isinstance(reason, BaseException):
        return str(reason)
    return str(reason if reason is not None else "cancelled")


class AgentToolRuns:
    """`run_agent_tool`: a new run admitted and dispatched, awaited or detached, or an existing
    run id answered without a second child turn."""

    __slots__ = (
        "_ctx",
        "_agent",
        "_store",
        "_ledger",
        "_admission",
        "_backbone",
        "_detached",
        "_forwarder",
        "_reattach",
        "_delivery",
    )

    def __init__(
        self,
        ctx: AgentContext,
        agent: AgentToolHooks,
        store: RunStore,
        ledger: DeliveryLedger,
        admission: Admission,
        backbone: DetachedBackbone,
        detached: DetachedRuns,
        forwarder: StreamForwarder,
        reattach: Reattach,
        delivery: EventDeliveryPolicy = FULL_DELIVERY,
    ) -> None:
        self._ctx = ctx
        self._agent = agent
        self._store = store
        self._ledger = ledger
        self._admission = admission
        self._backbone = backbone
        self._detached = detached
        self._forwarder = forwarder
        self._reattach = reattach
        self._delivery = delivery

    async def run(
        self,
        cls: type,
        *,
        input: Any,
        run_id: str | None = None,
        parent_tool_call_id: str | None = None,
        display_order: int = 0,
        signal: Any = None,
        detached: Any = None,
        input_preview: Any = None,
        display: Any = None,
        event_delivery: Any = None,
    ) -> RunAgentToolResult | DetachedRunAgentToolResult:
        """Run `cls` as a tool on `input` in a child sub-agent named by the run id.
        `event_delivery`: as the release's delivery policy takes it (0.21.0 has none)."""
        run_id = run_id if run_id is not None else self._ctx.host.entropy.nanoid(12)
        agent_type = cls.__name__
        config = parse_detached_option(self._agent, detached)
        delivery = self._delivery.option(event_delivery, config is not None)
        existing = self._store.read(run_id)
        if existing is not None:
            return await self._reissue_agent_tool_run(cls, existing, config)
        preview = input_preview if input_preview is not None else default_input_preview(input)
        rejected: RunAgentToolResult | None = self._admission.cap_rejection(
            run_id, agent_type, parent_tool_call_id, display_order, preview, display, config
        )
        if rejected is not None:
            return rejected
        dispatching = self._store.dispatching
        dispatching.add(run_id)
        try:
            now = self._ctx.host.clock.now_ms()
            self._admission.insert(
                run_id,
                agent_type,
                parent_tool_call_id,
                display_order,
                preview,
                display,
                now,
                config,
                event_delivery=delivery,
            )
            if config is not None:
                # In the row's own turn: a crash before the child has started must still leave a
                # tick that gives the run up (the SDK arms only after the child start: divergence
                # A7; the seed promises a run past its budget is never silently lost).
                try:
                    await self._backbone.arm(reset_cadence=True)
                except Exception:
                    self._drop_unarmed_agent_tool_run(run_id)
                    raise
            # The row this turn just wrote (a read that fails raises, a storage fault).
            row = cast("dict[str, Any]", self._store.read(run_id))
            await self._agent.on_agent_tool_start(AgentToolRunInfo.from_row(row))
            self._agent.broadcast(
                frame(
                    parent_tool_call_id,
                    0,
                    started_event(run_id, agent_type, preview, display_order, display),
                )
            )
            child = await self._store.child(cls, run_id)
            told = {} if delivery is None else {"event_delivery": delivery}
            start = await child.call("start_agent_tool_run", input, run_id, **told)
        finally:
            dispatching.discard(run_id)
        self._ctx.sql(
            "UPDATE cf_agent_tool_runs SET status = 'running' WHERE run_id = ? "
            "AND status = 'starting'",
            run_id,
        )
        if config is not None:
            return await self._detached.dispatch(cls, run_id, agent_type, config, signal)
        return await self._await_agent_tool_run(child, row, start, signal)

    def _drop_unarmed_agent_tool_run(self, run_id: str) -> None:
        """Arming the backbone for a new detached run failed (a storage error): nothing would
        ever give the run up, and nothing was announced yet (no hook, no frame, no child), so
        the row goes and the dispatch fails as a whole."""
        try:
            self._ctx.sql("DELETE FROM cf_agent_tool_runs WHERE run_id = ?", run_id)
            probe(self._ctx.host, "agent_tool.unarmed_dispatch_dropped")
        except Exception as exc:  # noqa: BLE001 - the next startup re-arms for the row (A5)
            self._ctx.log("error", f"dropping detached run {run_id} after a failed arm: {exc}")

    async def _await_agent_tool_run(
        self, child: Any, row: dict[str, Any], start: Any, signal: Any
    ) -> RunAgentToolResult:
        run_id, agent_type = row["run_id"], row["agent_type"]
        sequence = 1
        if signal is not None and signal.aborted:
            await self._cancel_child_quietly(child, run_id, signal.reason)
            result = RunAgentToolResult(
                run_id, agent_type, "aborted", error=_abort_message(signal.reason)
            )
            return await self._finish_awaited(row, result, sequence)
        if signal is not None:
            signal.add_listener(
                lambda reason: self._ctx.host.tasks.wait_until(
                    self._cancel_child_quietly(child, run_id, reason)
                )
            )
        try:
            outcome = await self._forwarder.forward(
                child, run_id, row["parent_tool_call_id"], sequence, signal=signal
            )
            sequence = outcome.sequence
            if signal is not None and signal.aborted:
                await self._cancel_child_quietly(child, run_id, signal.reason)
                result = RunAgentToolResult(
                    run_id, agent_type, "aborted", error=_abort_message(signal.reason)
                )
                return await self._finish_awaited(row, result, sequence)
            inspection = await child.call("inspect_agent_tool_run", run_id)
            result = result_from_inspection(run_id, agent_type, inspection or start)
            completed_at = (inspection or {}).get("completedAt")
            return await self._finish_awaited(row, result, sequence, completed_at)
        except AgentReset as reset:
            # S6: the child was reset while this parent lives: soft, retryable.
            probe(self._ctx.host, "agent_tool.child_reset_interrupted")
            result = RunAgentToolResult(
                run_id,
                agent_type,
                "interrupted",
                child_still_running=True,
                error=f"Agent tool child was reset ({reset.reason}) before it finished; "
                "it can be retried",
            )
            return await self._finish_awaited(row, result, sequence)
        except Exception as exc:  # noqa: BLE001 - any failure finishes the run as error
            if signal is not None and signal.aborted:
                await self._cancel_child_quietly(child, run_id, signal.reason)
                result = RunAgentToolResult(
                    run_id, agent_type, "aborted", error=_abort_message(signal.reason)
                )
            else:
                result = RunAgentToolResult(run_id, agent_type, "error", error=str(exc))
            return await self._finish_awaited(row, result, sequence)

    async def _finish_awaited(
        self,
        row: dict[str, Any],
        result: RunAgentToolResult,
        sequence: int,
        completed_at: int | None = None,
    ) -> RunAgentToolResult:
        if result.status != "completed" and row["run_id"] in self._store.cleared_in_flight:
            # A clear deleted the row, cancelled the child and deleted its facet: whatever the
            # call saw after that (the reset of the deleted facet, a failed inspection) is that
            # teardown, so the run ends as the cancel ended it.
            result = RunAgentToolResult(
                row["run_id"], row["agent_type"], "aborted", error=CLEAR_REASON
            )
        await self._ledger.finish_run(row, result, sequence, completed_at)
        return result

    async def _cancel_child_quietly(self, child: Any, run_id: str, reason: Any) -> None:
        try:
            await child.call("cancel_agent_tool_run", run_id, reason)
        except Exception as exc:  # noqa: BLE001 - best effort
            self._ctx.log("warn", f"cancelling agent tool run {run_id} failed: {exc}")

    async def _reissue_agent_tool_run(
        self, cls: type, row: dict[str, Any], config: Any
    ) -> RunAgentToolResult | DetachedRunAgentToolResult:
        """Never a second child turn: a detached re-issue re-arms the backbone and says
        `running`; an awaited one returns the stored result or re-attaches to the child."""
        run_id, status = row["run_id"], row["status"]
        if config is not None:
            if status not in HARD_TERMINAL:
                await self._backbone.arm(reset_cadence=False)
            return DetachedRunAgentToolResult(run_id, row["agent_type"], "running")
        if status == "completed" and row["output_json"] is None:
            return await self._reinspect_completed_run(cls, row)
        if status in HARD_TERMINAL:
            return self._store.result_from_row(row)
        return await self._reattach.on_reissue(cls, row)

    async def _reinspect_completed_run(self, cls: type, row: dict[str, Any]) -> RunAgentToolResult:
        stored = self._store.result_from_row(row)
        try:
            child = await self._store.child(cls, row["run_id"])
            inspection = await child.call("inspect_agent_tool_run", row["run_id"])
        except Exception:  # noqa: BLE001 - any failure falls back to the stored row
            return stored
        if not inspection or inspection.get("status") != "completed":
            return stored
        result = result_from_inspection(row["run_id"], row["agent_type"], inspection)
        if result.has_output:
            self._ctx.sql(
                "UPDATE cf_agent_tool_runs SET output_json = COALESCE(output_json, ?), "
                "summary = COALESCE(summary, ?) WHERE run_id = ?",
                to_json_text(result.output, "output"),
                result.summary,
                row["run_id"],
            )
        return result
