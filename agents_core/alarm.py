"""The alarm multiplexer and the alarm entry: one physical slot carries every logical timer.

`_schedule_next_alarm` recomputes, from durable state and the in-memory counters, the earliest
moment anything needs the agent (due schedules, running intervals turning hung, the keepAlive
heartbeat, pending fiber recovery with its backoff, facet fiber leases) and writes that one time
into the slot, or clears it. `alarm` is what the platform calls when the slot comes due: due
schedules, then recovery housekeeping, then the re-arm (spec fibers §1.5, §3.3).
"""

from __future__ import annotations

from typing import Protocol

from agents_core.probes import probe
from agents_core.run_rows import DESTROY_PENDING_KEY, FACET_RUNS, SCHEDULES
from agents_core.self_types import AgentSelf

__all__ = [
    "AlarmMixin",
    "DESTROY_PENDING_KEY",
    "FIBER_RECOVERY_BACKOFF_MAX_EXP",
    "FIBER_RECOVERY_MAX_BACKOFF_MS",
]

FIBER_RECOVERY_MAX_BACKOFF_MS = 300_000
FIBER_RECOVERY_BACKOFF_MAX_EXP = 20


class AlarmSelf(AgentSelf, Protocol):
    """What AlarmMixin uses of the agent it is mixed into."""

    _keep_alive_refs: int
    _recovery_no_progress_scans: int

    async def _facet_reschedule_root(self) -> None: ...
    def _has_pending_fiber_recovery(self) -> bool: ...
    async def _process_due_schedules(self) -> None: ...
    async def _handle_alarm_memory_limit(self, error: BaseException) -> bool: ...
    def _clear_alarm_memory_limit_strikes(self) -> None: ...
    async def destroy(self, *, deferred: bool = False) -> None: ...
    async def _check_run_fibers(self) -> None: ...
    async def _check_facet_run_fibers(self) -> None: ...

    # its own methods, called through self
    async def _schedule_next_alarm(self) -> None: ...
    def _schedule_alarm_candidates(self, now: int) -> list[int]: ...
    def _keep_alive_candidates(self, now: int) -> list[int]: ...
    def _recovery_alarm_candidates(self, now: int) -> list[int]: ...
    def _facet_lease_candidates(self, now: int) -> list[int]: ...
    async def _run_alarm_body(self) -> None: ...
    async def _on_alarm_housekeeping(self) -> None: ...
    async def on_alarm(self) -> None: ...


class AlarmMixin:
    async def _schedule_next_alarm(self: AlarmSelf) -> None:
        """Arm the slot at the earliest candidate, or clear it when there is none."""
        if self._is_facet:
            await self._facet_reschedule_root()
            return
        host = self.host
        now = host.clock.now_ms()
        try:
            if self._memo.destroy_pending():
                host.alarm.set_alarm(now)
                return
            candidates = [
                *self._schedule_alarm_candidates(now),
                *self._keep_alive_candidates(now),
                *self._recovery_alarm_candidates(now),
                *self._facet_lease_candidates(now),
            ]
        except Exception:
            # The state could not be read (a storage fault): what needs the agent is unknown,
            # so arm a check-back no later than one interval from now, whose alarm computes it
            # again. Without it a schedule written just before would never fire (divergence K5).
            probe(self.host, "alarm.reschedule_failed")
            check_back = now + self._options.keep_alive_interval_ms
            armed = host.alarm.get_alarm()
            host.alarm.set_alarm(check_back if armed is None else min(armed, check_back))
            raise
        if candidates:
            host.alarm.set_alarm(min(candidates))
        else:
            host.alarm.delete_alarm()

    def _schedule_alarm_candidates(self: AlarmSelf, now: int) -> list[int]:
        if self._memo.empty(SCHEDULES):
            return []
        now_s = now // 1000
        hung_cutoff = now_s - self._options.hung_schedule_timeout_seconds
        out = []
        ready = self.sql(
            "SELECT MIN(time) AS t FROM cf_agents_schedules WHERE type != 'interval' "
            "OR running = 0 OR COALESCE(execution_started_at, 0) <= ?",
            hung_cutoff,
        )
        if ready and ready[0]["t"] is not None:
            out.append(max(ready[0]["t"] * 1000, now + 1))
        running = self.sql(
            "SELECT MIN(execution_started_at) AS s FROM cf_agents_schedules "
            "WHERE type = 'interval' AND running = 1 AND COALESCE(execution_started_at, 0) > ?",
            hung_cutoff,
        )
        if running and running[0]["s"] is not None:
            out.append((running[0]["s"] + self._options.hung_schedule_timeout_seconds) * 1000)
        return out

    def _keep_alive_candidates(self: AlarmSelf, now: int) -> list[int]:
        if self._keep_alive_refs > 0:
            return [now + self._options.keep_alive_interval_ms]
        return []

    def _recovery_alarm_candidates(self: AlarmSelf, now: int) -> list[int]:
        if not self._has_pending_fiber_recovery():
            return []
        exponent = min(self._recovery_no_progress_scans, FIBER_RECOVERY_BACKOFF_MAX_EXP)
        delay = self._options.keep_alive_interval_ms * 2**exponent
        if delay >= FIBER_RECOVERY_MAX_BACKOFF_MS and self._recovery_no_progress_scans > 0:
            probe(self.host, "fiber.recovery_backoff_at_cap")
        at = now + min(FIBER_RECOVERY_MAX_BACKOFF_MS, delay)
        # Trace-only (not an SDK event): the recovery candidate itself, which the slot may not
        # show when an earlier candidate wins (checker `recovery_backoff`).
        self.host.trace.emit("fiber:recovery:backoff", at=at, delayMs=at - now)
        return [at]

    def _facet_lease_candidates(self: AlarmSelf, now: int) -> list[int]:
        if self._memo.empty(FACET_RUNS):
            return []
        return [now + self._options.keep_alive_interval_ms]

    async def alarm(self: AlarmSelf) -> None:
        """The platform's alarm entry (startup has already run in this incarnation)."""
        try:
            await self._run_alarm_body()
        except Exception as exc:
            if not await self._handle_alarm_memory_limit(exc):
                raise
            return
        self._clear_alarm_memory_limit_strikes()

    async def _run_alarm_body(self: AlarmSelf) -> None:
        if self._memo.destroy_pending():
            await self.destroy()
            return
        await self.on_alarm()
        await self._process_due_schedules()
        if self._destroyed:
            return
        await self._on_alarm_housekeeping()
        await self._schedule_next_alarm()

    async def _on_alarm_housekeeping(self: AlarmSelf) -> None:
        await self._check_run_fibers()
        await self._check_facet_run_fibers()

    async def on_alarm(self) -> None:
        """Host hook run at the start of every alarm (empty by default)."""
