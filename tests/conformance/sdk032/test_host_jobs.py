"""keepAlive, housekeeping and destroy as host jobs on 0.32.0 (spec sdk-0.32 §3.4, §4; J-02,
J-16, J-51 … J-56)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agents_core import Agent
from agents_core.recovery import FiberRecoveryContext
from sim import Simulation
from sim.simulation import AgentRef
from tests.conformance.sub_agent_fixtures import ROOT_HEARTBEAT_MS, Child, Root

INTERVAL_MS = 30_000  # keep_alive_interval_ms by default


class Holder(Agent):
    """Takes and gives back keepAlive leases; its recovery hook always throws."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self._leases: list[Callable[[], None]] = []

    async def hold(self) -> None:
        self._leases.append(await self.keep_alive())

    async def release(self) -> None:
        self._leases.pop()()

    async def plant_orphan(self, id: str) -> None:
        self.sql(
            "INSERT INTO cf_agents_runs (id, name, snapshot, created_at) VALUES (?, ?, ?, ?)",
            id,
            "work",
            json.dumps(None),
            self.host.clock.now_ms(),
        )

    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> Any:
        raise RuntimeError("not yet")


def wake(sim: Simulation, cls: type[Agent] = Holder, name: str = "a") -> AgentRef:
    ref = sim.agent(cls, name)
    sim.run_for(10_000)
    return ref


def host_jobs(sim: Simulation, ref: AgentRef) -> dict[str, dict[str, Any]]:
    rows = sim.query(ref, "SELECT * FROM cf_agents_jobs WHERE capability = 'host'")
    return {r["id"]: r for r in rows}


def test_J002_a_lease_holds_the_keep_alive_job_and_its_alarm(sim: Simulation) -> None:
    ref = wake(sim)
    sim.call(ref, "hold")
    job = host_jobs(sim, ref)["cf:keep-alive"]
    assert (job["capability"], job["fn"], job["time"]) == ("host", "keepAlive", sim.now_ms + 30_000)
    assert sim.alarm_of(ref) == job["time"]
    sim.run_for(INTERVAL_MS + 1)
    # The heartbeat ran and was pushed again one interval on.
    assert host_jobs(sim, ref)["cf:keep-alive"]["time"] == sim.alarm_of(ref)
    assert sim.alarm_of(ref) == sim.now_ms - 1 + INTERVAL_MS


def test_J051_the_keep_alive_job_comes_and_goes_with_the_lease(sim: Simulation) -> None:
    ref = wake(sim)
    sim.call(ref, "hold")
    assert set(host_jobs(sim, ref)) == {"cf:keep-alive"}
    sim.call(ref, "release")
    sim.run_for(0)
    assert host_jobs(sim, ref) == {}
    assert sim.alarm_of(ref) is None


def test_J052_an_evicted_lease_leaves_a_heartbeat_that_clears_itself(sim: Simulation) -> None:
    ref = wake(sim)
    sim.call(ref, "hold")
    armed = sim.alarm_of(ref)
    sim.evict(ref)
    assert "cf:keep-alive" in host_jobs(sim, ref)
    assert sim.alarm_of(ref) == armed
    sim.run_for(INTERVAL_MS + 1)
    assert host_jobs(sim, ref) == {}
    assert sim.alarm_of(ref) is None


def test_J053_an_orphan_run_row_holds_the_housekeeping_job(sim: Simulation) -> None:
    ref = wake(sim)
    sim.call(ref, "plant_orphan", "orphan1")
    sim.call(ref, "hold")  # a sync of the host jobs
    job = host_jobs(sim, ref)["cf:housekeeping"]
    assert (job["fn"], job["time"]) == ("housekeeping", sim.now_ms + INTERVAL_MS)


def test_J016_startup_re_derives_the_housekeeping_job(sim: Simulation) -> None:
    """A cold start's recovery scan makes no progress (the hook throws): the sync at the end of
    startup pushes `cf:housekeeping` with the backed-off wake, `interval × 2`."""
    ref = wake(sim)
    sim.call(ref, "plant_orphan", "orphan1")
    sim.call(ref, "hold")
    held_over = host_jobs(sim, ref)["cf:housekeeping"]["time"]
    sim.evict(ref)
    sim.run_for(5_000)
    now = sim.now_ms
    sim.fetch(ref)
    job = host_jobs(sim, ref)["cf:housekeeping"]
    assert job["time"] == now + 2 * INTERVAL_MS != held_over
    assert "cf:keep-alive" not in host_jobs(sim, ref)  # no lease in this incarnation
    assert sim.alarm_of(ref) == job["time"]


def test_J054_a_deferred_destroy_is_an_exclusive_job(sim: Simulation) -> None:
    ref = wake(sim)
    sim.call(ref, "hold")
    now = sim.now_ms
    sim.call(ref, "destroy", deferred=True)
    job = host_jobs(sim, ref)["cf:destroy"]
    assert (job["fn"], job["time"], job["exclusive"]) == ("destroy", now, 1)
    # The exclusive job owns the alarm: armed for its time, not the heartbeat's.
    last_set = [r for r in sim.trace.select("alarm:set", agent=ref.path)][-1]
    assert last_set.get("at") == now
    sim.run_for(1_000)
    assert sim.alarm_of(ref) is None
    tables = sim.query(ref, "SELECT name FROM sqlite_master WHERE name = 'cf_agents_jobs'")
    assert tables == []  # destroyed: the storage is gone


def test_J055_a_facet_lease_is_held_in_the_root_queue(sim: Simulation) -> None:
    root = wake(sim, Root, "root")
    sim.call(root, "at", [(Child, "c")], "hold")
    child = sim.facet(root, Child, "c")
    job = host_jobs(sim, root)["cf:keep-alive"]
    assert job["time"] == sim.now_ms + ROOT_HEARTBEAT_MS
    assert host_jobs(sim, child) == {}


def test_J056_host_jobs_are_not_schedules(sim: Simulation) -> None:
    ref = wake(sim)
    sim.call(ref, "plant_orphan", "orphan1")
    sim.call(ref, "hold")
    assert set(host_jobs(sim, ref)) == {"cf:keep-alive", "cf:housekeeping"}
    assert sim.call(ref, "list_schedules") == []
