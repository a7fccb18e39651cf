"""`ScheduleWorkload`: an agent that keeps interval, cron and one-shot schedules, described in YAML.

Each `SchedulePlan` is one schedule of the agent: `every` seconds (`schedule_every`), a `cron`
expression, a one-shot `after` a delay (a `delayed` row) or `at` an absolute sim time (a
`scheduled` row). All of them call `workload_tick({"name": ...})`, which records the attempt
(`workload_attempts`, `workload:schedule_run {name, attempt}`), works `work_ms` (a sleep inside
the alarm handler), and fails its first `fail` attempts (`workload:schedule_failed`; the
runtime's retries and `attempts` decide what happens next) before it records the run done
(`workload:schedule_done`). The work runs inside `keep_alive_while` with `keep_alive`, and
inside `run_fiber(name)` with `fiber` (each run of the schedule is a new fiber of that name). A
recurring schedule with `runs: N` cancels itself once N runs are done, so a poller settles.

The schedules are set up once (`workload_schedules` remembers each one durably, so a restart
never adds a second one-shot), from `on_start` after an optional `warmup_ms` (startup awaits it,
as a slow configuration load would, holding the input gate) or by a `setup` call. `status`
answers over RPC or a GET request; `cancel(name)` cancels one schedule, `recreate(name)` cancels
it and creates it again, `listing(type, start, end)` lists the agent's schedules in a time range
(`list_schedules`) and writes the runtime's answer beside the spec model's (`workload:listed`,
held by `listings_match`). A plan may give the row's retry options (`attempts`, `backoff_ms`,
`max_backoff_ms`) and, for a one-shot or cron row, `idempotent` and `recovery_loop`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from agents_core import Agent, AgentReset, Request, Response
from scenarios.workloads.plans import one_of, unique_plans
from scenarios.workloads.sub_agents import (
    close_sub_agent,
    instance,
    open_sub_agent,
    sub_agents_problem,
    sub_class,
)
from sim.checkers.models.listings import listed_schedules
from sim.checkers.schedule_store import schedule_of_job

__all__ = [
    "FAIL_AS",
    "SCHEDULE_SETUPS",
    "SchedulePlan",
    "ScheduleWorkload",
    "WorkloadScheduleFailed",
    "schedule_workload",
]

SCHEDULE_SETUPS = ("on_start", "call")
FAIL_AS = ("error", "memory", "network")
MEMORY_LIMIT_RESET = "Durable Object's isolate exceeded its memory limit and was reset."
"""The platform's message for an isolate reset at its memory limit (spec fibers §4.3, §4.6)."""
NETWORK_LOST = "Network connection lost."
"""The platform's transient failure (spec fibers §4.3 (b); sdk-0.32 §2.4 step 6, J-29)."""
PLATFORM_MESSAGES = {"memory": MEMORY_LIMIT_RESET, "network": NETWORK_LOST}
_DDL = (
    "CREATE TABLE IF NOT EXISTS workload_schedules (name TEXT PRIMARY KEY, schedule_id TEXT "
    "NOT NULL, kind TEXT NOT NULL, created_at INTEGER NOT NULL, cancelled_at INTEGER)",
    "CREATE TABLE IF NOT EXISTS workload_attempts (name TEXT NOT NULL, attempt INTEGER NOT NULL, "
    "schedule_id TEXT, started_at INTEGER NOT NULL, inc INTEGER NOT NULL, outcome TEXT, "
    "ended_at INTEGER)",
)


class WorkloadScheduleFailed(RuntimeError):
    """A schedule attempt scripted to fail (`fail`)."""


