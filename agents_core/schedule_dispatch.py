"""Running due schedules inside the alarm: dispatch by method name, retries, the deferred
failures of one-shot rows, and the alarm memory-limit circuit breaker (spec fibers §4.3–§4.6).

Callbacks run one after another, each awaited. A callback's final ordinary failure is swallowed
(reported through `schedule:error` and `on_error`) so the row counts as executed. Three platform
failures of a one-shot row are re-raised instead, so that `alarm()` rejects, the row survives and
the platform runs the alarm again: a superseded isolate (at once, no more in-process attempts), a
transient that outlives its retries, and a memory-limit reset, which the breaker then bounds.

`ScheduleDispatch` is the component: it owns the id of the row executing now (what the breaker
backs off) and the breaker's strike key, runs callbacks found by name on the agent, and reaches
`on_error`, the sub-agents' dispatch and whether a callback destroyed the agent through
`DispatchHooks`, its port of the agent. Its rows are the Scheduler's (`schedules.py`). The SDK's
counterpart is the Agent's `alarm()` schedule loop and `_executeScheduleCallback` (0.21.0), and
`Scheduler.onJob` with the Lifecycle's breaker (0.32.0, spec sdk-0.32 §2.5, §3.3).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from agents_core.cron import next_cron_time_ms
from agents_core.durable_memo import SCHEDULES
from agents_core.options import jitter_backoff_ms, resolve_retry
from agents_core.probes import probe
from agents_core.stored_names import callback_method

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.host import Host
    from agents_core.lifecycle import Lifecycle
    from agents_core.options import RetryOptions

__all__ = [
    "DUPLICATE_SCHEDULE_THRESHOLD",
    "OOM_ALARM_STRIKES_KEY",
    "DispatchHooks",
    "ScheduleDispatch",
    "is_code_update_reset",
    "is_memory_limit_reset",
    "is_platform_transient",
    "retry_from_json",
    "call_on_error",
    "call_with_retries",
    "retry_to_json",
]

DUPLICATE_SCHEDULE_THRESHOLD = 10
OOM_ALARM_STRIKES_KEY = "cf_agents:oom_alarm_strikes"
MEMORY_LIMIT_BACKOFF_MAX_S = 300
MEMORY_LIMIT_BACKOFF_STEP_S = 30
_CAUSE_DEPTH_MAX = 8
_ONE_SHOT_TYPES = ("delayed", "scheduled")

# The platform's own wording, matched closely so that an application error which merely mentions
# an upgrade is not taken for one (SDK `retries.ts`).
_SUPERSEDED_ISOLATE = re.compile(
    r"reset because its code was updated|this script has been upgraded", re.IGNORECASE
)
_CONNECTION_LOST = re.compile(r"network connection lost", re.IGNORECASE)
_STORAGE_RESET = re.compile(
    r"Internal error in Durable Object storage caused object to be reset", re.IGNORECASE
)
_MEMORY_LIMIT = re.compile(r"exceeded its memory limit", re.IGNORECASE)


_RETRY_JSON_KEYS = {
    "max_attempts": "maxAttempts",
    "base_delay_ms": "baseDelayMs",
    "max_delay_ms": "maxDelayMs",
}
_RETRY_PY_KEYS = {v: k for k, v in _RETRY_JSON_KEYS.items()}


def retry_to_json(retry: Mapping[str, Any]) -> dict[str, Any]:
    """Retry options (snake_case) as the SDK spells them in storage and in `Schedule`."""
    return {_RETRY_JSON_KEYS[k]: v for k, v in retry.items() if k in _RETRY_JSON_KEYS}


def retry_from_json(text: str | None) -> dict[str, Any] | None:
    """The `retry_options` column back to snake_case options (None when absent)."""
    if text is None:
        return None
    stored = json.loads(text)
    return {_RETRY_PY_KEYS[k]: v for k, v in stored.items() if k in _RETRY_PY_KEYS}


def _self_and_causes(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and len(chain) < _CAUSE_DEPTH_MAX:
        chain.append(current)
        current = current.__cause__
    return chain


def _is_retryable_flagged(error: BaseException) -> bool:
    return (
        getattr(error, "retryable", False) is True
        and getattr(error, "overloaded", False) is not True
        and "Durable Object is overloaded" not in str(error)
    )


def is_code_update_reset(error: BaseException) -> bool:
    """A superseded isolate (deploy), anywhere along the `__cause__` chain."""
    return any(_SUPERSEDED_ISOLATE.search(str(e)) for e in _self_and_causes(error))


def is_memory_limit_reset(error: BaseException) -> bool:
    """The isolate was reset for exceeding its memory limit."""
    return any(_MEMORY_LIMIT.search(str(e)) for e in _self_and_causes(error))


def is_platform_transient(error: BaseException) -> bool:
    """A failure of the platform rather than of the callback: the same work succeeds later."""
    for e in _self_and_causes(error):
        message = str(e)
        if _SUPERSEDED_ISOLATE.search(message) or _CONNECTION_LOST.search(message):
            return True
        if _STORAGE_RESET.search(message) or _is_retryable_flagged(e):
            return True
    return False


class DispatchHooks(Protocol):
    """What the dispatch uses of the agent: `on_error` (a hook users override), a sub-agent's
    row handed to its owner (the facets' routing), and whether a callback destroyed the agent.
    The agent is also where a callback is looked up by name."""

    @property
    def _destroyed(self) -> bool: ...

    def on_error(self, error: BaseException) -> Any: ...
    async def _dispatch_facet_schedule(self, row: dict[str, Any]) -> bool: ...


class ScheduleDispatch:
    """One agent's running of its due schedules, and the alarm memory-limit breaker."""

    __slots__ = (
        "_lifecycle",
        "_hooks",
        "host",
        "sql",
        "_memo",
        "_options",
        "_emit",
        "_log",
        "_executing_schedule_id",
    )

    def __init__(self, ctx: AgentContext, lifecycle: Lifecycle, hooks: DispatchHooks) -> None:
        self._lifecycle = lifecycle
        self._hooks = hooks
        self.host = ctx.host
        self.sql = ctx.sql
        self._memo = ctx.memo
        self._options = ctx.options
        self._emit = ctx.emit
        self._log = ctx.log
        self._executing_schedule_id: str | None = None
        """The row whose callback runs now (the one a memory-limit reset is charged to)."""

    def _schedule_alarm_candidates(self, now: int) -> list[int]:
        """The Lifecycle's alarm source: the earliest due schedule (a running interval not yet
        hung is not due), and the moment the earliest running interval turns hung."""
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

    async def _process_due_schedules(self) -> None:
        """Run every due row in storage order, then advance it (§4.4)."""
        self._executing_schedule_id = None
        now_s = self.host.clock.now_ms() // 1000
        if self._memo.known_empty(SCHEDULES):
            return  # no schedule is stored: none is due
        due = self.sql("SELECT * FROM cf_agents_schedules WHERE time <= ?", now_s)
        self._warn_stale_one_shots(due)
        for row in due:
            if self._hooks._destroyed:
                return
            if await self._run_due_row(row, now_s):
                self._advance_schedule_row(row)

    def _warn_stale_one_shots(self, due: list[dict[str, Any]]) -> None:
        counts = Counter(row["callback"] for row in due if row["type"] in _ONE_SHOT_TYPES)
        for callback, count in counts.items():
            if count < DUPLICATE_SCHEDULE_THRESHOLD:
                continue
            self._log(
                "warn",
                f'Processing {count} stale "{callback}" schedules in a single alarm cycle. This '
                "usually means schedule() is being called repeatedly without the idempotent "
                "option. Consider using schedule_every() for recurring tasks or passing "
                "idempotent=True to schedule().",
            )
            self._emit(
                "schedule:duplicate_warning", callback=callback, count=count, type="one-shot"
            )

    async def _run_due_row(self, row: dict[str, Any], now_s: int) -> bool:
        """Run one row; True when it ran (or failed in a swallowed way) and must advance."""
        if row["type"] == "interval":
            hung_after_s = self._options.hung_schedule_timeout_seconds
            if row["running"] == 1:
                elapsed_s = now_s - (row["execution_started_at"] or 0)
                if elapsed_s < hung_after_s:
                    self._log(
                        "warn",
                        f"Skipping interval schedule {row['id']}: previous execution still running",
                    )
                    return False
                probe(self.host, "schedule.hung_interval_forced")
                self._log(
                    "warn",
                    f"Forcing reset of hung interval schedule {row['id']} "
                    f"(started {elapsed_s}s ago)",
                )
            self.sql(
                "UPDATE cf_agents_schedules SET running = 1, execution_started_at = ? WHERE id = ?",
                now_s,
                row["id"],
            )
        if row["owner_path"] is not None:
            return await self._dispatch_owned_row(row)
        self._executing_schedule_id = row["id"]
        await self._execute_schedule_callback(row)
        self._executing_schedule_id = None
        return not self._hooks._destroyed

    async def _dispatch_owned_row(self, row: dict[str, Any]) -> bool:
        """A sub-agent's row: the owner runs it. A throwing dispatch leaves the row as it is."""
        try:
            return bool(await self._hooks._dispatch_facet_schedule(row))
        except Exception as exc:
            probe(self.host, "schedule.facet_dispatch_failed")
            self._log("error", f'error dispatching scheduled callback "{row["callback"]}": {exc}')
            self._emit(
                "schedule:error", callback=row["callback"], id=row["id"], error=str(exc), attempts=0
            )
            await self._call_on_error(exc)
            if row["type"] == "interval":
                self.sql("UPDATE cf_agents_schedules SET running = 0 WHERE id = ?", row["id"])
            return False

    def _advance_schedule_row(self, row: dict[str, Any]) -> None:
        now_ms = self.host.clock.now_ms()
        if row["type"] == "cron":
            next_s = next_cron_time_ms(row["cron"] or "", now_ms) // 1000
            self.sql("UPDATE cf_agents_schedules SET time = ? WHERE id = ?", next_s, row["id"])
        elif row["type"] == "interval":
            # Measured from completion, not from the previous due time.
            next_s = now_ms // 1000 + (row["intervalSeconds"] or 0)
            self.sql(
                "UPDATE cf_agents_schedules SET running = 0, time = ? WHERE id = ?",
                next_s,
                row["id"],
            )
        else:
            self.sql("DELETE FROM cf_agents_schedules WHERE id = ?", row["id"])

    async def _execute_schedule_callback(self, row: dict[str, Any]) -> None:
        """Call `self.<callback>(payload, row)` with retries (§4.3). Returns normally when the row
        counts as executed; raises only the deferred failures of one-shot rows."""
        callback, schedule_id = row["callback"], row["id"]
        method = callback_method(self._hooks, callback)
        if method is None:
            self._log("error", f"callback {callback} not found")
            return
        retry = resolve_retry(retry_from_json(row["retry_options"]), self._options.retry)
        try:
            payload = None if row["payload"] is None else json.loads(row["payload"])
        except ValueError as exc:
            self._log(
                "error",
                f'Failed to parse payload for schedule "{schedule_id}" (callback "{callback}"): '
                f"{exc}",
            )
            self._emit(
                "schedule:error", callback=callback, id=schedule_id, error=str(exc), attempts=0
            )
            return
        one_shot = row["type"] in _ONE_SHOT_TYPES
        self._emit("schedule:execute", callback=callback, id=schedule_id)

        async def failed(exc: Exception, attempt: int) -> bool:
            if one_shot and is_code_update_reset(exc):
                probe(self.host, "schedule.one_shot_deferred_to_platform")
                self._log(
                    "warn",
                    f'Deferring scheduled callback "{callback}" to a fresh invocation after '
                    "a Durable Object code-update reset; the one-shot row is preserved and "
                    "the alarm will re-run on new code.",
                )
                raise exc
            if attempt >= retry.max_attempts:
                await self._schedule_attempts_exhausted(row, exc, retry.max_attempts)
                return True
            return False

        await call_with_retries(
            self.host,
            self._emit,
            callback,
            schedule_id,
            retry,
            lambda: method(payload, dict(row)),
            failed,
        )

    async def _schedule_attempts_exhausted(
        self, row: dict[str, Any], error: Exception, max_attempts: int
    ) -> None:
        """The last attempt failed: defer a one-shot row on a platform failure (re-raise), else
        report and swallow, so that the row counts as executed."""
        callback = row["callback"]
        if row["type"] in _ONE_SHOT_TYPES:
            if is_platform_transient(error):
                probe(self.host, "schedule.one_shot_deferred_to_platform")
                self._log(
                    "warn",
                    f'Deferring scheduled callback "{callback}" after exhausting in-process '
                    "retries on a transient platform error; the one-shot row is preserved and "
                    "the alarm will re-run once the platform recovers.",
                )
                raise error
            if is_memory_limit_reset(error):
                self._log(
                    "warn",
                    f'Deferring scheduled callback "{callback}" to the alarm memory-limit '
                    "circuit breaker after a Durable Object memory-limit reset; the one-shot row "
                    "is preserved so the breaker can bound the retry loop.",
                )
                raise error
        self._log(
            "error",
            f'error executing callback "{callback}" after {max_attempts} attempts: '
            f"{type(error).__name__}: {error}",
        )
        self._emit(
            "schedule:error",
            callback=callback,
            id=row["id"],
            error=str(error),
            attempts=max_attempts,
        )
        await self._call_on_error(error)

    async def _call_on_error(self, error: BaseException) -> None:
        await call_on_error(self._hooks, error)

    # -- the alarm memory-limit circuit breaker (§4.6) ---------------------------------------
    async def _handle_alarm_memory_limit(self, error: BaseException) -> bool:
        """Swallow an alarm that ended in a memory-limit reset (so the platform does not retry
        it at once): back the executing row off, or purge it at the strike budget. False for
        any other error, which `alarm()` then re-raises."""
        if not is_memory_limit_reset(error):
            return False
        executing = self._executing_schedule_id
        self._executing_schedule_id = None
        kv = self.host.kv
        self._memo.strikes_clear = False
        # Every write of the breaker is best effort (§4.6): one that fails is skipped, and the
        # reset is still swallowed, so the platform's retry loop stops all the same.
        strikes = 1
        with contextlib.suppress(Exception):
            prior = kv.get(OOM_ALARM_STRIKES_KEY)
            strikes = (prior if isinstance(prior, int) else 0) + 1
            kv.put(OOM_ALARM_STRIKES_KEY, strikes)
        limit = self._options.max_alarm_memory_limit_strikes
        sealed = strikes >= limit
        if sealed:
            probe(self.host, "alarm.memory_limit_sealed")
        else:
            probe(self.host, "alarm.memory_limit_backed_off")
        self._log(
            "error",
            f"Alarm hit a Durable Object memory-limit reset (strike {strikes}/{limit}"
            f"{', sealing recovery' if sealed else ', will retry with backoff'}): {error}",
        )
        if executing is not None:
            with contextlib.suppress(Exception):
                if sealed:
                    self.sql("DELETE FROM cf_agents_schedules WHERE id = ?", executing)
                else:
                    backoff = min(MEMORY_LIMIT_BACKOFF_MAX_S, MEMORY_LIMIT_BACKOFF_STEP_S * strikes)
                    next_s = self.host.clock.now_ms() // 1000 + backoff
                    self.sql(
                        "UPDATE cf_agents_schedules SET time = ? WHERE id = ? AND time <= ?",
                        next_s,
                        executing,
                        next_s,
                    )
        if sealed:
            with contextlib.suppress(Exception):
                kv.delete(OOM_ALARM_STRIKES_KEY)
        self._emit(
            "alarm:memory_limit_reset",
            strikes=strikes,
            limit=limit,
            sealed=sealed,
            error=str(error),
        )
        try:
            await self._lifecycle.rearm()
        except Exception as exc:  # noqa: BLE001 - the next wake re-arms
            self._log("error", f"failed to re-arm the alarm after a memory-limit reset: {exc}")
        return True

    def _clear_alarm_memory_limit_strikes(self) -> None:
        """A clean alarm: the breaker counts consecutive resets only. Once the count is known to
        be clear in this incarnation, only a strike written since can bring it back."""
        memo = self._memo
        if memo.strikes_clear:
            return
        prior = self.host.kv.get(OOM_ALARM_STRIKES_KEY)
        if isinstance(prior, int) and prior > 0:
            self.host.kv.delete(OOM_ALARM_STRIKES_KEY)
        memo.strikes_clear = True


async def call_with_retries(
    host: Host,
    emit: Callable[..., None],
    callback: str,
    schedule_id: str,
    retry: RetryOptions,
    call: Callable[[], Any],
    failed: Callable[[Exception, int], Awaitable[bool]],
) -> None:
    """Run a schedule's callback (`call`, awaited when it answers an awaitable) until it
    returns, with `schedule:retry` before each later attempt and a jittered backoff between
    (§4.3; the 0.21.0 alarm's rows and 0.32.0's routed ones alike). After a failure,
    `failed(error, attempt)` answers True to stop (the schedule counts as run) or False to try
    again; it raises to defer the schedule to the platform."""
    attempt = 1
    while True:
        if attempt > 1:
            probe(host, "schedule.callback_retried")
            emit(
                "schedule:retry",
                callback=callback,
                id=schedule_id,
                attempt=attempt,
                maxAttempts=retry.max_attempts,
            )
        try:
            result = call()
            if inspect.isawaitable(result):
                await result
            return
        except Exception as exc:
            if await failed(exc, attempt):
                return
        await host.clock.sleep(
            jitter_backoff_ms(host.entropy, attempt, retry.base_delay_ms, retry.max_delay_ms)
        )
        attempt += 1


async def call_on_error(hooks: DispatchHooks, error: BaseException) -> None:
    """Hand a schedule's error to the agent's `on_error`, sync or async; an error of
    `on_error` itself is swallowed, as in the SDK."""
    try:
        result = hooks.on_error(error)
        if inspect.isawaitable(result):
            await result
    except Exception:  # noqa: BLE001 - errors of on_error are swallowed, as in the SDK
        return
