"""The Lifecycle: the one owner of the alarm slot, and the order of startup and of an alarm.

Only the Lifecycle writes the alarm. `rearm` (0.21.0's `_scheduleNextAlarm`) asks each installed
source, in install order, for the moments it needs the agent, and arms the slot at the earliest
of them, or clears it (spec fibers §1.5, §3.3); a sub-agent has no slot and asks its root to
re-arm. The sources, installed by the agent in this order, are: the scheduler (due schedules,
running intervals turning hung), keepAlive (the heartbeat), fiber recovery (pending recovery
with its backoff) and the sub-agents' fiber leases. The order is observable: each source may read
storage (where a fault can land) and recovery writes a trace record.

`start` and `alarm` run the agent's parts in the order the SDK 0.21.0 runs them, written down
once, here (spec fibers §1.4, §1.5). In 0.32.0 the Lifecycle is the same owner with a job queue
behind `rearm` and capabilities whose `onStart` run in install order (spec sdk-0.32 §1); this
module is 0.21.0's choice of that component. The parts of the agent that are not components of
their own yet are reached through `LifecycleParts`, this module's narrow port of the agent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from agents_core.probes import probe

if TYPE_CHECKING:
    from agents_core.context import AgentContext

__all__ = ["AgentToolSteps", "AlarmSource", "Lifecycle", "LifecycleParts"]

AlarmSource = Callable[[int], list[int]]
"""`source(now)`: the moments (ms) this part of the agent needs it woken; empty for none."""


class LifecycleParts(Protocol):
    """What the Lifecycle runs of the agent: the user's hooks (`on_start`, `on_alarm`), which
    a subclass may override, and the steps of the parts not yet recomposed into components."""

    @property
    def _destroyed(self) -> bool: ...

    async def on_start(self) -> None: ...
    async def on_alarm(self) -> None: ...
    async def destroy(self, *, deferred: bool = False) -> None: ...

    def _hydrate_facet_identity(self) -> bool: ...
    async def _check_run_fibers(self) -> None: ...
    async def _check_facet_run_fibers(self) -> None: ...
    async def _process_due_schedules(self) -> None: ...
    async def _handle_alarm_memory_limit(self, error: BaseException) -> bool: ...
    def _clear_alarm_memory_limit_strikes(self) -> None: ...


class AgentToolSteps(Protocol):
    """The agent tools' two parts of startup, around the user's `on_start`."""

    def note_runs_for_recovery(self) -> None: ...
    def after_on_start(self) -> None: ...


class StartupStep(Protocol):
    """A component's part of startup (MCP's restore, ...), run at its place in the order."""

    def on_start(self) -> None: ...


class Lifecycle:
    """One agent's alarm owner, startup and alarm handler (one per incarnation)."""

    __slots__ = ("_ctx", "_parts", "_sources", "_mcp", "_agent_tools", "in_on_start")

    def __init__(self, ctx: AgentContext, parts: LifecycleParts, mcp: StartupStep) -> None:
        self._ctx = ctx
        self._parts = parts
        self._sources: list[AlarmSource] = []
        self._mcp = mcp
        self._agent_tools: AgentToolSteps | None = None
        self.in_on_start = False
        """The user's `on_start` is running (a schedule made in it may warn: F-23)."""

    def install(self, source: AlarmSource) -> None:
        """Add a source of alarm candidates; `rearm` asks the sources in install order."""
        self._sources.append(source)

    def install_agent_tools(self, steps: AgentToolSteps) -> None:
        """The agent tools, whose steps startup runs around the user's `on_start`."""
        self._agent_tools = steps

    # -- the alarm slot -------------------------------------------------------------------------
    async def rearm(self) -> None:
        """Arm the slot at the earliest candidate, or clear it when there is none."""
        ctx = self._ctx
        host = ctx.host
        if ctx.is_facet:
            await host.facets.root().call("_cf_reschedule")
            return
        now = host.clock.now_ms()
        try:
            if ctx.memo.destroy_pending():
                host.alarm.set_alarm(now)
                return
            candidates = self._alarm_candidates(now)
        except Exception:
            # The state could not be read (a storage fault): what needs the agent is unknown,
            # so arm a check-back no later than one interval from now, whose alarm computes it
            # again. Without it a schedule written just before would never fire (divergence K5).
            probe(host, "alarm.reschedule_failed")
            check_back = now + ctx.options.keep_alive_interval_ms
            armed = host.alarm.get_alarm()
            host.alarm.set_alarm(check_back if armed is None else min(armed, check_back))
            raise
        if candidates:
            host.alarm.set_alarm(min(candidates))
        else:
            host.alarm.delete_alarm()

    def _alarm_candidates(self, now: int) -> list[int]:
        """The moments the installed sources ask for, in install order (a release whose alarm
        has another origin, 0.32.0's job queue, adds its own here)."""
        candidates: list[int] = []
        for source in self._sources:
            candidates += source(now)
        return candidates

    async def host_work_changed(self) -> None:
        """What the agent's own wakes depend on changed (a keepAlive lease taken or given back,
        a sub-agent's fiber lease, a deferred destroy): on 0.21.0 the alarm is computed again
        (0.32.0 re-derives its host jobs, `_syncHostJobs`)."""
        await self.rearm()

    async def host_work_changed_logged(self) -> None:
        """`host_work_changed` from background work: a failure is logged, not raised."""
        try:
            await self.host_work_changed()
        except Exception as exc:  # noqa: BLE001 - a background reschedule only logs
            self._ctx.log("error", f"failed to reschedule the alarm: {exc}")

    async def disable_alarms(self) -> None:
        """A top-level destroy is about to wipe the storage (and with it the alarm): nothing
        to do on 0.21.0 (0.32.0 stops every re-arm, deadman and fallback for good)."""

    def rpc_starts(self, method: str) -> bool:
        """Whether a plain RPC to `method` runs startup first: never on 0.21.0 (spec fibers
        §1.4; 0.32.0 starts for a user's async method)."""
        return False

    def alarm_arriving(self) -> None:
        """The platform is about to deliver an alarm, before startup runs: nothing to do on
        0.21.0 (0.32.0 arms its startup fallback here)."""

    async def alarm_startup_failed(self, error: BaseException) -> bool:
        """The startup an alarm wake ran failed with `error`: whether the alarm handles it. On
        0.21.0 never: the platform's start (partyserver's) runs before the alarm handler and
        its memory-limit breaker, so the failure is the alarm's (the platform retries it)."""
        return False

    async def rearm_logged(self) -> None:
        """`rearm` from background work: a failure is logged, not raised."""
        try:
            await self.rearm()
        except Exception as exc:  # noqa: BLE001 - a background reschedule only logs
            self._ctx.log("error", f"failed to reschedule the alarm: {exc}")

    # -- startup --------------------------------------------------------------------------------
    async def start(self) -> None:
        """Startup, once per incarnation under the input gate, in the SDK's order (the
        recovery scan runs before the user's `on_start`, spec fibers §1.4):
        1. a sub-agent stores its identity on its first start;
        2. MCP restores its servers and broadcasts them;
        3. the fiber recovery scan;
        4. agent tools note the runs that recovery will look at;
        5. the user's `on_start`;
        6. agent tools schedule their recovery and arm the redelivery of owed hooks."""
        parts = self._parts
        parts._hydrate_facet_identity()
        self._mcp.on_start()
        await parts._check_run_fibers()
        tools = self._agent_tools
        if tools is not None:
            tools.note_runs_for_recovery()
        self.in_on_start = True
        try:
            await parts.on_start()
        finally:
            self.in_on_start = False
        if tools is not None:
            tools.after_on_start()

    # -- the alarm ------------------------------------------------------------------------------
    async def alarm(self) -> None:
        """The platform's alarm entry (startup has already run in this incarnation), inside
        the memory-limit breaker: a reset it recognises ends the alarm quietly, and a clean
        alarm clears the strikes."""
        parts = self._parts
        try:
            await self._run_alarm_body()
        except Exception as exc:
            if not await parts._handle_alarm_memory_limit(exc):
                raise
            return
        parts._clear_alarm_memory_limit_strikes()

    async def _run_alarm_body(self) -> None:
        """0.21.0's order: a pending deferred destroy runs instead of everything else; then the
        user's `on_alarm`, the due schedules, and (unless a callback destroyed the agent) the
        housekeeping, the recovery scan then the sub-agents' scans, and last the re-arm."""
        parts = self._parts
        if self._ctx.memo.destroy_pending():
            await parts.destroy()
            return
        await parts.on_alarm()
        await parts._process_due_schedules()
        if parts._destroyed:
            return
        await parts._check_run_fibers()
        await parts._check_facet_run_fibers()
        await self.rearm()