@dataclass(frozen=True)
class SchedulePlan:
    """One schedule of the workload: exactly one of `every_s`, `cron`, `after_s`, `at_s`."""

    name: str
    every_s: int | None = None
    cron: str | None = None
    after_s: int | None = None
    at_s: int | None = None
    """An absolute sim time, in seconds since the simulation's epoch (a `scheduled` row)."""
    runs: int | None = None
    """A recurring schedule cancels itself after this many runs are done; None: never."""
    work_ms: int = 0
    fail: int = 0
    """The first `fail` attempts raise (counted across runs and restarts)."""
    fail_as: str = "error"
    """How a failing attempt raises: `error` (an ordinary exception), `memory` (the platform's
    memory-limit reset message, which the runtime hands to its alarm breaker) or `network` (the
    platform's transient "Network connection lost.", which defers the job to the platform)."""
    attempts: int | None = None
    """The row's retry `max_attempts`; None: the runtime's default."""
    backoff_ms: int | None = None
    """The row's retry `base_delay_ms`; None: the agent's (the runtime's default)."""
    max_backoff_ms: int | None = None
    """The row's retry `max_delay_ms`; None: the agent's."""
    idempotent: bool | None = None
    """`schedule(idempotent=...)` for a one-shot or cron row; None: True for a one-shot (a setup
    a crash cut short finds the row it wrote), the runtime's default for cron."""
    recovery_loop: bool = False
    """`schedule(recovery_loop=True)` for a one-shot or cron row: on 0.32.0 the job is one the
    memory-limit breaker backs off or purges with the executing one (spec sdk-0.32 §2.5, §3.2);
    0.21.0 ignores the option. Not for `every` (schedule_every takes no such option)."""
    keep_alive: bool = False
    fiber: bool = False

    @property
    def kind(self) -> str:
        """The row type the runtime writes: interval, cron, delayed or scheduled."""
        if self.every_s is not None:
            return "interval"
        if self.cron is not None:
            return "cron"
        return "delayed" if self.after_s is not None else "scheduled"

    @property
    def recurring(self) -> bool:
        return self.kind in ("interval", "cron")

    def retry(self) -> dict[str, int] | None:
        """The row's `retry` option, None when the plan sets none of it."""
        given = {
            "max_attempts": self.attempts,
            "base_delay_ms": self.backoff_ms,
            "max_delay_ms": self.max_backoff_ms,
        }
        retry = {key: value for key, value in given.items() if value is not None}
        return retry or None


