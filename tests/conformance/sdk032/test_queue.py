"""The Queue capability of SDK 0.32.0 (spec sdk-0.32 §2, §3.5, §6.4; J-76, J-59, J-27): items
are jobs of the capability `queue`, due at once with strictly increasing times, run by the
alarm; 0.21.0's `cf_agents_queues` moves into them at startup; a sub-agent's items are jobs of
its root, run in the sub-agent and pruned with its sub-tree."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from agents_core import Agent
from agents_core.queue import QUEUES_DDL
from sim import AgentRef, Simulation
from tests.conformance.sub_agent_fixtures import Child, Grandchild, Root, journal, owner_key
from tests.conformance.test_sub_agents import events, fire_next_alarm


class Legacy(Agent):
    """An agent whose callbacks journal their payload (the journal survives eviction)."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql("CREATE TABLE IF NOT EXISTS seen (seq INTEGER PRIMARY KEY, data TEXT)")

    async def plant(self, rows: list[dict[str, Any]]) -> None:
        """`cf_agents_queues` rows as 0.21.0 wrote them, inserted in this order."""
        self.sql(QUEUES_DDL)
        for row in rows:
            names = ", ".join(row)
            marks = ", ".join("?" for _ in row)
            self.sql(f"INSERT INTO cf_agents_queues ({names}) VALUES ({marks})", *row.values())

    async def cb(self, payload: Any, item: Any) -> None:
        self.sql("INSERT INTO seen (data) VALUES (?)", json.dumps(payload))

    async def push(self, payloads: list[Any], **options: Any) -> list[str]:
        return [await self.queue("cb", p, **options) for p in payloads]

    def kv(self, key: str) -> Any:
        return self.host.kv.get(key)


@pytest.fixture
def old(request: pytest.FixtureRequest) -> Iterator[Simulation]:
    """A simulation that starts on 0.21.0 (the migration tests upgrade it)."""
    with Simulation(seed=zlib.crc32(request.node.name.encode()), sdk="0.21.0") as simulation:
        yield simulation


