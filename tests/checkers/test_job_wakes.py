"""`startup_fallback_armed` (sdk-0.32 §1.4, J-10, J-04) and `deadman_before_drive` (§2.4, J-11):
an alarm that finds jobs queued first arms a wake at least 30 s on, and the slot holds now + 30 s
when the first due job is driven; a run that wrote the slot otherwise is caught; 0.21.0, which
keeps no jobs, is not judged."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from sim.checkers import CheckContext
from sim.trace import TraceRecord
from tests.checkers.agents import (
    fails_with_a_blind_checker,
    inserted,
    messages_of,
    record,
    renumbered,
    scenario_context,
    without,
)

PARENT = "ToolsWorkload/parent"
COLD_WAKE = """
    name: job-due-on-a-cold-wake
    description: >-
      a tools parent is evicted before its reconcile tick comes due; the alarm wakes it cold,
      and its startup re-arms for the overdue tick
    seed: 1
    agents:
      parent:
        workload: tools
        runs:
          - {run_id: r1, detached: true, steps: [{sleep: "10s"}, {finish: completed}]}
    steps:
      - call: {agent: parent, method: dispatch}
      - at: 1s
        evict: {agent: parent, reason: idle}
      - run_for: 5m
"""


@pytest.fixture(scope="module")
def cold_wake() -> CheckContext:
    return scenario_context(COLD_WAKE, sdk="0.32.0")


def _first_run(context: CheckContext) -> tuple[TraceRecord, list[TraceRecord]]:
    """The first alarm run that executed a schedule: its `alarm:fired`, and its slot writes
    before the execution."""
    records = context.records_of(PARENT, "alarm:fired", "alarm:set", "schedule:execute")
    (execute,) = [r for r in records if r.event == "schedule:execute"][:1]
    fired = [r for r in records if r.event == "alarm:fired" and r.seq < execute.seq][-1]
    writes = [r for r in records if r.event == "alarm:set" and fired.seq < r.seq < execute.seq]
    return fired, writes


def test_a_cold_wake_arms_the_fallback_then_the_deadman(cold_wake) -> None:
    """The alarm fires at 0:05 on a cold agent: its first write is the fallback (0:35), startup
    re-arms for the overdue tick (0:05.001), and the deadman (0:35) is the write before the
    dispatch."""
    fired, writes = _first_run(cold_wake)
    assert fired.t_ms == 5_000 and fired.inc > 1
    assert [w.get("at") for w in writes] == [35_000, 5_001, 35_000]
    assert messages_of(cold_wake, "startup_fallback_armed", "deadman_before_drive") == []


def test_a_drive_without_the_deadman_is_caught(cold_wake) -> None:
    """The deadman's set removed: nothing armed the slot 30 s on after the handler began."""
    fired, writes = _first_run(cold_wake)
    doctored = without(cold_wake, lambda r: r.seq == writes[-1].seq)
    found = messages_of(doctored, "deadman_before_drive")
    assert len(found) == 1
    assert "fired at 00:00:05.000 dispatched due job" in found[0]
    assert "(the last: none)" in found[0]


SCHED = "ScheduleWorkload/sched"
INTERVAL_COLD_WAKE = """
    name: interval-on-a-cold-wake
    description: an interval schedule's agent is evicted between runs; its alarm wakes it cold
    seed: 1
    agents:
      sched:
        workload: schedules
        setup: call
        schedules:
          - {name: poll, every: "1m", runs: 2}
    steps:
      - call: {agent: sched, method: setup}
      - at: 30s
        evict: {agent: sched, reason: idle}
      - run_for: 5m
"""


@pytest.fixture(scope="module")
def interval_wake() -> CheckContext:
    return scenario_context(INTERVAL_COLD_WAKE, sdk="0.32.0")


def _first_set_after_firing(context: CheckContext) -> tuple[TraceRecord, TraceRecord]:
    fired = context.events("alarm:fired", SCHED)[0]
    first = next(r for r in context.records if r.seq > fired.seq and r.event == "alarm:set")
    return fired, first


def _fallback_at_the_job(context: CheckContext) -> CheckContext:
    """The run with its first alarm's fallback armed at the overdue job's own time, 1 ms on."""
    fired, first = _first_set_after_firing(context)
    records = [
        dataclasses.replace(r, fields={**r.fields, "at": fired.t_ms + 1})
        if r.seq == first.seq
        else r
        for r in context.records
    ]
    return dataclasses.replace(context, records=renumbered(records))


def test_an_interval_s_cold_wake_arms_the_fallback_first(interval_wake) -> None:
    """The alarm fires at 1:00 with the interval's row queued (it stays, re-timed): the first
    write, before startup, is the fallback at 1:30."""
    fired, first = _first_set_after_firing(interval_wake)
    assert (fired.t_ms, first.get("at")) == (60_000, 90_000)
    assert messages_of(interval_wake, "startup_fallback_armed") == []


def test_a_fallback_armed_at_the_overdue_job_is_caught(interval_wake) -> None:
    """The fallback's set moved to the job's own time (`min` for `max`): caught."""
    found = messages_of(_fallback_at_the_job(interval_wake), "startup_fallback_armed")
    assert len(found) == 1
    assert "(the first: a set for 00:01:00.001)" in found[0]
    assert "no earlier than 00:01:30.000" in found[0]


def test_a_fallback_whose_read_a_storage_fault_struck_is_not_judged(interval_wake) -> None:
    """Found by generate on 0.32.0: a storage error on the fallback's own read of the queue
    failed the alarm before it armed anything; the writes another delivery made meanwhile are
    no fallback, and the span is not judged."""
    fired = interval_wake.events("alarm:fired", SCHED)[0]
    fault = record(0, fired.t_ms, SCHED, fired.inc, "fault:storage_error", statement="SELECT 1")
    struck = inserted(_fallback_at_the_job(interval_wake), fired.seq, fault)
    assert messages_of(struck, "startup_fallback_armed") == []


def test_a_release_without_jobs_is_not_judged() -> None:
    for story in (COLD_WAKE, INTERVAL_COLD_WAKE):
        context = scenario_context(story, sdk="0.21.0")
        assert context.table(PARENT, "cf_agents_jobs") == []
        assert context.table(SCHED, "cf_agents_jobs") == []
        assert messages_of(context, "startup_fallback_armed", "deadman_before_drive") == []


@pytest.mark.parametrize(
    ("name", "test", "story"),
    [
        ("deadman_before_drive", test_a_drive_without_the_deadman_is_caught, "cold_wake"),
        (
            "startup_fallback_armed",
            test_a_fallback_armed_at_the_overdue_job_is_caught,
            "interval_wake",
        ),
    ],
)
def test_the_catching_tests_fail_with_a_blind_checker(
    name: str,
    test: Callable[[CheckContext], None],
    story: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each catching test goes red when its checker is replaced by one that finds nothing."""
    fails_with_a_blind_checker(monkeypatch, name, test, request.getfixturevalue(story))
