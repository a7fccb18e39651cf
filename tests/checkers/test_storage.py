"""`turns_atomic`: replaying the journal of committed turns gives the committed storage. A run
with a crash mid-turn passes; a storage whose rollback lets a dying turn's writes land, and
crafted journals and rows, are caught with the first difference named."""

from __future__ import annotations

import dataclasses

import pytest

from sim.checkers import CheckContext, check
from sim.sqlite import FaultyStorage
from tests.checkers.agents import scenario_context, with_row

W = "Counter/worker"
CRASH_MID_TURN = """
    name: crash-mid-turn
    description: the process dies before the third count's INSERT
    seed: 3
    agents:
      worker: {class: "scenarios.workloads:Counter", options: {step_ms: 5s}}
    steps:
      - arm_storage_fault: {agent: worker, kind: crash, match: "INSERT INTO counts", skip: 2}
      - call: {agent: worker, method: work, args: [5], expect_error: AgentEvicted}
      - after: 1m
        call: {agent: worker, method: increment}
"""


def messages(context: CheckContext) -> list[str]:
    return [v.message for v in check(context, ["turns_atomic"])]


@pytest.fixture(scope="module")
def crashed() -> CheckContext:
    return scenario_context(CRASH_MID_TURN, sdk="0.21.0")  # 0.21.0's statements


def test_a_crash_mid_turn_leaves_exactly_the_committed_turns(crashed: CheckContext) -> None:
    """The dying turn left nothing behind: the journal replays to the committed storage."""
    assert [r["source"] for r in crashed.table(W, "counts")] == ["work", "work", "increment"]
    assert len(crashed.journals[W]) > 3
    assert messages(crashed) == []


def test_a_rollback_that_lets_the_dying_turn_land_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A storage whose rollback commits the dying turn's earlier writes (a partial turn lands)
    no longer matches its journal: the state the dying count wrote is there."""

    def rollback_that_commits(self: FaultyStorage) -> None:
        self._crash_after_commit = None
        if self._in_turn:
            self._in_turn = False
            self._db.execute("COMMIT")
            self._pending = []
            self._kernel.leave_turn(self)

    # The crash comes at the second count's state write, after its INSERT in the same turn (the
    # fourth upsert: the schema version and extras rows, then one state row per count).
    mid_turn = CRASH_MID_TURN.replace(
        'match: "INSERT INTO counts", skip: 2', 'match: "ON CONFLICT\\\\(id\\\\)", skip: 3'
    )
    healthy = scenario_context(mid_turn, sdk="0.21.0")
    assert [r["source"] for r in healthy.table(W, "counts")] == ["work", "increment"]
    assert messages(healthy) == []
    monkeypatch.setattr(FaultyStorage, "rollback_turn", rollback_that_commits)
    assert messages(scenario_context(mid_turn, sdk="0.21.0")) == [
        f"the committed storage of {W} is not what its 3 committed turns give: row 2 of its "
        'table counts is {"at_ms": 5000, "id": 2, "source": "work"}, but its committed turns '
        'give {"at_ms": 65000, "id": 2, "source": "increment"}'
    ]


def test_a_committed_turn_missing_from_storage_is_caught(crashed: CheckContext) -> None:
    """A row the journal inserts but the storage lacks (a committed turn lost) is named."""
    rows = crashed.table(W, "counts")
    broken = dataclasses.replace(
        crashed, storage={**crashed.storage, W: {**crashed.storage[W], "counts": rows[:2]}}
    )
    turns = len(crashed.journals[W])
    assert messages(broken) == [
        f"the committed storage of {W} is not what its {turns} committed turns give: its table "
        "counts has 2 row(s) where its committed turns give 3: it lacks "
        '{"at_ms": 70000, "id": 3, "source": "increment"}'
    ]


def test_a_row_that_differs_is_named_with_both_values(crashed: CheckContext) -> None:
    """A committed row changed behind the journal's back shows both versions."""
    broken = with_row(crashed, W, "counts", {"id": 2}, source="partial")
    turns = len(crashed.journals[W])
    assert messages(broken) == [
        f"the committed storage of {W} is not what its {turns} committed turns give: row 2 of "
        'its table counts is {"at_ms": 5000, "id": 2, "source": "partial"}, but its committed '
        'turns give {"at_ms": 5000, "id": 2, "source": "work"}'
    ]


def test_a_table_or_a_statement_only_one_side_knows_is_caught(crashed: CheckContext) -> None:
    """A table no turn created, and a journal statement that cannot replay, are each named."""
    extra = dataclasses.replace(
        crashed, storage={**crashed.storage, W: {**crashed.storage[W], "ghost": []}}
    )
    assert messages(extra)[0].endswith(
        "give: its table ghost exists, but no committed turn created it"
    )
    journal = [*crashed.journals[W], (("INSERT INTO nowhere VALUES (?)", (1,)),)]
    unplayable = dataclasses.replace(crashed, journals={**crashed.journals, W: journal})
    assert messages(unplayable) == [
        f"the committed storage of {W} is not what its {len(journal)} committed turns give: "
        f"committed turn {len(journal)} does not replay (no such table: nowhere: INSERT INTO "
        "nowhere VALUES (?))"
    ]


def test_a_hand_built_context_without_journals_has_nothing_to_replay() -> None:
    """No journal, no check: a context built by hand is not flagged."""
    assert messages(CheckContext(records=(), storage={W: {"counts": [{"id": 1}]}})) == []


def test_a_wipe_of_the_kv_table_deletes_every_key_written_before_it() -> None:
    """A destroy's wipe journals `DELETE FROM _cf_KV`: every key put before it reads as deleted
    from then on (a count kept in KV starts afresh), and a key put after it stands."""
    from sim.checkers.storage import kv_writes

    put = "INSERT INTO _cf_KV (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = ?"
    turns = [
        [(put, ("cf:strikes", "1", "1")), (put, ("other", "2", "2"))],
        [("DELETE FROM _cf_KV", ())],
        [(put, ("cf:strikes", "1", "1"))],
    ]
    writes = [(w.key, w.value, w.turn) for w in kv_writes(turns, "cf:")]
    assert writes == [("cf:strikes", 1, 1), ("cf:strikes", None, 2), ("cf:strikes", 1, 3)]


UPGRADED_THEN_DESTROYED = """
    name: upgraded-then-destroyed
    description: >
      a 0.21.0 schedules agent is upgraded at once; the first 0.32.0 call destroys it, in the
      turn whose startup dropped the migrated cf_agents_schedules, uncommitted
    seed: 0
    sdk: "0.21.0"
    agents:
      sched:
        workload: schedules
        schedules: [{name: s1, every: "2s", runs: 1}]
    steps:
      - at: 0s
        call: {agent: sched, method: status, wait: false}
      - at: 0s
        deploy: {sdk: "0.32.0"}
      - at: 1s
        call: {agent: sched, method: destroy_agent, args: [null, false], wait: false,
               may_fail_with: AgentEvicted}
"""


def test_a_destroy_wipes_a_table_its_own_turn_dropped_uncommitted() -> None:
    """The wipe journals a drop of every table the committed turns hold, not only of those the
    live database still has: a table the destroying turn dropped is dropped in the journal too,
    so the journal replays to the storage (found by generate on 0.32.0)."""
    context = scenario_context(UPGRADED_THEN_DESTROYED)
    assert messages(context) == []
    assert any(
        statement == 'DROP TABLE IF EXISTS "cf_agents_schedules"'
        for turn in context.journals["ScheduleWorkload/sched"]
        for statement, _values in turn
    )
