"""Faulty SQLite: turns commit at the next await, faults fail a statement or kill the process
between two statements, and no fault ever loses a committed turn."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_core import Agent
from sim import AgentEvicted, FaultProfile, Simulation, StorageError
from tests.releases import on_both_releases


class Ledger(Agent):
    """Each turn writes entry i into two tables, then announces it in the trace."""

    async def on_start(self) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS a (i INTEGER PRIMARY KEY)")
        self.sql("CREATE TABLE IF NOT EXISTS b (i INTEGER PRIMARY KEY)")

    async def write(self, turns: int, first: int = 0) -> None:
        for i in range(first, first + turns):
            try:
                self.sql("INSERT INTO a VALUES (?)", i)
                self.sql("INSERT INTO b VALUES (?)", i)
            finally:
                self.host.trace.emit("user:turn", i=i)
            self.host.trace.emit("user:committed", i=i)
            await self.host.clock.sleep(100)

    async def write_forgiving(self, turns: int) -> list[str]:
        errors = []
        for i in range(turns):
            try:
                self.sql("INSERT INTO a VALUES (?)", i)
            except StorageError as exc:
                errors.append(str(exc))
            self.sql("INSERT INTO b VALUES (?)", i)
            await self.host.clock.sleep(100)
        return errors


def rows(sim: Simulation, ref, table: str) -> list[int]:
    return [r["i"] for r in sim.query(ref, f"SELECT i FROM {table} ORDER BY i")]


def test_a_turn_commits_when_the_coroutine_next_awaits(sim: Simulation) -> None:
    """Writes are invisible from outside until the turn ends at its await, then durable."""
    ref = sim.agent(Ledger, "l")
    sim.start_call(ref, "write", 3)
    sim.run_for(150)
    assert rows(sim, ref, "a") == [0, 1]
    sim.evict(ref)
    assert rows(sim, ref, "a") == [0, 1]
    assert rows(sim, ref, "b") == [0, 1]


def test_a_storage_error_fails_one_statement_and_the_turn_goes_on(sim: Simulation) -> None:
    """An injected error raises from that statement only; the turn's other writes commit."""
    ref = sim.agent(Ledger, "l")
    sim.run_for(1)
    sim.arm_storage_fault(ref, "error", match="INSERT INTO a", skip=1)
    errors = sim.call(ref, "write_forgiving", 3)
    assert errors == ["injected storage fault (statement: INSERT INTO a VALUES (?))"]
    assert rows(sim, ref, "a") == [0, 2]
    assert rows(sim, ref, "b") == [0, 1, 2]
    assert len(sim.trace.select("fault:storage_error")) == 1


def test_a_crash_between_statements_rolls_back_only_that_turn(sim: Simulation) -> None:
    """Dying before the second statement of turn 2 loses turn 2 entirely and nothing before."""
    ref = sim.agent(Ledger, "l")
    sim.run_for(1)
    sim.arm_storage_fault(ref, "crash", match="INSERT INTO b", skip=2)
    pending = sim.start_call(ref, "write", 5)
    with pytest.raises(AgentEvicted, match="crash"):
        sim.wait(pending)
    assert rows(sim, ref, "a") == [0, 1]
    assert rows(sim, ref, "b") == [0, 1]
    # the finally in the dying turn ran (Python cannot stop it) but its trace record was refused
    assert [r.get("i") for r in sim.trace.select("user:turn")] == [0, 1]
    assert sim.trace.select("incarnation:end")[-1].get("reason") == "crash"


