"""A 0.21.0 `cf_agents_schedules` moved into 0.32.0's job queue by the Scheduler's startup
(spec sdk-0.32 §6.3; J-71 … J-75). Each test writes the rows on 0.21.0, upgrades the deploy to
0.32.0 (`sim.deploy(sdk=...)`) and wakes the agent on the stored state as it is."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from agents_core import Agent
from sim import Simulation
from sim.simulation import AgentRef


@pytest.fixture
def old(request: pytest.FixtureRequest) -> Iterator[Simulation]:
    """A simulation that starts on 0.21.0 (the tests upgrade it)."""
    seed = zlib.crc32(request.node.name.encode())
    with Simulation(seed=seed, sdk="0.21.0") as simulation:
        yield simulation


class Legacy(Agent):
    async def plant(self, id: str, callback: str, kind: str, time: int, **extra: Any) -> None:
        """A schedules row as 0.21.0 (or an earlier release) wrote it."""
        columns = {"id": id, "callback": callback, "type": kind, "time": time, **extra}
        names = ", ".join(columns)
        marks = ", ".join("?" for _ in columns)
        self.sql(f"INSERT INTO cf_agents_schedules ({names}) VALUES ({marks})", *columns.values())

    async def recreate_table(self) -> None:
        self.sql(
            "CREATE TABLE IF NOT EXISTS cf_agents_schedules (id TEXT PRIMARY KEY, callback TEXT, "
            "payload TEXT, type TEXT, time INTEGER)"
        )
        self.sql(
            "INSERT INTO cf_agents_schedules (id, callback, type, time) "
            "VALUES ('late', 'cb', 'delayed', 2000)"
        )

    async def cb(self, payload: Any, schedule: Any) -> None:
        pass

    def kv(self, key: str) -> Any:
        return self.host.kv.get(key)


def upgraded(sim: Simulation, ref: AgentRef) -> None:
    sim.deploy(sdk="0.32.0")
    sim.fetch(ref)


def jobs(sim: Simulation, ref: AgentRef) -> dict[str, dict[str, Any]]:
    rows = sim.query(ref, "SELECT * FROM cf_agents_jobs WHERE capability = 'scheduler'")
    return {r["id"]: r for r in rows}


def has_table(sim: Simulation, ref: AgentRef) -> bool:
    found = sim.query(ref, "SELECT name FROM sqlite_master WHERE name = 'cf_agents_schedules'")
    return bool(found)


def test_J071_a_schedule_row_becomes_a_job_and_the_table_is_dropped(old: Simulation) -> None:
    ref = old.agent(Legacy, "a")
    old.call(ref, "plant", "s1", "cb", "delayed", 1000, payload='{"n":1}', delayInSeconds=5)
    upgraded(old, ref)
    job = jobs(old, ref)["s1"]
    assert (job["fn"], job["time"], job["running"]) == ("cb", 1_000_000, 0)
    assert json.loads(job["payload"]) == {
        "payload": {"n": 1},
        "type": "delayed",
        "delayInSeconds": 5,
        "owner_path": None,
        "owner_path_key": None,
    }
    assert not has_table(old, ref)
    assert old.call(ref, "kv", "cf_agents:schedules_schema_version") == 2


def test_J072_a_legacy_heartbeat_row_is_not_migrated(old: Simulation) -> None:
    ref = old.agent(Legacy, "a")
    old.call(ref, "plant", "hb", "_cf_keepAliveHeartbeat", "interval", 500, intervalSeconds=30)
    old.call(ref, "plant", "s1", "cb", "delayed", 1000)
    upgraded(old, ref)
    assert set(jobs(old, ref)) == {"s1"}


def test_J073_a_row_with_an_unreadable_payload_is_skipped(old: Simulation) -> None:
    ref = old.agent(Legacy, "a")
    old.call(ref, "plant", "bad", "cb", "delayed", 1000, payload="{not json")
    old.call(ref, "plant", "good", "cb", "delayed", 1001, retry_options="{oops")
    upgraded(old, ref)
    found = jobs(old, ref)
    assert set(found) == {"good"}
    assert json.loads(found["good"]["retry_options"]) == {
        "maxAttempts": 3,
        "baseDelayMs": 100,
        "maxDelayMs": 3000,
    }
    assert not has_table(old, ref)
    errors = [r.get("message") for r in old.trace.select("console:error", agent=ref.path)]
    assert any(m.startswith('Skipping schedule "bad" during job-queue migration') for m in errors)


def test_J074_recovery_rows_join_the_recovery_loop_and_intervals_start_idle(
    old: Simulation,
) -> None:
    ref = old.agent(Legacy, "a")
    old.call(ref, "plant", "c", "_chatRecoveryContinue", "delayed", 1000)
    old.call(ref, "plant", "r", "_chatRecoveryRetry", "delayed", 1000)
    old.call(
        ref,
        "plant",
        "i",
        "cb",
        "interval",
        1000,
        intervalSeconds=60,
        running=1,
        execution_started_at=990,
    )
    upgraded(old, ref)
    found = jobs(old, ref)
    assert (found["c"]["recovery_loop"], found["r"]["recovery_loop"]) == (1, 1)
    interval = found["i"]
    assert (interval["recovery_loop"], interval["singleflight"], interval["running"]) == (0, 1, 0)
    assert interval["execution_started_at"] is None


def test_J075_a_table_made_again_after_the_migration_is_ignored(old: Simulation) -> None:
    ref = old.agent(Legacy, "a")
    old.call(ref, "plant", "s1", "cb", "delayed", 1000)
    upgraded(old, ref)
    old.call(ref, "recreate_table")
    old.evict(ref)
    old.fetch(ref)
    assert set(jobs(old, ref)) == {"s1"}
    assert has_table(old, ref)
    assert old.query(ref, "SELECT id FROM cf_agents_schedules") == [{"id": "late"}]
