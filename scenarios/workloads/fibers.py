"""`FiberWorkload`: an agent that runs fibers of N sleeping steps, described in YAML.

Each fiber (`FiberPlan`) runs `steps` steps; a step sleeps `step_ms`, records itself in
`workload_steps`, and (with `stash`) stashes `{"fiber": name, "step": k}` and emits
`workload:stashed {fiberId, step}` — the convention `no_lost_stash` checks. A fiber with
`fail_at: k` raises at step k instead (`workload:fiber_failed`); one that finishes emits
`workload:fiber_done {name}`. `managed` fibers go through `start_fiber` (the ledger, with an
optional idempotency key), the others through `run_fiber`.

Fibers start from `on_start` (`start_on = "on_start"`) or when the `start` method is called.
Each fiber starts once: `workload_fibers` remembers it durably, with its status (`running`,
`done`, `failed`, `dropped`) and how many times it was resumed.

The recovery hook does what `recovery` says with a fiber an eviction interrupted (a fiber's
own `recovery` overrides the workload's): `resume` emits
`workload:resumed {fiberId: the recovered fiber's id, step: the stashed step or None}` and starts
a continuation fiber (a new id, no idempotency key: the key stays with the interrupted original)
at the next step; `drop` lets it go (`workload:dropped`); `throw`
raises, so the row stays a poison row that recovery retries until it ages out.

Managed fibers can be cancelled: `cancel(name)` (or, with `deadline_ms`, a one-shot schedule
the workload sets when the fiber starts) marks the fiber cancelled in `workload_fiber_ids` and
calls `cancel_fiber` on its current execution. The fiber cooperates: each step's sleep is raced
against its abort signal, and a fiber whose signal fired stops there and returns
(`workload:fiber_cancelled {name, step}`, status `cancelled`). A fiber marked cancelled is never
resumed by recovery, and a continuation that starts after the mark stops at once.

The rest of the ledger's surface is a call each: `start_again(name)` starts a managed fiber once
more with its key (a duplicate start), `start_waiting(name)` does so waiting for completion
(`workload:waited`, held by `waited_status_settled`), `connect_mcp(name)` and
`disconnect_mcp(name)` add and remove an MCP server (`workload:mcp_added`, `workload:mcp_removed`;
a recovery hook that finds servers connected writes `workload:hook_saw_mcp`, held by
`mcp_servers_durable`), `resolve(name, status)` settles its
interrupted execution by hand (`resolve_fiber`), `forget(status, settled_before, limit)`
deletes terminal rows (`delete_fibers`) and `listing(status, name, limit)` lists the ledger
(`list_fibers`), each writing the runtime's answer beside the spec model's (`workload:deleted`,
`workload:listed`, held by `listings_match`). `hold(ms, depth, fail, twice)` takes keepAlive
by hand (`workload:held`), and `hold_in(name, ...)` has the sub-agent `name` do so, its leases
kept on the root under its path. A plan's
`stash_bytes` pads every stash, so stashes come in several sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from agents_core import Agent
from scenarios.workloads.plans import one_of, unique_plans
from scenarios.workloads.sub_agents import (
    close_sub_agent,
    instance,
    open_sub_agent,
    sub_agents_problem,
    sub_class,
)
from sim.checkers.models.listings import deleted_fibers, listed_fibers, start_answer

__all__ = [
    "FIBER_RECOVERIES",
    "FIBER_STARTS",
    "FiberPlan",
    "FiberWorkload",
    "WorkloadRecoveryRefused",
    "WorkloadStepFailed",
    "fiber_workload",
]

FIBER_STARTS = ("on_start", "call")
TWIN_CLASS = "FiberTwin"
"""The class of a `twin:` sub-agent of a fibers workload."""
FIBER_RECOVERIES = ("resume", "drop", "throw")
_MANAGED_DDL = (
    "CREATE TABLE IF NOT EXISTS workload_fiber_ids (name TEXT PRIMARY KEY, fiber_id TEXT, "
    "cancelled_at INTEGER)"
)
_DDL = (
    "CREATE TABLE IF NOT EXISTS workload_fibers (name TEXT PRIMARY KEY, status TEXT NOT NULL, "
    "started_at INTEGER NOT NULL, ended_at INTEGER, resumes INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS workload_steps (fiber TEXT NOT NULL, step INTEGER NOT NULL, "
    "fiber_id TEXT NOT NULL, at_ms INTEGER NOT NULL)",
)


class WorkloadStepFailed(RuntimeError):
    """A fiber step scripted to fail (`fail_at`)."""


class WorkloadRecoveryRefused(RuntimeError):
    """The recovery hook of a workload with `recovery: throw`."""


@dataclass(frozen=True)
class FiberPlan:
    """One fiber of the workload."""

    name: str
    steps: int
    step_ms: int = 30_000
    stash: bool = True
    fail_at: int | None = None
    """The step (1-based) that raises instead of completing; None: no step fails."""
    managed: bool = False
    idempotency_key: str | None = None
    """For a managed fiber: `start_fiber`'s idempotency key."""
    deadline_ms: int | None = None
    """For a managed fiber: cancel it this long after it starts (a durable one-shot schedule)."""
    recovery: str | None = None
    """What recovery does with this fiber; None: the workload's `recovery`."""
    stash_bytes: int = 0
    """Pad each stash with this many bytes (`pad`), for stashes of several sizes."""


