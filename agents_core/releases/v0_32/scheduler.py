"""0.32.0's `Scheduler`: schedules as jobs of the capability `scheduler` (spec sdk-0.32 §3).

The API and its timing are 0.21.0's (the Scheduler this class extends); what changes is where a
schedule lives and how it runs. A schedule is one job of `cf_agents_jobs`: `fn` is the callback,
`time` the due second × 1000, `retry_options` the fully resolved retry, `singleflight` set for
an interval, `hung_timeout_seconds` the class option, `recovery_loop` the call's option (a
member of the memory-limit breaker's recovery loop). Its payload is the timing envelope
`{payload, retry, type, delayInSeconds, cron, intervalSeconds, owner_path, owner_path_key}` with
the user's payload under `payload` and the caller's own retry under `retry`. The job driver
runs it: `on_job` emits `schedule:execute` on the first attempt and `schedule:retry` before
each later one, calls the callback with its payload and the `Schedule` (as a dict, no storage
keys), and returns the recurrence: a cron advances to its next time, an interval to one
interval after it finished (in ms), a one-shot is deleted. `on_job_error` reports a final
ordinary failure (`schedule:error`, `on_error`) and returns the same recurrence. The schedule
events go through the Lifecycle (held during startup); a cancel is emitted after the delete.

A sub-agent's schedule is a job of its root whose envelope names the owner. When due, the root
announces it and walks down to the owner with a dispatch message (the job's id, callback,
envelope and stored retry), and the owner runs it (`execute_routed`, spec §3.5) with a retry
loop of its own: the stored retry over the owner's class defaults, no further attempt after a
code-update reset of a one-shot, and the `Schedule` built from the envelope alone (its `time`
is 0, as the SDK builds it there). A one-shot's final platform failure (a memory-limit reset
included) goes back to the root, whose driver retries the walk and then keeps the job; any
other final failure is the owner's `schedule:error` and `on_error`. A walk that throws (not a
platform failure) is reported on the root with `attempts: 0` and the job yields, due again at
once.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agents_core.cron import next_cron_time_ms
from agents_core.errors import AgentsError, InvalidArgument
from agents_core.jsontext import parse_json_text
from agents_core.options import RetryOptions, resolve_retry
from agents_core.probes import probe
from agents_core.releases.v0_32.job_driver import is_platform_failure
from agents_core.releases.v0_32.job_queue import SCHEDULER_CAPABILITY
from agents_core.releases.v0_32.schema_keys import SCHEDULES_SCHEMA
from agents_core.schedule_dispatch import (
    call_on_error,
    call_with_retries,
    is_code_update_reset,
    retry_to_json,
)
from agents_core.schedules import (
    TIME_RANGE_END_MAX_S,
    Schedule,
    ScheduleTiming,
    _epoch_seconds,
    encode_payload,
)
from agents_core.schedules import (
    Scheduler as Scheduler021,
)
from agents_core.stored_names import callback_method

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.releases.v0_32.job_queue import Job
    from agents_core.releases.v0_32.lifecycle import Lifecycle
    from agents_core.schedule_dispatch import DispatchHooks

__all__ = ["SCHEDULER_CAPABILITY", "Scheduler"]

LEGACY_KEEP_ALIVE_CALLBACK = "_cf_keepAliveHeartbeat"
LEGACY_RECOVERY_LOOP_CALLBACKS = frozenset({"_chatRecoveryContinue", "_chatRecoveryRetry"})
_ONE_SHOT_TYPES = ("delayed", "scheduled")
_PY_RETRY = {
    "maxAttempts": "max_attempts",
    "baseDelayMs": "base_delay_ms",
    "maxDelayMs": "max_delay_ms",
}


def _retry_of(envelope_retry: Any) -> dict[str, Any] | None:
    if not isinstance(envelope_retry, Mapping):
        return None
    return {_PY_RETRY[k]: v for k, v in envelope_retry.items() if k in _PY_RETRY}


def is_envelope(payload: Any) -> bool:
    """The SDK's `isSchedulerJobPayload`: a timing envelope has a string `type`."""
    return isinstance(payload, Mapping) and isinstance(payload.get("type"), str)


