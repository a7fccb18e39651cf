"""`deferred_job_kept` (sdk-0.32 §2.4, J-29): a job whose dispatch ends in a platform failure is
kept with its time and its dispatch marker cleared, and the alarm's retry runs it; a run that
left the marker set is caught; 0.21.0, which keeps no jobs, is not judged."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from sim.checkers import CheckContext
from tests.checkers.agents import fails_with_a_blind_checker, messages_of, scenario_context

SCHED = "ScheduleWorkload/sched"
LOSES_THE_NETWORK = """
    name: poll-loses-the-network
    description: an interval whose first two runs lose the network
    seed: 1
    agents:
      sched:
        workload: schedules
        setup: call
        schedules:
          - {name: poll, every: 1m, runs: 3, fail: 2, fail_as: network, attempts: 1}
    steps:
      - call: {agent: sched, method: setup}
      - run_for: 10m
"""


@pytest.fixture(scope="module")
def loses_the_network() -> CheckContext:
    return scenario_context(LOSES_THE_NETWORK, sdk="0.32.0")


def messages(context: CheckContext) -> list[str]:
    return messages_of(context, "deferred_job_kept")


def test_a_job_a_platform_failure_cut_is_kept_and_retried(loses_the_network) -> None:
    """Each failure rejects the alarm; the platform's retry runs the job again at once."""
    failed = loses_the_network.events("alarm:failed", SCHED)
    executed = [r.t_ms for r in loses_the_network.events("schedule:execute", SCHED)]
    assert [r.t_ms for r in failed] == [60_000, 62_000]
    assert executed[:3] == [60_000, 62_000, 66_000]
    assert messages(loses_the_network) == []


def _marker_kept(context: CheckContext) -> CheckContext:
    """The journal as a driver that forgot to clear the marker would leave it: every write that
    only clears a job's `running` removed."""
    journal = tuple(
        tuple(
            (sql, params)
            for sql, params in turn
            if not (sql.startswith("UPDATE cf_agents_jobs SET running = 0"))
        )
        for turn in context.journals[SCHED]
    )
    return dataclasses.replace(context, journals={**context.journals, SCHED: journal})


def test_a_job_left_marked_running_is_caught(loses_the_network) -> None:
    found = messages(_marker_kept(loses_the_network))
    assert found, "the rewritten journal still clears the marker"
    assert "failed at 00:01:00.000 while driving job" in found[0]
    assert "left with running 1" in found[0]


def test_a_release_without_jobs_is_not_judged() -> None:
    """0.21.0 keeps its schedules in `cf_agents_schedules` and defers only one-shots."""
    context = scenario_context(LOSES_THE_NETWORK, sdk="0.21.0")
    assert context.table(SCHED, "cf_agents_jobs") == []
    assert messages(_marker_kept(context)) == []


@pytest.mark.parametrize("test", [test_a_job_left_marked_running_is_caught])
def test_the_catching_test_fails_with_a_blind_checker(
    test: Callable[[CheckContext], None],
    loses_the_network: CheckContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fails_with_a_blind_checker(monkeypatch, "deferred_job_kept", test, loses_the_network)
