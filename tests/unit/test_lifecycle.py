"""Idle eviction (70–140 s without activity), what resets and what prevents it, and deploys."""

from __future__ import annotations

import pytest

from agents_core import Agent, Request
from sim import FaultProfile, Simulation
from sim.lifecycle import DAY_MS, IDLE_TIMEOUT_MAX_MS, IDLE_TIMEOUT_MIN_MS


class Quiet(Agent):
    async def ping(self) -> None:
        return None

    async def background(self, ms: int) -> None:
        async def work() -> None:
            await self.host.clock.sleep(ms)

        self.host.tasks.wait_until(work())

    async def heartbeat(self, every_ms: int) -> None:
        self.host.alarm.set_alarm(self.host.clock.now_ms() + every_ms)
        self.set_state({"every": every_ms})

    async def alarm(self) -> None:
        every = (self.state or {}).get("every")
        if every:
            self.host.alarm.set_alarm(self.host.clock.now_ms() + every)


def idle_ends(sim: Simulation, ref) -> list[int]:
    return [r.t_ms for r in sim.trace.select("incarnation:end", agent=ref.path, reason="idle")]


@pytest.mark.parametrize("seed", range(12))
def test_idle_eviction_comes_70_to_140_seconds_after_the_last_activity(seed: int) -> None:
    """With nothing going on, the incarnation dies between 70 and 140 s after its last event."""
    sim = Simulation(seed=seed)
    ref = sim.agent(Quiet, "q")
    sim.call(ref, "ping")
    last_activity = sim.now_ms
    sim.run_for(200_000)
    (ended,) = idle_ends(sim, ref)
    assert IDLE_TIMEOUT_MIN_MS <= ended - last_activity <= IDLE_TIMEOUT_MAX_MS


def test_idle_timeouts_vary_with_the_seed() -> None:
    """The timeout is drawn from the seed, not fixed."""
    timeouts = set()
    for seed in range(8):
        sim = Simulation(seed=seed)
        ref = sim.agent(Quiet, "q")
        sim.run_for(200_000)
        timeouts.add(idle_ends(sim, ref)[0])
    assert len(timeouts) > 1


def test_activity_resets_the_idle_timer(sim: Simulation) -> None:
    """A call every 60 s keeps the agent alive for ten minutes; after the last, it idles out."""
    ref = sim.agent(Quiet, "q")
    for _ in range(10):
        sim.call(ref, "ping")
        sim.run_for(60_000)
    assert idle_ends(sim, ref) == []
    sim.run_for(IDLE_TIMEOUT_MAX_MS)
    assert len(idle_ends(sim, ref)) == 1


def test_an_open_connection_prevents_idle_eviction(sim: Simulation) -> None:
    """While a client is connected the agent stays; after it leaves, the idle clock starts."""
    ref = sim.agent(Quiet, "q")
    client = sim.connect(ref)
    sim.run_for(30 * 60_000)
    assert idle_ends(sim, ref) == []
    client.disconnect()
    left_at = sim.now_ms
    sim.run_for(IDLE_TIMEOUT_MAX_MS + 1)
    (ended,) = idle_ends(sim, ref)
    assert IDLE_TIMEOUT_MIN_MS <= ended - left_at <= IDLE_TIMEOUT_MAX_MS


def test_background_work_does_not_keep_the_agent_alive(sim: Simulation) -> None:
    """wait_until work does not count as activity: the agent idles out under it."""
    ref = sim.agent(Quiet, "q")
    sim.call(ref, "background", 10 * 60_000)
    sim.run_for(10 * 60_000)
    assert len(idle_ends(sim, ref)) == 1


def test_an_alarm_every_30s_keeps_the_agent_warm(sim: Simulation) -> None:
    """Alarm activity resets the idle clock, which is how a heartbeat keeps an agent alive."""
    ref = sim.agent(Quiet, "q")
    sim.call(ref, "heartbeat", 30_000)
    sim.run_for(60 * 60_000)
    assert idle_ends(sim, ref) == []
    assert sim.incarnation_of(ref) == 1


def test_an_alarm_every_three_minutes_lets_the_agent_idle_between(sim: Simulation) -> None:
    """With alarms further apart than the idle timeout, each alarm wakes a new incarnation."""
    ref = sim.agent(Quiet, "q")
    sim.call(ref, "heartbeat", 180_000)
    sim.run_for(30 * 60_000)
    assert len(idle_ends(sim, ref)) >= 9
    assert sim.incarnation_of(ref) in (0, 11)


def test_idle_eviction_can_be_switched_off(sim: Simulation) -> None:
    """A profile without idle eviction keeps incarnations until something else kills them."""
    calm = Simulation(seed=1, faults=FaultProfile(idle_eviction=False))
    ref = calm.agent(Quiet, "q")
    calm.run_for(DAY_MS)
    assert calm.incarnation_of(ref) == 1


def test_a_deploy_restarts_every_live_agent(sim: Simulation) -> None:
    """A deploy ends all live incarnations at one instant; the next event starts new ones."""
    a = sim.agent(Quiet, "a")
    b = sim.agent(Quiet, "b")
    sim.run_for(1_000)
    assert sorted(sim.deploy()) == ["Quiet/a", "Quiet/b"]
    assert sim.incarnation_of(a) == 0 and sim.incarnation_of(b) == 0
    sim.fetch(a, Request())
    assert sim.incarnation_of(a) == 2


def test_the_platform_profile_deploys_one_or_two_times_each_day() -> None:
    """Seeded deploys: every simulated day has 1 or 2 of them, and both counts occur."""
    counts: list[int] = []
    for seed in range(4):
        sim = Simulation(seed=seed, faults=FaultProfile(deploys_per_day=(1, 2)))
        sim.run_for(10 * DAY_MS)
        days = [r.t_ms // DAY_MS for r in sim.trace.select("platform:deploy")]
        counts.extend(days.count(day) for day in range(10))
    assert set(counts) == {1, 2}


def test_quiesce_stops_profile_deploys() -> None:
    """In the liveness phase no further deploy happens."""
    sim = Simulation(seed=5, faults=FaultProfile(deploys_per_day=(2, 2)))
    sim.quiesce(limit_ms=5 * DAY_MS)
    assert sim.trace.select("platform:deploy") == []
