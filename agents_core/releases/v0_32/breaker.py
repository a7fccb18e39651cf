"""`MemoryLimitBreaker`: 0.32.0's alarm memory-limit circuit breaker, in the Lifecycle, over jobs
(spec sdk-0.32 §2.5).

An alarm that ends in a memory-limit reset is swallowed, not retried at once by the platform. A
durable strike count (KV `cf_agents:oom_alarm_strikes`) tolerates up to the limit (option
`max_alarm_memory_limit_strikes`, 3) of consecutive resets. Below it the executing job and every
recovery-loop job due by then are pushed to `now + min(300, 30 × strikes)` s. At it the executing
job is deleted, every recovery-loop job purged and the count deleted. Each event is recorded once
and emitted once (`alarm:memory_limit_reset`). Once the event is handled and the alarm re-armed,
the isolate is reset: on a 0 ms timer, when the breaker's writes have committed (the SDK awaits
`storage.sync()` first), the incarnation aborts itself with "Alarm memory-limit strike N/L[
(sealed)]; resetting isolate (#1825)" and no platform retry of the alarm
(`ctx.abort(reason, {retryAlarm: false})`, `host.lifecycle.abort(..., retry_alarm=False)`); the
re-armed alarm wakes a fresh one. A clean alarm clears the count, once nothing of the alarm is
in flight and no strike was recorded by this incarnation (so only a fresh one clears it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from agents_core.probes import probe
from agents_core.schedule_dispatch import OOM_ALARM_STRIKES_KEY

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.releases.v0_32.job_queue import JobQueue

__all__ = ["MemoryLimitBreaker"]

_BACKOFF_MAX_S = 300
_BACKOFF_STEP_S = 30


class MemoryLimitBreaker:
    """One agent's breaker state: alarms in flight, and whether this incarnation struck."""

    __slots__ = ("_ctx", "_queue", "_rearm", "_emit", "alarms_in_flight", "struck")

    def __init__(
        self,
        ctx: AgentContext,
        queue: JobQueue,
        rearm: Callable[[], Awaitable[None]],
        emit: Callable[..., None],
    ) -> None:
        self._ctx = ctx
        self._queue = queue
        self._rearm = rearm
        self._emit = emit
        self.alarms_in_flight = 0
        self.struck = False
        """A strike was recorded by this incarnation (the count is not cleared in it)."""

    async def handle(self, error: BaseException, executing: Mapping[str, Any] | None) -> None:
        """One memory-limit reset event: record the strike, back off or purge, re-arm."""
        ctx = self._ctx
        kv = ctx.host.kv
        queue = self._queue
        self.struck = True
        # Every write of the breaker is best effort (sdk-0.32 §2.5): one that fails is skipped.
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
        if sealed:
            probe(ctx.host, "job.memory_limit_sealed")
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
        if executing is not None:
            with contextlib.suppress(Exception):
                if sealed:
                    queue.delete(executing["id"])
                elif next_time is not None:
                    queue.retime(executing["id"], next_time)
        try:
            await self._rearm()
        except Exception as exc:  # noqa: BLE001 - the next wake re-arms
            ctx.log("error", f"failed to re-arm the alarm after a memory-limit reset: {exc}")
        reason = (
            f"Alarm memory-limit strike {strikes}/{limit}{' (sealed)' if sealed else ''}; "
            "resetting isolate (#1825)"
        )
        with contextlib.suppress(Exception):  # best effort, as the SDK's
            ctx.host.tasks.wait_until(self._reset_isolate(reason))

    async def _reset_isolate(self, reason: str) -> None:
        """The SDK's `setTimeout(() => ctx.abort(reason, {retryAlarm: false}), 0)`."""
        host = self._ctx.host
        await host.clock.sleep(0)
        host.lifecycle.abort(reason, retry_alarm=False)

    def quiescent(self) -> bool:
        """Nothing of the alarm is in flight and this incarnation recorded no strike: a clean
        alarm may clear the count now."""
        return self.alarms_in_flight == 0 and not self.struck