def test_a_crash_after_commit_keeps_the_turn_and_kills_at_that_instant(sim: Simulation) -> None:
    """The matched statement runs, its turn commits whole, and the incarnation dies right then:
    the next turn never starts."""
    ref = sim.agent(Ledger, "l")
    sim.run_for(1)
    sim.arm_storage_fault(ref, "crash-after-commit", match="INSERT INTO b", skip=1)
    pending = sim.start_call(ref, "write", 5)
    with pytest.raises(AgentEvicted, match="crash"):
        sim.wait(pending)
    assert rows(sim, ref, "a") == [0, 1]
    assert rows(sim, ref, "b") == [0, 1]
    assert [r.get("i") for r in sim.trace.select("user:committed")] == [0, 1]
    (fault,) = sim.trace.select("fault:crash_after_commit")
    (end,) = sim.trace.select("incarnation:end")
    assert fault.seq < end.seq and fault.t_ms == end.t_ms == 101
    assert end.get("reason") == "crash"


def test_the_journal_holds_exactly_the_committed_writes(sim: Simulation) -> None:
    """Replaying the journal gives the committed state: a rolled-back turn is not in it, a
    failed statement is not in it, reads are not in it."""
    ref = sim.agent(Ledger, "l")
    sim.run_for(1)
    sim.arm_storage_fault(ref, "crash", match="INSERT INTO b", skip=2)
    with pytest.raises(AgentEvicted):
        sim.call(ref, "write", 5)
    storage = sim.platform.records[ref.path].storage
    writes = [w for turn in storage.journal for w in turn]
    inserts = [
        (stmt, params)
        for stmt, params in writes
        if stmt.startswith("INSERT INTO ") and stmt.split()[2] in ("a", "b")
    ]
    assert inserts == [
        ("INSERT INTO a VALUES (?)", (0,)),
        ("INSERT INTO b VALUES (?)", (0,)),
        ("INSERT INTO a VALUES (?)", (1,)),
        ("INSERT INTO b VALUES (?)", (1,)),
    ]
    mine = [t for t in storage.journal if any(w[0].startswith("INSERT INTO a") for w in t)]
    assert [len(turn) for turn in mine] == [2, 2]
    assert not any(stmt.startswith("SELECT") for stmt, _ in writes)


def test_statement_shapes_name_kind_and_table() -> None:
    """The hunt groups statements by kind and table."""
    from scenarios.hunt.statement_shapes import statement_shape

    assert statement_shape("UPDATE cf_agents_runs SET snapshot = ?") == ("UPDATE", "cf_agents_runs")
    assert statement_shape("  insert or replace into t (a) values (1)") == (
        "INSERT OR REPLACE",
        "t",
    )
    assert statement_shape("DELETE FROM counts WHERE id = 1") == ("DELETE", "counts")
    assert statement_shape("SELECT MIN(time) AS t FROM cf_agents_schedules") == (
        "SELECT",
        "cf_agents_schedules",
    )
    assert statement_shape('CREATE TABLE IF NOT EXISTS "x" (a)') == ("CREATE TABLE", "x")
    assert statement_shape("SELECT 1") == ("SELECT", "")


def test_sqlite_errors_name_the_statement(sim: Simulation) -> None:
    """A bad statement raises StorageError showing SQLite's message and the statement."""

    class Broken(Agent):
        async def bad(self) -> None:
            self.sql("SELEC nonsense")

    ref = sim.agent(Broken, "b")
    with pytest.raises(StorageError, match=r"syntax error.*statement: SELEC nonsense"):
        sim.call(ref, "bad")


def test_unknown_fault_kind_is_refused(sim: Simulation) -> None:
    """Arming says which kinds exist."""
    ref = sim.agent(Ledger, "l")
    with pytest.raises(
        ValueError, match=r"one of \['error', 'crash', 'crash-after-commit'\], got 'melt'"
    ):
        sim.arm_storage_fault(ref, "melt")


