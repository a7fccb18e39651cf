"""0.32.0's `Lifecycle`: the alarm slot's owner, with the job queue behind it (spec sdk-0.32 §1).

It keeps 0.21.0's startup steps and adds what 0.32.0 changed around them:
- a status, `zero` → `starting` → `started` (a failed startup returns to `zero` and the next
  entry runs it again); capabilities installed with `use` run their `on_start` in install order
  before the agent's own startup;
- the alarm is derived from the job queue (`JobQueue.next_alarm_time`) after every queue
  mutation made through a scoped `Jobs` surface. A re-arm asked for while starting is held and
  done once, right after startup succeeds. Events emitted through the Lifecycle before `started`
  are buffered and published after it, or discarded when startup fails (a failed startup that
  asked for a re-arm arms the startup fallback instead);
- one alarm (§1.4): the startup fallback before startup (`alarm_arriving`), the due jobs (the
  deadman armed before the first), the user's `on_alarm`, then housekeeping and the host jobs'
  sync, all inside the memory-limit breaker; a clean alarm clears the strikes when quiescent;
  last the re-arm. A memory-limit reset in a job, `on_alarm` or housekeeping is the breaker's,
  which re-arms and then resets the isolate (`breaker.py`), and so is one of work a dispatch
  handed off (`track_alarm_work`); a strike's hooks are the capabilities' `on_memory_limit`,
  then the agent's `on_alarm_memory_limit`.

keepAlive, the recovery follow-up and the sub-agents' leases are host jobs (`host_jobs.py`),
re-derived at the end of startup, at the end of every alarm and whenever that state changes
(`host_work_changed`); the schedules are the Scheduler capability's jobs (`scheduler.py`).
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from agents_core.lifecycle import Lifecycle as Lifecycle021
from agents_core.lifecycle import LifecycleParts, StartupStep
from agents_core.releases.v0_32.breaker import MemoryLimitBreaker, MemoryLimitContext
from agents_core.releases.v0_32.job_driver import (
    AttributedPlatformFailure,
    Dispatch,
    JobDriver,
)
from agents_core.releases.v0_32.job_queue import HOST_JOB_CAPABILITY, Job, JobQueue
from agents_core.schedule_dispatch import is_memory_limit_reset

if TYPE_CHECKING:
    from agents_core.context import AgentContext

__all__ = ["STARTING_CALLS", "Capability", "HostJobSync", "Jobs", "Lifecycle"]

STARTING_CALLS = frozenset(
    {
        "schedule",
        "schedule_every",
        "cancel_schedule",
        "get_schedule_by_id",
        "list_schedules",
        "queue",
        "dequeue",
        "dequeue_all",
        "dequeue_all_by_callback",
        "get_queue",
        "get_queues",
    }
)
"""The Scheduler's and the Queue's calls, which await the Lifecycle's startup before they act
(§1.3; the Queue's `push`, `cancel`, `get` and `list` await `lifecycle.ready()`)."""


class Capability(Protocol):
    """A part of the agent installed on the Lifecycle: its id (the owner of its jobs), its
    part of startup, and its jobs' dispatch (`on_job_error` may be None). A capability may also
    have `async on_memory_limit(context: MemoryLimitContext)`, its policy for a memory-limit
    strike (the SDK's optional `onMemoryLimit`; `breaker.py`)."""

    @property
    def id(self) -> str: ...

    async def on_start(self) -> None: ...
    async def on_job(self, job: Job, attempt: int) -> Any: ...

    @property
    def on_job_error(self) -> Callable[[Job, int, BaseException], Awaitable[Any]] | None: ...


class _MemoryLimitHost(Protocol):
    async def on_alarm_memory_limit(self, context: MemoryLimitContext) -> None: ...


class HostJobSync(Protocol):
    """The agent's host jobs as the Lifecycle runs them (`v0_32/host_jobs.py`)."""

    async def sync(self) -> None: ...
    async def on_job(self, job: Job, attempt: int) -> Any: ...


class Jobs:
    """One owner's scoped queue: every mutation is followed by a re-arm (`get`, `list` not)."""

    __slots__ = ("_lifecycle", "_owner")

    def __init__(self, lifecycle: Lifecycle, owner: str) -> None:
        self._lifecycle = lifecycle
        self._owner = owner

    async def push(self, fn: str, time: Any, **options: Any) -> Job:
        job = self._lifecycle.queue.push(self._owner, fn, time, **options)
        await self._lifecycle.rearm()
        return job

    async def cancel(self, id: str) -> bool:
        cancelled = self._lifecycle.queue.cancel(self._owner, id)
        await self._lifecycle.rearm()
        return cancelled

    async def reschedule(self, id: str, time: Any) -> bool:
        moved = self._lifecycle.queue.reschedule(self._owner, id, time)
        await self._lifecycle.rearm()
        return moved

    def get(self, id: str) -> Job | None:
        return self._lifecycle.queue.get(self._owner, id)

    def list(self) -> list[Job]:
        return self._lifecycle.queue.list(self._owner)

    async def rearm(self) -> None:
        await self._lifecycle.rearm()

    def routed_under(self, prefix: str) -> builtins.list[Job]:
        """This owner's jobs routed from the sub-agent whose key is `prefix` or from one below
        it: a payload naming an `owner_path`, whose `owner_path_key` (else that path) is
        `prefix` or starts with `prefix + "/"` (the SDK's `cleanupRoutePrefix` match)."""
        out = []
        for job in self.list():
            payload = job.payload
            if not isinstance(payload, Mapping) or not payload.get("owner_path"):
                continue
            key = payload.get("owner_path_key")
            if key is None:
                key = payload["owner_path"]
            if key == prefix or str(key).startswith(f"{prefix}/"):
                out.append(job)
        return out

    def cancel_routed_under(self, prefix: str) -> None:
        """Cancel every job `routed_under(prefix)` (a pruned sub-tree's), without a re-arm: the
        prune that calls this re-arms once when it is done."""
        for job in self.routed_under(prefix):
            self._lifecycle.queue.cancel(self._owner, job.id)


class Lifecycle(Lifecycle021):
    """One agent's Lifecycle on 0.32.0 (one per incarnation)."""

    __slots__ = (
        "queue",
        "driver",
        "breaker",
        "status",
        "_capabilities",
        "_host_on_job",
        "_host_jobs",
        "_rearm_requested_during_start",
        "_pending_events",
        "_alarms_disabled",
        "_executing",
    )

    def __init__(self, ctx: AgentContext, parts: LifecycleParts, mcp: StartupStep) -> None:
        super().__init__(ctx, parts, mcp)
        self.queue = JobQueue(ctx.sql, ctx.host.entropy.nanoid, ctx.host.clock.now_ms)
        self.status = "zero"
        self._capabilities: list[Capability] = []
        self._host_on_job: Callable[[Job, int], Awaitable[Any]] | None = None
        self._host_jobs: HostJobSync | None = None
        self._rearm_requested_during_start = False
        self._pending_events: list[tuple[str, dict[str, Any]]] = []
        self._alarms_disabled = False
        self.breaker = MemoryLimitBreaker(
            ctx,
            self.queue,
            self.rearm,
            self.emit_event,
            self._memory_limit,
            self.alarms_disabled,
            parts._clear_alarm_memory_limit_strikes,
        )
        self.driver = JobDriver(
            ctx,
            self.queue,
            self._resolve_dispatch,
            self.alarms_disabled,
            self.emit_event,
            self.breaker.scope,
        )

    # -- capabilities and their jobs ------------------------------------------------------------
    def use(self, capability: Capability) -> None:
        """Install a capability (before startup, as the SDK requires)."""
        if self.status != "zero":
            raise RuntimeError("Lifecycle capabilities must be added before startup")
        self._capabilities.append(capability)

    def capability(self, id: str) -> Capability | None:
        """The installed capability of that id (a framework host reaches the agent's Tasks)."""
        for capability in self._capabilities:
            if capability.id == id:
                return capability
        return None

    def install_host_jobs(self, host_jobs: HostJobSync) -> None:
        """The agent's own jobs (owner `host`): their sync, and their dispatch (host jobs have
        no error hook)."""
        self._host_jobs = host_jobs
        self._host_on_job = host_jobs.on_job

    async def host_work_changed(self) -> None:
        """0.32.0 re-derives the host jobs (`_syncHostJobs`); each push or cancel re-arms."""
        if self._host_jobs is not None:
            await self._host_jobs.sync()
        await self.rearm()

    def jobs_for(self, owner: str) -> Jobs:
        return Jobs(self, owner)

    @property
    def jobs(self) -> Jobs:
        """The agent's own scoped queue (owner `host`)."""
        return Jobs(self, HOST_JOB_CAPABILITY)

    def _resolve_dispatch(self, owner: str) -> Dispatch | None:
        if owner == HOST_JOB_CAPABILITY:
            if self._host_on_job is None:
                return None
            return Dispatch(self._host_on_job)
        for capability in self._capabilities:
            if capability.id == owner:
                return Dispatch(capability.on_job, capability.on_job_error)
        return None

    def alarms_disabled(self) -> bool:
        return self._alarms_disabled

    # -- the memory-limit breaker's hooks and handed-off work ----------------------------------
    async def _memory_limit(self, context: MemoryLimitContext) -> None:
        """A strike's policy hooks: each capability's `on_memory_limit` in install order (one
        that fails is logged and the next still runs: the isolate resets either way), then the
        agent's `on_alarm_memory_limit` (its error goes back to the breaker, which drops it)."""
        for capability in self._capabilities:
            hook = getattr(capability, "on_memory_limit", None)
            if hook is None:
                continue
            try:
                await hook(context)
            except Exception as error:  # noqa: BLE001 - logged; the next capability runs
                self._ctx.log(
                    "error", f"Lifecycle capability memory-limit policy failed: {error!r}"
                )
        host = cast("_MemoryLimitHost", self._parts)
        await host.on_alarm_memory_limit(context)

    def track_alarm_work(self, work: Any) -> bool:
        """Keep work a dispatch handed off (a task or a deferred) in the memory-limit breaker's
        domain: a memory-limit reset it settles with is a strike against the job that handed it
        off (the SDK's `lifecycle.trackAlarmWork`). False when called outside an alarm's
        dispatch or hooks (nothing is tracked)."""
        return self.breaker.track_alarm_work(work)

    async def disable_alarms(self) -> None:
        """Destroy's teardown: no re-arm, fallback or deadman any more, and no alarm."""
        self._alarms_disabled = True
        self._ctx.host.alarm.delete_alarm()

    # -- events through the Lifecycle -----------------------------------------------------------
    def emit_event(self, event_type: str, **payload: Any) -> None:
        """A capability's (or the driver's) event: held while startup runs, published once it
        has succeeded, dropped when it fails. (An incarnation whose startup never ran, a plain
        RPC's to a synchronous method, publishes at once.)"""
        if self.status == "starting":
            self._pending_events.append((event_type, payload))
            return
        self._ctx.emit(event_type, **payload)

    # -- the alarm slot -------------------------------------------------------------------------
    async def rearm(self) -> None:
        if self._alarms_disabled:
            return
        if self.status == "starting":
            self._rearm_requested_during_start = True
            return
        await super().rearm()

    def _alarm_candidates(self, now: int) -> list[int]:
        queued = self.queue.next_alarm_time(now)
        if queued is not None and self.queue.has_exclusive():
            return [queued]
        legacy = super()._alarm_candidates(now)
        return legacy if queued is None else [queued, *legacy]

    def alarm_arriving(self) -> None:
        self.driver.arm_startup_fallback()

    async def alarm_startup_failed(self, error: BaseException) -> bool:
        """The alarm runs startup inside its memory-limit breaker (`runAlarm`, spec sdk-0.32
        §1.4, §2.5): a memory-limit reset during that startup is a strike charged to no job
        (the breaker backs the recovery loop off, re-arms and resets the isolate) and the alarm
        ends quietly; any other startup failure stays the alarm's."""
        if not is_memory_limit_reset(error):
            return False
        breaker = self.breaker
        breaker.alarms_in_flight += 1
        try:
            await breaker.handle(error, None)
        finally:
            breaker.alarms_in_flight -= 1
        return True

    def rpc_starts(self, method: str) -> bool:
        """An RPC runs startup first when it calls a user's `async` method (defined by the
        agent's own classes, not the runtime's; not a `_` name, not a property) or one of the
        schedule calls, which wait for startup (spec sdk-0.32 §1.3)."""
        if method.startswith("_"):
            return False
        if method in STARTING_CALLS:
            return True
        for cls in type(self._parts).__mro__:
            found = cls.__dict__.get(method)
            if found is None:
                continue
            if cls.__module__.split(".")[0] == "agents_core":
                return False
            return inspect.iscoroutinefunction(found)
        return False

    # -- startup --------------------------------------------------------------------------------
    async def start(self) -> None:
        """Startup (0.21.0's steps after the capabilities' `on_start`); a call from inside a
        running startup returns at once instead of waiting for itself."""
        if self.status != "zero":
            return
        self.status = "starting"
        try:
            for capability in self._capabilities:
                await capability.on_start()
            await super().start()
            if self._host_jobs is not None:
                await self._host_jobs.sync()
        except BaseException:
            self.status = "zero"
            requested = self._rearm_requested_during_start
            self._rearm_requested_during_start = False
            self._pending_events.clear()
            if requested:
                with contextlib.suppress(Exception):  # the startup error is what propagates
                    self.driver.arm_startup_fallback()
            raise
        self.status = "started"
        pending, self._pending_events = self._pending_events, []
        for event_type, payload in pending:
            self._ctx.emit(event_type, **payload)
        if self._rearm_requested_during_start:
            self._rearm_requested_during_start = False
            await self.rearm()

    # -- the alarm ------------------------------------------------------------------------------
    async def alarm(self) -> None:
        """One alarm invocation (the fallback was armed before startup: `alarm_arriving`)."""
        breaker = self.breaker
        breaker.alarms_in_flight += 1
        clean = False
        try:
            try:
                await self._run_alarm_body()
                clean = True
            except AttributedPlatformFailure as failure:
                if not is_memory_limit_reset(failure.cause):
                    raise failure.cause from None
                await breaker.handle(failure.cause, failure.row)
                return
            except Exception as exc:
                if not is_memory_limit_reset(exc):
                    raise
                # Not a job's (on_alarm, housekeeping): the same event, charged to no job
                # (LC:503-507 hands it to the breaker with no executing row).
                await breaker.handle(exc, None)
                return
        finally:
            breaker.alarms_in_flight -= 1
            if clean and not self._alarms_disabled:
                breaker.clear_when_quiescent()
        await self.rearm()

    async def _run_alarm_body(self) -> None:
        """0.32.0's order: the due jobs (the schedules among them), then the user's
        `on_alarm`, then housekeeping (the recovery scan, the sub-agents' scans) unless a
        callback destroyed the agent. A pending deferred destroy runs instead of all of it."""
        parts = self._parts
        if self._ctx.memo.destroy_pending():
            await parts.destroy()
            return
        await self.driver.drive_due_jobs()
        if parts._destroyed:
            return
        # The agent's own alarm hooks run in the alarm scope of no job (the SDK's host alarm).
        async with self.breaker.scope(None):
            await parts.on_alarm()
            if parts._destroyed:
                return
            await parts._check_run_fibers()
            await parts._check_facet_run_fibers()
            if parts._destroyed or self._host_jobs is None:
                return
            await self._host_jobs.sync()
