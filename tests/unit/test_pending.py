"""Pending events that would do nothing keep no run busy: a liveness phase is quiet when only
timers of replaced alarms, of idle checks overtaken by activity, or of dead incarnations
remain, and it ends at the last event that did something."""

from __future__ import annotations

from agents_core import Agent
from sim import Simulation
from sim.pending import event_is_live


class Rearm(Agent):
    async def arm(self, after_ms: int) -> None:
        self.host.alarm.set_alarm(self.host.clock.now_ms() + after_ms)

    async def on_alarm(self) -> None:
        self.host.trace.emit("user:alarm")


def test_a_replaced_alarm_leaves_a_dead_timer_that_keeps_nothing_busy(sim: Simulation) -> None:
    ref = sim.agent(Rearm, "r")
    sim.call(ref, "arm", 600_000)
    sim.call(ref, "arm", 1_000)
    queue = sim.platform.kernel.env._queue
    dead = [entry for entry in queue if not event_is_live(entry[3])]
    assert dead, "the first alarm's timer is still queued, dead"
    assert sim.quiesce(3_600_000) is True
    (alarm,) = sim.trace.select("user:alarm")
    end = sim.trace.select("quiesce:end")[-1]
    assert alarm.t_ms == 1_000
    assert end.t_ms < 600_000, "the phase ends with the last live event, not the dead timer"


def test_a_sleep_of_a_dead_incarnation_is_not_live(sim: Simulation) -> None:
    class Sleeper(Agent):
        async def nap(self) -> None:
            await self.host.clock.sleep(1_000_000)

    ref = sim.agent(Sleeper, "s")
    sim.start_call(ref, "nap")
    sim.run_for(10)
    assert sim.platform.kernel.any_live()
    sim.evict(ref)
    naps = [e for e in sim.platform.kernel.env._queue if e[0] == 1_000_000]
    assert naps and not any(event_is_live(entry[3]) for entry in naps)
