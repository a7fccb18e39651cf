"""The queue API on both releases: `queue`, `dequeue`, `dequeue_all`, `dequeue_all_by_callback`,
`get_queue`, `get_queues` (0.21.0: rows of `cf_agents_queues` flushed by the queuing incarnation;
0.32.0: jobs of the capability `queue` run by the alarm, spec sdk-0.32 §2, §6.4).

What holds on both: items run one at a time in the order they were queued, each with its
payload and its item; an item is gone once it ran; a callback that keeps failing is tried as
often as its retry options say (`queue:retry` before every attempt after the first), then
reported (`queue:error`, `on_error`) and dropped; a dequeued item never runs. What differs is
said where a test reads it: what `dequeue` returns, the item's keys, when an item runs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents_core import Agent
from sim import AgentRef, Simulation
from tests.releases import on_both_releases

ZERO_WAIT = {"max_attempts": 3, "base_delay_ms": 1, "max_delay_ms": 1}


class Worker(Agent):
    """Queues work and journals what its callbacks see (the journal survives eviction)."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql(
            "CREATE TABLE IF NOT EXISTS journal (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
            "kind TEXT, data TEXT)"
        )

    def _note(self, kind: str, data: Any) -> None:
        self.sql("INSERT INTO journal (kind, data) VALUES (?, ?)", kind, json.dumps(data))

    async def push(self, callback: str, payloads: list[Any], **options: Any) -> list[str]:
        """Queue one item per payload, in one turn; their ids."""
        return [await self.queue(callback, p, **options) for p in payloads]

    async def push_and_read(self, payloads: list[Any], key: str, value: Any) -> dict[str, Any]:
        """Queue behind a slow first item, then read the pending items in the same turn."""
        ids = [await self.queue("slow", p) for p in payloads]
        return {
            "ids": ids,
            "second": await self.get_queue(ids[1]),
            "missing": await self.get_queue("nope"),
            "matching": await self.get_queues(key, value),
        }

    async def push_then_dequeue(self) -> dict[str, Any]:
        """Queue a slow item, then three more; dequeue the second and every `other` one."""
        first = await self.queue("slow", "a")
        second = await self.queue("work", "b")
        third = await self.queue("work", "c")
        await self.queue("other", "d")
        return {
            "ids": [first, second, third],
            "dequeued": await self.dequeue(second),
            "missing": await self.dequeue("nope"),
            "by_callback": await self.dequeue_all_by_callback("other"),
        }

    async def push_then_dequeue_all(self) -> Any:
        await self.queue("slow", "a")
        await self.queue("work", "b")
        return await self.dequeue_all()

    async def work(self, payload: Any, item: dict[str, Any]) -> None:
        self._note("work", {"payload": payload, "id": item["id"], "callback": item["callback"]})

    async def other(self, payload: Any, item: dict[str, Any]) -> None:
        self._note("other", payload)

    async def slow(self, payload: Any, item: dict[str, Any]) -> None:
        self._note("slow:start", payload)
        await self.host.clock.sleep(5_000)
        self._note("slow:end", payload)

    async def boom(self, payload: Any, item: dict[str, Any]) -> None:
        self._note("boom", payload)
        raise RuntimeError(f"boom {payload}")

    def on_error(self, error: BaseException) -> Any:
        self._note("on_error", str(error))


def journal(sim: Simulation, ref: AgentRef) -> list[tuple[str, Any]]:
    rows = sim.query(ref, "SELECT kind, data FROM journal ORDER BY seq")
    return [(row["kind"], json.loads(row["data"])) for row in rows]


def events(sim: Simulation, ref: AgentRef, name: str) -> list[dict[str, Any]]:
    return [dict(r.fields) for r in sim.trace.select(name, agent=ref.path)]


@on_both_releases
def test_items_run_in_queue_order_with_their_payload_and_are_gone_after(sim: Simulation) -> None:
    ref = sim.agent(Worker, "w")
    ids = sim.call(ref, "push", "work", [{"n": 1}, {"n": 2}, {"n": 3}])
    sim.run_for(1_000)
    assert journal(sim, ref) == [
        ("work", {"payload": {"n": n}, "id": id, "callback": "work"})
        for n, id in zip((1, 2, 3), ids, strict=True)
    ]
    assert events(sim, ref, "queue:create") == [{"callback": "work", "id": id} for id in ids]
    assert [sim.call(ref, "get_queue", id) for id in ids] == [None, None, None]


@on_both_releases
def test_a_failing_item_is_retried_then_reported_and_dropped(sim: Simulation) -> None:
    ref = sim.agent(Worker, "w")
    (id,) = sim.call(ref, "push", "boom", ["x"], retry={**ZERO_WAIT, "max_attempts": 2})
    sim.run_for(1_000)
    assert journal(sim, ref) == [("boom", "x"), ("boom", "x"), ("on_error", "boom x")]
    assert events(sim, ref, "queue:retry") == [
        {"callback": "boom", "id": id, "attempt": 2, "maxAttempts": 2}
    ]
    assert events(sim, ref, "queue:error") == [
        {"callback": "boom", "id": id, "error": "boom x", "attempts": 2}
    ]
    assert sim.call(ref, "get_queue", id) is None


