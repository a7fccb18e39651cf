"""The lean paths keep their promises: a turn that only reads opens no transaction, a write
makes no rows, rows are the dicts they always were, the trace's lines and digest are made once
and stay right as it grows, and the collector's run policy, once released, leaves the process as
it found it."""

from __future__ import annotations

import gc
import hashlib
import json
import sqlite3

import pytest

from agents_core import Agent
from sim import FaultProfile, Simulation, Trace, collector
from sim.kernel import Kernel
from sim.sqlite import FaultyStorage, StorageFault


def storage_in(kernel: Kernel) -> FaultyStorage:
    return FaultyStorage(kernel, on_fault=lambda kind, stmt: None, random_fault=None)


def run_step(kernel: Kernel, body) -> None:
    async def step() -> None:
        body()

    kernel.spawn(step(), None, "step")


def test_a_turn_that_only_reads_opens_no_transaction() -> None:
    """Reads before the first write run outside a transaction; the first write opens it and the
    end of the step commits it, as one journal entry."""
    kernel = Kernel()
    storage = storage_in(kernel)
    storage.execute("CREATE TABLE t (i INTEGER)")
    seen = []

    def body() -> None:
        storage.query("SELECT * FROM t")
        seen.append(storage._db.in_transaction)
        storage.execute("INSERT INTO t VALUES (1)")
        seen.append(storage._db.in_transaction)
        storage.query("SELECT * FROM t")

    run_step(kernel, body)
    assert seen == [False, True]
    assert not storage._db.in_transaction
    assert storage.journal[-1] == (("INSERT INTO t VALUES (1)", ()),)
    run_step(kernel, lambda: storage.query("SELECT * FROM t"))
    assert len(storage.journal) == 2  # the read-only turn wrote nothing to the journal


def test_a_crash_before_the_first_write_rolls_back_nothing_and_kills() -> None:
    """A crash fault on a read that opens the turn still kills, and the later turn's state is
    the committed one."""
    kernel = Kernel()
    storage = storage_in(kernel)
    storage.execute("CREATE TABLE t (i INTEGER)")
    storage.execute("INSERT INTO t VALUES (1)")
    crashed = []
    storage.bind_crash(lambda: crashed.append(True))
    storage.arm(StorageFault(kind="crash", match="^SELECT"))
    outcome = []

    async def step() -> None:
        try:
            storage.query("SELECT i FROM t")
        except BaseException as exc:  # noqa: BLE001 - what the dying step sees
            outcome.append(type(exc).__name__)

    kernel.spawn(step(), None, "step")
    assert crashed == [True]
    assert outcome == ["IncarnationKilled"]
    assert storage.query("SELECT i FROM t") == [{"i": 1}]


def test_rows_are_the_dicts_sqlite_rows_make() -> None:
    """A write returns no rows; RETURNING does; one name used twice keeps the first column's
    value, exactly as `dict(sqlite3.Row)` does."""
    storage = storage_in(Kernel())
    storage.execute("CREATE TABLE t (i INTEGER, s TEXT)")
    assert storage.query("INSERT INTO t VALUES (1, 'a')") == []
    assert storage.query("INSERT INTO t VALUES (2, 'b') RETURNING i, s") == [{"i": 2, "s": "b"}]
    statement = "SELECT i, s, i + 10 AS I, s AS x FROM t ORDER BY i"
    expected_db = sqlite3.connect(":memory:")
    expected_db.row_factory = sqlite3.Row
    expected_db.execute("CREATE TABLE t (i INTEGER, s TEXT)")
    expected_db.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    expected = [dict(row) for row in expected_db.execute(statement)]
    assert storage.query(statement) == expected
    assert list(storage.query(statement)[0]) == list(expected[0])
    assert storage.query("SELECT i FROM t ORDER BY i") == [{"i": 1}, {"i": 2}]


class Reader(Agent):
    async def on_start(self) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS t (i INTEGER)")

    async def touch(self) -> int:
        self.sql("INSERT INTO t VALUES (1)")
        return len(self.sql("SELECT i FROM t"))


