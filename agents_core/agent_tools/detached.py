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

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agents_core.agent_tools.backbone import BackboneMixin
from agents_core.agent_tools.notify import NotifyMixin
from agents_core.agent_tools.registry import (
    HARD_TERMINAL,
    DetachedRunAgentToolResult,
    RunAgentToolResult,
)
from agents_core.agent_tools.runs import result_from_inspection
from agents_core.agent_tools.self_type import AgentToolsSelf
from agents_core.errors import InvalidArgument
from agents_core.jsontext import to_json_text
from agents_core.probes import probe
from agents_core.stored_names import DETACHED_NOTIFY_CALLBACK, callback_method

__all__ = ["DETACHED_LIVE_COUNT_WARN_THRESHOLD", "DetachedConfig", "DetachedMixin"]

DETACHED_LIVE_COUNT_WARN_THRESHOLD = 50
DETACHED_OPTION_KEYS = (
    "on_finish",
    "notify",
    "max_budget_ms",
    "no_progress_budget_ms",
    "on_milestones",
)


@dataclass(frozen=True)
class DetachedConfig:
    """The parsed `detached` option of one dispatch."""

    on_finish: str | None = None
    """The method name stored as the run's callback (the notify hook under `notify`)."""
    notify_source: str | None = None
    max_budget_ms: float | None = None
    no_progress_budget_ms: float | None = None
    on_milestones: dict[str, Any] | None = None
    """`{"names": [...], "mode": "narrate" | "react"}`."""


