"""`due_jobs_in_time_order` (sdk-0.32 §2.4, J-19): the jobs one alarm finds due run earliest first;
a run that drove them in another order is caught; 0.21.0, which keeps no jobs, is not judged."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from sim.checkers import CheckContext
from sim.trace import TraceRecord
from tests.checkers.agents import (
    fails_with_a_blind_checker,
    messages_of,
    renumbered,
    scenario_context,
)

SCHED = "ScheduleWorkload/sched"
DUE_TOGETHER = """
    name: jobs-due-together
    description: a long callback holds the alarm while four more schedules fall due
    seed: 1
    agents:
      sched:
        workload: schedules
        setup: call
        schedules:
          - {name: s1, after: 10s, work: 50s}
          - {name: s2, after: 40s}
          - {name: s3, after: 20s}
          - {name: s4, after: 30s}
          - {name: s5, after: 25s}
    steps:
      - call: {agent: sched, method: setup}
      - run_for: 5m
"""


@pytest.fixture(scope="module")
def due_together() -> CheckContext:
    return scenario_context(DUE_TOGETHER, sdk="0.32.0")


def messages(context: CheckContext) -> list[str]:
    return messages_of(context, "due_jobs_in_time_order")


def _executed_at(context: CheckContext, t_ms: int) -> list[TraceRecord]:
    return [r for r in context.events("schedule:execute", SCHED) if r.t_ms == t_ms]


def test_jobs_due_together_run_earliest_first(due_together) -> None:
    """The four schedules that fell due during s1's 50 s callback all run in the alarm that
    fires 1 ms after it ends (the slot its handler armed last), in due order, and the checker
    agrees."""
    assert len(_executed_at(due_together, 60_001)) == 4
    assert messages(due_together) == []


def test_a_run_in_another_order_is_caught(due_together) -> None:
    """The second and third executions of that run swapped: the first one out of order is
    named with the one it overtook."""
    records = list(due_together.records)
    second, third = _executed_at(due_together, 60_001)[1:3]
    i, j = records.index(second), records.index(third)
    records[i], records[j] = third, second
    swapped = dataclasses.replace(due_together, records=renumbered(records))
    found = messages(swapped)
    assert len(found) == 1
    assert "alarm run fired at 00:01:00.001 executed schedule" in found[0]
    assert "one alarm drives its due jobs earliest first" in found[0]


def test_a_release_without_jobs_is_not_judged() -> None:
    """0.21.0 keeps its schedules in `cf_agents_schedules` and names no order."""
    context = scenario_context(DUE_TOGETHER, sdk="0.21.0")
    assert context.table(SCHED, "cf_agents_jobs") == []
    assert messages(context) == []


@pytest.mark.parametrize("test", [test_a_run_in_another_order_is_caught])
def test_the_catching_test_fails_with_a_blind_checker(
    test: Callable[[CheckContext], None],
    due_together: CheckContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The catching test goes red when the checker is replaced by one that finds nothing."""
    fails_with_a_blind_checker(monkeypatch, "due_jobs_in_time_order", test, due_together)
