"""What follows one schedule run — `interval_runs_on_time` and `one_shot_retried_when_cut` — on
a poller every 5 s and an export one-shot that a deploy cuts short mid-callback: the healthy run
passes; an interval whose running flag is never cleared (the runtime patched), crafted late runs
and a one-shot never run again after its cut are caught, with what excuses them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from agents_core.schedule_dispatch import ScheduleDispatch
from sim.checkers import CheckContext, check
from sim.trace import TraceRecord
from tests.checkers.agents import (
    fails_with_a_blind_checker,
    record,
    scenario_context,
    with_record,
    without,
)

OPS = "ScheduleWorkload/ops"
CADENCE = """
    name: cadence
    description: a poller every 5 s and an export one-shot a deploy cuts short mid-callback
    seed: 5
    agents:
      ops:
        workload: schedules
        schedules:
          - {name: poll, every: 5s, runs: 4, work: 1s}
          - {name: export, after: 30s, work: 20s}
    steps:
      - call: {agent: ops, method: status}
      - at: 40s
        deploy_all: {}
      - run_until: 3m
"""


@pytest.fixture(scope="module")
def cadence() -> CheckContext:
    return scenario_context(CADENCE, sdk="0.21.0")  # 0.21.0's schedule rows


def schedule_id(context: CheckContext, name: str) -> str:
    (made,) = context.events("workload:scheduled", OPS, name=name)
    return str(made.get("scheduleId"))


def executions(context: CheckContext, name: str) -> list[TraceRecord]:
    return context.events("schedule:execute", OPS, id=schedule_id(context, name))


def messages(context: CheckContext, name: str) -> list[str]:
    return [v.message for v in check(context, [name])]


def test_the_poller_keeps_its_cadence_and_the_cut_export_runs_again(cadence) -> None:
    """Each poll runs 5 s after the previous one completed; the export cut by the deploy at
    40 s runs again when the platform retries the alarm."""
    assert [r.t_ms for r in executions(cadence, "poll")] == [5_000, 11_000, 17_000, 23_000]
    assert [r.t_ms for r in executions(cadence, "export")] == [30_000, 42_000]
    assert check(cadence, ["interval_runs_on_time", "one_shot_retried_when_cut"]) == []


# -- interval_runs_on_time ------------------------------------------------------------------------
def test_an_interval_whose_running_flag_stays_set_is_caught(monkeypatch) -> None:
    """The runtime advancing an interval row without clearing `running` holds the next run back
    until the 30 s hung timeout (then the export holds the slot, and the deploy at 40 s comes
    after the poll was due, so it excuses nothing); `schedules_fire` allows that much, this rule
    does not."""
    original = ScheduleDispatch._advance_schedule_row

    def advance_keeping_the_flag(self: Any, row: dict[str, Any]) -> None:
        if row["type"] != "interval":
            original(self, row)
            return
        next_s = self.host.clock.now_ms() // 1000 + (row["intervalSeconds"] or 0)
        self.sql("UPDATE cf_agents_schedules SET time = ? WHERE id = ?", next_s, row["id"])

    monkeypatch.setattr(ScheduleDispatch, "_advance_schedule_row", advance_keeping_the_flag)
    stuck = scenario_context(CADENCE, sdk="0.21.0")  # the broken dispatch is 0.21.0's
    poll = schedule_id(stuck, "poll")
    assert [r.t_ms for r in executions(stuck, "poll")][:2] == [5_000, 42_000]
    assert check(stuck, ["schedules_fire"]) == []
    assert messages(stuck, "interval_runs_on_time") == [
        f"interval schedule {poll} (every 5 s, callback workload_tick) of {OPS} ran at "
        "00:00:05.000 in an alarm run that completed at 00:00:06.000, so it was due again by "
        "00:00:11.000 and should have run by 00:00:11.000, but it ran again at 00:00:42.000"
    ]


def test_an_interval_run_late_is_caught_unless_something_cut_it(cadence) -> None:
    """Without its run at 11 s the poll that completed at 6 s next runs at 17 s: late. A death,
    a cancel or a failed alarm run between excuses it."""
    second = executions(cadence, "poll")[1]
    late = without(cadence, lambda r: r == second)
    poll = schedule_id(cadence, "poll")
    assert messages(late, "interval_runs_on_time") == [
        f"interval schedule {poll} (every 5 s, callback workload_tick) of {OPS} ran at "
        "00:00:05.000 in an alarm run that completed at 00:00:06.000, so it was due again by "
        "00:00:11.000 and should have run by 00:00:11.000, but it ran again at 00:00:17.000"
    ]
    first = executions(late, "poll")[0]
    for excuse in (
        record(0, 8_000, OPS, 1, "incarnation:end", reason="explicit"),
        record(0, 8_000, OPS, 1, "schedule:cancel", id=poll, callback="workload_tick"),
        record(0, 8_000, OPS, 1, "alarm:failed", attempt=0, error="boom"),
    ):
        done = next(r for r in late.events("alarm:done", OPS) if r.seq > first.seq)
        excused = with_record(late, done.seq, excuse, t_ms=8_000)
        assert messages(excused, "interval_runs_on_time") == [], excuse.event


def test_an_interval_whose_row_was_deleted_in_time_owes_no_run(cadence) -> None:
    """A committed turn that deleted the poll's row by the time it was due again excuses the
    missing run, whether or not a `schedule:cancel` was written (a sub-agent writes its cancel
    only once its root answered, and a storage fault after the root's delete loses it): here a
    DELETE of the row is added to the journal at 8 s, and at 12 s (after the due time) it does
    not excuse."""
    second = executions(cadence, "poll")[1]
    late = without(cadence, lambda r: r == second)
    poll = schedule_id(cadence, "poll")
    delete = (("DELETE FROM cf_agents_schedules WHERE id = ?", (poll,)),)
    journal, instants = list(late.journals[OPS]), list(late.journal_ms[OPS])
    at = next(n for n, ms in enumerate(instants) if ms > 8_000)
    deleted = dataclasses.replace(
        late,
        journals={**late.journals, OPS: (*journal[:at], delete, *journal[at:])},
        journal_ms={**late.journal_ms, OPS: (*instants[:at], 8_000, *instants[at:])},
    )
    assert messages(deleted, "interval_runs_on_time") == []
    at = next(n for n, ms in enumerate(instants) if ms > 12_000)
    too_late = dataclasses.replace(
        late,
        journals={**late.journals, OPS: (*journal[:at], delete, *journal[at:])},
        journal_ms={**late.journal_ms, OPS: (*instants[:at], 12_000, *instants[at:])},
    )
    assert len(messages(too_late, "interval_runs_on_time")) == 1


def test_an_interval_waits_for_a_long_alarm_run_that_holds_the_slot(cadence) -> None:
    """When an alarm run that started before the poll came due still runs, the poll may wait
    for its end (1 ms later, as the re-arm asks): here the run at 11 s is replaced by one from
    10 s to 16.999 s, and the poll next runs at 17 s."""
    gone = without(cadence, lambda r: r.agent == OPS and 11_000 <= r.t_ms <= 12_000)
    first_done = [r for r in gone.events("alarm:done", OPS) if r.t_ms == 6_000][0]
    fired = gone.events("alarm:fired", OPS)[0]
    held = with_record(gone, first_done.seq, fired, t_ms=10_000)
    held = with_record(held, first_done.seq + 1, first_done, t_ms=16_999)
    assert messages(held, "interval_runs_on_time") == []
    longer = with_record(gone, first_done.seq, fired, t_ms=10_000)
    longer = with_record(longer, first_done.seq + 1, first_done, t_ms=16_998)
    assert len(messages(longer, "interval_runs_on_time")) == 1


# -- one_shot_retried_when_cut ---------------------------------------------------------------------
def test_a_one_shot_cut_mid_callback_and_never_run_again_is_caught(cadence) -> None:
    """Without its run after the deploy, the export whose alarm run died mid-callback is named;
    a cancel after it, or another row run after it in that alarm run, excuses it; a cancel in a
    turn that crashed in its instant does not."""
    cut, again = executions(cadence, "export")
    export = schedule_id(cadence, "export")
    lost = without(cadence, lambda r: r == again)
    assert messages(lost, "one_shot_retried_when_cut") == [
        f"delayed schedule {export} (callback workload_tick) of {OPS} ran at 00:00:30.000 in an "
        "alarm run that interrupted (deploy) at 00:00:40.000 before its callback returned, and "
        "never ran again by the end (00:03:13.338, quiet)"
    ]
    cancel = record(0, 45_000, OPS, 2, "schedule:cancel", id=export, callback="workload_tick")
    deploy = next(r for r in lost.events("incarnation:end", OPS))
    cancelled = with_record(lost, deploy.seq, cancel, t_ms=45_000)
    assert messages(cancelled, "one_shot_retried_when_cut") == []
    crash = record(0, 45_000, OPS, 2, "incarnation:end", reason="crash")
    rolled_back = with_record(cancelled, deploy.seq + 1, crash, t_ms=45_000)
    assert len(messages(rolled_back, "one_shot_retried_when_cut")) == 1
    (cut,) = executions(lost, "export")
    moved_on = with_record(lost, cut.seq, cut, id="another", t_ms=35_000)
    assert messages(moved_on, "one_shot_retried_when_cut") == []
    no_liveness = without(lost, lambda r: r.event.startswith("quiesce:"))
    quiet_unknown = dataclasses.replace(no_liveness, quiet=None)
    assert messages(quiet_unknown, "one_shot_retried_when_cut") == []


def test_a_one_shot_whose_row_was_deleted_before_the_cut_owes_no_second_run(cadence) -> None:
    """A turn that committed the row's delete by the cut shows the callback returned (the loop
    deletes a one-shot only then), or a cancel took the row before the run that had selected it:
    no row is left to run again. Here the delete the re-run committed is moved into the cut
    run's instant, then before its execution; after the cut it excuses nothing."""
    cut, again = executions(cadence, "export")
    export = schedule_id(cadence, "export")
    lost = without(cadence, lambda r: r == again)
    journal, instants = lost.journals[OPS], list(lost.journal_ms[OPS])
    (deleted,) = [
        n
        for n, turn in enumerate(journal)
        if any(st.startswith("DELETE FROM cf_agents_schedules") and export in p for st, p in turn)
    ]
    assert instants[deleted] > 40_000  # the re-run's
    instants[deleted] = 40_000
    returned = dataclasses.replace(lost, journal_ms={**lost.journal_ms, OPS: tuple(instants)})
    assert messages(returned, "one_shot_retried_when_cut") == []
    instants[deleted] = cut.t_ms - 1
    before = dataclasses.replace(lost, journal_ms={**lost.journal_ms, OPS: tuple(instants)})
    assert messages(before, "one_shot_retried_when_cut") == []
    instants[deleted] = 40_001
    after = dataclasses.replace(lost, journal_ms={**lost.journal_ms, OPS: tuple(instants)})
    assert len(messages(after, "one_shot_retried_when_cut")) == 1


