"""`failed_finish_redelivered` (S8): a detached run whose `on_finish` throws twice is delivered
again after each failure and passes; a failure never followed by another call is caught, unless
the run's row is gone or the failure's turn may have rolled back."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from sim.checkers import CheckContext, check
from tests.checkers.agents import (
    fails_with_a_blind_checker,
    found_context,
    record,
    scenario_context,
    with_record,
    with_rows,
    with_turn,
    without,
)

TOOLS = "ToolsWorkload/parent"
FLAKY = """
    name: flaky-webhook
    description: a detached import whose finish callback fails its first two calls
    seed: 13
    agents:
      parent:
        workload: tools
        runs:
          - run_id: import
            detached: {on_finish_fails: 2}
            steps: [{text: "Importing"}, {sleep: 1m}, {finish: {status: completed, summary: ok}}]
    steps:
      - call: {agent: parent, method: dispatch}
      - run_until: 15m
"""


@pytest.fixture(scope="module")
def flaky() -> CheckContext:
    return scenario_context(FLAKY)


def messages(context: CheckContext) -> list[str]:
    return [v.message for v in check(context, ["failed_finish_redelivered"])]


def test_each_failed_finish_is_delivered_again(flaky) -> None:
    """Two failures, each followed by another call; the third call succeeds and is marked."""
    failures = flaky.events("agent_tool:detached:delivery_failed", TOOLS, runId="import")
    calls = flaky.events("hook:on_finish", TOOLS, runId="import", slot="finish")
    assert len(failures) == 2 and len(calls) == 3
    assert [r.get("slot") for r in flaky.events("hook:delivered", TOOLS)] == ["finish"]
    assert check(flaky, ["failed_finish_redelivered", "exactly_once_finish"]) == []


def test_a_failed_finish_never_called_again_is_caught(flaky) -> None:
    """Without the calls after the second failure (a slot marked delivered although its handler
    threw) the failure is named; a row cleared since, or a failure in a turn that crashed in its
    instant, is not judged; neither is a run with no liveness phase."""
    last = flaky.events("agent_tool:detached:delivery_failed", TOOLS, runId="import")[-1]
    lost = without(
        flaky, lambda r: r.seq > last.seq and r.event == "hook:on_finish" and r.agent == TOOLS
    )
    assert messages(lost) == [
        f"run import of {TOOLS}: its finish handler workload_on_finish threw at 00:02:50.000, "
        "and it was never called again by the end (00:15:00.000, quiet); a slot whose handler "
        "threw stays undelivered and is delivered again"
    ]
    cleared = with_rows(lost, TOOLS, "cf_agent_tool_runs", [])
    assert messages(cleared) == []
    (failed,) = [r for r in lost.records if r.event == last.event and r.t_ms == last.t_ms]
    crash = record(0, failed.t_ms, TOOLS, failed.inc, "incarnation:end", reason="crash")
    assert messages(with_record(lost, failed.seq, crash)) == []
    assert messages(_no_liveness(lost)) == []


def test_a_run_cleared_while_its_handler_ran_and_dispatched_again_owes_nothing(flaky) -> None:
    """Found by generate on 0.21.0: a clear deleted the run's row while its finish handler ran
    (agent-tools §8.1: no ledger delivery after a clear); the handler then threw, and a run of
    the same id was dispatched again, whose row is there at the end. That new run owes the old
    one's finish nothing."""
    last = flaky.events("agent_tool:detached:delivery_failed", TOOLS, runId="import")[-1]
    lost = without(
        flaky, lambda r: r.seq > last.seq and r.event == "hook:on_finish" and r.agent == TOOLS
    )
    delete = ("DELETE FROM cf_agent_tool_runs WHERE run_id = ?", ("import",))
    insert_again = (
        "INSERT INTO cf_agent_tool_runs (run_id, status) VALUES (?, ?)",
        ("import", "running"),
    )
    cleared = with_turn(lost, TOOLS, delete, insert_again, at_ms=last.t_ms)
    assert messages(cleared) == []


def test_a_failed_give_up_is_answered_by_either_slot(flaky) -> None:
    """A give-up whose handler threw may be superseded by the run's real finish: a later call of
    either slot answers it; a failed finish needs a finish call."""
    first = flaky.events("agent_tool:detached:delivery_failed", TOOLS, runId="import")[0]
    as_give_up = with_record(flaky, first.seq, first, kind="give_up")
    assert messages(as_give_up) == []
    last = flaky.events("agent_tool:detached:delivery_failed", TOOLS, runId="import")[-1]
    calls_as_give_up = [
        dataclasses.replace(r, fields={**r.fields, "slot": "give_up"})
        if r.event == "hook:on_finish" and r.seq > last.seq
        else r
        for r in flaky.records
    ]
    relabelled = dataclasses.replace(flaky, records=calls_as_give_up)
    assert len(messages(relabelled)) == 1


def test_a_failed_give_up_is_discharged_by_a_finish_delivered_after_it_began() -> None:
    """Found by generate: a user's cancel delivers the run's `finish` (`aborted`) while the
    give-up's handler still runs; the give-up then throws, and the backbone, which only ticks
    runs whose finish is undelivered, never calls it again. The real result superseded it.
    Without that finish delivery the failed give-up is owed."""
    context = found_context("give-up-superseded-by-a-cancel")
    parent = "ThinkToolsWorkload/parent2"
    (failure,) = context.events("agent_tool:detached:delivery_failed", parent, runId="alpha")
    (give_up,) = context.events("hook:on_finish", parent, runId="alpha", slot="give_up")
    (finish,) = context.events("hook:on_finish", parent, runId="alpha", slot="finish")
    (delivered,) = context.events("hook:delivered", parent, runId="alpha", slot="finish")
    assert give_up.seq < finish.seq < failure.seq < delivered.seq
    assert failure.get("kind") == "give_up"
    assert messages(context) == []
    undelivered = without(context, lambda r: r.seq == delivered.seq)
    assert [v.subject for v in check(undelivered, ["failed_finish_redelivered"])] == ["alpha"]


def _no_liveness(context: CheckContext) -> CheckContext:
    trimmed = without(context, lambda r: r.event.startswith("quiesce:"))
    return dataclasses.replace(trimmed, quiet=None)


@pytest.mark.parametrize(
    "test",
    [
        test_a_failed_finish_never_called_again_is_caught,
        test_a_failed_give_up_is_answered_by_either_slot,
    ],
)
def test_the_catching_tests_fail_with_a_blind_checker(
    test: Callable[[CheckContext], None], flaky: CheckContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test above goes red when the checker is replaced by one that finds nothing."""
    fails_with_a_blind_checker(monkeypatch, "failed_finish_redelivered", test, flaky)