def test_a_calm_profile_skips_the_random_fault_check_and_a_faulty_one_keeps_it() -> None:
    """No rate, no fault check per statement; any rate, the check (and its draws) as before."""
    calm = Simulation(seed=1)
    calm.call(calm.agent(Reader, "r"), "touch")
    assert calm.platform.records["Reader/r"].storage._random_fault is None
    flaky = Simulation(seed=1, faults=FaultProfile(storage_error_rate=1e-9))
    flaky.call(flaky.agent(Reader, "r"), "touch")
    assert flaky.platform.records["Reader/r"].storage._random_fault is not None


def test_the_statement_observer_sees_statements_of_agents_made_before_and_after() -> None:
    """Setting the observer reaches the storage of agents that already exist and later ones."""
    sim = Simulation(seed=1)
    first = sim.agent(Reader, "a")
    sim.run_for(1)
    seen: list[tuple[str, str]] = []
    sim.platform.statement_observer = lambda path, statement: seen.append((path, statement))
    sim.call(first, "touch")
    sim.call(sim.agent(Reader, "b"), "touch")
    assert ("Reader/a", "INSERT INTO t VALUES (1)") in seen
    assert ("Reader/b", "INSERT INTO t VALUES (1)") in seen
    sim.platform.statement_observer = None
    count = len(seen)
    sim.call(first, "touch")
    assert len(seen) == count


def test_the_digest_is_the_hash_of_the_lines_as_the_trace_grows() -> None:
    """Lines are made once and reused; the digest asked for twice, with records appended in
    between, is always the hash of all the lines."""
    trace = Trace()

    def fresh_digest() -> str:
        hasher = hashlib.sha256()
        for record in trace.records:
            line = json.dumps(
                record.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False
            )
            hasher.update(line.encode() + b"\n")
        return hasher.hexdigest()

    trace.append(1, "A/a", 1, "e", {"x": 1, "é": "ü", "n": None, "f": 1.5, "s": {2, 1}})
    assert trace.digest() == fresh_digest()
    trace.append(2, "A/a", 1, "e", {"nested": {"b": [1, (2, 3)]}})
    assert trace.digest() == fresh_digest()
    assert list(trace.lines()) == [r.to_json() for r in trace.records]
    trace.records[:] = trace.records[:1]  # cut: the lines and the hash start over
    assert trace.digest() == fresh_digest()


def test_a_reserved_field_name_is_refused() -> None:
    with pytest.raises(ValueError, match="trace field name 'seq' is reserved"):
        Trace().append(0, "", 0, "e", {"seq": 1})


def test_the_run_policy_freezes_raises_thresholds_and_release_restores_everything() -> None:
    """Inside a run loop the heap is frozen and the young generations collected less often; the
    policy stays in force between loops (what was made in between is frozen by the next loop),
    and `release` gives back the thresholds and the frozen set as they were."""
    collector.release()  # whatever earlier tests' runs left in force
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    assert not collector.engaged()
    try:
        with collector.running():
            assert gc.get_threshold() == collector.RUN_THRESHOLDS
            frozen = gc.get_freeze_count()
            assert frozen > 0
            with collector.running():
                assert gc.get_threshold() == collector.RUN_THRESHOLDS
        assert collector.engaged()
        assert gc.get_threshold() == collector.RUN_THRESHOLDS
        made_between = [[] for _ in range(1000)]
        with collector.running():
            assert gc.get_freeze_count() >= frozen + len(made_between)
        assert gc.get_freeze_count() > 0
    finally:
        collector.release()
    assert not collector.engaged()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_with_objects_the_process_froze_itself_garbage_is_still_collected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process that froze objects itself keeps them frozen; the doubling rule's full
    collections still reclaim the cyclic garbage of the run."""
    import weakref

    class Node:
        pass

    collector.release()
    gc.freeze()  # the process's own
    mine = gc.get_freeze_count()
    monkeypatch.setattr(collector, "HEAP_FLOOR", 1)
    monkeypatch.setattr(collector._State, "blocks", 1)  # the heap "doubled" since
    gone = []
    try:
        with collector.running():
            node = Node()
            node.self = node  # a cycle: only a collection reclaims it
            weakref.finalize(node, gone.append, True)
            del node
        assert gone == [True]
        assert gc.get_freeze_count() >= mine
    finally:
        collector.release()
        gc.unfreeze()


def test_the_run_policy_leaves_a_disabled_collector_alone() -> None:
    collector.release()
    gc.disable()
    try:
        before = gc.get_threshold()
        with collector.running():
            assert gc.get_threshold() == before
            assert gc.get_freeze_count() == 0
    finally:
        gc.enable()
