"""The Lifecycle that owns the alarm on 0.32.0: status and startup, the startup fallback, the
deadman and the order of one alarm (spec sdk-0.32 §1, J-01 … J-15)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents_core.recovery import FiberRecoveryContext
from agents_core.releases.v0_32.job_queue import JobQueue
from sim import Simulation
from sim.simulation import AgentRef
from tests.conformance.sdk032.job_agents import JobsAgent, payload


def wake(sim: Simulation, cls: type[JobsAgent] = JobsAgent, name: str = "a") -> AgentRef:
    ref = sim.agent(cls, name)
    sim.run_for(10_000)
    return ref


def notes(sim: Simulation, ref: AgentRef) -> list[str]:
    return [r["note"] for r in sim.query(ref, "SELECT note FROM notes ORDER BY rowid")]


def trace_of(sim: Simulation, ref: AgentRef, *names: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (r.event, dict(r.fields))
        for r in sim.trace.records
        if r.agent == ref.path and r.event in names
    ]


class Recovering(JobsAgent):
    """Notes each call of the recovery hook; the hook throws when KV `hook_throws` is set."""

    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> Any:
        self.note(f"recovered:{ctx.id}")
        if self.host.kv.get("hook_throws"):
            raise RuntimeError("hook failed")
        return None

    async def plant_orphan(self, id: str) -> None:
        """A run row no fiber of this incarnation owns (its isolate died)."""
        self.sql(
            "INSERT INTO cf_agents_runs (id, name, snapshot, created_at) VALUES (?, ?, ?, ?)",
            id,
            "work",
            json.dumps(None),
            self.host.clock.now_ms(),
        )

    async def tick(self, payload: Any, row: Any) -> None:
        self.note("schedule:tick")


class FailingStart(JobsAgent):
    """While KV `fail_start` is set, startup pushes a job, emits an event through the
    Lifecycle, then throws (`"plain"`: it only throws)."""

    async def on_start(self) -> None:
        await super().on_start()
        mode = self.host.kv.get("fail_start")
        if mode == "plain":
            raise RuntimeError("startup failed")
        if mode:
            now = self.host.clock.now_ms()
            await self._lifecycle.jobs_for("work").push("fn", now + 5_000, id="during")
            self._lifecycle.emit_event("test:buffered", n=1)
            raise RuntimeError("startup failed")


class SchedulesInStart(JobsAgent):
    async def on_start(self) -> None:
        await super().on_start()
        await self.schedule(60, "tick", idempotent=True)
        self.host.trace.emit("test:on_start_end")

    async def tick(self, payload: Any, row: Any) -> None:
        self.note("tick")


class ReEnters(JobsAgent):
    async def on_start(self) -> None:
        await super().on_start()
        await self._lifecycle.start()
        self.note("re-entered")


def test_J001_a_fresh_agent_arms_nothing_and_the_table_comes_with_the_first_statement(
    sim: Simulation,
) -> None:
    """A fresh agent's startup (its host-job sync is the first queue operation) leaves the
    queue empty and no alarm; the queue runs no statement before its first operation, and the
    first one it runs creates the table."""
    ref = wake(sim)
    assert sim.alarm_of(ref) is None
    assert sim.query(ref, "SELECT * FROM cf_agents_jobs") == []
    statements: list[str] = []

    def sql(query: str, *params: Any) -> list[dict[str, Any]]:
        statements.append(query)
        return []

    queue = JobQueue(sql, lambda size: "x" * size, lambda: 0)
    assert statements == []
    assert queue.get("work", "nothing") is None
    assert statements[0].startswith("CREATE TABLE IF NOT EXISTS cf_agents_jobs")
    assert "WITHOUT ROWID" in statements[0]
    assert len(statements) == 2


def test_J003_a_re_arm_asked_for_during_startup_lands_once_after_it(sim: Simulation) -> None:
    ref = sim.agent(SchedulesInStart, "a")
    sim.run_for(0)
    seen = trace_of(sim, ref, "startup:begin", "test:on_start_end", "alarm:set")
    assert [e for e, _ in seen] == ["startup:begin", "test:on_start_end", "alarm:set"]
    assert seen[-1][1]["at"] == sim.alarm_of(ref) == (sim.now_ms // 1000 + 60) * 1000


def test_J004_a_failed_startup_arms_the_fallback_and_drops_its_events(sim: Simulation) -> None:
    ref = wake(sim, FailingStart)
    sim.call(ref, "put_kv", "fail_start", True)
    sim.evict(ref)
    now = sim.now_ms
    with pytest.raises(RuntimeError, match="startup failed"):
        sim.fetch(ref)
    assert sim.alarm_of(ref) == now + 30_000
    assert trace_of(sim, ref, "test:buffered") == []


def test_J008_concurrent_entries_run_startup_once(sim: Simulation) -> None:
    ref = sim.agent(JobsAgent, "a")
    sim.run_for(0)
    sim.evict(ref)
    first, second = sim.start_fetch(ref), sim.start_fetch(ref)
    sim.wait(first)
    sim.wait(second)
    assert notes(sim, ref).count("start:work") == 2  # once per incarnation
    assert notes(sim, ref).count("on_start") == 2


def test_J009_startup_re_entered_from_on_start_returns_at_once(sim: Simulation) -> None:
    ref = wake(sim, ReEnters)
    assert notes(sim, ref) == ["start:work", "start:bare", "on_start", "re-entered"]


def test_J010_an_alarm_arms_the_startup_fallback_before_startup(sim: Simulation) -> None:
    ref = wake(sim, FailingStart)
    due = sim.now_ms + 1_000
    sim.call(ref, "push", "work", "fn", due, id="J")
    sim.call(ref, "put_kv", "fail_start", "plain")
    sim.evict(ref)
    sim.run_for(1_000)
    seen = trace_of(sim, ref, "alarm:fired", "alarm:set", "startup:begin", "startup:failed")
    assert [e for e, _ in seen[-4:]] == [
        "alarm:fired",
        "alarm:set",
        "startup:begin",
        "startup:failed",
    ]
    assert seen[-3][1]["at"] == sim.alarm_of(ref) == due + 30_000


def test_J011_the_deadman_is_armed_before_the_first_dispatch(sim: Simulation) -> None:
    ref = wake(sim)
    due = sim.now_ms + 1_000
    sim.call(ref, "push", "work", "fn", due, id="J")
    sim.run_for(1_000)
    seen = trace_of(sim, ref, "delivery:begin", "alarm:set", "test:on_job", "alarm:deleted")
    # After the alarm's delivery begins: the deadman, then the job's dispatch.
    tail = [e for e, _ in seen[-4:]]
    assert tail == ["delivery:begin", "alarm:set", "test:on_job", "alarm:deleted"]
    assert seen[-3][1]["at"] == due + 30_000
    sim.run_for(10)
    assert sim.alarm_of(ref) is None


def test_J012_an_alarm_without_due_jobs_arms_no_deadman(sim: Simulation) -> None:
    ref = wake(sim)
    sim.call(ref, "push", "work", "fn", sim.now_ms + 60_000, id="later")
    at = sim.now_ms + 1_000
    sim.call(ref, "set_alarm", at)
    sim.run_for(1_500)
    sets = [f["at"] for e, f in trace_of(sim, ref, "alarm:set")]
    assert at + 30_000 not in sets
    assert sim.alarm_of(ref) == at - 1_000 + 60_000


def test_J013_due_work_runs_before_on_alarm_and_housekeeping_after(sim: Simulation) -> None:
    ref = wake(sim, Recovering)
    sim.call(ref, "plant_orphan", "orphan1")
    sim.call(ref, "schedule", 5, "tick")
    sim.call(ref, "push", "work", "fn", (sim.now_ms // 1000 + 5) * 1000, id="J")
    sim.run_for(6_000)
    tail = notes(sim, ref)[-5:]
    assert tail == ["job:J", "done:J", "schedule:tick", "on_alarm", "recovered:orphan1"]


def test_J014_a_cold_alarm_wake_scans_twice(sim: Simulation) -> None:
    ref = wake(sim, Recovering)
    sim.call(ref, "put_kv", "hook_throws", True)
    sim.call(ref, "push", "work", "fn", sim.now_ms + 5_000, id="J")
    sim.call(ref, "plant_orphan", "orphan1")
    sim.evict(ref)
    sim.run_for(5_000)
    assert notes(sim, ref).count("recovered:orphan1") == 2


def test_J015_a_completed_alarm_leaves_the_queue_next_time(sim: Simulation) -> None:
    ref = wake(sim)
    now = sim.now_ms
    sim.call(ref, "push", "work", "fn", now + 1_000, id="one")
    sim.call(ref, "push", "work", "fn", now + 7_000, id="two", payload=payload(sleep_ms=100))
    sim.run_for(1_001)
    assert sim.alarm_of(ref) == now + 7_000
    sim.run_for(7_000)
    assert sim.alarm_of(ref) is None


class Called(Recovering):
    async def work(self) -> str:
        self.note("work")
        return "done"

    def sync_work(self) -> str:
        self.note("sync")
        return "done"


def test_J005_an_rpc_to_an_async_method_runs_startup_first(sim: Simulation) -> None:
    ref = wake(sim, Called)
    sim.call(ref, "plant_orphan", "orphan1")
    sim.evict(ref)
    before = len(notes(sim, ref))
    assert sim.call(ref, "work") == "done"
    assert notes(sim, ref)[before:] == [
        "start:work",
        "start:bare",
        "recovered:orphan1",
        "on_start",
        "work",
    ]
    (begin,) = [r for r in sim.trace.select("startup:begin", agent=ref.path) if r.inc == 2]
    assert begin.get("trigger") == "rpc"


def test_J006_an_rpc_to_a_synchronous_method_does_not_start(sim: Simulation) -> None:
    ref = wake(sim, Called)
    sim.evict(ref)
    before = len(notes(sim, ref))
    assert sim.call(ref, "sync_work") == "done"
    assert notes(sim, ref)[before:] == ["sync"]
    assert [r.inc for r in sim.trace.select("startup:begin", agent=ref.path)] == [1]


def test_J007_a_schedule_call_over_rpc_runs_startup_first(sim: Simulation) -> None:
    ref = wake(sim, Called)
    sim.evict(ref)
    before = len(notes(sim, ref))
    sim.call(ref, "list_schedules")
    assert notes(sim, ref)[before:] == ["start:work", "start:bare", "on_start"]


@pytest.mark.parametrize("call", [("get_queues", "k", 1), ("dequeue_all",)])
def test_a_queue_call_over_rpc_runs_startup_first(sim: Simulation, call: tuple[Any, ...]) -> None:
    """As the Scheduler's, the Queue's calls await the Lifecycle's startup (its `push`,
    `cancel`, `get` and `list` await `lifecycle.ready()`)."""
    ref = wake(sim, Called)
    sim.evict(ref)
    before = len(notes(sim, ref))
    sim.call(ref, *call)
    assert notes(sim, ref)[before:] == ["start:work", "start:bare", "on_start"]
