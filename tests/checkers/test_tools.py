"""The agent-tool invariants beyond finish delivery — `milestones_once` (S3),
`child_reset_retryable` (S6) and `give_up_not_early` (S7) — pass tools workloads that narrate a
milestone across a deploy, lose an awaited child while the parent lives, and give detached runs
up at their budget and their no-progress window; and catch crafted claims, chat notices,
statuses and give-up times."""

from __future__ import annotations

import dataclasses
import json

import pytest

from sim.checkers import CheckContext, check
from sim.trace import TraceRecord
from tests.checkers.agents import MILESTONE, scenario_context, with_row, with_rows

THINK = "ThinkToolsWorkload/parent"
TOOLS = "ToolsWorkload/parent"
KEY = "cf_agents:agent_tool_milestone:research:sources"
KV_PUT = (
    "INSERT INTO _cf_KV (key, value) VALUES (?, ?) "
    "ON CONFLICT(key) DO UPDATE SET value = excluded.value"
)
RESET = """
    name: reset
    description: an awaited run whose child is evicted while the parent lives
    seed: 9
    agents:
      parent:
        workload: tools
        runs:
          - run_id: lookup
            steps: [{text: "Searching"}, {sleep: 1m}, {finish: completed}]
    steps:
      - call: {agent: parent, method: dispatch, wait: false}
      - at: 30s
        evict: {agent: parent/lookup}
      - run_until: 5m
"""
GIVE_UP = """
    name: give-up
    description: a detached run past its budget, and one silent past its no-progress window
    seed: 10
    agents:
      parent:
        workload: tools
        runs:
          - run_id: slow
            detached: {max_budget: 2m}
            steps: [{hang: true}]
          - run_id: quiet
            detached: {no_progress_budget: 1m}
            steps: [{progress: {fraction: 0.5}}, {hang: true}]
    steps:
      - call: {agent: parent, method: dispatch}
      - run_until: 10m
"""


def messages(context: CheckContext, name: str) -> list[str]:
    return [v.message for v in check(context, [name])]


def changed(context: CheckContext, target: TraceRecord, **changes: object) -> CheckContext:
    t_ms = changes.pop("t_ms", target.t_ms)
    new = dataclasses.replace(target, t_ms=t_ms, fields={**target.fields, **changes})
    return dataclasses.replace(
        context, records=tuple(new if r is target else r for r in context.records)
    )


# -- milestones_once -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def narrated() -> CheckContext:
    return scenario_context(MILESTONE)


def with_claims(context: CheckContext, *values: dict[str, object]) -> CheckContext:
    """The parent's journal with its milestone entry's writes replaced by these values."""
    journal = [
        turn
        for turn in context.journals[THINK]
        if not any(params and params[0] == KEY for _, params in turn)
    ]
    journal += [((KV_PUT, (KEY, json.dumps(value, sort_keys=True))),) for value in values]
    return dataclasses.replace(context, journals={**context.journals, THINK: journal})


def test_a_milestone_narrated_once_across_a_deploy_passes(narrated: CheckContext) -> None:
    """Claimed and delivered at 1 min; the reconcile after the deploy sees it again and keeps
    quiet; the chat holds one notice for it."""
    notices = [
        r for r in narrated.table(THINK, "cf_ai_chat_agent_messages") if "detached-ms" in r["id"]
    ]
    assert [r["id"] for r in notices] == ["detached-ms:research:sources"]
    assert messages(narrated, "milestones_once") == []


def test_a_milestone_claimed_again_after_delivery_is_caught(narrated: CheckContext) -> None:
    claimed = {"state": "claimed", "at": 60_000}
    delivered = {"state": "delivered", "at": 60_000}
    again = with_claims(narrated, claimed, delivered, {"state": "claimed", "at": 200_000})
    assert messages(again, "milestones_once") == [
        f"milestone sources of run research on {THINK} was claimed for delivery again at "
        "00:03:20.000 after it was delivered at 00:01:00.000"
    ]
    early = with_claims(narrated, claimed, {"state": "claimed", "at": 90_000})
    assert messages(early, "milestones_once") == [
        f"milestone sources of run research on {THINK} was claimed for delivery twice, at "
        "00:01:00.000 and again at 00:01:30.000, before the first claim's 60 s lease ran out"
    ]
    stale = with_claims(narrated, claimed, {"state": "claimed", "at": 130_000}, delivered)
    assert messages(stale, "milestones_once") == []
    unclaimed = with_claims(narrated, delivered)
    assert messages(unclaimed, "milestones_once") == [
        f"milestone sources of run research on {THINK} was marked delivered at 00:01:00.000 "
        "without being claimed first"
    ]