def queue_jobs(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    return sim.query(
        ref, "SELECT * FROM cf_agents_jobs WHERE capability = 'queue' ORDER BY time, id"
    )


def seen(sim: Simulation, ref: AgentRef) -> list[Any]:
    return [json.loads(r["data"]) for r in sim.query(ref, "SELECT data FROM seen ORDER BY seq")]


LEGACY_ROWS = [
    {"id": "late", "callback": "cb", "payload": '"late"', "created_at": 200},
    {"id": "tie2", "callback": "cb", "payload": '"tie2"', "created_at": 100},
    {"id": "bad", "callback": "cb", "payload": "{not json", "created_at": 100},
    {"id": "tie1", "callback": "cb", "payload": '"tie1"', "created_at": 100},
    {
        "id": "first",
        "callback": "cb",
        "payload": '"first"',
        "created_at": 50,
        "retry_options": '{"maxAttempts":5}',
    },
]
"""Inserted in this order: `tie2` has a lower rowid than `tie1`, with the same `created_at`."""


def test_J076_queue_rows_become_jobs_in_created_at_rowid_order_and_the_table_is_dropped(
    old: Simulation,
) -> None:
    ref = old.agent(Legacy, "a")
    old.call(ref, "plant", LEGACY_ROWS)
    old.run_for(5_000)
    old.deploy(sdk="0.32.0")
    old.fetch(ref)  # its startup migrates; the items are due, not run yet
    now = old.now_ms
    jobs = queue_jobs(old, ref)
    assert [(j["id"], j["fn"], j["time"]) for j in jobs] == [
        ("first", "cb", now),
        ("tie2", "cb", now + 1),
        ("tie1", "cb", now + 2),
        ("late", "cb", now + 3),
    ]
    assert json.loads(jobs[0]["payload"]) == {
        "payload": "first",
        "owner_path": None,
        "owner_path_key": None,
    }
    assert [json.loads(j["retry_options"])["maxAttempts"] for j in jobs] == [5, 3, 3, 3]
    assert old.query(ref, "SELECT name FROM sqlite_master WHERE name = 'cf_agents_queues'") == []
    assert old.call(ref, "kv", "cf_agents:queue_schema_version") == 1
    errors = [r.get("message") for r in old.trace.select("console:error", agent=ref.path)]
    assert any(m.startswith('Skipping queue item "bad" during job-queue migration') for m in errors)
    old.run_for(1_000)
    assert seen(old, ref) == ["first", "tie2", "tie1", "late"]
    assert queue_jobs(old, ref) == []


def test_J076_at_version_1_a_queue_table_is_left_alone(old: Simulation) -> None:
    ref = old.agent(Legacy, "a")
    old.deploy(sdk="0.32.0")
    old.fetch(ref)
    assert old.call(ref, "kv", "cf_agents:queue_schema_version") == 1
    old.call(ref, "plant", LEGACY_ROWS[:1])
    old.evict(ref, "deploy")
    old.fetch(ref)
    assert queue_jobs(old, ref) == []
    assert len(old.query(ref, "SELECT id FROM cf_agents_queues")) == 1


@pytest.fixture
def sim(request: pytest.FixtureRequest) -> Iterator[Simulation]:
    with Simulation(seed=zlib.crc32(request.node.name.encode()), sdk="0.32.0") as simulation:
        yield simulation


def test_items_queued_in_one_ms_get_strictly_increasing_times(sim: Simulation) -> None:
    ref = sim.agent(Legacy, "a")
    sim.run_for(7_000)
    ids = sim.call(ref, "push", [1, 2, 3])
    now = sim.now_ms
    jobs = queue_jobs(sim, ref)
    assert [(j["id"], j["time"]) for j in jobs] == list(
        zip(ids, (now, now + 1, now + 2), strict=True)
    )
    assert all(j["hung_timeout_seconds"] is None and j["singleflight"] == 0 for j in jobs)


def test_an_item_survives_the_incarnation_and_the_alarm_runs_it(sim: Simulation) -> None:
    ref = sim.agent(Legacy, "a")
    sim.call(ref, "push", ["kept"])
    sim.evict(ref, "crash")
    assert seen(sim, ref) == []
    fire_next_alarm(sim)
    assert seen(sim, ref) == ["kept"]
    assert queue_jobs(sim, ref) == []


def test_a_push_with_the_id_of_a_pending_item_replaces_it_in_its_place(sim: Simulation) -> None:
    ref = sim.agent(Legacy, "a")
    (first,) = sim.call(ref, "push", ["old"], id="x")
    sim.run_for(0)
    sim.call(ref, "push", ["other"])
    assert first == "x"
    sim.evict(ref, "crash")
    before = {j["id"]: j["time"] for j in queue_jobs(sim, ref)}
    sim.agent(Legacy, "a")
    sim.call(ref, "push", ["new"], id="x")
    after = {j["id"]: j["time"] for j in queue_jobs(sim, ref)}
    assert after == before
    sim.run_for(1_000)
    assert seen(sim, ref) == ["new", "other"]


def test_a_blank_id_is_refused(sim: Simulation) -> None:
    ref = sim.agent(Legacy, "a")
    with pytest.raises(ValueError, match="Queue item ids must be non-empty"):
        sim.call(ref, "push", [1], id="  ")
    assert queue_jobs(sim, ref) == []


def wake(sim: Simulation) -> AgentRef:
    ref = sim.agent(Root, "root")
    sim.run_for(10_000)
    return ref


def test_a_facet_item_is_a_job_of_its_root_and_runs_in_the_facet(sim: Simulation) -> None:
    root = wake(sim)
    deep = [(Child, "c"), (Grandchild, "g")]
    grandchild = sim.facet(sim.facet(root, Child, "c"), Grandchild, "g")
    id = sim.call(root, "at", deep, "queue", "tick", "deep")
    (job,) = queue_jobs(sim, root)
    assert job["id"] == id
    envelope = json.loads(job["payload"])
    assert envelope["owner_path_key"] == owner_key(grandchild)
    assert [r.agent for r in sim.trace.select("queue:create")] == [grandchild.path]
    assert sim.call(root, "at", deep, "get_queue", id)["payload"] == "deep"
    assert sim.call(root, "get_queue", id) is None  # another owner's item
    assert sim.query(
        grandchild, "SELECT name FROM sqlite_master WHERE name = 'cf_agents_jobs'"
    ) in (
        [],
        [{"name": "cf_agents_jobs"}],
    )
    fire_next_alarm(sim)
    assert [r["data"] for r in journal(sim, grandchild, "tick")] == ["deep"]
    assert journal(sim, root, "tick") == []
    assert queue_jobs(sim, root) == []


def test_J059_a_facet_item_whose_owner_left_the_registry_is_pruned_unrun(
    sim: Simulation,
) -> None:
    """The root's walk finds the registry entry of `c` gone: it prunes that sub-tree (its
    schedules with `schedule:cancel`, and its queue items and its grandchild's, silently) and
    runs none of them; the items of a sibling and of the root run."""
    root = wake(sim)
    child = sim.facet(root, Child, "c")
    grandchild = sim.facet(child, Grandchild, "g")
    sim.call(root, "at", [(Child, "c")], "queue", "tick", "lost")
    sim.call(root, "at", [(Child, "c"), (Grandchild, "g")], "queue", "tick", "deeper")
    created = sim.call(root, "at", [(Child, "c")], "schedule", 600, "tick", "scheduled")
    sim.call(root, "at", [(Child, "c2")], "queue", "tick", "kept")
    sim.call(root, "queue", "tick", "root")
    sim.call(root, "forget_child", "Child", "c")
    sim.run_for(1_000)
    assert journal(sim, child, "tick") == []
    assert journal(sim, grandchild, "tick") == []
    assert [r["data"] for r in journal(sim, sim.facet(root, Child, "c2"), "tick")] == ["kept"]
    assert [r["data"] for r in journal(sim, root, "tick")] == ["root"]
    assert events(sim, root, "schedule:cancel") == [{"callback": "tick", "id": created.id}]
    assert events(sim, root, "queue:error") == []
    assert queue_jobs(sim, root) == []


def test_deleting_a_sub_agent_drops_its_queue_items(sim: Simulation) -> None:
    root = wake(sim)
    sim.call(root, "at", [(Child, "c")], "queue", "tick", "gone")
    kept = sim.call(root, "at", [(Child, "c2")], "queue", "tick", "kept")
    sim.call(root, "delete_child", Child, "c")
    assert [j["id"] for j in queue_jobs(sim, root)] == [kept]


def test_a_facet_dequeues_only_its_own_items(sim: Simulation) -> None:
    root = wake(sim)
    sim.call(root, "at", [(Child, "a")], "queue", "tick", "a")
    b = sim.call(root, "at", [(Child, "b")], "queue", "tick", "b")
    assert sim.call(root, "at", [(Child, "a")], "dequeue", b) is False
    assert sim.call(root, "at", [(Child, "a")], "dequeue_all") == 1
    assert [j["id"] for j in queue_jobs(sim, root)] == [b]


def test_J027_a_queue_job_without_its_capability_would_be_dropped_but_now_runs(
    sim: Simulation,
) -> None:
    """Before the Queue existed a `queue` job had no dispatcher and was deleted unrun (J-27);
    with the capability installed it runs."""
    ref = sim.agent(Legacy, "a")
    sim.call(ref, "push", ["x"])
    sim.run_for(1_000)
    assert seen(sim, ref) == ["x"]
    logs = [r.get("message", "") for r in sim.trace.select("console:error", agent=ref.path)]
    assert not any("No installed capability" in m for m in logs)


class Failing(Child):
    async def boom(self, payload: Any = None, item: Any = None) -> None:
        self._note("boom", payload)
        raise RuntimeError(f"boom {payload}")


def test_a_facet_item_that_keeps_failing_is_retried_and_reported_in_the_facet(
    sim: Simulation,
) -> None:
    """The owner runs its item with its own retries (§3.5): `queue:retry` and `queue:error`
    are the sub-agent's; the root drops the job once the route returned."""
    root = wake(sim)
    facet = sim.facet(root, Failing, "f")
    retry = {"max_attempts": 2, "base_delay_ms": 1, "max_delay_ms": 1}
    id = sim.call(root, "at", [(Failing, "f")], "queue", "boom", "x", retry=retry)
    sim.run_for(1_000)
    assert [r["data"] for r in journal(sim, facet, "boom")] == ["x", "x"]
    assert events(sim, facet, "queue:retry") == [
        {"callback": "boom", "id": id, "attempt": 2, "maxAttempts": 2}
    ]
    assert events(sim, facet, "queue:error") == [
        {"callback": "boom", "id": id, "error": "boom x", "attempts": 2}
    ]
    assert events(sim, root, "queue:error") == []
    assert queue_jobs(sim, root) == []
