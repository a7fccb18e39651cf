"""One form for times in a failure: an alarm's `at`/`was` fields read `00:03:10.000`, like the
time column and the short log, in expectation failures and in an invariant violation's trace
tail; a time an expectation asks for in ms also shows that form."""

from __future__ import annotations

from scenarios import parse_scenario, run_scenario
from sim import TraceRecord
from sim.checkers import render_record

SCENARIO = """\
name: alarm-time
description: An alarm set at 3m10s, expected a millisecond later.
seed: 1
faults: none
agents:
  counter: {class: "scenarios.workloads:Counter"}
steps:
  - call: {agent: counter, method: arm, args: [190000]}
expect:
  - event: alarm:set
    agent: counter
    fields: {at: 190001}
    count: {exactly: 1}
"""


def test_an_expectation_failure_shows_alarm_times_in_one_form() -> None:
    (failure,) = run_scenario(parse_scenario(SCENARIO, "a.yaml")).failures
    assert "with at=00:03:10.001 (190001 ms)" in failure, failure
    assert "alarm:set Counter/counter#1 at 00:00:00.000 (at=00:03:10.000)" in failure, failure
    assert "at=190000" not in failure


def test_the_trace_tail_of_a_violation_shows_alarm_times_as_the_time_column() -> None:
    line = render_record(TraceRecord(9, 1000, "Counter/c", 1, "alarm:set", {"at": 190000}))
    assert line == "#9     00:00:01.000  Counter/c#1  alarm:set  at=00:03:10.000"
    other = render_record(TraceRecord(3, 0, "Counter/c", 1, "schedule:created", {"at": 5}))
    assert other.endswith("schedule:created  at=5")  # not a sim time of the alarm slot