def _budget(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise InvalidArgument(
            f"run_agent_tool: detached.{field} must be a number of milliseconds (0 or "
            f"float('inf') allowed), got {value!r}"
        )
    return value


def _milestones(raw: Any) -> dict[str, Any] | None:
    if not raw:
        return None
    names: Any
    if isinstance(raw, list | tuple):
        names, mode = list(raw), "narrate"
    elif isinstance(raw, Mapping):
        names, mode = raw.get("names"), raw.get("mode") or "narrate"
        unknown = sorted(set(raw) - {"names", "mode"})
        if unknown:
            raise InvalidArgument(
                f"run_agent_tool: detached.on_milestones takes 'names' and 'mode', got {unknown}"
            )
    else:
        raise InvalidArgument(
            "run_agent_tool: detached.on_milestones must be a list of milestone names or "
            f"{{'names': [...], 'mode': 'narrate' | 'react'}}, got {raw!r}"
        )
    if mode not in ("narrate", "react"):
        raise InvalidArgument(
            "run_agent_tool: detached.on_milestones mode must be 'narrate' or 'react', "
            f"got {mode!r}"
        )
    if names is not None and not all(isinstance(n, str) for n in names):
        raise InvalidArgument(
            f"run_agent_tool: detached.on_milestones names must be strings, got {names!r}"
        )
    return {"names": list(names), "mode": mode} if names else None


class DetachedMixin(BackboneMixin, NotifyMixin):
    # -- the option (§4.2) ------------------------------------------------------------------
    def _parse_detached_option(self: AgentToolsSelf, detached: Any) -> DetachedConfig | None:
        """None for an awaited run (None or False); True or any mapping, even an empty one (a
        JavaScript object is truthy), is detached. Raises before any row is written when
        `on_finish` does not name a method of this agent."""
        if detached is None or detached is False:
            return None
        if detached is True:
            return DetachedConfig()
        if not isinstance(detached, Mapping):
            raise InvalidArgument(
                "run_agent_tool: detached must be True or a mapping with the keys "
                f"{list(DETACHED_OPTION_KEYS)}, got {detached!r}"
            )
        unknown = sorted(set(detached) - set(DETACHED_OPTION_KEYS))
        if unknown:
            raise InvalidArgument(
                f"run_agent_tool: unknown detached option(s) {unknown}; known: "
                f"{list(DETACHED_OPTION_KEYS)}"
            )
        cls_name = type(self).__name__
        on_finish = detached.get("on_finish")
        if on_finish is not None and not isinstance(on_finish, str):
            raise InvalidArgument(
                f"run_agent_tool: detached.on_finish must be the NAME of a method on {cls_name}, "
                f"not {on_finish!r}: closures cannot be rehydrated after the Durable Object is "
                "evicted."
            )
        if on_finish is not None and callback_method(self, on_finish) is None:
            raise InvalidArgument(
                f'run_agent_tool: detached.on_finish "{on_finish}" is not a method on {cls_name}. '
                'Pass the NAME of a method (e.g. "on_import_done"), not a closure — closures '
                "cannot be rehydrated after the Durable Object is evicted."
            )
        notify = detached.get("notify")
        if notify is not None and not isinstance(notify, bool | Mapping):
            raise InvalidArgument(
                f"run_agent_tool: detached.notify must be True or {{'source': ...}}, got {notify!r}"
            )
        source = notify.get("source") if isinstance(notify, Mapping) else None
        if on_finish is None and notify and callback_method(self, DETACHED_NOTIFY_CALLBACK):
            on_finish = DETACHED_NOTIFY_CALLBACK
        return DetachedConfig(
            on_finish=on_finish,
            notify_source=source,
            max_budget_ms=_budget(detached.get("max_budget_ms"), "max_budget_ms"),
            no_progress_budget_ms=_budget(
                detached.get("no_progress_budget_ms"), "no_progress_budget_ms"
            ),
            on_milestones=_milestones(detached.get("on_milestones")),
        )

    def _detached_columns(
        self: AgentToolsSelf, config: DetachedConfig, started_at: int
    ) -> dict[str, Any]:
        max_budget = config.max_budget_ms
        if max_budget is None:
            max_budget = self._options.detached_max_budget_ms
        window = config.no_progress_budget_ms
        if window is None:
            window = self._options.detached_no_progress_budget_ms
        milestones = config.on_milestones
        return {
            "detached": 1,
            "detached_on_finish": config.on_finish,
            "detached_notify_source": config.notify_source,
            # An infinite budget is stored as NULL: it never fires.
            "detached_max_budget_at": (
                started_at + math.floor(max_budget) if math.isfinite(max_budget) else None
            ),
            "detached_no_progress_budget_ms": math.floor(window) if math.isfinite(window) else None,
            "detached_on_milestones": (
                None if milestones is None else to_json_text(milestones, "on_milestones")
            ),
        }

    # -- dispatch (§4.1) --------------------------------------------------------------------
    async def _dispatch_detached_run(
        self: AgentToolsSelf,
        cls: type,
        run_id: str,
        agent_type: str,
        config: DetachedConfig,
        signal: Any,
    ) -> DetachedRunAgentToolResult:
        if signal is not None:
            self._log(
                "warn",
                "run_agent_tool: signal is ignored for detached runs: a detached run outlives "
                "the turn that started it. Cancel it with cancel_agent_tool(run_id).",
            )
        # Armed (again, keeping the tick the row's turn armed) before the fast path starts.
        await self._arm_detached_backbone(reset_cadence=False)
        self._check_detached_live_count()
        self.host.tasks.wait_until(self._detached_fast_path(cls, run_id))
        return DetachedRunAgentToolResult(run_id, agent_type, "running")

    def _check_detached_live_count(self: AgentToolsSelf) -> None:
        """Warn once when live detached runs reach 50; re-armed when they fall below."""
        live = self.sql(
            "SELECT count(*) AS n FROM cf_agent_tool_runs WHERE detached = 1 "
            "AND status IN ('starting', 'running')"
        )[0]["n"]
        if live < DETACHED_LIVE_COUNT_WARN_THRESHOLD:
            self._detached_live_count_warned = False
            return
        if getattr(self, "_detached_live_count_warned", False):
            return
        self._detached_live_count_warned = True
        self._emit(
            "agent_tool:detached:live_count_warning",
            liveCount=live,
            threshold=DETACHED_LIVE_COUNT_WARN_THRESHOLD,
        )
        self._log(
            "warn",
            f"{live} detached agent-tool runs are live on this agent (threshold "
            f"{DETACHED_LIVE_COUNT_WARN_THRESHOLD}). Detached runs hold a concurrency slot until "
            "they finish: make sure they complete or are cancelled.",
        )

    async def _detached_fast_path(self: AgentToolsSelf, cls: type, run_id: str) -> None:
        """Forward the child's stream while this isolate lives and deliver its terminal; best
        effort, every failure is left to the backbone."""
        try:
            row = self._read_agent_tool_run(run_id)
            if row is None:
                return
            child = await self._agent_tool_child(cls, run_id)
            sequence = 1
            if self._child_can_tail(child):
                outcome = await self._forward_agent_tool_stream(
                    child, run_id, row["parent_tool_call_id"], sequence
                )
                sequence = outcome.sequence
            inspection = await child.call("inspect_agent_tool_run", run_id)
            if not isinstance(inspection, Mapping) or inspection.get("status") not in HARD_TERMINAL:
                return
            row = self._read_agent_tool_run(run_id) or row
            self._notify_detached_milestones(row, inspection.get("milestones"))
            result = result_from_inspection(run_id, row["agent_type"], dict(inspection))
            await self._deliver_detached_terminal(
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

    def _on_forwarded_milestone(
        self: AgentToolsSelf, row: dict[str, Any], data: dict[str, Any]
    ) -> None:
        """A milestone forwarded live (awaited, fast path or re-attach)."""
        if not isinstance(data.get("name"), str):
            return
        milestone = {
            "name": data["name"],
            "sequence": data.get("sequence", 0),
            "at": data.get("at", self.host.clock.now_ms()),
        }
        if data.get("data") is not None:
            milestone["data"] = data["data"]
        # S3: the live path notifies as soon as the milestone is reached, before the run ends.
        self._notify_detached_milestone(row, milestone)

    # -- delivery ---------------------------------------------------------------------------
    async def _deliver_detached_terminal(
        self: AgentToolsSelf,
        run_id: str,
        slot: str,
        result: RunAgentToolResult,
        *,
        sequence: int | None = None,
        completed_at: int | None = None,
        serialize: bool = False,
        from_child: bool = False,
    ) -> bool:
        """The ledger funnel, except for the `aborted` a child reports because the parent's own
        give-up cancelled it (`from_child`: the result is the child's inspection)."""
        if (
            slot == "finish"
            and from_child
            and result.status == "aborted"
            and self._aborted_by_own_teardown(run_id, completed_at)
        ):
            await self._close_finish_after_own_teardown(run_id, serialize)
            return False
        return await self._deliver_agent_tool_terminal(
            run_id, slot, result, sequence=sequence, completed_at=completed_at, serialize=serialize
        )

    async def _close_finish_after_own_teardown(
        self: AgentToolsSelf, run_id: str, serialize: bool
    ) -> None:
        # S7: the give-up was the delivery; the abort it caused closes the finish slot silently
        # (no frame, no hook) and the row stays `interrupted`.
        row = self._read_agent_tool_run(run_id)
        if row is None:
            return
        if row["give_up_delivered_at"] is None:
            # The give-up itself is still owed (its handler threw, or the isolate died in it).
            give_up = self._give_up_result_from_marker(row)
            if give_up is not None:
                await self._deliver_agent_tool_terminal(
                    run_id, "give_up", give_up, serialize=serialize
                )
            row = self._read_agent_tool_run(run_id)
            if row is None or row["give_up_delivered_at"] is None:
                return
        if self._close_finish_slot_silently(run_id):
            probe(self.host, "agent_tool.own_teardown_abort_closed")
            self._log(
                "info",
                f"detached run {run_id} was aborted by the parent's own give-up teardown; "
                "nothing more is delivered",
            )

    # -- cancel (§4.7) ----------------------------------------------------------------------
    async def cancel_agent_tool(self: AgentToolsSelf, run_id: str, reason: Any = None) -> None:
        """Cancel a run's child. A detached run is delivered `aborted` (its `on_finish` fires);
        an awaited one is finished by its awaiting call. Idempotent: an unknown or hard-terminal
        run is left alone."""
        row = self._read_agent_tool_run(run_id)
        if row is None or row["status"] in HARD_TERMINAL:
            probe(self.host, "agent_tool.cancel_ignored_settled_run")
            return
        message = str(reason) if isinstance(reason, BaseException) else None
        if message is None:
            message = str(reason if reason is not None else "cancelled by parent")
        try:
            child = await self._agent_tool_child(row["agent_type"], run_id)
            await child.call("cancel_agent_tool_run", run_id, reason)
        except Exception as exc:  # noqa: BLE001 - best effort
            self._log("warn", f"cancelling agent tool run {run_id} failed: {exc}")
        if not row["detached"]:
            return
        result = RunAgentToolResult(run_id, row["agent_type"], "aborted", error=message)
        await self._deliver_agent_tool_terminal(run_id, "finish", result)
