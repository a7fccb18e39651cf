"""An alarm write belongs to its turn: a crash that rolls the turn's rows back puts the alarm slot
back as it was before the turn, as the platform confirms a turn's writes (alarm included)
together."""

from __future__ import annotations

from scenarios.language.loader import parse_scenario
from scenarios.run.runner import run_scenario

STORY = """
name: cancel-rolled-back
description: a cancel whose turn dies after it deleted the schedule's row and the alarm
seed: 3
faults: none
agents:
  sched:
    workload: schedules
    schedules: [{{name: s1, every: "3m55s", runs: 2}}]
steps:
  - call: {{agent: sched, method: status}}
  - arm_storage_fault: {{agent: sched, kind: {kind}, match: '^UPDATE workload_schedules SET'}}
  - at: 2s
    call: {{agent: sched, method: cancel, args: ["s1"], wait: false, may_fail_with: AgentEvicted}}
expect:
  - invariants: all
"""


def _run(kind: str):
    return run_scenario(parse_scenario(STORY.format(kind=kind), "cancel-rolled-back.yaml"))


def _events(result, name: str):
    return [r for r in result.trace if r.event == name and r.agent == "ScheduleWorkload/sched"]


def test_a_crash_after_a_cancel_puts_the_alarm_back_with_the_row() -> None:
    """The cancel deletes the row and the alarm, then dies on its own bookkeeping: the row is
    rolled back, and so is the alarm (an `alarm:set` marked rolled_back, at the time it held),
    so the interval still fires at 3m55s and every invariant holds."""
    result = _run("crash")
    assert result.failures == (), result.failures
    put_back = [r for r in _events(result, "alarm:set") if r.fields.get("rolled_back")]
    assert [r.fields["at"] for r in put_back] == [235_000]
    runs = [r for r in _events(result, "schedule:execute")]
    assert runs and runs[0].t_ms >= 235_000


def test_an_error_that_lets_the_turn_commit_keeps_the_alarm_deleted() -> None:
    """With a storage error instead (the turn commits what it wrote), the cancel's delete of the
    alarm stands: nothing is put back and the schedule never runs."""
    result = _run("error")
    assert not [r for r in _events(result, "alarm:set") if r.fields.get("rolled_back")]
    assert not _events(result, "schedule:execute")
