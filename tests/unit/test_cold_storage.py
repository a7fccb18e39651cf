"""Idle agents' databases go cold (kept as bytes, the connection closed) and come back exactly as
they were: the same bytes, rows and rowids, the same runs of every library scenario."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents_core import Agent
from scenarios.run.golden import check_golden
from sim import FaultProfile, Simulation, cold_storage
from sim.kernel import Kernel
from sim.sqlite import FaultyStorage

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"


def storage() -> FaultyStorage:
    return FaultyStorage(Kernel(), on_fault=lambda kind, stmt: None, random_fault=None)


def test_a_cooled_database_comes_back_byte_for_byte(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cold_storage, "WARM_PARKED", 0)
    store, twin = storage(), storage()
    for db in (store, twin):
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT)")
        for n in range(40):
            db.execute("INSERT INTO t (v) VALUES (?)", ("x" * (n * 37),))  # overflow pages too
        db.execute("DELETE FROM t WHERE id % 3 = 0")
        db.kv_put("k", {"a": [1, 2]})
    before = store._db.serialize()
    store.park()
    assert store.cold
    assert store.snapshot() == twin.snapshot()  # read from a copy: it stays cold
    assert store.read("SELECT count(*) AS n FROM t") == [{"n": 27}]
    assert store.cold
    assert store.query("SELECT max(id) AS m FROM t") == [{"m": 40}]  # in use: warm again
    assert not store.cold
    assert store._db.serialize() == before
    store.execute("INSERT INTO t (v) VALUES ('after')")
    twin.execute("INSERT INTO t (v) VALUES ('after')")
    assert store.query("SELECT max(id) AS m FROM t") == [{"m": 41}]
    assert store.kv_get("k") == {"a": [1, 2]}
    assert store.snapshot() == twin.snapshot()
    assert store._db.serialize() == twin._db.serialize()


def test_only_the_most_recently_parked_stay_warm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cold_storage, "WARM_PARKED", 3)
    stores = [storage() for _ in range(5)]
    for store in stores:
        store.park()
    assert [store.cold for store in stores] == [True, True, False, False, False]
    stores[0].query("SELECT 1 AS x")  # in use again: warm, and no longer parked
    stores[0].park()  # parked again: the most recent, so the oldest warm one goes cold
    assert [store.cold for store in stores] == [False, True, True, False, False]


class Idle(Agent):
    async def on_start(self) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS seen (id INTEGER PRIMARY KEY, at INTEGER)")

    async def touch(self) -> int:
        self.sql("INSERT INTO seen (at) VALUES (?)", self.host.clock.now_ms())
        return len(self.sql("SELECT id FROM seen"))


def test_agents_woken_from_cold_storage_run_as_if_always_warm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def run() -> tuple[str, list[int], list[bool]]:
        sim = Simulation(seed=5, faults=FaultProfile(name="none"))
        refs = [sim.agent(Idle, f"i{n}") for n in range(6)]
        counts = []
        for _ in range(3):
            counts += [sim.call(ref, "touch") for ref in refs]
            sim.run_for(600_000)  # every agent evicted idle
        cold = [sim._record(ref).storage.cold for ref in refs]
        digest = sim.digest()
        sim.close()
        return digest, counts, cold

    warm = run()
    monkeypatch.setattr(cold_storage, "WARM_PARKED", 2)
    cooled = run()
    assert cooled[:2] == warm[:2]
    assert warm[2] == [False] * 6
    assert sorted(cooled[2]) == [False] * 2 + [True] * 4  # all but the two parked last


def test_every_library_scenario_runs_the_same_with_every_idle_database_cold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every eviction cools the agent's database at once and every wake restores it: the
    short logs, expectations and invariants of the library are all unchanged."""
    monkeypatch.setattr(cold_storage, "WARM_PARKED", 0)
    for path in sorted(LIBRARY.glob("*.yaml")):
        verdict = check_golden(path)
        assert verdict.status == "match", verdict.diff
        assert not verdict.failures, (path.name, verdict.failures)
