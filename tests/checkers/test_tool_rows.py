"""`interrupted_reason_kept`: a run's interrupted reason and `child_still_running` pair as the
spec's table says, and only an interrupted run keeps them. `agent_tools_under_cap`: no more runs
starting or running than the cap, and a rejection only while it is full."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sim.checkers import CheckContext, check
from sim.sqlite import Write
from tests.checkers.agents import (
    fails_with_a_blind_checker,
    scenario_context,
    with_journal,
    with_row,
)
from tests.checkers.test_tools import RESET, TOOLS

RUNS = "cf_agent_tool_runs"
CAPS = (
    Path(__file__).resolve().parents[2]
    / "scenarios"
    / "library"
    / "nested-agent-tools-own-caps.yaml"
)
TOP = "StoryParent/top"


def messages(context: CheckContext, name: str = "interrupted_reason_kept") -> list[str]:
    return [v.message for v in check(context, [name])]


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


# -- agent_tools_under_cap -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def caps() -> CheckContext:
    return scenario_context(CAPS.read_text(encoding="utf-8"))


def inserted_as(run_id: str, status: str, error: str | None) -> Callable[[Write], Write]:
    """A journal rewrite: `run_id`'s row inserted with this status and error."""

    def rewrite(write: Write) -> Write:
        statement, params = write
        if statement.startswith("INSERT INTO cf_agent_tool_runs") and params[0] == run_id:
            params = (*params[:5], status, error, *params[7:])
        return statement, params

    return rewrite


def test_a_top_parent_under_its_cap_of_one_passes(caps: CheckContext) -> None:
    assert caps.option(TOP, "max_concurrent_agent_tools") == 1
    statuses = {r["run_id"]: r["status"] for r in caps.table(TOP, RUNS)}
    assert statuses == {"m0": "completed", "m1": "error", "m2": "completed"}
    assert messages(caps, "agent_tools_under_cap") == []


def test_two_runs_admitted_under_a_cap_of_one_are_caught(caps: CheckContext) -> None:
    admitted = with_journal(caps, TOP, inserted_as("m1", "starting", None))
    found = messages(admitted, "agent_tools_under_cap")
    assert len(found) == 1
    assert found[0].startswith(f"{TOP} kept 2 agent-tool runs starting or running (m0, m1) after")
    assert found[0].endswith("over its cap of 1")


def test_a_rejection_while_the_cap_is_not_full_is_caught(caps: CheckContext) -> None:
    m0_failed = with_journal(caps, TOP, inserted_as("m0", "error", "boom"))
    assert messages(m0_failed, "agent_tools_under_cap") == [
        f"run m1 of {TOP} was rejected for its cap of 1 while only 0 run(s) were starting or "
        "running"
    ]


def test_the_cap_tests_fail_with_a_blind_checker(
    monkeypatch: pytest.MonkeyPatch, caps: CheckContext
) -> None:
    for test in (
        test_two_runs_admitted_under_a_cap_of_one_are_caught,
        test_a_rejection_while_the_cap_is_not_full_is_caught,
    ):
        fails_with_a_blind_checker(monkeypatch, "agent_tools_under_cap", test, caps)
