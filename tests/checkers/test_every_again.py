"""`schedule_dedupe_keys` on a changed period: `every_again` asks `schedule_every` for another
interval of a schedule's callback and payload, which is another dedupe key (a row of its own),
while the same interval answers the row there. A dedupe that ignores the interval is caught."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sim.checkers import CheckContext
from tests.checkers.agents import (
    fails_with_a_blind_checker,
    messages_of,
    scenario_context,
    with_record,
    without,
)

SCHED = "ScheduleWorkload/sched"
PERIOD_CHANGED = """
    name: poll-period-changed
    description: a user changes a poll's period, then asks for the first period again
    seed: 1
    agents:
      sched:
        workload: schedules
        setup: call
        schedules:
          - {name: poll, every: 10s, runs: 4}
    steps:
      - call: {agent: sched, method: setup}
      - at: 5s
        call: {agent: sched, method: every_again, args: [poll, 60]}
      - at: 6s
        call: {agent: sched, method: every_again, args: [poll, 10]}
      - run_for: 5m
"""


@pytest.fixture(scope="module", params=["0.21.0", "0.32.0"])
def period_changed(request: pytest.FixtureRequest) -> CheckContext:
    return scenario_context(PERIOD_CHANGED, sdk=request.param)


def messages(context: CheckContext) -> list[str]:
    return messages_of(context, "schedule_dedupe_keys")


def test_another_period_is_a_row_of_its_own_and_the_same_one_is_not(period_changed) -> None:
    first, other, same = period_changed.events("workload:scheduled", SCHED)
    assert [r.get("every") for r in (first, other, same)] == [None, 60, 10]
    assert other.get("scheduleId") != first.get("scheduleId")
    assert same.get("scheduleId") == first.get("scheduleId")
    assert messages(period_changed) == []


def test_another_period_answered_with_the_old_row_is_caught(period_changed) -> None:
    """What a dedupe that ignores the interval answers: the 10 s row for a 60 s request."""
    first, other, _same = period_changed.events("workload:scheduled", SCHED)
    answered = with_record(
        without(period_changed, lambda r: r.seq == other.seq),
        other.seq - 1,
        other,
        scheduleId=first.get("scheduleId"),
    )
    found = messages(answered)
    assert len(found) == 1
    message = found[0]
    assert "for its interval schedule 'poll' (callback workload_tick, payload" in message
    assert "every 60 s) and was answered schedule" in message
    assert message.endswith("interval 10 s: a dedupe answered with a row of another key")


@pytest.mark.parametrize("test", [test_another_period_answered_with_the_old_row_is_caught])
def test_the_catching_test_fails_with_a_blind_checker(
    test: Callable[[CheckContext], None],
    period_changed: CheckContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fails_with_a_blind_checker(monkeypatch, "schedule_dedupe_keys", test, period_changed)


def test_every_again_refuses_a_schedule_that_is_not_an_interval() -> None:
    """Only an interval schedule has a period to change; the error says which kind it is."""
    text = PERIOD_CHANGED.replace("{name: poll, every: 10s, runs: 4}", "{name: poll, after: 1m}")
    with pytest.raises(AssertionError, match="every_again takes an interval one"):
        scenario_context(text)