class Scheduler(Scheduler021):
    """One agent's schedules on the job queue, and the capability that runs them."""

    __slots__ = ("_jobs", "_lc", "_hooks")

    def __init__(
        self,
        ctx: AgentContext,
        lifecycle: Lifecycle,
        agent: DispatchHooks,
        self_path: list[dict[str, str]],
        owner_key: str,
    ) -> None:
        super().__init__(ctx, lifecycle, agent, self_path, owner_key)
        self._lc = lifecycle
        self._jobs = lifecycle.jobs_for(SCHEDULER_CAPABILITY)
        self._hooks = agent
        self._emit = lifecycle.emit_event  # the schedule events go through the Lifecycle

    # -- the capability -------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return SCHEDULER_CAPABILITY

    async def on_start(self) -> None:
        """Forget the startup warnings of an earlier startup, and move a 0.21.0 schedules table
        into the queue once (below `cf_agents:schedules_schema_version` 2, spec §6.3)."""
        self._on_start_schedule_warned.clear()
        await SCHEDULES_SCHEMA.migrate(self.host.kv, self._migrate_legacy_table)

    async def _migrate_legacy_table(self, version: int) -> None:
        """Every row of `cf_agents_schedules` becomes a job with its id (its time in ms, its
        timing in the envelope, an interval idle), then the table is dropped. The keepAlive
        heartbeat rows of old releases are dropped, and so is a row whose payload is not JSON;
        retry options that are not JSON count as none."""
        exists = self.sql(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'cf_agents_schedules'"
        )
        if not exists:
            return
        for row in self.sql("SELECT * FROM cf_agents_schedules"):
            if row["callback"] == LEGACY_KEEP_ALIVE_CALLBACK:
                continue
            envelope: dict[str, Any] = {}
            if isinstance(row["payload"], str):
                try:
                    envelope["payload"] = json.loads(row["payload"])
                except ValueError as exc:
                    self._log(
                        "error",
                        f'Skipping schedule "{row["id"]}" during job-queue migration: its '
                        f"payload is not valid JSON: {exc}",
                    )
                    continue
            _, retry = parse_json_text(row["retry_options"])  # invalid JSON reads as none
            if retry is not None:
                envelope["retry"] = retry
            envelope["type"] = row["type"]
            for key in ("delayInSeconds", "cron", "intervalSeconds"):
                if row[key] is not None:
                    envelope[key] = row[key]
            envelope["owner_path"] = row["owner_path"]
            envelope["owner_path_key"] = row["owner_path_key"]
            resolved = resolve_retry(_retry_of(retry), self._options.retry)
            await self._jobs.push(
                row["callback"],
                int(row["time"] or 0) * 1000,
                id=row["id"],
                payload=envelope,
                retry={
                    "maxAttempts": resolved.max_attempts,
                    "baseDelayMs": resolved.base_delay_ms,
                    "maxDelayMs": resolved.max_delay_ms,
                },
                singleflight=row["type"] == "interval",
                hung_timeout_seconds=self._options.hung_schedule_timeout_seconds,
                recovery_loop=row["callback"] in LEGACY_RECOVERY_LOOP_CALLBACKS,
            )
        self.sql("DROP TABLE cf_agents_schedules")

    async def on_job(self, job: Job, attempt: int) -> Any:
        timing = job.payload
        if not is_envelope(timing):
            self._log("error", f"Malformed schedule job {job.id}; dropping it")
            return None
        emit = self._lc.emit_event
        routed = bool(timing.get("owner_path"))
        if attempt == 1:
            # A sub-agent's schedule too is announced here, on the root (§3.5); its owner runs
            # it without announcing it again.
            emit("schedule:execute", callback=job.fn, id=job.id)
        else:
            emit(
                "schedule:retry",
                callback=job.fn,
                id=job.id,
                attempt=attempt,
                maxAttempts=self._max_attempts(job),
            )
        if routed:
            return await self._route(job, timing)
        method = callback_method(self._agent, job.fn)
        if method is None:
            self._log("error", f"callback {job.fn} not found")
            return self._recurrence(timing)
        schedule = self._to_schedule(job.id, job.fn, timing, job.time // 1000)
        result = method(timing.get("payload"), schedule.to_dict())
        if inspect.isawaitable(result):
            await result
        return self._recurrence(timing)

    @property
    def on_job_error(self) -> Callable[[Job, int, BaseException], Awaitable[Any]]:
        return self._on_job_error

    async def _on_job_error(self, job: Job, attempt: int, error: BaseException) -> Any:
        timing = job.payload
        if not is_envelope(timing):
            return None
        attempts = self._max_attempts(job)
        self._log(
            "error",
            f'error executing callback "{job.fn}" after {attempts} attempts: '
            f"{type(error).__name__}: {error}",
        )
        self._lc.emit_event(
            "schedule:error", callback=job.fn, id=job.id, error=str(error), attempts=attempts
        )
        await self._call_on_error(error)
        return self._recurrence(timing)

    def _max_attempts(self, job: Job) -> int:
        retry = job.retry or {}
        resolved = resolve_retry(_retry_of(retry), self._options.retry)
        return resolved.max_attempts

    def _recurrence(self, timing: Mapping[str, Any]) -> Any:
        now = self.host.clock.now_ms()
        if timing["type"] == "cron":
            return {"rescheduleAt": next_cron_time_ms(timing.get("cron") or "", now)}
        if timing["type"] == "interval":
            return {"rescheduleAt": now + (timing.get("intervalSeconds") or 0) * 1000}
        return None

    async def _call_on_error(self, error: BaseException) -> None:
        await call_on_error(self._hooks, error)

    async def _route(self, job: Job, timing: Mapping[str, Any]) -> Any:
        """A sub-agent's schedule: walk down to its owner, which runs it (`execute_routed`)."""
        message = {
            "owner_path": timing.get("owner_path"),
            "id": job.id,
            "fn": job.fn,
            "job": dict(timing),
            "retry": job.retry,
        }
        try:
            await self._hooks._dispatch_facet_schedule(message)
        except Exception as error:
            if is_platform_failure(error):
                raise
            self._log("error", f'error dispatching scheduled callback "{job.fn}": {error}')
            self._lc.emit_event(
                "schedule:error", callback=job.fn, id=job.id, error=str(error), attempts=0
            )
            await self._call_on_error(error)
            return "yield"
        return self._recurrence(timing)

    async def execute_routed(self, message: Mapping[str, Any]) -> None:
        """In the owner: run a schedule its root routed here (SC:415). The root announced it;
        this agent emits `schedule:retry` before each later attempt, and on the last failure
        either re-raises (a one-shot's platform failure: the root keeps the job) or reports it
        (`schedule:error` with the attempts, `on_error`) and returns."""
        id, fn, timing = message["id"], message["fn"], message["job"]
        method = callback_method(self._agent, fn)
        if method is None:
            self._log("error", f"callback {fn} not found")
            return
        # The job's retry was resolved by the root when it was stored, so the owner's defaults
        # only fill what a job stored without one lacks.
        retry = resolve_retry(_retry_of(message.get("retry")), self._options.retry)
        one_shot = timing["type"] in _ONE_SHOT_TYPES
        schedule = self._to_schedule(id, fn, timing, 0).to_dict()

        async def failed(error: Exception, attempt: int) -> bool:
            last = attempt >= retry.max_attempts
            if last or (one_shot and is_code_update_reset(error)):
                await self._routed_attempts_exhausted(id, fn, one_shot, error, retry)
                return True
            return False

        payload = timing.get("payload")
        await call_with_retries(
            self.host, self._emit, fn, id, retry, lambda: method(payload, schedule), failed
        )

    async def _routed_attempts_exhausted(
        self, id: str, fn: str, one_shot: bool, error: Exception, retry: RetryOptions
    ) -> None:
        if one_shot and is_platform_failure(error):
            probe(self.host, "schedule.one_shot_deferred_to_platform")
            raise error
        self._log(
            "error",
            f'error executing callback "{fn}" after {retry.max_attempts} attempts: '
            f"{type(error).__name__}: {error}",
        )
        self._emit(
            "schedule:error", callback=fn, id=id, error=str(error), attempts=retry.max_attempts
        )
        await self._call_on_error(error)

    # -- validation ------------------------------------------------------------------------------
    def _check_schedule_callback(self, callback: Any) -> None:
        if not isinstance(callback, str):
            raise InvalidArgument("Callback must be a string")
        if callback_method(self._agent, callback) is None:
            raise InvalidArgument(
                f'Unknown scheduled callback "{callback}": not registered on this Scheduler'
            )

    def _warn_schedule_in_on_start(self, when: Any, callback: str, idempotent: Any) -> None:
        if self._lc.status != "starting" or idempotent is not None or isinstance(when, str):
            return
        if callback in self._on_start_schedule_warned:
            return
        self._on_start_schedule_warned.add(callback)
        self._log(
            "warn",
            f'Scheduling "{callback}" during startup (e.g. onStart()) without '
            "{ idempotent: true } creates a new row on every Durable Object restart, which can "
            "cause duplicate executions. Pass { idempotent: true } to deduplicate, or use an "
            "interval schedule for recurring tasks.",
        )

    # -- storage ---------------------------------------------------------------------------------
    def _owned(self) -> list[tuple[Job, Mapping[str, Any]]]:
        return [(job, job.payload) for job in self._jobs.list() if is_envelope(job.payload)]

    def _to_schedule(self, id: str, fn: str, timing: Mapping[str, Any], time_s: int) -> Schedule:
        kind = timing["type"]
        return Schedule(
            callback=fn,
            id=id,
            payload=timing.get("payload"),
            retry=_retry_of(timing.get("retry")),
            time=time_s,
            type=kind,
            delay_in_seconds=(timing.get("delayInSeconds") or 0) if kind == "delayed" else None,
            cron=(timing.get("cron") or "") if kind == "cron" else None,
            interval_seconds=(timing.get("intervalSeconds") or 0) if kind == "interval" else None,
        )

    async def _insert_schedule(
        self,
        timing: ScheduleTiming,
        callback: str,
        payload: Any,
        *,
        retry: Mapping[str, Any] | None,
        idempotent: bool | None,
        recovery_loop: bool | None = None,
        owner_path: str | Sequence[Mapping[str, str]] | None,
        owner_path_key: str | None,
    ) -> tuple[Schedule, bool]:
        """Push the schedule's job, or return the job an idempotent request matches. A new job
        is a member of the breaker's recovery loop when `recovery_loop` is set. A hit that is
        not one while the call asks for it is pushed again under its id as it is, but with
        `recovery_loop = 1` and the class's hung timeout (a re-push, which also clears its
        dispatch marker); a hit re-arms the alarm either way (spec sdk-0.32 §3.2)."""
        payload_json = encode_payload(payload)
        dedupe = idempotent is not False if timing.recurring else bool(idempotent)
        if dedupe:
            found = self._find_matching_job(timing, callback, payload_json, owner_path_key)
            if found is not None:
                hit, hit_timing = found
                probe(self._ctx.host, "schedule.idempotent_dedupe")
                if recovery_loop and not hit.recovery_loop:
                    await self._jobs.push(
                        hit.fn,
                        hit.time,
                        id=hit.id,
                        payload=hit.payload,
                        retry=hit.retry,
                        singleflight=hit.singleflight,
                        exclusive=hit.exclusive,
                        hung_timeout_seconds=self._options.hung_schedule_timeout_seconds,
                        recovery_loop=True,
                    )
                await self._jobs.rearm()
                return self._to_schedule(hit.id, hit.fn, hit_timing, hit.time // 1000), False
        if owner_path is not None and not isinstance(owner_path, str):
            owner_path = json.dumps(list(owner_path), separators=(",", ":"))
        envelope: dict[str, Any] = {}
        if payload is not None:
            envelope["payload"] = payload
        if retry is not None:
            envelope["retry"] = retry_to_json(retry)
        envelope["type"] = timing.type
        if timing.type == "delayed":
            envelope["delayInSeconds"] = timing.delay_in_seconds
        if timing.type == "cron":
            envelope["cron"] = timing.cron
        if timing.type == "interval":
            envelope["intervalSeconds"] = timing.interval_seconds
        envelope["owner_path"] = owner_path
        envelope["owner_path_key"] = owner_path_key
        resolved = resolve_retry(retry, self._options.retry)
        job = await self._jobs.push(
            callback,
            timing.time * 1000,
            payload=envelope,
            retry={
                "maxAttempts": resolved.max_attempts,
                "baseDelayMs": resolved.base_delay_ms,
                "maxDelayMs": resolved.max_delay_ms,
            },
            singleflight=timing.type == "interval",
            hung_timeout_seconds=self._options.hung_schedule_timeout_seconds,
            recovery_loop=bool(recovery_loop),
        )
        schedule = Schedule.of(timing, callback=callback, id=job.id, payload=payload, retry=retry)
        return schedule, True

    def _find_matching_job(
        self,
        timing: ScheduleTiming,
        callback: str,
        payload_json: str | None,
        owner_path_key: str | None,
    ) -> tuple[Job, Mapping[str, Any]] | None:
        # Time and delay are still not compared (spec sdk-0.32 §3.2).
        for job, envelope in self._owned():
            if envelope["type"] != timing.type or job.fn != callback:
                continue
            if envelope.get("owner_path_key") != owner_path_key:
                continue
            if encode_payload(envelope.get("payload")) != payload_json:
                continue
            if timing.type == "cron" and envelope.get("cron") != timing.cron:
                continue
            if timing.type == "interval" and envelope.get("intervalSeconds") != (
                timing.interval_seconds
            ):
                continue
            return job, envelope
        return None

    def _owned_job(self, id: str, owner_path_key: str | None) -> Job | None:
        job = self._jobs.get(id)
        if job is None or not is_envelope(job.payload):
            return None
        if job.payload.get("owner_path_key") != owner_path_key:
            return None
        return job

    async def _cancel_schedule_for_owner(
        self, schedule_id: str, owner_path_key: str | None
    ) -> str | None:
        """Delete one owner's schedule; its callback, or None. The event follows the delete."""
        job = self._owned_job(schedule_id, owner_path_key)
        if job is None:
            return None
        await self._jobs.cancel(schedule_id)
        self._lc.emit_event("schedule:cancel", callback=job.fn, id=schedule_id)
        return job.fn

    async def get_schedule_by_id(self, id: str) -> Schedule | None:
        if self._ctx.is_facet:
            found = await self.list_schedules(id=id)
            return found[0] if found else None
        return self._own_schedule(id)

    def _own_schedule(self, id: str) -> Schedule | None:
        job = self._owned_job(id, None)
        if job is None:
            return None
        return self._to_schedule(job.id, job.fn, job.payload, job.time // 1000)

    def get_schedule(self, id: str) -> Schedule | None:
        if self._ctx.is_facet:
            raise AgentsError(
                "get_schedule() is synchronous and cannot read parent-owned sub-agent "
                f"schedules (asked for {id!r}). Use await self.get_schedule_by_id(id) instead."
            )
        return self._own_schedule(id)

    def _list_schedules_for_owner(
        self,
        owner_path_key: str | None,
        *,
        id: str | None = None,
        type: str | None = None,
        time_range: Mapping[str, datetime | None] | None = None,
    ) -> list[Schedule]:
        low, high = 0, TIME_RANGE_END_MAX_S
        if time_range is not None:
            unknown = sorted(set(time_range) - {"start", "end"})
            if unknown:
                raise InvalidArgument(
                    f"time_range takes the keys 'start' and 'end', got {unknown} in {time_range!r}"
                )
            start, end = time_range.get("start"), time_range.get("end")
            if start is not None:
                low = _epoch_seconds(start, "time_range['start']")
            if end is not None:
                high = _epoch_seconds(end, "time_range['end']")
        out = []
        for job, envelope in self._owned():
            if envelope.get("owner_path_key") != owner_path_key:
                continue
            if id and job.id != id:
                continue
            if type and envelope["type"] != type:
                continue
            seconds = job.time // 1000
            if not low <= seconds <= high:
                continue
            out.append(self._to_schedule(job.id, job.fn, envelope, seconds))
        return out

    async def cancel_for_facet(self, schedule_id: str, owner_key: str) -> str | None:
        job = self._owned_job(schedule_id, owner_key)
        if job is None:
            return None
        await self._jobs.cancel(schedule_id)
        return job.fn

    def drop_owned_under(self, under: Callable[[str | None], bool]) -> None:
        """On a root: delete every sub-agent schedule whose owner path `under` accepts, each
        followed by its `schedule:cancel` (the caller re-arms once its prune is done)."""
        queue = self._lc.queue
        for job, envelope in self._owned():
            owner_path = envelope.get("owner_path")
            if owner_path is not None and under(owner_path):
                queue.cancel(SCHEDULER_CAPABILITY, job.id)
                self._lc.emit_event("schedule:cancel", callback=job.fn, id=job.id)
