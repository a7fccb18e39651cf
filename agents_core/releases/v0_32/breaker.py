"""`MemoryLimitBreaker`: 0.32.0's alarm memory-limit circuit breaker, in the Lifecycle, over jobs
(spec sdk-0.32 §2.5).

An alarm that ends in a memory-limit reset is swallowed, not retried at once by the platform. A
durable strike count (KV `cf_agents:oom_alarm_strikes`) tolerates up to the limit (option
`max_alarm_memory_limit_strikes`, 3) of consecutive resets. Below it the executing job and every
recovery-loop job due by then are pushed to `now + min(300, 30 × strikes)` s. At it the executing
job is deleted, every recovery-loop job purged and the count deleted. Each event is recorded once
and emitted once (`alarm:memory_limit_reset`), however many flows of the incarnation observe it:
every observer applies the policy of its own job and tells the hooks, the first alone re-arms and
resets. The hooks, after the job's policy: each capability's `on_memory_limit`, then the agent's
`on_alarm_memory_limit`, with a `MemoryLimitContext` (`sealed`, `next_time`, the executing job,
and for the first observer of a sealing strike the recovery-loop jobs it purged); on every
strike, sealed or not. A hook's error is swallowed (a capability's is logged, and the next one
still runs). Once the event is handled and the alarm re-armed, the isolate is reset: on a 0 ms
timer, when the breaker's writes have committed (the SDK awaits `storage.sync()` first), the
incarnation aborts itself with "Alarm memory-limit strike N/L[ (sealed)]; resetting isolate
(#1825)" and no platform retry of the alarm (`ctx.abort(reason, {retryAlarm: false})`,
`host.lifecycle.abort(..., retry_alarm=False)`); the re-armed alarm wakes a fresh one.

Work a dispatch hands off and returns before (`track_alarm_work`, the SDK's `trackAlarmWork`)
stays in the breaker's domain: the alarm scope (`scope`: the job being dispatched, or none
while the agent's own alarm hooks run; each breaker's own, as each SDK JobDriver has its own
async-local scope) travels with the tasks started in it, and a memory-limit
reset that the handed-off work settles with is a strike against the job that handed it off. A
clean alarm clears the count once the incarnation is quiescent: no alarm in flight, no handed-off
work outstanding, and no strike recorded by this incarnation (so only a fresh one clears it); the
last of those to end clears it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents_core.probes import probe
from agents_core.releases.v0_32.job_queue import Job, job_from_row
from agents_core.schedule_dispatch import OOM_ALARM_STRIKES_KEY, is_memory_limit_reset

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.releases.v0_32.job_queue import JobQueue

__all__ = ["MemoryLimitBreaker", "MemoryLimitContext"]

_BACKOFF_MAX_S = 300
_BACKOFF_STEP_S = 30


@dataclass(frozen=True)
class MemoryLimitContext:
    """What the memory-limit hooks are told of one strike (the SDK's `{sealed, nextTime,
    executing, purgedRecoveryLoopJobs}`)."""

    sealed: bool
    next_time: int | None
    """Where the backed-off jobs went (None when sealed)."""
    executing: Job | None
    """The job the strike is charged to (None: the alarm's own hooks, or its startup)."""
    purged_recovery_loop_jobs: tuple[Job, ...] | None
    """The recovery-loop jobs a sealing strike purged, as they were; only the event's first
    observer is told (None otherwise, and below the limit)."""


@dataclass(frozen=True)
class _Strike:
    strikes: int
    limit: int
    sealed: bool
    next_time: int | None
    purged: tuple[Job, ...] | None


@dataclass(frozen=True)
class _Scope:
    breaker: MemoryLimitBreaker
    executing: Mapping[str, Any] | None


_current_scope: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar(
    "agents_core_alarm_scope", default=None
)


class MemoryLimitBreaker:
    """One agent's breaker state: alarms in flight, handed-off work, and this incarnation's
    strike."""

    __slots__ = (
        "_ctx",
        "_queue",
        "_rearm",
        "_emit",
        "_on_memory_limit",
        "_disabled",
        "_clear",
        "_strike",
        "_outstanding",
        "alarms_in_flight",
        "struck",
    )

    def __init__(
        self,
        ctx: AgentContext,
        queue: JobQueue,
        rearm: Callable[[], Awaitable[None]],
        emit: Callable[..., None],
        on_memory_limit: Callable[[MemoryLimitContext], Awaitable[None]],
        disabled: Callable[[], bool],
        clear: Callable[[], None],
    ) -> None:
        self._ctx = ctx
        self._queue = queue
        self._rearm = rearm
        self._emit = emit
        self._on_memory_limit = on_memory_limit
        """The capabilities' `on_memory_limit`, then the agent's `on_alarm_memory_limit`."""
        self._disabled = disabled
        self._clear = clear
        """Delete the strike count (when there is one)."""
        self._strike: _Strike | None = None
        """The event this incarnation recorded (one per incarnation: it resets after it)."""
        self._outstanding: list[Awaitable[Any]] = []
        """Handed-off work not yet settled (by identity)."""
        self.alarms_in_flight = 0
        self.struck = False
        """A strike was recorded by this incarnation (the count is not cleared in it)."""

    async def handle(self, error: BaseException, executing: Mapping[str, Any] | None) -> None:
        """One observer of a memory-limit reset event: record the strike (the first observer),
        apply the policy of the job it is charged to, tell the hooks, and (the first) re-arm and
        reset the isolate."""
        first = self._strike is None
        self.struck = True
        if self._strike is None:
            self._strike = self._record(error)
        strike = self._strike
        queue = self._queue
        if executing is not None:
            with contextlib.suppress(Exception):  # best effort, as every write of the breaker
                if strike.sealed:
                    queue.delete(executing["id"])
                elif strike.next_time is not None:
                    queue.retime(executing["id"], strike.next_time)
        context = MemoryLimitContext(
            sealed=strike.sealed,
            next_time=strike.next_time,
            executing=None if executing is None else job_from_row(executing),
            purged_recovery_loop_jobs=strike.purged if first else None,
        )
        with contextlib.suppress(Exception):  # the isolate resets either way
            await self._on_memory_limit(context)
        if not first:
            return
        ctx = self._ctx
        try:
            await self._rearm()
        except Exception as exc:  # noqa: BLE001 - the next wake re-arms
            ctx.log("error", f"failed to re-arm the alarm after a memory-limit reset: {exc}")
        reason = (
            f"Alarm memory-limit strike {strike.strikes}/{strike.limit}"
            f"{' (sealed)' if strike.sealed else ''}; resetting isolate (#1825)"
        )
        with contextlib.suppress(Exception):  # best effort, as the SDK's
            ctx.host.tasks.wait_until(self._reset_isolate(reason))

    def _record(self, error: BaseException) -> _Strike:
        """Count the strike durably and apply the policy of the event rather than of a job:
        the recovery loop backs off (or is purged) as one, a sealing strike deletes the count,
        and the event is emitted. Every write is best effort (sdk-0.32 §2.5)."""
        ctx = self._ctx
        kv = ctx.host.kv
        queue = self._queue
        strikes = 1
        with contextlib.suppress(Exception):
            prior = kv.get(OOM_ALARM_STRIKES_KEY)
            strikes = (prior if isinstance(prior, int) and not isinstance(prior, bool) else 0) + 1
            kv.put(OOM_ALARM_STRIKES_KEY, strikes)
        limit = ctx.options.max_alarm_memory_limit_strikes
        sealed = strikes >= limit
        ctx.log(
            "error",
            f"Alarm hit a Durable Object memory-limit reset (strike {strikes}/{limit}"
            f"{', sealing recovery' if sealed else ', will retry with backoff'}). Breaking the "
            f"platform alarm-retry loop (#1825). {error}",
        )
        now = ctx.host.clock.now_ms()
        next_time = None if sealed else now + min(_BACKOFF_MAX_S, _BACKOFF_STEP_S * strikes) * 1000
        purged: tuple[Job, ...] | None = None
        if sealed:
            probe(ctx.host, "job.memory_limit_sealed")
            with contextlib.suppress(Exception):
                purged = tuple(queue.recovery_loop_jobs())
            with contextlib.suppress(Exception):
                queue.purge_recovery_loop_jobs()
            with contextlib.suppress(Exception):
                kv.delete(OOM_ALARM_STRIKES_KEY)
        else:
            probe(ctx.host, "job.memory_limit_backed_off")
            assert next_time is not None
            with contextlib.suppress(Exception):
                queue.delay_recovery_loop_jobs(next_time)
        self._emit(
            "alarm:memory_limit_reset",
            strikes=strikes,
            limit=limit,
            sealed=sealed,
            error=str(error),
        )
        return _Strike(strikes, limit, sealed, next_time, purged)

    async def _reset_isolate(self, reason: str) -> None:
        """The SDK's `setTimeout(() => ctx.abort(reason, {retryAlarm: false}), 0)`."""
        host = self._ctx.host
        await host.clock.sleep(0)
        host.lifecycle.abort(reason, retry_alarm=False)

    # -- handed-off work --------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def scope(self, executing: Mapping[str, Any] | None) -> AsyncIterator[None]:
        """Run the block in this breaker's alarm scope, charged to `executing` (a job row), or
        to no job; tasks started inside keep it (the SDK's async-local alarm scope)."""
        token = _current_scope.set(_Scope(self, executing))
        try:
            yield
        finally:
            _current_scope.reset(token)

    def track_alarm_work(self, work: Awaitable[Any]) -> bool:
        """Keep `work` (a task or a deferred a dispatch handed off) in the breaker's domain,
        charged to the job of the alarm scope it is called in. False outside this breaker's
        alarm scopes (nothing is tracked); tracking the same work again does nothing more."""
        scope = _current_scope.get()
        if scope is None or scope.breaker is not self:
            return False
        if any(tracked is work for tracked in self._outstanding):
            return True
        self._outstanding.append(work)
        self._ctx.host.tasks.wait_until(self._settle(work, scope.executing))
        return True

    async def _settle(self, work: Awaitable[Any], executing: Mapping[str, Any] | None) -> None:
        error: Exception | None = None
        try:
            await work
        except Exception as exc:  # noqa: BLE001 - classified below; its owner reports it
            error = exc
        try:
            if self._disabled():
                return
            if error is not None and is_memory_limit_reset(error):
                probe(self._ctx.host, "job.memory_limit_in_handed_off_work")
                await self.handle(error, executing)
                return
        finally:
            self._outstanding = [w for w in self._outstanding if w is not work]
        self.clear_when_quiescent()

    def quiescent(self) -> bool:
        """Nothing of the alarm is in flight or outstanding, and this incarnation recorded no
        strike: a clean alarm may clear the count now."""
        return self.alarms_in_flight == 0 and not self._outstanding and not self.struck

    def clear_when_quiescent(self) -> None:
        """Clear the count if the incarnation is quiescent (whichever ends last clears it)."""
        if self.quiescent():
            self._clear()