@on_both_releases
def test_get_queue_and_get_queues_read_the_pending_items(sim: Simulation) -> None:
    ref = sim.agent(Worker, "w")
    seen = sim.call(ref, "push_and_read", [{"k": 1}, {"k": 2}, {"k": "2"}, {"j": 2}], "k", 2)
    second = seen["second"]
    assert (second["id"], second["callback"], second["payload"]) == (
        seen["ids"][1],
        "slow",
        {"k": 2},
    )
    assert seen["missing"] is None
    # Strict equality: the string "2" and a payload without the key do not match.
    assert [item["id"] for item in seen["matching"]] == [seen["ids"][1]]
    if sim.platform.release == "0.21.0":
        assert second["retry"] is None  # the caller's own options, as stored
        assert {"created_at", "retry_options"} <= set(second)
    else:
        assert second["retry"] == {"maxAttempts": 3, "baseDelayMs": 100, "maxDelayMs": 3000}
        assert "createdAt" in second


@on_both_releases
def test_dequeued_items_never_run(sim: Simulation) -> None:
    ref = sim.agent(Worker, "w")
    seen = sim.call(ref, "push_then_dequeue")
    sim.run_for(20_000)
    first, _second, third = seen["ids"]
    assert [kind for kind, _ in journal(sim, ref)] == ["slow:start", "slow:end", "work"]
    assert journal(sim, ref)[-1][1]["id"] == third
    if sim.platform.release == "0.21.0":
        # 0.21.0's deletes answer nothing.
        assert (seen["dequeued"], seen["missing"], seen["by_callback"]) == (None, None, None)
    else:
        assert (seen["dequeued"], seen["missing"], seen["by_callback"]) == (True, False, 1)
    assert sim.call(ref, "get_queue", first) is None


@on_both_releases
def test_dequeue_all_drops_every_pending_item(sim: Simulation) -> None:
    ref = sim.agent(Worker, "w")
    dropped = sim.call(ref, "push_then_dequeue_all")
    sim.run_for(20_000)
    work = [kind for kind, _ in journal(sim, ref) if kind == "work"]
    assert work == []
    assert dropped == (None if sim.platform.release == "0.21.0" else 2)


@on_both_releases
@pytest.mark.parametrize(
    ("callback", "message"),
    [
        ("missing", r"self\.missing is not a function"),
        (42, "Callback must be a string"),
    ],
)
def test_a_callback_that_is_no_method_is_refused(
    sim: Simulation, callback: Any, message: str
) -> None:
    ref = sim.agent(Worker, "w")
    with pytest.raises(ValueError, match=message):
        sim.call(ref, "push", callback, [1])
    assert events(sim, ref, "queue:create") == []


@on_both_releases
def test_bad_retry_options_are_refused(sim: Simulation) -> None:
    ref = sim.agent(Worker, "w")
    with pytest.raises(ValueError, match="max_attempts"):
        sim.call(ref, "push", "work", [1], retry={"max_attempts": 0})
    assert events(sim, ref, "queue:create") == []


@pytest.mark.parametrize("sim", ["0.21.0"], indirect=True)
def test_Q1_0_21_makes_the_queue_table_on_first_use(sim: Simulation) -> None:
    """0.21.0 creates `cf_agents_queues` with its schema; here an agent that never queues has
    no such table, and the first queue call makes it with 0.21.0's columns
    (docs/divergences.md Q1)."""
    ref = sim.agent(Worker, "w")
    found = "SELECT name FROM sqlite_master WHERE name = 'cf_agents_queues'"
    assert sim.query(ref, found) == []
    sim.call(ref, "push", "work", [1])
    columns = [row["name"] for row in sim.query(ref, "PRAGMA table_info(cf_agents_queues)")]
    assert columns == ["id", "payload", "callback", "created_at", "retry_options"]


@pytest.mark.parametrize("sim", ["0.21.0"], indirect=True)
def test_0_21_runs_the_items_of_a_dead_incarnation_at_the_next_queue_call(
    sim: Simulation,
) -> None:
    """0.21.0 flushes from the queuing incarnation only: an item left by one that died stays
    in the table (nothing flushes at startup) until the next `queue()` runs it, first."""
    ref = sim.agent(Worker, "w")
    sim.call(ref, "push", "slow", ["a"])
    sim.evict(ref, "crash")
    sim.agent(Worker, "w")
    sim.run_for(20_000)
    assert journal(sim, ref) == [("slow:start", "a")]
    sim.call(ref, "push", "work", ["b"])
    sim.run_for(20_000)
    kinds = [kind for kind, _ in journal(sim, ref)]
    assert kinds == ["slow:start", "slow:start", "slow:end", "work"]
