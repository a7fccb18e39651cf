"""The platform's lazily armed timers: one idle timer per incarnation, re-armed when activity
moved its deadline on, and a 15-minute handler limit armed only for an alarm handler that waits.
Each runs where a timer armed at the start of its wait would have run, and same-instant groups
count it only at the instant it acts."""

from __future__ import annotations

from agents_core import Agent
from sim import Simulation
from sim.alarms import ALARM_HANDLER_LIMIT_MS
from sim.interleave import Interleave, describe_event
from sim.pending import event_is_live


class Pinged(Agent):
    async def ping(self) -> None:
        return None

    async def arm(self, at_ms: int) -> None:
        self.host.alarm.set_alarm(at_ms)

    async def alarm(self) -> None:
        if self.host.kv.get("handler_ms"):
            await self.host.clock.sleep(self.host.kv.get("handler_ms"))

    async def set_handler_ms(self, ms: int) -> None:
        self.host.kv.put("handler_ms", ms)


def queued(sim: Simulation, what: str) -> list[tuple[int, object]]:
    """(due time, event) of every queued event whose callbacks mention `what`."""
    queue = sim.platform.kernel.env._queue
    return [(entry[0], entry[3]) for entry in queue if what in describe_event(entry[3])]


def test_an_incarnation_keeps_one_idle_timer_however_busy_it_is(sim: Simulation) -> None:
    """A hundred calls half a second apart leave at most two idle timers queued (the pending one
    and, after an earlier deadline, the one it left behind), and the eviction comes exactly at
    the deadline the last call's wait drew."""
    ref = sim.agent(Pinged, "p")
    most = 0
    for _ in range(100):
        sim.call(ref, "ping")
        most = max(most, len(queued(sim, "_idle_due")))
        sim.run_for(500)
    incarnation = sim.platform.records[ref.path].incarnation
    assert incarnation is not None
    deadline = incarnation.idle_deadline
    assert deadline is not None
    assert most <= 2
    assert len([e for _, e in queued(sim, "_idle_due") if event_is_live(e)]) == 1
    sim.run_for(200_000)
    (end,) = sim.trace.select("incarnation:end", agent=ref.path)
    assert (end.t_ms, end.fields["reason"]) == (deadline, "idle")


def test_only_an_alarm_handler_that_waits_gets_a_limit_timer(sim: Simulation) -> None:
    """A handler that ends in its first step arms no limit timer; one that sleeps past the limit
    is killed exactly 15 minutes after it started."""
    ref = sim.agent(Pinged, "a")
    sim.call(ref, "arm", 1_000)
    sim.run_for(1_000)
    assert len(sim.trace.select("alarm:done", agent=ref.path)) == 1
    assert queued(sim, "_limit") == []

    sim.call(ref, "set_handler_ms", 20 * 60_000)
    sim.call(ref, "arm", 10_000)
    sim.run_until(10_000)
    (limit,) = queued(sim, "_limit")
    assert limit[0] == 10_000 + ALARM_HANDLER_LIMIT_MS
    sim.run_until(10_000 + ALARM_HANDLER_LIMIT_MS)
    (killed,) = sim.trace.select("alarm:killed", agent=ref.path)
    assert killed.t_ms == 10_000 + ALARM_HANDLER_LIMIT_MS


def test_an_idle_timer_that_only_rearms_makes_no_same_instant_group() -> None:
    """An idle timer whose deadline moved on fires at its first time only to arm itself again:
    due at the same instant as another agent's alarm, it does not make a group of two (it would
    shift the numbering of every later group an interleaving names)."""
    with Simulation(seed=3, interleave=Interleave(seed=1)) as sim:
        a = sim.agent(Pinged, "a")
        b = sim.agent(Pinged, "b")
        sim.call(b, "ping")
        sim.call(a, "ping")
        incarnation = sim.platform.records[a.path].incarnation
        assert incarnation is not None
        first = incarnation.idle_timer_at
        assert first is not None
        while incarnation.idle_deadline is not None and incarnation.idle_deadline <= first:
            sim.run_for(1_000)  # until a call draws a deadline past the pending timer
            sim.call(a, "ping")
        assert incarnation.idle_timer_at == first < incarnation.idle_deadline
        sim.call(b, "arm", first)
        groups = len(sim.platform.kernel.group_sizes)
        sim.run_until(first)
        assert sim.trace.select("alarm:fired", agent=b.path)[-1].t_ms == first
        assert len(sim.platform.kernel.group_sizes) == groups
        assert incarnation.alive and incarnation.idle_timer_at == incarnation.idle_deadline