def _stashed_step(snapshot: Any) -> int | None:
    step = snapshot.get("step") if isinstance(snapshot, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


class WorkloadHoldFailed(RuntimeError):
    """The work a `hold` call does under its leases, scripted to fail."""


class FiberWorkload(Agent):
    """Runs `fibers` (class attribute, built from the scenario) and recovers them."""

    fibers: ClassVar[tuple[FiberPlan, ...]] = ()
    start_on: ClassVar[str] = "on_start"
    recovery: ClassVar[str] = "resume"
    sub_agents: ClassVar[tuple[str, ...]] = ()
    """The names of the sub-agents `open(name)` may open: each runs the same fibers, started by
    the `open` (`scenarios.workloads.sub_agents`: `w1/x`, `twin:w1`)."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        # Here and not in on_start: recovery runs before on_start, and a plain RPC on a stale
        # stub starts an incarnation without on_start at all.
        for statement in _DDL:
            self.sql(statement)
        if any(plan.managed for plan in self.fibers):
            self.sql(_MANAGED_DDL)

    # -- the surface a scenario calls -----------------------------------------------------------
    async def on_start(self) -> None:
        if self.start_on == "on_start":
            self._start_unstarted(None)

    async def start(self, name: str | None = None) -> list[str]:
        """Start every fiber (or the one named) that never started; the names started."""
        return self._start_unstarted(name)

    async def status(self) -> dict[str, str]:
        """Each started fiber's status: running, done, failed, dropped or cancelled."""
        rows = self.sql("SELECT name, status FROM workload_fibers ORDER BY started_at, name")
        return {row["name"]: row["status"] for row in rows}

    async def cancel(self, name: str, reason: str = "cancelled by the scenario") -> bool:
        """Cancel the managed fiber `name`: True when its current execution was cancelled."""
        return self._cancel(self._managed(name), reason)

    async def start_again(self, name: str) -> str:
        """Start the managed fiber `name` once more through `start_fiber`, with its idempotency
        key (a duplicate start, which the ledger answers with the execution it has), whatever the
        workload remembers; the status `start_fiber` answered."""
        plan = self._managed(name)
        result = await self.start_fiber(
            plan.name,
            lambda ctx: self._steps(plan, ctx, 1),
            idempotency_key=plan.idempotency_key,
        )
        return str(getattr(result, "status", result))

    async def start_waiting(self, name: str) -> str:
        """`start_fiber` of the managed fiber `name` with its idempotency key and
        `wait_for_completion`: a new execution when its key is free (or it has none), else the
        one the ledger has; waits until it settles and returns the status answered. The record
        `workload:waited {name, fiberId, accepted, status}` holds the answer, which
        `waited_status_settled` compares with the ledger."""
        plan = self._managed(name)
        result = await self.start_fiber(
            plan.name,
            lambda ctx: self._steps(plan, ctx, 1),
            idempotency_key=plan.idempotency_key,
            wait_for_completion=True,
        )
        self.host.trace.emit(
            "workload:waited",
            name=name,
            fiberId=result.fiber_id,
            accepted=result.accepted,
            status=result.status,
        )
        return str(result.status)

    async def hold(self, ms: int, depth: int = 1, fail: bool = False, twice: bool = False) -> int:
        """keepAlive by hand: take `depth` leases one inside another (`keep_alive`, outermost
        first), work `ms` inside `keep_alive_while` (its own lease), and give the leases back
        innermost first, each disposer called twice when `twice` (a disposer is idempotent).
        With `fail` the work raises, and every lease is given back all the same. Records
        `workload:held {depth, ms, failed}` once the leases are back; returns `depth`."""
        disposers = [await self.keep_alive() for _ in range(depth)]
        failed = False
        try:
            await self.keep_alive_while(lambda: self._held_work(ms, fail))
        except WorkloadHoldFailed:
            failed = True
        finally:
            for dispose in reversed(disposers):
                for _ in range(2 if twice else 1):
                    dispose()
        self.host.trace.emit("workload:held", depth=depth, ms=ms, failed=failed)
        return depth

    async def hold_in(
        self, name: str, ms: int, depth: int = 1, fail: bool = False, twice: bool = False
    ) -> int:
        """`hold` in the sub-agent `name` (`w1/x` through `w1`, `twin:w1` of the twin class):
        its leases are facet leases, kept on the root under its path. Returns `depth`."""
        child, _, below = name.partition("/")
        stub = await self.sub_agent(self._sub_class(child), instance(child))
        if below:
            held: int = await stub.hold_in(below, ms, depth, fail, twice)
        else:
            held = await stub.hold(ms, depth, fail, twice)
        return held

    async def _held_work(self, ms: int, fail: bool) -> None:
        await self.host.clock.sleep(ms)
        if fail:
            raise WorkloadHoldFailed(f"the work held for {ms} ms failed")

    async def open(self, name: str) -> list[str]:
        """Open the sub-agent `name` (again, after a `close`) and start its fibers; the names it
        started. `w1/x` is the sub-agent `x` of the sub-agent `w1`, opened by `w1`."""
        child = name.partition("/")[0]
        return await open_sub_agent(self, name, self._sub_class(child), lambda s: s.start())

    async def close(self, name: str) -> bool:
        """Delete the sub-agent `name` (its storage, its fibers, its own sub-agents); whether its
        parent still had it. `w1/x` is closed by `w1`."""
        return await close_sub_agent(self, name, self._sub_class(name.partition("/")[0]))

    @classmethod
    def _sub_class(cls, child: str) -> type[FiberWorkload]:
        """The class of this workload's sub-agent `child`: the same fibers, started by its
        parent's `open`, with the sub-agents named below it (`child/x`) as its own."""
        made: type[FiberWorkload] = sub_class(
            cls, child, FiberWorkload, TWIN_CLASS, {"start_on": "call"}
        )
        return made

    async def connect_mcp(self, name: str) -> str:
        """`add_mcp_server`: register and connect an MCP server named `name` (durably); its id.
        `workload:mcp_added {name, id}` says so (`mcp_servers_durable` holds what follows)."""
        server_id = self.add_mcp_server(name, f"https://mcp.example/{name}")
        self.host.trace.emit("workload:mcp_added", name=name, id=server_id)
        return server_id

    async def disconnect_mcp(self, name: str) -> bool:
        """`remove_mcp_server` of every connected server named `name`; whether there was one.
        `workload:mcp_removed {name, ids}` names the servers removed."""
        ids = sorted(str(sid) for sid, c in self.mcp_connections.items() if c.get("name") == name)
        for server_id in ids:
            self.remove_mcp_server(server_id)
        self.host.trace.emit("workload:mcp_removed", name=name, ids=ids)
        return bool(ids)

    async def resolve(self, name: str, status: str = "completed") -> bool:
        """`resolve_fiber` on the managed fiber's current execution (only an `interrupted` one
        is settled); whether it was."""
        self._managed(name)
        rows = self.sql("SELECT fiber_id FROM workload_fiber_ids WHERE name = ?", name)
        fiber_id = rows[0]["fiber_id"] if rows else None
        if fiber_id is None:
            return False
        reason = {"error": "error", "status": status} if status == "error" else {"status": status}
        return self.resolve_fiber(fiber_id, reason)

    async def forget(
        self,
        status: str | list[str] | None = None,
        settled_before: int | None = None,
        limit: int | None = None,
    ) -> int:
        """`delete_fibers`: the ledger's terminal rows (of the statuses asked, settled before an
        instant in sim ms) go; how many. The record `workload:deleted` says what the spec's
        model allows beside what went (`listings_match` compares them)."""
        rows = self._ledger_rows()
        allowed = deleted_fibers(rows, status=status, settled_before_ms=settled_before, limit=limit)
        got = self.delete_fibers(status=status, settled_before=settled_before, limit=limit)
        left = {row["fiber_id"] for row in self._ledger_rows()}
        self.host.trace.emit(
            "workload:deleted",
            api="delete_fibers",
            args={"status": status, "settled_before": settled_before, "limit": limit},
            got=got,
            gone=sorted({row["fiber_id"] for row in rows} - left),
            count=allowed.count,
            required=sorted(allowed.required),
            allowed=sorted(allowed.allowed),
        )
        return got

    async def listing(
        self,
        status: str | list[str] | None = None,
        name: str | None = None,
        limit: int | None = None,
    ) -> list[str]:
        """`list_fibers`: the ids listed. The record `workload:listed` holds them beside the
        spec's model's answer over the same rows (`listings_match` compares them)."""
        expected = listed_fibers(self._ledger_rows(), status=status, name=name, limit=limit)
        got = [row.fiber_id for row in self.list_fibers(status=status, name=name, limit=limit)]
        self.host.trace.emit(
            "workload:listed",
            api="list_fibers",
            args={"status": status, "name": name, "limit": limit},
            got=got,
            expected=expected,
        )
        return got

    async def start_as(self, name: str, fiber_id: str) -> dict[str, Any]:
        """`start_fiber` of the managed fiber `name` under an explicit `fiber_id`, with its
        idempotency key: what it answered (`{"refused": True}` when it raised). The record
        `workload:listed` holds it beside the spec's answer over the ledger's rows."""
        plan = self._managed(name)
        expected = start_answer(self._ledger_rows(), fiber_id, plan.idempotency_key)
        try:
            result = await self.start_fiber(
                plan.name,
                lambda ctx: self._steps(plan, ctx, 1),
                fiber_id=fiber_id,
                idempotency_key=plan.idempotency_key,
            )
        except ValueError:
            got: dict[str, Any] = {"refused": True}
        else:
            got = {"id": result.fiber_id, "accepted": result.accepted}
        self.host.trace.emit(
            "workload:listed",
            api="start_fiber",
            args={"fiber_id": fiber_id, "idempotency_key": plan.idempotency_key},
            got=got,
            expected=expected,
        )
        return got

    def _ledger_rows(self) -> list[dict[str, Any]]:
        """The ledger's rows as the agent's storage holds them now (read by the workload, not
        through the runtime)."""
        return self.sql(
            "SELECT fiber_id, idempotency_key, name, status, created_at, completed_at "
            "FROM cf_agents_fibers"
        )

    def _managed(self, name: str) -> FiberPlan:
        plan = self._plan(name)
        if plan is None or not plan.managed:
            managed = [plan.name for plan in self.fibers if plan.managed]
            raise ValueError(f"no managed fiber named {name!r}; this workload's: {managed}")
        return plan

    async def workload_fiber_deadline(self, payload: Any = None, row: Any = None) -> None:
        """The one-shot a fiber with `deadline_ms` set when it started: cancel it now."""
        plan = self._plan(payload.get("name") if isinstance(payload, dict) else None)
        if plan is not None and plan.managed:
            self._cancel(plan, "deadline")

    # -- running --------------------------------------------------------------------------------
    def _plan(self, name: str | None) -> FiberPlan | None:
        return next((plan for plan in self.fibers if plan.name == name), None)

    def _start_unstarted(self, name: str | None) -> list[str]:
        if name is not None and self._plan(name) is None:
            names = [plan.name for plan in self.fibers]
            raise ValueError(f"no fiber named {name!r}; this workload's fibers: {names}")
        started = []
        for plan in self.fibers:
            if name is not None and plan.name != name:
                continue
            if self.sql("SELECT 1 AS x FROM workload_fibers WHERE name = ?", plan.name):
                continue
            self.sql(
                "INSERT INTO workload_fibers (name, status, started_at) VALUES (?, 'running', ?)",
                plan.name,
                self.host.clock.now_ms(),
            )
            self._launch(plan, 1)
            started.append(plan.name)
        return started

    def _cancel(self, plan: FiberPlan, reason: str) -> bool:
        """Mark the fiber cancelled and cancel its current execution, in one turn: a
        continuation that starts later sees the mark, one that started earlier is cancelled."""
        now = self.host.clock.now_ms()
        self.sql(
            "INSERT INTO workload_fiber_ids (name, cancelled_at) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET cancelled_at = COALESCE(cancelled_at, ?)",
            plan.name,
            now,
            now,
        )
        rows = self.sql("SELECT fiber_id FROM workload_fiber_ids WHERE name = ?", plan.name)
        fiber_id = rows[0]["fiber_id"] if rows else None
        cancelled = fiber_id is not None and self.cancel_fiber(fiber_id, reason)
        self.host.trace.emit(
            "workload:cancel", name=plan.name, fiberId=fiber_id, reason=reason, cancelled=cancelled
        )
        return cancelled

    def _cancelled(self, plan: FiberPlan) -> bool:
        rows = self.sql("SELECT cancelled_at FROM workload_fiber_ids WHERE name = ?", plan.name)
        return bool(rows) and rows[0]["cancelled_at"] is not None

    def _launch(self, plan: FiberPlan, first_step: int, *, continuation: bool = False) -> None:
        self.host.tasks.wait_until(self._run(plan, first_step, continuation))

    async def _run(self, plan: FiberPlan, first_step: int, continuation: bool) -> None:
        async def body(ctx: Any) -> None:
            await self._steps(plan, ctx, first_step)

        # The key stays with the original: a continuation under it would be deduplicated
        # into the interrupted ledger row and never run.
        key = None if continuation else plan.idempotency_key
        try:
            if plan.managed and plan.deadline_ms is not None and not continuation:
                # In the same turn as the ledger row below: the deadline exists iff the fiber does.
                await self.schedule(
                    -(-plan.deadline_ms // 1000),
                    "workload_fiber_deadline",
                    {"name": plan.name},
                    idempotent=True,
                )
            if plan.managed:
                started = await self.start_fiber(plan.name, body, idempotency_key=key)
                # The execution is known from the answer, before its body runs (if ever: a
                # start whose execution cannot begin leaves its row pending, cancellable).
                self._current_execution(plan, started.fiber_id)
            else:
                await self.run_fiber(plan.name, body)
        except WorkloadStepFailed:
            return  # scripted: already recorded by the step itself

    async def _steps(self, plan: FiberPlan, ctx: Any, first_step: int) -> None:
        aborted = None
        if plan.managed:
            # Which execution is current, and whether a cancel came before it started: one turn.
            self._current_execution(plan, ctx.id)
            if self._cancelled(plan):
                self._stop_cancelled(plan, first_step)
                return
            aborted = self.host.tasks.deferred()
            ctx.signal.add_listener(lambda _reason: aborted.resolve(None))
        for step in range(first_step, plan.steps + 1):
            sleep = self.host.clock.sleep(plan.step_ms)
            await (sleep if aborted is None else self.host.tasks.race(sleep, aborted))
            if ctx.signal.aborted:
                self._stop_cancelled(plan, step)
                return
            if plan.fail_at == step:
                self._ended(plan, "failed")
                error = f"fiber {plan.name} failed at step {step} (fail_at)"
                self.host.trace.emit("workload:fiber_failed", name=plan.name, step=step)
                raise WorkloadStepFailed(error)
            self.sql(
                "INSERT INTO workload_steps (fiber, step, fiber_id, at_ms) VALUES (?, ?, ?, ?)",
                plan.name,
                step,
                ctx.id,
                self.host.clock.now_ms(),
            )
            if plan.stash:
                pad = {"pad": "x" * plan.stash_bytes} if plan.stash_bytes else {}
                ctx.stash({"fiber": plan.name, "step": step, **pad})
                self.host.trace.emit("workload:stashed", fiberId=ctx.id, step=step)
        self._ended(plan, "done")
        self.host.trace.emit("workload:fiber_done", name=plan.name)

    def _current_execution(self, plan: FiberPlan, fiber_id: str) -> None:
        self.sql(
            "INSERT INTO workload_fiber_ids (name, fiber_id) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET fiber_id = excluded.fiber_id",
            plan.name,
            fiber_id,
        )

    def _stop_cancelled(self, plan: FiberPlan, step: int) -> None:
        """The cooperative end of a cancelled fiber: it returns without doing step `step`."""
        self._ended(plan, "cancelled")
        self.host.trace.emit("workload:fiber_cancelled", name=plan.name, step=step)

    def _ended(self, plan: FiberPlan, status: str) -> None:
        self.sql(
            "UPDATE workload_fibers SET status = ?, ended_at = ? WHERE name = ?",
            status,
            self.host.clock.now_ms(),
            plan.name,
        )

    # -- recovery -------------------------------------------------------------------------------
    async def on_fiber_recovered(self, ctx: Any) -> Any:
        plan = self._plan(ctx.name)
        if plan is None:
            return await super().on_fiber_recovered(ctx)
        step = _stashed_step(ctx.snapshot)
        if self.mcp_connections:
            # What the hook can use: startup restores the MCP servers before recovery (F-65).
            servers = sorted({str(c.get("name")) for c in self.mcp_connections.values()})
            self.host.trace.emit("workload:hook_saw_mcp", fiberId=ctx.id, servers=servers)
        recovery = plan.recovery or self.recovery
        if recovery == "throw":
            raise WorkloadRecoveryRefused(
                f"fiber {ctx.name} ({ctx.id}) was not recovered: the workload's recovery is throw"
            )
        if recovery == "drop" or (plan.managed and self._cancelled(plan)):
            self._ended(plan, "cancelled" if plan.managed and self._cancelled(plan) else "dropped")
            self.host.trace.emit("workload:dropped", fiberId=ctx.id, step=step)
            return None
        self.host.trace.emit("workload:resumed", fiberId=ctx.id, step=step)
        self.sql("UPDATE workload_fibers SET resumes = resumes + 1 WHERE name = ?", plan.name)
        self._launch(plan, (step or 0) + 1, continuation=True)
        return None


def fiber_workload(
    fibers: Sequence[FiberPlan],
    *,
    start: str = "on_start",
    recovery: str = "resume",
    sub_agents: Sequence[str] = (),
) -> type[FiberWorkload]:
    """A `FiberWorkload` subclass (same name, so trace paths read `FiberWorkload/<alias>`)
    running `fibers`, started `on_start` or by a `call` to `start`, recovered per `recovery`,
    with the sub-agents `sub_agents` that `open` may open."""
    plans = unique_plans(fibers, FiberPlan, "fiber_workload", lambda p: p.name, "fiber names")
    one_of("start", start, FIBER_STARTS)
    one_of("recovery", recovery, FIBER_RECOVERIES)
    for plan in plans:
        if plan.recovery is not None and plan.recovery not in FIBER_RECOVERIES:
            raise ValueError(f"fiber {plan.name}: recovery must be one of {list(FIBER_RECOVERIES)}")
        if plan.deadline_ms is not None and not plan.managed:
            raise ValueError(f"fiber {plan.name}: only a managed fiber has a deadline")
    problem = sub_agents_problem(sub_agents)
    if problem is not None:
        raise ValueError(problem)
    attributes = {
        "fibers": plans,
        "start_on": start,
        "recovery": recovery,
        "sub_agents": tuple(sub_agents),
        "__module__": FiberWorkload.__module__,
        "__qualname__": FiberWorkload.__qualname__,
        "__doc__": FiberWorkload.__doc__,
    }
    return type(FiberWorkload.__name__, (FiberWorkload,), attributes)