class ScheduleWorkload(Agent):
    """Keeps `schedules` (class attribute, built from the scenario) and runs their callbacks."""

    schedules: ClassVar[tuple[SchedulePlan, ...]] = ()
    setup_on: ClassVar[str] = "on_start"
    warmup_ms: ClassVar[int] = 0
    """How long `on_start` awaits before it sets up (startup holds the input gate meanwhile)."""
    sub_agents: ClassVar[tuple[str, ...]] = ()
    """The names of the sub-agents `open(name)` may open: each keeps the same schedules (its
    rows live on the root, under its owner path); `w1/x` names a sub-agent `x` of `w1`, and
    `twin:w1` a sub-agent named `w1` of another class (`ScheduleTwin`), beside `w1`."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        # Here, not in on_start: a plain RPC on a stale stub starts an incarnation without it,
        # and fiber recovery runs before it.
        for statement in _DDL:
            self.sql(statement)

    # -- the surface a scenario calls -----------------------------------------------------------
    async def on_start(self) -> None:
        if self.warmup_ms > 0:
            await self.host.clock.sleep(int(self.warmup_ms))
            self.host.trace.emit("workload:warmed_up", ms=int(self.warmup_ms))
        if self.setup_on == "on_start":
            await self._setup()

    async def setup(self) -> list[str]:
        """Create every schedule not created yet; the names created."""
        return await self._setup()

    async def status(self) -> dict[str, dict[str, int]]:
        """For each schedule set up: its runs done and attempts made."""
        out: dict[str, dict[str, int]] = {}
        for row in self.sql("SELECT name FROM workload_schedules ORDER BY created_at, name"):
            name = row["name"]
            counts = self.sql(
                "SELECT COUNT(*) AS attempts, SUM(outcome = 'done') AS done "
                "FROM workload_attempts WHERE name = ?",
                name,
            )[0]
            out[name] = {"done": int(counts["done"] or 0), "attempts": int(counts["attempts"])}
        return out

    async def open(self, name: str) -> list[str]:
        """Open the sub-agent `name` (again, after a `close`) and set its schedules up; the
        names it created. `w1/x` is the sub-agent `x` of the sub-agent `w1`, opened by `w1`."""
        child = name.partition("/")[0]
        return await open_sub_agent(self, name, self._sub_class(child), lambda s: s.setup())

    async def close(self, name: str) -> bool:
        """Delete the sub-agent `name` (its storage, its own sub-agents, and its schedules on
        the root); whether its parent still had it. `w1/x` is closed by `w1`."""
        return await close_sub_agent(self, name, self._sub_class(name.partition("/")[0]))

    async def destroy_agent(self, name: str | None = None, deferred: bool = False) -> bool:
        """`destroy()`: the sub-agent `name` destroys itself (`w1/x` is reached through `w1`;
        its parent deletes it, and its rows on the root go), or with no name this agent does
        (`deferred`: the destroy marker, carried out by the next alarm). True once asked."""
        if name is None:
            self.host.trace.emit("workload:destroying", deferred=deferred)
            await self.destroy(deferred=deferred)
            return True
        child, _, below = name.partition("/")
        stub = await self.sub_agent(self._sub_class(child), instance(child))
        try:
            await stub.destroy_agent(below or None)
        except AgentReset:
            if below:
                raise
            # The sub-agent's own parent (this agent) deleted it while it was answering.
        return True

    @classmethod
    def _sub_class(cls, child: str) -> type[ScheduleWorkload]:
        """The class of this workload's sub-agent `child`: the same schedules, set up by its
        parent's `open`, with the sub-agents named below it (`child/x`) as its own."""
        overrides = {"setup_on": "call", "warmup_ms": 0}
        made: type[ScheduleWorkload] = sub_class(
            cls, child, ScheduleWorkload, TWIN_CLASS, overrides
        )
        return made

    async def cancel(self, name: str) -> bool:
        """Cancel the schedule `name`; False when it is gone already (ran out, or cancelled)."""
        self._plan_named(name)
        return await self._cancel(name, "call")

    async def on_request(self, request: Request) -> Response:
        if request.method == "GET":
            return Response(200, await self.status())
        return Response(405, f"method {request.method} not allowed; use GET")

    # -- setting up -----------------------------------------------------------------------------
    def _plan_named(self, name: str) -> SchedulePlan:
        plan = next((plan for plan in self.schedules if plan.name == name), None)
        if plan is None:
            names = [plan.name for plan in self.schedules]
            raise ValueError(f"no schedule named {name!r}; this workload's schedules: {names}")
        return plan

    async def _setup(self) -> list[str]:
        created = []
        for plan in self.schedules:
            if self.sql("SELECT 1 AS x FROM workload_schedules WHERE name = ?", plan.name):
                continue
            await self._set_up(plan)
            created.append(plan.name)
        return created

    async def _set_up(self, plan: SchedulePlan) -> None:
        schedule = await self._create(plan)
        self.sql(
            "INSERT INTO workload_schedules (name, schedule_id, kind, created_at) "
            "VALUES (?, ?, ?, ?)",
            plan.name,
            schedule.id,
            plan.kind,
            self.host.clock.now_ms(),
        )
        self.host.trace.emit(
            "workload:scheduled", name=plan.name, scheduleId=schedule.id, kind=plan.kind
        )

    async def recreate(self, name: str) -> bool:
        """Cancel the schedule `name` (if it is still there) and create it again, as a new row;
        whether there was one to cancel."""
        plan = self._plan_named(name)
        cancelled = await self._cancel(name, "recreate")
        self.sql("DELETE FROM workload_schedules WHERE name = ?", name)
        await self._set_up(plan)
        return cancelled

    async def every_again(self, name: str, seconds: int) -> bool:
        """`schedule_every(seconds)` once more with the interval schedule `name`'s callback and
        payload, as a user changing its period does before cancelling the old one: another
        interval is another dedupe key, so a row of its own, and the same interval answers the
        row there already. The record `workload:scheduled` says the interval asked for and the
        id answered (`schedule_dedupe_keys` holds the answer to it); the call returns whether
        that is another row than the one the workload recorded for `name` (an id itself would
        differ from run to run on the real side)."""
        plan = self._plan_named(name)
        if plan.every_s is None:
            raise ValueError(
                f"schedule {name!r} is a {plan.kind} schedule; every_again takes an interval one"
            )
        if not isinstance(seconds, int) or seconds < 1:
            raise ValueError(f"every_again takes whole seconds, at least 1; got {seconds!r}")
        schedule = await self.schedule_every(
            seconds, "workload_tick", {"name": name}, retry=plan.retry()
        )
        self.host.trace.emit(
            "workload:scheduled",
            name=name,
            scheduleId=schedule.id,
            kind="interval",
            every=seconds,
        )
        recorded = self.sql("SELECT schedule_id FROM workload_schedules WHERE name = ?", name)
        return not recorded or recorded[0]["schedule_id"] != schedule.id

    async def listing(
        self, type: str | None = None, start: int | None = None, end: int | None = None
    ) -> list[str]:
        """`list_schedules` with a type and a time range (sim ms, either end open): the ids
        listed, sorted. The record `workload:listed` holds them beside the spec model's answer
        over the agent's own rows, read by the workload around the call (`listings_match`
        compares them; a call whose rows changed while it ran writes no record)."""
        before = self._own_schedule_rows()
        filters: dict[str, Any] = {} if type is None else {"type": type}
        bounds = {"start": start, "end": end}
        time_range = {
            key: datetime.fromtimestamp(ms / 1000, UTC)
            for key, ms in bounds.items()
            if ms is not None
        }
        if time_range:
            filters["time_range"] = time_range
        got = sorted(schedule.id for schedule in await self.list_schedules(**filters))
        if self._own_schedule_rows() == before:
            self.host.trace.emit(
                "workload:listed",
                api="list_schedules",
                args={"type": type, "start": start, "end": end},
                got=got,
                expected=listed_schedules(before, type=type, start_ms=start, end_ms=end),
            )
        return got

    def _own_schedule_rows(self) -> list[dict[str, Any]]:
        """This agent's own schedules (no sub-agent's), id, type and time in seconds, read from
        storage as each release keeps them: the rows of `cf_agents_schedules`, or the
        `scheduler` jobs of `cf_agents_jobs` (their timing in the payload, time in ms)."""
        tables = {
            r["name"] for r in self.sql("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        rows: list[dict[str, Any]] = []
        if "cf_agents_schedules" in tables:
            rows += self.sql(
                "SELECT id, type, time FROM cf_agents_schedules WHERE owner_path_key IS NULL "
                "ORDER BY id"
            )
        if "cf_agents_jobs" in tables:
            for job in self.sql("SELECT * FROM cf_agents_jobs ORDER BY id"):
                row = schedule_of_job(job)
                if row is not None and row["owner_path_key"] is None:
                    rows.append({key: row[key] for key in ("id", "type", "time")})
        return rows

    async def _create(self, plan: SchedulePlan) -> Any:
        payload = {"name": plan.name}
        retry = plan.retry()
        if plan.idempotent is False:
            # Every other create of this workload is idempotent (an `every`, a cron by the
            # runtime's default, a one-shot by the workload's): `schedule_dedupe_keys` holds those.
            self.host.trace.emit("workload:duplicates_allowed", name=plan.name, kind=plan.kind)
        if plan.every_s is not None:
            return await self.schedule_every(plan.every_s, "workload_tick", payload, retry=retry)
        options: dict[str, Any] = {"retry": retry}
        if plan.recovery_loop:
            options["recovery_loop"] = True
        if plan.cron is not None:
            if plan.idempotent is None:
                return await self.schedule(plan.cron, "workload_tick", payload, **options)
            return await self.schedule(
                plan.cron, "workload_tick", payload, idempotent=plan.idempotent, **options
            )
        when: Any = plan.after_s
        if plan.at_s is not None:
            when = datetime.fromtimestamp(plan.at_s, UTC)
        # Idempotent by default: a setup a crash cut short and ran again finds the row it wrote.
        idempotent = True if plan.idempotent is None else plan.idempotent
        return await self.schedule(when, "workload_tick", payload, idempotent=idempotent, **options)

    async def _cancel(self, name: str, by: str, running: str | None = None) -> bool:
        """Cancel the schedule `name`; `running`: the id of the row whose callback runs now,
        cancelled even when setup never recorded it (a setup that failed between creating the
        row and writing it down, so that a recurring schedule still stops at its runs)."""
        rows = self.sql(
            "SELECT schedule_id FROM workload_schedules WHERE name = ? AND cancelled_at IS NULL",
            name,
        )
        recorded = self.sql("SELECT schedule_id FROM workload_schedules WHERE name = ?", name)
        # A row whose callback runs but that no record names: a setup or re-create failed
        # between creating it and writing it down (a recorded name may have been cancelled and
        # created again since). It is cancelled too, or it would run on for good.
        if running is not None and all(r["schedule_id"] != running for r in recorded):
            cancelled = await self.cancel_schedule(running)
            self.host.trace.emit("workload:schedule_cancelled", name=name, by=by, found=cancelled)
            if not rows:
                return cancelled
        if not rows:
            return False
        # The cancel first: one that fails (a storage error) must leave the name uncancelled, so
        # the next run tries again; marked first, the schedule would run on for good.
        cancelled = await self.cancel_schedule(rows[0]["schedule_id"])
        self.sql(
            "UPDATE workload_schedules SET cancelled_at = ? WHERE name = ?",
            self.host.clock.now_ms(),
            name,
        )
        self.host.trace.emit("workload:schedule_cancelled", name=name, by=by, found=cancelled)
        return cancelled

    # -- the callback ---------------------------------------------------------------------------
    async def workload_tick(self, payload: Any = None, row: Any = None) -> None:
        """Every schedule's callback: one attempt of the run of `payload["name"]`."""
        name = payload.get("name") if isinstance(payload, dict) else None
        plan = next((plan for plan in self.schedules if plan.name == name), None)
        if plan is None or name is None:
            return
        attempt = (
            self.sql("SELECT COUNT(*) AS n FROM workload_attempts WHERE name = ?", name)[0]["n"] + 1
        )
        schedule_id = row.get("id") if isinstance(row, dict) else None
        self.sql(
            "INSERT INTO workload_attempts (name, attempt, schedule_id, started_at, inc) "
            "VALUES (?, ?, ?, ?, ?)",
            name,
            attempt,
            schedule_id,
            self.host.clock.now_ms(),
            self.host.incarnation_number,
        )
        self.host.trace.emit("workload:schedule_run", name=name, attempt=attempt)

        async def work() -> None:
            if plan.work_ms > 0:
                await self.host.clock.sleep(int(plan.work_ms))
            if attempt <= plan.fail:
                self._attempt_ended(name, attempt, "failed")
                if plan.fail_as in PLATFORM_MESSAGES:
                    self.host.trace.emit(
                        "workload:schedule_failed", name=name, attempt=attempt, fail_as=plan.fail_as
                    )
                    raise WorkloadScheduleFailed(PLATFORM_MESSAGES[plan.fail_as])
                self.host.trace.emit("workload:schedule_failed", name=name, attempt=attempt)
                raise WorkloadScheduleFailed(
                    f"schedule {name} failed its attempt {attempt} (fail: {plan.fail})"
                )
            self._attempt_ended(name, attempt, "done")
            self.host.trace.emit("workload:schedule_done", name=name, attempt=attempt)

        async def in_fiber() -> None:
            if plan.fiber:
                await self.run_fiber(name, lambda _ctx: work())
            else:
                await work()

        if plan.keep_alive:
            await self.keep_alive_while(in_fiber)
        else:
            await in_fiber()
        if plan.recurring and plan.runs is not None:
            done = self.sql(
                "SELECT COUNT(*) AS n FROM workload_attempts WHERE name = ? AND outcome = 'done'",
                name,
            )[0]["n"]
            if done >= plan.runs:
                await self._cancel(name, "runs", schedule_id)

    def _attempt_ended(self, name: str, attempt: int, outcome: str) -> None:
        self.sql(
            "UPDATE workload_attempts SET outcome = ?, ended_at = ? WHERE name = ? AND attempt = ?",
            outcome,
            self.host.clock.now_ms(),
            name,
            attempt,
        )

    async def on_fiber_recovered(self, ctx: Any) -> Any:
        if not any(plan.name == ctx.name for plan in self.schedules):
            return await super().on_fiber_recovered(ctx)
        # The schedule itself runs the work again (a one-shot row is kept until its callback
        # returns; a recurring one comes round), so the interrupted fiber is let go.
        self.host.trace.emit("workload:schedule_fiber_dropped", name=ctx.name, fiberId=ctx.id)
        return None


TWIN_CLASS = "ScheduleTwin"
"""The class of a `twin:` sub-agent of a schedules workload."""


def schedule_workload(
    schedules: Sequence[SchedulePlan],
    *,
    setup: str = "on_start",
    warmup_ms: int = 0,
    sub_agents: Sequence[str] = (),
) -> type[ScheduleWorkload]:
    """A `ScheduleWorkload` subclass (same name, so trace paths read `ScheduleWorkload/<alias>`)
    keeping `schedules`, set up `on_start` (after `warmup_ms`) or by a `setup` call."""
    plans = unique_plans(
        schedules, SchedulePlan, "schedule_workload", lambda p: p.name, "schedule names"
    )
    for plan in plans:
        timings = [plan.every_s, plan.cron, plan.after_s, plan.at_s]
        if sum(value is not None for value in timings) != 1:
            raise ValueError(f"schedule {plan.name}: give exactly one of every, cron, after, at")
        if plan.runs is not None and not plan.recurring:
            raise ValueError(f"schedule {plan.name}: runs is for every or cron schedules")
        if plan.idempotent is not None and plan.every_s is not None:
            raise ValueError(f"schedule {plan.name}: an every schedule is always idempotent")
        if plan.recovery_loop and plan.every_s is not None:
            raise ValueError(
                f"schedule {plan.name}: recovery_loop is an option of schedule(), which an "
                "every schedule does not use"
            )
        one_of(f"schedule {plan.name}: fail_as", plan.fail_as, FAIL_AS)
    one_of("setup", setup, SCHEDULE_SETUPS)
    if warmup_ms < 0:
        raise ValueError(f"warmup_ms must be >= 0, got {warmup_ms}")
    problem = sub_agents_problem(sub_agents)
    if problem is not None:
        raise ValueError(problem)
    attributes = {
        "schedules": plans,
        "setup_on": setup,
        "warmup_ms": warmup_ms,
        "sub_agents": tuple(sub_agents),
        "__module__": ScheduleWorkload.__module__,
        "__qualname__": ScheduleWorkload.__qualname__,
        "__doc__": ScheduleWorkload.__doc__,
    }
    return type(ScheduleWorkload.__name__, (ScheduleWorkload,), attributes)
