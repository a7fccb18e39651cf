"""Platform events per second, beside bare simpy on the same machine in the same run.

Run: `python -m pytest tests/bench -m bench --benchmark-enable -s`. Deselected by default, and
skipped (not failed) with `-m bench` alone: pytest-benchmark is disabled by default.

The simulated workload: 20 agents, each called 20 times; each call sleeps, writes SQLite and
arms its alarm, so a run has deliveries, turns, alarms, idle evictions and restarts. The
baseline is bare simpy processing the same number of timeout events. The printed ratio is how
many times slower one platform event is than one bare simpy event.
"""

from __future__ import annotations

import time

import pytest
import simpy

from agents_core import Agent
from sim import Simulation

pytestmark = pytest.mark.bench

AGENTS = 20
CALLS = 20


class Worker(Agent):
    async def on_start(self) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS w (i INTEGER)")

    async def step(self, i: int) -> None:
        await self.host.clock.sleep(50)
        self.sql("INSERT INTO w VALUES (?)", i)
        self.host.alarm.set_alarm(self.host.clock.now_ms() + 45_000)

    async def alarm(self) -> None:
        self.sql("SELECT count(*) FROM w")


def simulated_workload() -> int:
    sim = Simulation(seed=1)
    refs = [sim.agent(Worker, f"w{i}") for i in range(AGENTS)]
    for i in range(CALLS):
        for ref in refs:
            sim.start_call(ref, "step", i)
        sim.run_for(100_000)
    sim.quiesce(limit_ms=3_600_000)
    return len(sim.trace)


def bare_simpy(events: int) -> int:
    env = simpy.Environment()

    def proc(env: simpy.Environment, count: int):
        for _ in range(count):
            yield env.timeout(1)

    per = max(1, events // AGENTS)
    for _ in range(AGENTS):
        env.process(proc(env, per))
    env.run()
    return per * AGENTS


def test_platform_events_per_second_against_bare_simpy(enabled_benchmark) -> None:
    benchmark = enabled_benchmark
    events = benchmark.pedantic(simulated_workload, rounds=5, iterations=1)
    sim_seconds = benchmark.stats.stats.mean
    start = time.perf_counter()
    rounds = 5
    for _ in range(rounds):
        bare = bare_simpy(events)
    simpy_seconds = (time.perf_counter() - start) / rounds
    sim_rate = events / sim_seconds
    simpy_rate = bare / simpy_seconds
    ratio = simpy_rate / sim_rate
    benchmark.extra_info.update(
        platform_events=events,
        platform_events_per_s=round(sim_rate),
        simpy_events_per_s=round(simpy_rate),
        slowdown_vs_simpy=round(ratio, 2),
    )
    print(
        f"\nplatform: {sim_rate:,.0f} events/s ({events} events); bare simpy: "
        f"{simpy_rate:,.0f} events/s; ratio (simpy/platform): {ratio:.1f}x"
    )
    assert events > AGENTS * CALLS
