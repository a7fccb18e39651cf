"""Work a job's dispatch hands off stays in the memory-limit breaker's domain on 0.32.0 (spec
sdk-0.32 §2.5, `lifecycle.trackAlarmWork`): a memory-limit reset it settles with is a strike
against the job that handed it off, and a clean alarm's strike count is cleared only once no
handed-off work is outstanding (`agents_core/releases/v0_32/breaker.py`)."""

from __future__ import annotations

from typing import Any

import pytest

from sim import Simulation
from sim.simulation import AgentRef
from tests.conformance.sdk032.job_agents import JobsAgent

on_0_32 = pytest.mark.parametrize("sim", ["0.32.0"], indirect=True)

MEMORY_LIMIT = "Durable Object's isolate exceeded its memory limit and was reset."
STRIKES = "cf_agents:oom_alarm_strikes"


class HandOff:
    """A capability whose dispatch starts work in the background (it waits `ms` of clock and
    then raises `error`, or ends cleanly), hands it to `track_alarm_work`, records what that
    answered, and returns re-timing its job an hour on."""

    def __init__(self, agent: HandingAgent) -> None:
        self._agent = agent

    @property
    def id(self) -> str:
        return "handoff"

    async def on_start(self) -> None:
        return None

    async def on_job(self, job: Any, attempt: int) -> Any:
        agent = self._agent
        script = job.payload
        host = agent.host

        async def work() -> None:
            await host.clock.sleep(script["ms"])
            agent.note(f"work-ends:{job.id}")
            if script.get("error"):
                raise RuntimeError(script["error"])

        task = host.tasks.wait_until(work())
        agent.note(f"tracked:{agent._lifecycle.track_alarm_work(task)}")
        return {"rescheduleAt": host.clock.now_ms() + 3_600_000}

    @property
    def on_job_error(self) -> None:
        return None


class HandingAgent(JobsAgent):
    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self._lifecycle.use(HandOff(self))

    async def track_here(self) -> bool:
        """`track_alarm_work` outside any alarm."""

        async def nothing() -> None:
            return None

        return self._lifecycle.track_alarm_work(self.host.tasks.wait_until(nothing()))


def notes(sim: Simulation, ref: AgentRef) -> list[str]:
    return [r["note"] for r in sim.query(ref, "SELECT note FROM notes ORDER BY rowid")]


def wake(sim: Simulation) -> AgentRef:
    ref = sim.agent(HandingAgent, "a")
    sim.run_for(10_000)
    return ref


def hand_off(sim: Simulation, ref: AgentRef, **script: Any) -> int:
    at = sim.now_ms + 1_000
    sim.call(ref, "push", "handoff", "fn", at, id="H", payload=script)
    return at


@on_0_32
def test_a_memory_limit_reset_of_handed_off_work_is_a_strike_against_its_job(
    sim: Simulation,
) -> None:
    """The alarm ends cleanly; 2 s later the work it handed off hits a memory-limit reset: the
    strike is counted and emitted then, the job that handed it off is backed off from then,
    the recovery loop with it, and the isolate is reset."""
    ref = wake(sim)
    loop_at = sim.now_ms + 5_000
    sim.call(ref, "push", "work", "fn", loop_at, id="loop", recovery_loop=True)
    at = hand_off(sim, ref, ms=2_000, error=MEMORY_LIMIT)
    sim.run_for(4_000)
    struck_at = at + 2_000
    (event,) = sim.trace.select("alarm:memory_limit_reset", agent=ref.path)
    assert event.t_ms == struck_at
    assert (event.get("strikes"), event.get("sealed")) == (1, False)
    assert sim.call(ref, "get_kv", STRIKES) == 1
    times = {r["id"]: r["time"] for r in sim.query(ref, "SELECT id, time FROM cf_agents_jobs")}
    assert times == {"H": struck_at + 30_000, "loop": struck_at + 30_000}
    ends = sim.trace.select("incarnation:end", agent=ref.path)
    assert (ends[-1].t_ms, ends[-1].get("message")) == (
        struck_at,
        "Alarm memory-limit strike 1/3; resetting isolate (#1825)",
    )
    assert "tracked:True" in notes(sim, ref)


@on_0_32
def test_a_sealing_strike_of_handed_off_work_deletes_its_job(sim: Simulation) -> None:
    ref = wake(sim)
    sim.call(ref, "put_kv", STRIKES, 2)
    hand_off(sim, ref, ms=2_000, error=MEMORY_LIMIT)
    sim.run_for(4_000)
    (event,) = sim.trace.select("alarm:memory_limit_reset", agent=ref.path)
    assert (event.get("strikes"), event.get("sealed")) == (3, True)
    assert sim.query(ref, "SELECT id FROM cf_agents_jobs WHERE id = 'H'") == []
    assert sim.call(ref, "get_kv", STRIKES) is None


@on_0_32
def test_any_other_failure_of_handed_off_work_is_no_strike(sim: Simulation) -> None:
    ref = wake(sim)
    hand_off(sim, ref, ms=2_000, error="Network connection lost.")
    sim.run_for(4_000)
    assert sim.trace.select("alarm:memory_limit_reset", agent=ref.path) == []
    assert sim.call(ref, "get_kv", STRIKES) is None


@on_0_32
def test_the_count_is_cleared_when_the_last_handed_off_work_settles_cleanly(
    sim: Simulation,
) -> None:
    """A clean alarm with handed-off work still outstanding leaves the count; the work ending
    cleanly clears it."""
    ref = wake(sim)
    sim.call(ref, "put_kv", STRIKES, 2)
    at = hand_off(sim, ref, ms=5_000)
    sim.run_until(at + 4_000)
    assert sim.trace.select("alarm:done", agent=ref.path)[-1].t_ms == at
    assert sim.call(ref, "get_kv", STRIKES) == 2
    sim.run_until(at + 6_000)
    assert "work-ends:H" in notes(sim, ref)
    assert sim.call(ref, "get_kv", STRIKES) is None


@on_0_32
def test_outside_an_alarm_nothing_is_tracked(sim: Simulation) -> None:
    ref = wake(sim)
    assert sim.call(ref, "track_here") is False


@on_0_32
def test_one_reset_seen_by_two_hand_offs_is_one_strike_charged_to_both_jobs(
    sim: Simulation,
) -> None:
    """Two jobs' handed-off work hits the same memory-limit reset: one strike is counted and
    emitted, each job is backed off, and the isolate is reset once."""
    ref = wake(sim)
    at = sim.now_ms + 1_000
    for id in ("H1", "H2"):
        sim.call(
            ref, "push", "handoff", "fn", at, id=id, payload={"ms": 2_000, "error": MEMORY_LIMIT}
        )
    sim.run_for(4_000)
    struck_at = at + 2_000
    (event,) = sim.trace.select("alarm:memory_limit_reset", agent=ref.path)
    assert (event.t_ms, event.get("strikes")) == (struck_at, 1)
    assert sim.call(ref, "get_kv", STRIKES) == 1
    times = {r["id"]: r["time"] for r in sim.query(ref, "SELECT id, time FROM cf_agents_jobs")}
    assert times == {"H1": struck_at + 30_000, "H2": struck_at + 30_000}
    resets = [
        e for e in sim.trace.select("incarnation:end", agent=ref.path) if e.get("reason") == "reset"
    ]
    assert len(resets) == 1
