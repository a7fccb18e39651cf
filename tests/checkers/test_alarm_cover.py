"""`alarm_covers_schedules`: the slot is armed by each stored row's due time, and a re-arm that
could not read its sources (a failed SELECT in its instant) arms a check-back that never
postpones the alarm already pending. A schedules agent whose third write's re-arm fails: the
slot stays at the one-shot's 2 s; a slot armed later (a check-back that postponed it, or a
re-arm that forgot the row) is caught."""

from __future__ import annotations

import dataclasses

import pytest

from sim.checkers import CheckContext, check
from tests.checkers.agents import fails_with_a_blind_checker, found_context, scenario_context

S = "ScheduleWorkload/sched"
STORY = """
    name: rearm
    description: a re-arm whose read of the alarm's sources fails
    seed: 1
    agents:
      sched:
        workload: schedules
        schedules:
          - {name: s1, after: 2s}
          - {name: s2, after: 1m}
          - {name: s3, every: 20s, runs: 2}
    steps:
      - arm_storage_fault:
          {agent: sched, kind: error, match: '^SELECT .*FROM cf_agents_schedules\\b', skip: 4}
      - call: {agent: sched, method: status, may_fail_with: StorageError}
      - run_for: 3m
"""


def messages(context: CheckContext) -> list[str]:
    return [v.message for v in check(context, ["alarm_covers_schedules"])]


def _moved(context: CheckContext, seq: int, at: int) -> CheckContext:
    records = [
        dataclasses.replace(r, fields={**r.fields, "at": at}) if r.seq == seq else r
        for r in context.records
    ]
    return dataclasses.replace(context, records=tuple(records))


def test_a_failed_re_arm_keeps_the_earlier_alarm_and_a_later_slot_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    context = scenario_context(STORY, sdk="0.21.0")  # 0.21.0's re-arm and alarm writes
    faults = context.events("fault:storage_error", S)
    assert len(faults) == 1 and faults[0].get("statement").startswith("SELECT MIN(time)")
    sets = context.records_of(S, "alarm:set")
    after_fault = next(r for r in sets if r.seq > faults[0].seq)
    assert after_fault.get("at") == 2_000
    assert messages(context) == []

    postponed = _moved(context, after_fault.seq, 30_000)

    def caught(ctx: CheckContext) -> None:
        found = messages(ctx)
        assert len(found) == 1 and "a re-arm after a failed read" in found[0]
        assert "later than 00:00:02.000" in found[0]

    caught(postponed)
    # A plain re-arm later than a stored row's due time: the 2 m alarm set at 42 s armed 1 s
    # past the one-shot s2 (due at 1 m) is named with the row.
    plain = next(r for r in sets if r.t_ms == 42_000 and r.get("at") == 60_000)
    late = messages(_moved(context, plain.seq, 61_000))
    assert len(late) == 1 and "later than schedule" in late[0] and "(due 00:01:00.000)" in late[0]
    fails_with_a_blind_checker(monkeypatch, "alarm_covers_schedules", caught, postponed)


ROLLED_BACK = """
    name: rearm-rolled-back
    description: a re-create whose turn crashes after the re-arms; the rollback puts the slot back
    seed: 1
    agents:
      sched:
        workload: schedules
        schedules:
          - {name: s1, after: 2m}
          - {name: s2, after: 5m}
    steps:
      - call: {agent: sched, method: status}
      - at: 30s
        arm_storage_fault:
          {agent: sched, kind: crash, match: '^INSERT INTO workload_schedules\\b', skip: 0}
      - at: 30s
        call: {agent: sched, method: recreate, args: [s1], may_fail_with: AgentEvicted}
      - run_for: 10m
"""


def test_a_re_arm_in_a_turn_that_rolled_back_is_not_judged() -> None:
    """The re-create deletes s1 (due at 2 m) and re-arms for later, then its turn crashes: the
    platform puts the slot back at 2 m (`alarm:set {rolled_back}`), and the rows it was judged
    by are the committed ones, so the uncommitted re-arms are not judged; a slot the rollback
    put back later than the row is still caught."""
    context = scenario_context(ROLLED_BACK, sdk="0.21.0")  # 0.21.0's re-arm
    sets = [r for r in context.records_of(S, "alarm:set") if r.t_ms == 30_000]
    undone = [r for r in sets if not r.get("rolled_back")]
    (restored,) = [r for r in sets if r.get("rolled_back")]
    assert restored.get("at") == 120_000
    assert undone and all(r.get("at") > 120_000 for r in undone)
    assert messages(context) == []
    late = messages(_moved(context, restored.seq, 121_000))
    assert len(late) == 1 and "(due 00:02:00.000)" in late[0]


def test_a_slot_put_back_at_a_check_back_already_judged_is_not_judged_again() -> None:
    """Found by generate on 0.21.0: a re-arm after a failed read armed a check-back past an
    overdue interval (allowed: it may not have read the rows), then a crash rolled a later turn
    back and the platform put that same slot back (`alarm:set {rolled_back}`). That is the arm
    judged before, not a re-arm; moved a second later, it is one, and is caught."""
    context = found_context("alarm-slot-put-back-after-a-check-back")
    hub = "ScheduleWorkload/hub"
    restored = [r for r in context.records_of(hub, "alarm:set") if r.get("rolled_back")][0]
    # The last arm of an earlier instant: the rolled-back turn's own re-arms are not it.
    earlier = [r for r in context.records_of(hub, "alarm:set") if r.t_ms < restored.t_ms][-1]
    assert earlier.get("at") == restored.get("at") == 414_000
    assert messages(context) == []
    assert len(messages(_moved(context, restored.seq, 415_000))) == 1
