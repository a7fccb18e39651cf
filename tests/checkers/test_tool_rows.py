"""`interrupted_reason_kept`: a run's interrupted reason and `child_still_running` pair as the
spec's table says, and only an interrupted run keeps them."""

from __future__ import annotations

import pytest

from sim.checkers import CheckContext, check
from tests.checkers.agents import fails_with_a_blind_checker, scenario_context, with_row
from tests.checkers.test_tools import RESET, TOOLS

RUNS = "cf_agent_tool_runs"


def messages(context: CheckContext) -> list[str]:
    return [v.message for v in check(context, ["interrupted_reason_kept"])]


@pytest.fixture(scope="module")
def reset() -> CheckContext:
    return scenario_context(RESET)


def test_a_reset_child_s_interrupted_run_passes(reset: CheckContext) -> None:
    (row,) = reset.table(TOOLS, RUNS)
    assert (row["status"], row["interrupted_reason"], row["child_still_running"]) == (
        "interrupted",
        None,
        1,
    )
    assert messages(reset) == []


def test_a_completed_run_keeping_its_interrupted_reason_is_caught(reset: CheckContext) -> None:
    repaired = with_row(
        reset,
        TOOLS,
        RUNS,
        {"run_id": "lookup"},
        status="completed",
        interrupted_reason="no-progress",
    )
    assert messages(repaired) == [
        f"run lookup of {TOOLS} is completed but keeps interrupted_reason 'no-progress' and "
        "child_still_running 1: a terminal write other than interrupted clears both"
    ]


def test_an_unknown_reason_is_caught(reset: CheckContext) -> None:
    odd = with_row(reset, TOOLS, RUNS, {"run_id": "lookup"}, interrupted_reason="gave-up")
    assert messages(odd) == [
        f"run lookup of {TOOLS} is interrupted with the reason 'gave-up', which is none of "
        "['budget-exceeded', 'inspect-failed', 'inspect-timeout', 'no-progress', "
        "'not-tailable', 'recovery-deadline', 'window-exceeded']"
    ]


def test_a_reason_with_the_wrong_child_flag_is_caught(reset: CheckContext) -> None:
    timed_out = with_row(
        reset, TOOLS, RUNS, {"run_id": "lookup"}, interrupted_reason="inspect-timeout"
    )
    assert messages(timed_out) == [
        f"run lookup of {TOOLS} is interrupted (inspect-timeout) with child_still_running 1, "
        "where that reason carries [None]"
    ]
    no_reason = with_row(reset, TOOLS, RUNS, {"run_id": "lookup"}, child_still_running=0)
    assert messages(no_reason) == [
        f"run lookup of {TOOLS} is interrupted (no reason) with child_still_running 0, where "
        "that reason carries [1]"
    ]


def test_the_catching_tests_fail_with_a_blind_checker(
    monkeypatch: pytest.MonkeyPatch, reset: CheckContext
) -> None:
    for test in (
        test_a_completed_run_keeping_its_interrupted_reason_is_caught,
        test_an_unknown_reason_is_caught,
        test_a_reason_with_the_wrong_child_flag_is_caught,
    ):
        fails_with_a_blind_checker(monkeypatch, "interrupted_reason_kept", test, reset)