@pytest.mark.parametrize(
    ("name", "test"),
    [
        ("interval_runs_on_time", test_an_interval_run_late_is_caught_unless_something_cut_it),
        (
            "one_shot_retried_when_cut",
            test_a_one_shot_cut_mid_callback_and_never_run_again_is_caught,
        ),
    ],
)
def test_the_catching_tests_fail_with_a_blind_checker(
    name: str,
    test: Callable[[CheckContext], None],
    cadence: CheckContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each test above goes red when its checker is replaced by one that finds nothing."""
    fails_with_a_blind_checker(monkeypatch, name, test, cadence)


FACET = """
    name: facet-dispatch
    description: a sub-agent's interval whose dispatch fails when the sub-agent dies mid-callback
    seed: 1
    agents:
      sched:
        workload: schedules
        schedules:
          - {name: s1, every: 10s, runs: 4, work: 3s}
        sub_agents: [w1]
    steps:
      - call: {agent: sched, method: status}
      - call: {agent: sched, method: open, args: [w1]}
      - at: 14s
        evict: {agent: sched/w1}
      - run_for: 2m
"""
W1 = "ScheduleWorkload/sched/ScheduleWorkload/w1"


def test_a_sub_agent_s_interval_whose_dispatch_failed_is_tried_again_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """w1 dies mid-callback at 14 s: the root's dispatch fails, and the root's next alarm run
    (1 ms later) runs the interval again. With that execution gone from the trace (a running
    flag left set holds the row until the hung timeout), the checker names the failure and the
    run that should have tried it; a storage fault in between excuses it."""
    context = scenario_context(FACET, sdk="0.21.0")
    (failure,) = [r for r in context.events("schedule:error", "ScheduleWorkload/sched")]
    retried = [r for r in context.events("schedule:execute", W1) if r.t_ms == 14_001]
    assert failure.t_ms == 14_000 and len(retried) == 1
    assert check(context, ["facet_interval_redispatched"]) == []

    def caught(ctx: CheckContext) -> None:
        found = check(ctx, ["facet_interval_redispatched"])
        assert [v.message for v in found] and "failed to dispatch at 00:00:14.000" in (
            found[0].message
        )

    held = without(context, lambda r: r.seq == retried[0].seq)
    caught(held)
    fails_with_a_blind_checker(monkeypatch, "facet_interval_redispatched", caught, held)
    fault = record(0, 14_000, "ScheduleWorkload/sched", 1, "fault:storage_error", statement="x")
    assert check(with_record(held, failure.seq, fault), ["facet_interval_redispatched"]) == []
