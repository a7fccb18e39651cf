"""`legacy_schedules_moved` (sdk-0.32 §6.3, J-71): once an agent's startup finished after the
upgrade to 0.32.0, no legacy schedule row is left; a move cut by a storage error is finished by
the next startup; rows left after a finished startup are caught; a crash after it is not judged."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sim.checkers import CheckContext
from tests.checkers.agents import (
    fails_with_a_blind_checker,
    messages_of,
    record,
    scenario_context,
    with_record,
    with_rows,
)

SCHED = "ScheduleWorkload/sched"
CUT_MOVE = """
    name: migration-cut-by-a-storage-error
    description: >-
      three schedules set up on 0.21.0; the upgrade's first startup fails pushing the second
      legacy row as a job; the next startup moves them all
    seed: 1
    agents:
      sched:
        workload: schedules
        setup: call
        schedules:
          - {name: tick, every: "1m", runs: 3}
          - {name: once, after: "5m"}
          - {name: hourly, cron: "0 * * * *", runs: 1}
    steps:
      - call: {agent: sched, method: setup}
      - at: 30s
        arm_storage_fault:
          agent: sched
          kind: error
          match: '^INSERT (OR [A-Z]+ )?INTO cf_agents_jobs\\b'
          skip: 1
      - at: 30s
        deploy: {sdk: "0.32.0"}
      - at: 40s
        call: {agent: sched, method: status, may_fail_with: StorageError}
      - run_for: 2h
"""
LEGACY_ROW = {"id": "legacy1", "callback": "workload_tick", "type": "delayed", "time": 300}


@pytest.fixture(scope="module")
def cut_move() -> CheckContext:
    return scenario_context(CUT_MOVE, sdk="0.21.0")


def test_a_move_cut_by_a_storage_error_is_finished_by_the_next_startup(cut_move) -> None:
    """The first 0.32.0 startup fails on the second push; the alarm's fallback wakes the agent
    30 s later, whose startup moves every row and drops the table: every schedule fires."""
    failed = cut_move.events("startup:failed", SCHED)
    assert len(failed) == 1 and "cf_agents_jobs" in str(failed[0].get("error"))
    assert cut_move.table(SCHED, "cf_agents_schedules") == []
    ran = {r.get("name") for r in cut_move.events("workload:schedule_done", SCHED)}
    assert ran == {"tick", "once", "hourly"}
    assert messages_of(cut_move, "legacy_schedules_moved") == []


def test_rows_left_after_a_finished_startup_are_caught(cut_move) -> None:
    """What a schema version stored before the move leaves: the rows stay in the legacy table
    though a later startup finished."""
    left = with_rows(cut_move, SCHED, "cf_agents_schedules", [LEGACY_ROW])
    found = messages_of(left, "legacy_schedules_moved")
    assert len(found) == 1
    assert "startup on 0.32.0 finished at 01:00:00.000" in found[0]
    assert "1 legacy schedule(s) are left in cf_agents_schedules (legacy1)" in found[0]


def test_a_crash_after_the_last_startup_is_not_judged(cut_move) -> None:
    left = with_rows(cut_move, SCHED, "cf_agents_schedules", [LEGACY_ROW])
    last = cut_move.events("startup:done", SCHED)[-1]
    crashed = with_record(
        left, last.seq, record(0, last.t_ms, SCHED, last.inc, "incarnation:end", reason="crash")
    )
    assert messages_of(crashed, "legacy_schedules_moved") == []


def test_a_run_that_never_upgraded_is_not_judged(cut_move) -> None:
    context = scenario_context(CUT_MOVE.replace('deploy: {sdk: "0.32.0"}', "deploy: {}"))
    assert (
        messages_of(
            with_rows(context, SCHED, "cf_agents_schedules", [LEGACY_ROW]), "legacy_schedules_moved"
        )
        == []
    )


@pytest.mark.parametrize("test", [test_rows_left_after_a_finished_startup_are_caught])
def test_the_catching_test_fails_with_a_blind_checker(
    test: Callable[[CheckContext], None],
    cut_move: CheckContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fails_with_a_blind_checker(monkeypatch, "legacy_schedules_moved", test, cut_move)
