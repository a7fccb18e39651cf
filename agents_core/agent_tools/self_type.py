"""`AgentToolsSelf`: the self type of the agent-tool mixins, what each of them may use of the agent.

The package's mixins (runs, forwarding, the delivery ledger, notify, detached runs, the backbone,
re-attach, the recovery sweep, retention) call one another's methods through `self`, and a few of
the core mixins' (schedules, keepAlive, facets). Each member they call is declared here once,
grouped by the module that defines it, and every mixin method annotates `self` with this Protocol;
`agents_core/self_types.py` checks statically that `Agent` and the chat hosts satisfy it. Nothing
here runs: the module holds only the Protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from agents_core.self_types import AgentSelf

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence
    from datetime import datetime

    from agents_core.agent_tools.detached import DetachedConfig
    from agents_core.agent_tools.forward import ForwardOutcome
    from agents_core.agent_tools.reattach import ReattachOutcome
    from agents_core.agent_tools.recovery_sweep import DeferredHook, KeptOutcome
    from agents_core.agent_tools.registry import (
        AgentToolRunInfo,
        DetachedRunAgentToolResult,
        RunAgentToolResult,
    )
    from agents_core.host import Deferred, Task
    from agents_core.options import RetryOptions
    from agents_core.schedules import Schedule
    from agents_core.signals import AbortController, AbortSignal

__all__ = ["AgentToolsSelf"]


class AgentToolsSelf(AgentSelf, Protocol):
    """What the agent-tool mixins use of the agent they are mixed into, each member once."""

    # state the package's mixins keep on the agent
    _detached_arm_chain: Deferred[Any]
    _agent_tool_runs_dispatching: set[str]
    _detached_live_count_warned: bool
    _agent_tool_claims_held: dict[tuple[str, str], int]
    _agent_tool_claims_failed: set[tuple[str, str, int]]
    _agent_tool_claims_handled: set[tuple[str, str, int]]
    _agent_tool_runs_cleared_in_flight: set[str]
    _agent_tool_recovery_snapshot: list[Any]
    _agent_tool_recovery_task: Task[Any]
    _agent_tool_recovery_retry_attempt: int
    _agent_tool_recovery_owed_runs: dict[str, KeptOutcome | None]
    _agent_tool_recovery_timeout_ms: int
    _agent_tool_recovery_total_timeout_ms: int
    _max_concurrent_agent_tools: float | None

    # defined by Agent and the core mixins (agent.py, alarm, keepAlive, schedules, facets)
    def broadcast(self, frame: Any, exclude: tuple[str, ...] = ()) -> None: ...
    def on_error(self, error: BaseException) -> Any: ...
    async def _schedule_next_alarm(self) -> None: ...
    async def _keep_alive_lease(self, holder: str) -> Callable[[], None]: ...
    async def schedule(
        self,
        when: datetime | int | float | str,
        callback: str,
        payload: Any = None,
        *,
        retry: Mapping[str, Any] | RetryOptions | None = None,
        idempotent: bool | None = None,
    ) -> Schedule: ...
    async def cancel_schedule(self, id: str) -> bool: ...
    async def list_schedules(self, **filters: Any) -> list[Any]: ...
    async def delete_sub_agent(self, cls: type, name: str) -> None: ...
    async def sub_agent(self, cls: type, name: str) -> Any: ...

    # defined by runs.py
    def _read_agent_tool_run(self, run_id: str) -> dict[str, Any] | None: ...
    async def _agent_tool_child(self, cls_or_name: type | str, run_id: str) -> Any: ...
    def _result_from_agent_tool_row(self, row: dict[str, Any]) -> RunAgentToolResult: ...
    @staticmethod
    def _child_can_tail(child: Any) -> bool: ...
    def _update_agent_tool_terminal(
        self, run_id: str, result: RunAgentToolResult, completed_at: int | None = None
    ) -> bool: ...
    async def on_agent_tool_finish(self, run: AgentToolRunInfo, result: Any) -> None: ...
    async def _finish_agent_tool_run(
        self,
        row: dict[str, Any],
        result: RunAgentToolResult,
        sequence: int | None,
        completed_at: int | None = None,
        *,
        serialize: bool = False,
        defer_handlers_to: list[Any] | None = None,
    ) -> bool: ...
    async def _await_agent_tool_run(
        self, child: Any, row: dict[str, Any], start: Any, signal: Any
    ) -> RunAgentToolResult: ...
    async def _finish_cleared_awaited_run(
        self,
        row: dict[str, Any],
        result: RunAgentToolResult,
        sequence: int | None,
        completed_at: int | None,
    ) -> bool: ...
    async def _reissue_agent_tool_run(
        self, cls: type, row: dict[str, Any], config: Any
    ) -> RunAgentToolResult | DetachedRunAgentToolResult: ...
    async def on_agent_tool_start(self, run: AgentToolRunInfo) -> None: ...
    async def _cancel_child_quietly(self, child: Any, run_id: str, reason: Any) -> None: ...
    async def _finish_awaited(
        self,
        row: dict[str, Any],
        result: RunAgentToolResult,
        sequence: int,
        completed_at: int | None = None,
    ) -> RunAgentToolResult: ...
    async def _reinspect_completed_run(
        self, cls: type, row: dict[str, Any]
    ) -> RunAgentToolResult: ...
    def _drop_unarmed_agent_tool_run(self, run_id: str) -> None: ...

    # defined by admission.py
    @property
    def max_concurrent_agent_tools(self) -> float | None: ...
    def _agent_tool_cap_rejection(
        self,
        run_id: str,
        agent_type: str,
        parent_tool_call_id: str | None,
        display_order: int,
        preview: Any,
        display: Any,
        config: Any,
    ) -> Any: ...
    def _insert_agent_tool_run(
        self,
        run_id: str,
        agent_type: str,
        parent_tool_call_id: str | None,
        display_order: int,
        preview: Any,
        display: Any,
        now: int,
        config: Any,
        status: str = "starting",
        error: str | None = None,
    ) -> None: ...

    # defined by forward.py
    async def _forward_agent_tool_stream(
        self,
        child: Any,
        run_id: str,
        parent_tool_call_id: str | None,
        sequence: int,
        *,
        after_sequence: int = -1,
        signal: Any = None,
        idle_ms: float | None = None,
    ) -> ForwardOutcome: ...
    async def _close_tail_quietly(self, child: Any, tail_id: str) -> None: ...
    async def _call_on_progress(self, info: AgentToolRunInfo, snapshot: dict[str, Any]) -> None: ...
    async def _close_tail_once_open(self, child: Any, opening: Any) -> None: ...
    async def on_progress(self, run: AgentToolRunInfo, snapshot: dict[str, Any]) -> None: ...
    def _observe_forwarded_progress(self, run_id: str, body: str) -> None: ...
    def _on_agent_tool_stream_progress(self) -> None: ...

    # defined by ledger.py
    def _agent_tool_slot_held(self, run_id: str, slot: str) -> bool: ...
    def _owes_detached_finish(self) -> bool: ...
    def _mark_handled_slots(self, row: dict[str, Any]) -> bool: ...
    async def _deliver_agent_tool_terminal(
        self,
        run_id: str,
        slot: str,
        result: RunAgentToolResult,
        *,
        sequence: int | None = None,
        completed_at: int | None = None,
        serialize: bool = False,
        defer_handlers_to: list[Callable[[], Awaitable[None]]] | None = None,
    ) -> bool: ...
    def _mark_handled_slot(self, row: dict[str, Any], slot: str) -> bool: ...
    def _note_reclaimed_slot(self, row: dict[str, Any], slot: str) -> None: ...
    def _write_delivered_mark(self, run_id: str, slot: str, status: str) -> None: ...
    def _claimed_undelivered_awaited_rows(self) -> list[dict[str, Any]]: ...
    async def _schedule_awaited_redelivery(
        self, rows: list[dict[str, Any]], *, idempotent: bool
    ) -> None: ...
    def _release_unused_claim(self, run_id: str, slot: str, claimed_at: int) -> bool: ...
    async def _invoke_finish_handlers(
        self, row: dict[str, Any], slot: str, info: AgentToolRunInfo, result: RunAgentToolResult
    ) -> None: ...
    async def _run_serialized_delivery(self, invoke: Any) -> None: ...
    async def _call_on_error_quietly(self, error: BaseException) -> None: ...
    async def _arm_awaited_redelivery(self) -> bool: ...

    # defined by notify.py
    def _notify_detached_milestones(
        self, row: Mapping[str, Any], milestones: Sequence[Any] | None, *, reconciled: bool = False
    ) -> None: ...
    def _notify_detached_milestone(
        self, row: Mapping[str, Any], milestone: Any, *, reconciled: bool = False
    ) -> None: ...
    async def _deliver_detached_milestone(
        self, hook: Any, run: AgentToolRunInfo, milestone: dict[str, Any], mode: str, key: str
    ) -> None: ...

    # defined by detached.py
    async def _deliver_detached_terminal(
        self,
        run_id: str,
        slot: str,
        result: RunAgentToolResult,
        *,
        sequence: int | None = None,
        completed_at: int | None = None,
        serialize: bool = False,
        from_child: bool = False,
    ) -> bool: ...
    def _check_detached_live_count(self) -> None: ...
    async def _detached_fast_path(self, cls: type, run_id: str) -> None: ...
    async def _close_finish_after_own_teardown(self, run_id: str, serialize: bool) -> None: ...
    def _on_forwarded_milestone(self, row: dict[str, Any], data: dict[str, Any]) -> None: ...
    def _parse_detached_option(self, detached: Any) -> DetachedConfig | None: ...
    def _detached_columns(self, config: DetachedConfig, started_at: int) -> dict[str, Any]: ...
    async def _dispatch_detached_run(
        self, cls: type, run_id: str, agent_type: str, config: DetachedConfig, signal: Any
    ) -> DetachedRunAgentToolResult: ...

    # defined by backbone.py
    def _close_finish_slot_silently(self, run_id: str) -> bool: ...
    async def _serialized_backbone_arm(self, step: Callable[[], Awaitable[None]]) -> None: ...
    async def _pending_backbone_ticks(self, excluding: str | None = None) -> list[Any]: ...
    async def _schedule_next_backbone_tick(self, index: int, executing: str | None) -> None: ...
    async def _redeliver_hard_terminal_row(
        self, row: Mapping[str, Any], inspection: Mapping[str, Any] | None
    ) -> None: ...
    async def _give_up_detached_run(
        self, row: Mapping[str, Any], child: Any, reason: str
    ) -> None: ...
    async def _close_finish_of_unstarted_run(self, row: Mapping[str, Any]) -> None: ...
    async def _reconcile_detached_run(self, run_id: str) -> None: ...
    async def _retry_give_up_teardown(self, row: Mapping[str, Any], child: Any) -> None: ...
    async def _arm_detached_backbone(self, *, reset_cadence: bool) -> None: ...
    def _aborted_by_own_teardown(self, run_id: str, completed_at: int | None) -> bool: ...
    def _give_up_result_from_marker(self, row: Mapping[str, Any]) -> RunAgentToolResult | None: ...

    # defined by reattach.py
    @staticmethod
    def _reattach_call_timeout_ms(no_progress_ms: float) -> float: ...
    def _agent_tool_reattach_budgets(self) -> tuple[float, float]: ...
    async def _reattach_agent_tool_run_to_terminal(
        self,
        child: Any,
        row: dict[str, Any],
        sequence: int,
        no_progress_ms: float,
        max_window_ms: float,
    ) -> ReattachOutcome: ...
    async def _teardown_given_up_child(
        self, child: Any, row: dict[str, Any], reason: str | None
    ) -> bool: ...
    async def _rebroadcast_stored_chunks(
        self, row: dict[str, Any], child: Any, timeout_ms: float | None
    ) -> int: ...
    async def _collect_agent_tool_terminal(
        self, child: Any, row: dict[str, Any], timeout_ms: float | None
    ) -> tuple[RunAgentToolResult, int | None] | None: ...
    async def _arm_reattach_ceiling(
        self, ceiling: AbortController, max_window_ms: float, stop: Any
    ) -> None: ...
    async def _last_stored_chunk_sequence(self, child: Any, run_id: str) -> int: ...
    async def _tail_once(
        self,
        child: Any,
        row: dict[str, Any],
        sequence: int,
        after_sequence: int,
        no_progress_ms: float,
        signal: AbortSignal | None,
    ) -> tuple[int, str, int]: ...
    async def _reattach_on_reissue(self, cls: type, row: dict[str, Any]) -> RunAgentToolResult: ...

    # defined by recovery_sweep.py
    async def _within(
        self, awaitable: Awaitable[Any], timeout_ms: float | None, signal: Any = None
    ) -> tuple[str, Any]: ...
    def _agent_tool_recovery_owed(self) -> dict[str, KeptOutcome | None]: ...
    async def _run_scheduled_agent_tool_recovery(self, run_ids: list[str]) -> None: ...
    async def _reconcile_agent_tool_runs(
        self, run_ids: list[str], *, child_timeout_ms: float, total_timeout_ms: float
    ) -> None: ...
    async def _finalize_recovered_run(
        self,
        row: dict[str, Any],
        result: RunAgentToolResult,
        sequence: int,
        started: int,
        deferred: list[DeferredHook],
        completed_at: int | None = None,
    ) -> None: ...
    async def _finish_recovered_row(
        self, kept: KeptOutcome, deferred: list[DeferredHook]
    ) -> None: ...
    async def _finalize_kept_outcomes(
        self, rows: list[dict[str, Any]], deferred: list[DeferredHook]
    ) -> list[dict[str, Any]]: ...
    async def _recovery_pass_one(
        self,
        rows: list[dict[str, Any]],
        started: int,
        child_timeout_ms: float,
        total_timeout_ms: float,
        deferred: list[DeferredHook],
    ) -> list[tuple[dict[str, Any], Any]]: ...
    async def _rearm_detached_backbone_after_recovery(self) -> None: ...
    async def _arm_agent_tool_recovery_retry(self) -> None: ...
    async def _agent_tool_recovery_lease(self) -> Callable[[], None]: ...
    async def _inspect_recovered_child(self, row: dict[str, Any]) -> tuple[Any, Any]: ...
    async def _recover_by_reattach(
        self, row: dict[str, Any], child: Any, started: int, deferred: list[DeferredHook]
    ) -> None: ...

    # defined by retention.py
    async def _stored_agent_tool_chunks(
        self, row: dict[str, Any], after: int = -1
    ) -> list[dict[str, Any]]: ...
    async def _fetch_stored_chunks(self, row: dict[str, Any], after: int) -> Any: ...
    async def _clear_one_agent_tool_run(self, row: dict[str, Any]) -> None: ...
