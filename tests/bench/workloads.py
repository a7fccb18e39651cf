"""The workloads the speed benchmarks time, and the ceiling each is compared with.

The ceiling is what the harness could do at best on this machine in this process: bare simpy,
one in-memory SQLite database per agent, each agent waking once a second to run one transaction
(BEGIN, UPDATE, SELECT, COMMIT). Every figure is a ratio against a ceiling measured in the same
process, next to the run it is compared with. Both are timed in CPU seconds of this process
(`time.process_time`), which other work on a shared machine inflates far less than wall time.

Each `measure_*` function returns a dict of plain numbers. Run as a module
(`python -m tests.bench.workloads FIGURE [ARGS]`) it prints that dict as one JSON line: the
benchmarks run the figures that need a process of their own (peak RSS, memory per agent, the
collector's share with nothing else on the heap) that way.
"""

from __future__ import annotations

import gc
import json
import resource
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

import simpy

from agents_core import Agent
from sim import FaultProfile, Simulation
from sim.budget import RunBudget

__all__ = [
    "CEILING_REFERENCE_STEPS_PER_S",
    "GcClock",
    "ceiling_steps_per_s",
    "measure_durable_step",
    "measure_idle_memory",
    "measure_record_cost",
    "measure_seeds",
    "measure_standard_day",
    "statement_floor_us",
]

CEILING_REFERENCE_STEPS_PER_S = 210_000
"""The ceiling of the machine the targets were set on: a standard day's rate is normalised to it
(rate × reference / this machine's ceiling)."""

STEP_MS = 1_000
_UPDATE = "UPDATE counts SET v = v + 1 WHERE id = 1"
_SELECT = "SELECT v FROM counts WHERE id = 1"
_DDL = "CREATE TABLE IF NOT EXISTS counts (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)"
_SEED_ROW = "INSERT OR IGNORE INTO counts (id, v) VALUES (1, 0)"


# -- the ceiling --------------------------------------------------------------------------------
def _counter_databases(agents: int) -> list[sqlite3.Connection]:
    """One in-memory database per agent, each holding the counter row the ceilings update."""
    databases = []
    for _ in range(agents):
        db = sqlite3.connect(":memory:", isolation_level=None)
        db.execute(_DDL)
        db.execute(_SEED_ROW)
        databases.append(db)
    return databases


def ceiling_steps_per_s(agents: int, steps: int) -> float:
    """Wakeups per wall second of bare simpy driving one SQLite transaction per wakeup."""
    env = simpy.Environment()
    databases = _counter_databases(agents)

    def agent(db: sqlite3.Connection) -> Any:
        for _ in range(steps):
            yield env.timeout(STEP_MS)
            db.execute("BEGIN")
            db.execute(_UPDATE)
            db.execute(_SELECT).fetchall()
            db.execute("COMMIT")

    for db in databases:
        env.process(agent(db))
    started = time.process_time()
    env.run()
    elapsed = time.process_time() - started
    for db in databases:
        db.close()
    return agents * steps / elapsed


def statement_floor_us(agents: int, steps: int) -> float:
    """CPU µs of one UPDATE on an agent's own connection, the connections taken in turn as the
    agents of a run wake: no simpy, no transaction, nothing else. What it grows by with the
    number of agents is what the machine's caches cost any harness that keeps a database per
    agent, whatever that harness does."""
    cursors = [db.cursor() for db in _counter_databases(agents)]
    started = time.process_time()
    for _ in range(steps):
        for cursor in cursors:
            cursor.execute(_UPDATE)
    elapsed = time.process_time() - started
    for cursor in cursors:
        cursor.connection.close()
    return elapsed / (agents * steps) * 1e6


