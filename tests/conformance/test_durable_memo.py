"""Conformance: what the runtime keeps in memory of state only it writes
(`agents_core.durable_memo`).

The heartbeat's answers (is a fiber orphaned? is a schedule stored? is a destroy pending? are
memory-limit strikes counted?) come from memory after one read per incarnation. These tests hold
that the answers stay the ones storage would give: the reads happen once per incarnation and
again in the next one, user SQL that plants a run row or a schedule row is still seen, and a
strike written after a clean alarm is still cleared by the next clean one.
"""

from __future__ import annotations

from collections import Counter

from sim import Simulation
from tests.conformance.fiber_agents import Recorder, hook_calls, run_rows, sleep
from tests.conformance.test_schedules import (
    MEMORY_LIMIT,
    oom_events,
    run_times,
    schedule_rows,
    strikes_stored,
)
from tests.conformance.test_schedules import Recorder as ScheduleRecorder
from tests.releases import on_both_releases, on_release

KV_READ = "SELECT value FROM _cf_KV WHERE key = ?"
"""The key-value read: the destroy flag's, and the memory-limit strikes'."""
RUN_IDS_READ = "SELECT id FROM cf_agents_runs"


class Planter(Recorder):
    """A Recorder whose user code writes a run row of its own through `Agent.sql`."""

    async def plant_orphan(self, fiber_id: str) -> None:
        self.sql(
            "INSERT INTO cf_agents_runs (id, name, snapshot, created_at) "
            "VALUES (?, 'old', NULL, ?)",
            fiber_id,
            self.host.clock.now_ms(),
        )


def count_statements(sim: Simulation) -> Counter[tuple[int, str]]:
    """(incarnation number, statement) -> how many times agent code ran it, from now on."""
    seen: Counter[tuple[int, str]] = Counter()

    def observe(path: str, statement: str) -> None:
        record = sim.platform.records[path]
        number = record.incarnation.number if record.incarnation is not None else 0
        seen[(number, " ".join(statement.split()))] += 1

    sim.platform.statement_observer = observe
    return seen


@on_release("0.21.0")
def test_heartbeats_read_the_destroy_flag_and_run_rows_once_per_incarnation(
    sim: Simulation,
) -> None:
    """A fiber held alive by nine heartbeats reads the destroy flag, the strike count and the
    run-row ids once in its incarnation; after an eviction the next incarnation reads them
    again."""
    ref = sim.agent(Recorder, "r")
    sim.run_for(1)
    seen = count_statements(sim)
    sim.start_call(ref, "run", "long", [sleep(20_000)])
    sim.run_for(21_000)
    fired = len(sim.trace.select("alarm:fired", agent=ref.path))
    assert fired >= 9
    assert seen[(1, KV_READ)] == 2  # the destroy flag and the strike count
    assert seen[(1, RUN_IDS_READ)] == 0  # the startup scan saw every row already

    sim.evict(ref, "deploy")
    sim.start_call(ref, "run", "again", [sleep(10_000)])
    sim.run_for(11_000)
    assert sim.incarnation_of(ref) == 2
    assert seen[(2, KV_READ)] == 2
    assert run_rows(sim, ref) == []


@on_both_releases
def test_a_run_row_planted_by_user_sql_is_recovered_by_the_next_heartbeat(
    sim: Simulation,
) -> None:
    """User code writes a run row no fiber of this incarnation runs while the memo knows the
    rows: the write makes the memo read them again, so the next heartbeat's housekeeping offers
    the row to the recovery hook, as a storage read would."""
    ref = sim.agent(Planter, "p")
    sim.start_call(ref, "run", "long", [sleep(20_000)])
    sim.run_for(5_000)  # two heartbeats: the memo holds the one running fiber's row
    sim.call(ref, "plant_orphan", "orphan")
    sim.run_for(5_000)
    assert [call["fiber"] for call in hook_calls(sim, ref)] == ["orphan"]
    sim.run_for(15_000)
    assert run_rows(sim, ref) == []


@on_release("0.21.0")
def test_a_strike_after_a_clean_alarm_is_cleared_by_the_next_clean_alarm(
    sim: Simulation,
) -> None:
    """A clean alarm leaves the strike count known to be clear; a memory-limit reset in the same
    incarnation writes a strike, and the next clean alarm must read and delete it again."""
    ref = sim.agent(ScheduleRecorder, "s")
    oom = {"errors": [MEMORY_LIMIT], "forever": True}
    sim.call(ref, "schedule", 5, "tick")
    sim.call(ref, "schedule", 10, "fail", oom, retry={"max_attempts": 1})
    sim.call(ref, "schedule", 20, "tick")
    sim.run_until(10_500)
    assert oom_events(sim, ref) == [(1, 3, False)]
    assert strikes_stored(sim, ref) == 1
    assert sim.incarnation_of(ref) == 1
    sim.run_until(25_000)  # the tick at 20 s: a clean alarm in the same incarnation
    assert sim.incarnation_of(ref) == 1
    assert strikes_stored(sim, ref) is None


@on_release("0.21.0")
def test_schedules_written_while_the_table_was_known_empty_still_fire(sim: Simulation) -> None:
    """Heartbeats learn that no schedule is stored and stop reading the table; a schedule the
    runtime writes afterwards, and a row user SQL plants, still fire when due."""
    ref = sim.agent(ScheduleRecorder, "k")
    sim.call(ref, "hold_keep_alive")
    seen = count_statements(sim)
    sim.run_for(95_000)  # three heartbeats with no schedule
    assert len(sim.trace.select("alarm:fired", agent=ref.path)) == 3
    assert not [s for (_, s), n in seen.items() if "cf_agents_schedules WHERE" in s]
    created = sim.now_ms
    sim.call(ref, "schedule", 5, "tick", {"n": 1})
    sim.run_for(6_000)
    assert run_times(sim, ref, "tick") == [created + 5_000]
    assert schedule_rows(sim, ref) == []
    sim.run_for(30_000)  # a heartbeat: the delete left the table's emptiness unknown
    sim.call(ref, "plant_row", "planted", "tick", '{"n": 2}')
    sim.run_for(1_000)
    assert len(run_times(sim, ref, "tick")) == 2
    assert schedule_rows(sim, ref) == []