@on_both_releases
def test_kv_lives_in_the_same_turns_as_sql(sim: Simulation) -> None:
    """A KV write rolls back with the turn that made it, and survives once committed."""

    class Kv(Agent):
        async def put_then_crash(self) -> None:
            self.host.kv.put("committed", {"n": 1})
            await self.host.clock.sleep(1)
            self.host.kv.put("lost", True)
            self.sql("SELECT 1")

        async def read(self) -> dict:
            # 0.32.0 keeps its schema versions in the same KV (sdk-0.32 §6.1, §6.2).
            stored = self.host.kv.list()
            return {k: v for k, v in stored.items() if not k.startswith("cf_agents:")}

    ref = sim.agent(Kv, "k")
    sim.run_for(1)
    sim.arm_storage_fault(ref, "crash", match="SELECT 1")
    with pytest.raises(AgentEvicted):
        sim.call(ref, "put_then_crash")
    assert sim.call(ref, "read") == {"committed": {"n": 1}}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2**32),
    kind=st.sampled_from(["error", "crash"]),
    skip=st.integers(0, 12),
    evict_at=st.one_of(st.none(), st.integers(1, 1_500)),
    rates=st.tuples(st.sampled_from([0.0, 0.05, 0.2]), st.sampled_from([0.0, 0.05, 0.2])),
)
def test_no_fault_loses_a_committed_turn(seed, kind, skip, evict_at, rates) -> None:
    """Whatever faults strike, every turn that reached its await is in both tables; and when
    the only faults are crashes, no table holds half a turn (a storage error, by contrast, fails
    one statement and lets the turn's others commit)."""
    profile = FaultProfile(storage_error_rate=rates[0], crash_rate=rates[1])
    sim = Simulation(seed=seed, faults=profile)
    ref = sim.agent(Ledger, "l")
    for table in ("a", "b"):  # from outside: no fault can stop the tables existing
        sim.query(ref, f"CREATE TABLE IF NOT EXISTS {table} (i INTEGER PRIMARY KEY)")
    sim.run_for(1)
    sim.arm_storage_fault(ref, kind, skip=skip)
    pending = sim.start_call(ref, "write", 10)
    if evict_at is not None:
        sim.run_for(evict_at)
        sim.evict(ref)
    sim.quiesce(limit_ms=10_000)
    assert pending.done()
    committed = {r.get("i") for r in sim.trace.select("user:committed")}
    a, b = set(rows(sim, ref, "a")), set(rows(sim, ref, "b"))
    assert committed <= a & b
    if kind == "crash" and rates[0] == 0.0:
        assert a == b


def test_background_work_started_by_a_dying_turn_leaves_no_unawaited_coroutine(
    sim: Simulation,
) -> None:
    """A crash mid-turn before wait_until: the coroutine handed to it is closed, not leaked."""
    import gc
    import warnings

    class Starter(Agent):
        async def go(self) -> None:
            async def later() -> None:
                return None

            try:
                self.sql("SELECT 1")
            finally:
                self.host.tasks.wait_until(later())  # runs in the dying turn

    ref = sim.agent(Starter, "s")
    sim.run_for(1)
    sim.arm_storage_fault(ref, "crash", match="SELECT 1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AgentEvicted):
            sim.call(ref, "go")
        gc.collect()


def test_shape_patterns_match_every_statement_of_the_shape_and_read_plainly() -> None:
    """`match:` patterns the hunt writes: anchored, the statement's own words, whitespace-blind."""
    from scenarios.hunt.statement_shapes import shape_pattern
    from sim.sqlite import StorageFault

    update = shape_pattern("UPDATE cf_agents_runs SET snapshot = ? WHERE id = ?")
    assert update == r"^UPDATE cf_agents_runs\b"
    fault = StorageFault("error", match=update)
    assert fault.matches("UPDATE  cf_agents_runs\n   SET x = 1")
    assert not fault.matches("UPDATE cf_agents_runs_archive SET x = 1")
    assert not fault.matches("SELECT * FROM cf_agents_runs")
    select = shape_pattern("SELECT MIN(time) AS t FROM cf_agents_schedules WHERE x = 1")
    assert select == r"^SELECT\b.* FROM cf_agents_schedules\b"
    assert StorageFault("error", match=select).matches("SELECT id FROM cf_agents_schedules")