class GcClock:
    """Wall time spent in the cyclic collector while it is installed, by generation."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started
            self.collections[info["generation"]] += 1

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


# -- agents -------------------------------------------------------------------------------------
class StepAgent(Agent):
    """The durable step: a loop of sleep, UPDATE, SELECT (RPC) or sleep, stash (fiber)."""

    async def on_start(self) -> None:
        self.sql(_DDL)
        self.sql(_SEED_ROW)

    async def rpc_loop(self, steps: int) -> None:
        for _ in range(steps):
            await self.host.clock.sleep(STEP_MS)
            self.sql(_UPDATE)
            self.sql(_SELECT)

    async def traced_loop(self, steps: int) -> None:
        for step in range(steps):
            await self.host.clock.sleep(STEP_MS)
            self.sql(_UPDATE)
            self.host.trace.emit("bench:step", step=step)

    async def fiber_loop(self, steps: int) -> None:
        async def body(ctx: Any) -> None:
            for step in range(steps):
                await self.host.clock.sleep(STEP_MS)
                ctx.stash({"step": step})

        await self.run_fiber("loop", body)


class DayAgent(Agent):
    """One agent of the standard day: an interval schedule every 15 minutes and, when called,
    a fiber of ten one-minute steps that stashes after each."""

    async def on_start(self) -> None:
        self.sql(_DDL)
        self.sql(_SEED_ROW)
        await self.schedule_every(900, "tick")

    async def tick(self, payload: Any = None, row: Any = None) -> None:
        self.sql(_UPDATE)

    async def work(self, steps: int) -> None:
        async def body(ctx: Any) -> None:
            for step in range(steps):
                await self.host.clock.sleep(60_000)
                self.sql(_UPDATE)
                ctx.stash({"step": step})

        await self.run_fiber("job", body)


NO_LIMITS = RunBudget(
    events=None, records=None, wall_s=None, memory_mb=None, events_per_second=None
)
"""A benchmark's runs are meant to be big: no budget stops them."""


def _started_simulation(
    cls: type, agents: int, *, seed: int, faults: FaultProfile, sdk: str | None = None
) -> Any:
    sim = Simulation(seed=seed, faults=faults, budget=NO_LIMITS, sdk=sdk)
    refs = [sim.agent(cls, f"a{i}") for i in range(agents)]
    sim.run_for(1)
    return sim, refs


def _drain(sim: Simulation, pending: Iterable[Any]) -> None:
    """Run until every call settled, counted as they settle: no scan per event, and no list of
    thousands of calls for the collector to walk while it is built."""
    remaining = [0]
    failures: list[BaseException] = []

    def settled(event: Any) -> None:
        remaining[0] -= 1
        if not event.ok:
            failures.append(event.value)

    for p in pending:
        remaining[0] += 1
        p.event.callbacks.append(settled)
    sim.run_while(lambda: remaining[0] > 0, limit_ms=10 * 86_400_000)
    if failures:
        raise failures[0]


# -- figures ------------------------------------------------------------------------------------
def measure_durable_step(
    shape: str, agents: int, steps: int, sdk: str | None = None
) -> dict[str, Any]:
    """One timed run of `agents` agents doing `steps` durable steps each (`rpc` or `fiber`),
    beside the ceiling at the same number of agents. `sdk`: the release the agents run on
    (None: the default)."""
    before = ceiling_steps_per_s(agents, steps)
    sim, refs = _started_simulation(
        StepAgent, agents, seed=1, faults=FaultProfile(name="none"), sdk=sdk
    )
    method = "rpc_loop" if shape == "rpc" else "fiber_loop"
    with GcClock() as collector:
        started = time.process_time()
        _drain(sim, (sim.start_call(ref, method, steps) for ref in refs))
        elapsed = time.process_time() - started
    sim.close()
    ceiling = (before + ceiling_steps_per_s(agents, steps)) / 2  # measured before and after
    rate = agents * steps / elapsed
    return {
        "steps_per_s": rate,
        "ceiling_steps_per_s": ceiling,
        "ratio": rate / ceiling,
        "gc_share": collector.seconds / elapsed,
    }


def standard_day(
    seed: int = 1, agents: int = 100, hours: int = 24, sdk: str | None = None
) -> Simulation:
    """100 agents for one simulated day: two deploys, idle evictions, an interval schedule per
    agent, and once an hour per agent a ten-minute fiber (which holds keepAlive). `sdk`: the
    release the agents run on (None: the default)."""
    faults = FaultProfile(deploys_per_day=(2, 2), name="standard-day")
    sim, refs = _started_simulation(DayAgent, agents, seed=seed, faults=faults, sdk=sdk)
    spacing_ms = 3_600_000 // agents
    for hour in range(hours):
        for index, ref in enumerate(refs):
            sim.run_until(hour * 3_600_000 + index * spacing_ms + 1)
            sim.start_call(ref, "work", 10)
    sim.run_until(hours * 3_600_000)
    return sim