def test_a_milestone_announced_twice_in_the_chat_is_caught(narrated: CheckContext) -> None:
    rows = narrated.table(THINK, "cf_ai_chat_agent_messages")
    notice = next(r for r in rows if r["id"] == "detached-ms:research:sources")
    doubled = with_rows(
        narrated, THINK, "cf_ai_chat_agent_messages", [*rows, {**notice, "id": "copy"}]
    )
    assert messages(doubled, "milestones_once") == [
        f"milestone sources of run research was announced 2 times in the chat of {THINK} "
        "(messages detached-ms:research:sources, copy)"
    ]


# -- child_reset_retryable -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def reset() -> CheckContext:
    return scenario_context(RESET)


def test_a_child_lost_while_its_parent_lives_ends_the_run_interrupted(reset: CheckContext) -> None:
    (finish,) = reset.events("hook:on_agent_tool_finish", TOOLS, runId="lookup")
    assert (finish.t_ms, finish.get("status")) == (30_000, "interrupted")
    assert messages(reset, "child_reset_retryable") == []


def test_a_child_reset_finishing_the_run_as_error_is_caught(reset: CheckContext) -> None:
    """The SDK's non-retryable `error` is the broken promise; the child's own status is not."""
    (finish,) = reset.events("hook:on_agent_tool_finish", TOOLS, runId="lookup")
    error = changed(reset, finish, status="error")
    assert messages(error, "child_reset_retryable") == [
        f"awaited run lookup of {TOOLS} lost its child {TOOLS}/ScriptedToolChild/lookup "
        "(explicit) at 00:00:30.000 while the parent lived, and finished error at 00:00:30.000; "
        "a reset child makes the run 'interrupted' (retryable)"
    ]
    child = f"{TOOLS}/ScriptedToolChild/lookup"
    own = with_row(error, child, "child_runs", {"run_id": "lookup"}, status="error")
    assert messages(own, "child_reset_retryable") == []


# -- give_up_not_early ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def given_up() -> CheckContext:
    return scenario_context(GIVE_UP)


def give_up_of(context: CheckContext, run_id: str) -> TraceRecord:
    return context.events("hook:on_agent_tool_finish", TOOLS, runId=run_id, slot="give_up")[0]


def test_give_ups_at_the_budget_and_the_window_pass(given_up: CheckContext) -> None:
    """Both runs were given up by the 2m50s tick: one past its 2 min budget, one past its
    1 min window."""
    assert [give_up_of(given_up, r).t_ms for r in ("slow", "quiet")] == [170_000, 170_000]
    assert messages(given_up, "give_up_not_early") == []


def test_a_give_up_before_the_final_run_started_was_an_earlier_run_s(
    given_up: CheckContext,
) -> None:
    """A run cleared and its id used again: the final row is the new run's, started after the
    old one's give-up, which the new run's budget does not judge; a give-up after the new run
    started, before its budget, is still caught."""
    restarted = with_row(
        given_up,
        TOOLS,
        "cf_agent_tool_runs",
        {"run_id": "slow"},
        started_at=171_000,
        detached_max_budget_at=291_000,
    )
    assert messages(restarted, "give_up_not_early") == []
    early = changed(restarted, give_up_of(restarted, "slow"), t_ms=200_000)
    assert messages(early, "give_up_not_early") == [
        f"detached run slow of {TOOLS} was given up at 00:03:20.000, as budget-exceeded, before "
        "its budget ran out at 00:04:51.000"
    ]


def test_a_give_up_before_the_budget_or_the_window_is_caught(given_up: CheckContext) -> None:
    early = changed(given_up, give_up_of(given_up, "slow"), t_ms=90_000)
    assert messages(early, "give_up_not_early") == [
        f"detached run slow of {TOOLS} was given up at 00:01:30.000, as budget-exceeded, before "
        "its budget ran out at 00:02:00.000"
    ]
    unlabelled = with_row(early, TOOLS, "cf_agent_tool_runs", {"run_id": "slow"}, status="error")
    assert messages(unlabelled, "give_up_not_early") == [
        f"detached run slow of {TOOLS} was given up at 00:01:30.000, before its budget ran out "
        "at 00:02:00.000 and before a 3600000 ms no-progress window could pass since it started "
        "at 00:00:00.000"
    ]
    silent = changed(given_up, give_up_of(given_up, "quiet"), t_ms=30_000)
    assert messages(silent, "give_up_not_early") == [
        f"detached run quiet of {TOOLS} was given up at 00:00:30.000, before its budget ran out "
        "at 1d00:00:00.000 and before a 60000 ms no-progress window could pass since it started "
        "at 00:00:00.000"
    ]