def measure_standard_day(seed: int = 1, hours: int = 24, sdk: str | None = None) -> dict[str, Any]:
    """Simulated seconds per wall second of the standard day, raw and normalised to the
    reference ceiling; the collector's share; this process's peak RSS. `sdk`: the release the
    agents run on (None: the default)."""
    before = ceiling_steps_per_s(100, 200)
    with GcClock() as collector:
        started = time.process_time()
        sim = standard_day(seed=seed, hours=hours, sdk=sdk)
        elapsed = time.process_time() - started
    records = len(sim.trace)
    sim.close()
    ceiling = (before + ceiling_steps_per_s(100, 200)) / 2  # measured before and after
    rate = hours * 3600 / elapsed
    return {
        "sim_s_per_wall_s": rate,
        "normalised": rate * CEILING_REFERENCE_STEPS_PER_S / ceiling,
        "ceiling_steps_per_s": ceiling,
        "records": records,
        "gc_share": collector.seconds / elapsed,
        "full_collections": collector.collections[2],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def measure_record_cost(agents: int, records_target: int = 40_000) -> dict[str, Any]:
    """CPU µs per trace record while `agents` agents run loops of sleep, UPDATE and one trace
    record, and the collector's share; beside the ceiling at the same number of agents (bare
    simpy and SQLite slow down too as thousands of databases outgrow the caches)."""
    steps = max(20, records_target // agents)
    sim, refs = _started_simulation(StepAgent, agents, seed=1, faults=FaultProfile(name="none"))
    before = len(sim.trace)
    with GcClock() as collector:
        started = time.process_time()
        _drain(sim, (sim.start_call(ref, "traced_loop", steps) for ref in refs))
        elapsed = time.process_time() - started
    records = len(sim.trace) - before
    sim.close()
    ceiling = ceiling_steps_per_s(agents, steps)
    return {
        "us_per_record": elapsed / records * 1e6,
        "statement_floor_us": statement_floor_us(agents, steps),
        "records": records,
        "gc_share": collector.seconds / elapsed,
        "ceiling_steps_per_s": ceiling,
        "ratio": 1e6 / ceiling / (elapsed / records * 1e6),
    }


def measure_seeds(seeds: int = 3) -> dict[str, Any]:
    """Seeds per second of a scenario of about 10,000 records: 20 agents, 4 simulated hours of
    the standard day's shape, each seed run to its digest."""
    ceiling = ceiling_steps_per_s(20, 500)
    records = []
    started = time.process_time()
    for seed in range(1, seeds + 1):
        sim = standard_day(seed=seed, agents=20, hours=4)
        sim.digest()
        records.append(len(sim.trace))
        sim.close()
    elapsed = time.process_time() - started
    rate = seeds / elapsed
    return {
        "seeds_per_s": rate,
        "records_per_seed": statistics.median(records),
        "ceiling_steps_per_s": ceiling,
        "normalised": rate * CEILING_REFERENCE_STEPS_PER_S / ceiling,
    }


def _rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def measure_idle_memory(agents: int = 1000) -> dict[str, Any]:
    """Resident memory per agent once every agent has run startup and been evicted idle."""
    gc.collect()
    base = _rss_kib()
    sim, refs = _started_simulation(StepAgent, agents, seed=1, faults=FaultProfile(name="none"))
    for ref in refs:
        sim.start_call(ref, "rpc_loop", 2)
    sim.run_for(200_000)  # past the longest idle timeout: every incarnation is gone
    alive = sum(1 for ref in refs if sim.incarnation_of(ref))
    gc.collect()
    per_agent = (_rss_kib() - base) / agents
    sim.close()
    return {"kib_per_idle_agent": per_agent, "alive_after_idle": alive}


FIGURES: dict[str, Callable[..., dict[str, Any]]] = {
    "durable_step": measure_durable_step,
    "standard_day": measure_standard_day,
    "record_cost": measure_record_cost,
    "seeds": measure_seeds,
    "idle_memory": measure_idle_memory,
}


def main(argv: list[str]) -> None:
    name, *args = argv
    parsed = [int(a) if a.lstrip("-").isdigit() else a for a in args]
    print(json.dumps(FIGURES[name](*parsed)))


if __name__ == "__main__":
    main(sys.argv[1:])
