"""The ledger invariants read from the journal — `delivered_marks_earned` (S8),
`claims_wait_for_lease` (S8) and `managed_status_final` (S1) — pass a slow handler cut short by a
deploy and a flaky one, both taken over after their lease, a milestone narrated across a deploy,
the ledger's closings that deliver nothing, and managed fibers that complete, are cancelled or
are resolved after recovery; and catch a mark written before its handlers returned, a claim taken
over inside its lease or after delivery, and a settled fiber whose status changed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agents_core.agent_tools.registry import AGENT_TOOL_RUNS_DDL
from sim import Simulation
from sim.checkers import CheckContext, check, context_from
from sim.checkers.storage import row_changes
from sim.trace import format_sim_time
from tests.checkers.agents import (
    MILESTONE,
    fails_with_a_blind_checker,
    scenario_context,
    with_journal,
    with_row,
    with_turn,
    without,
)
from tests.conformance import test_agent_tools, test_detached_dispatch_crash, test_reissue

P = "ToolsWorkload/parent"
THINK = "ThinkToolsWorkload/parent"
J = "FiberWorkload/jobs"
NAMES = ["delivered_marks_earned", "claims_wait_for_lease", "managed_status_final"]
LEDGERS = """
    name: ledgers
    description: a slow on_finish cut by a deploy and a flaky one, both delivered after the lease
    seed: 7
    agents:
      parent:
        workload: tools
        runs:
          - run_id: slow
            detached: {on_finish_work: 5s}
            steps: [{sleep: 2s}, {finish: completed}]
          - run_id: flaky
            detached: {on_finish_fails: 1}
            steps: [{sleep: 1s}, {finish: completed}]
    steps:
      - call: {agent: parent, method: dispatch}
      - at: 4s
        deploy: {}
      - run_until: 10m
"""
FIBERS = """
    name: managed
    description: managed fibers that complete, are cancelled, and are interrupted then resolved
    seed: 4
    agents:
      jobs:
        workload: fibers
        start: call
        recovery: throw
        keep_alive_interval: 10s
        fibers:
          - {name: reply, steps: 2, step: 10s, managed: true}
          - {name: export, steps: 10, step: 30s, managed: true}
          - {name: watch, steps: 10, step: 30s, managed: true}
    steps:
      - call: {agent: jobs, method: start}
      - at: 1m
        call: {agent: jobs, method: cancel, args: [export, no longer needed]}
      - at: 2m
        deploy: {}
      - run_until: 10m
"""
CLAIM = "UPDATE cf_agent_tool_runs SET finish_claimed_at = ? WHERE run_id = ?"
RELEASE = "UPDATE cf_agent_tool_runs SET finish_claimed_at = NULL WHERE run_id = ?"


@pytest.fixture(scope="module")
def ledgers() -> CheckContext:
    return scenario_context(LEDGERS)


@pytest.fixture(scope="module")
def milestone() -> CheckContext:
    return scenario_context(MILESTONE)


@pytest.fixture(scope="module")
def fibers() -> CheckContext:
    return scenario_context(FIBERS)


def messages(context: CheckContext, name: str) -> list[str]:
    return [v.message for v in check(context, [name])]


def takeovers(context: CheckContext, agent: str) -> list[tuple[Any, Any, Any]]:
    """(run, old claim, new claim) of every committed claim that replaced another."""
    out = []
    for change in row_changes(context.journals[agent], "cf_agent_tool_runs", "run_id"):
        old, new = change.value("finish_claimed_at", "before"), change.value("finish_claimed_at")
        if old is not None and new is not None and old != new:
            out.append((change.key, old, new))
    return out


# -- healthy runs ---------------------------------------------------------------------------------
def test_deliveries_cut_short_or_failed_are_taken_over_after_their_lease(
    ledgers: CheckContext,
) -> None:
    """The slow handler (claimed at 2 s) died with the deploy and the flaky one (1 s) threw; the
    backbone took both claims over after their lease and marked each at the instant its handlers
    returned."""
    assert takeovers(ledgers, P) == [("slow", 2_000, 170_000), ("flaky", 1_000, 175_000)]
    marks = {
        row["run_id"]: row["finish_delivered_at"] for row in ledgers.table(P, "cf_agent_tool_runs")
    }
    delivered = {r.get("runId"): r.t_ms for r in ledgers.events("hook:delivered", P)}
    assert marks == delivered == {"slow": 175_000, "flaky": 175_000}
    assert check(ledgers, NAMES) == []


def test_a_milestone_narrated_across_a_deploy_is_marked_when_its_hook_returned(
    milestone: CheckContext,
) -> None:
    (hook,) = milestone.events("hook:milestone_delivered", THINK)
    assert (hook.get("runId"), hook.get("name")) == ("research", "sources")
    assert check(milestone, NAMES) == []


Story = Callable[[Simulation], None]
STORIES = {
    "finish-closed-silently": (
        test_detached_dispatch_crash.test_a_given_up_run_whose_child_never_started_stops_the_backbone
    ),
    "superseded-give-up-closed": (
        test_reissue.test_a_give_up_left_claimed_by_a_dead_incarnation_is_closed_once_the_run_completed
    ),
    "unused-claim-released": (
        test_agent_tools.test_S8_a_failed_terminal_write_gives_the_claim_back_and_the_error_finish_is_delivered
    ),
}


def unearned(context: CheckContext) -> list[tuple[str, str]]:
    """(run, slot) of every mark no `hook:delivered` at its instant explains."""
    return [
        (row["run_id"], slot)
        for path in context.paths()
        for row in context.table(path, "cf_agent_tool_runs")
        for slot in ("finish", "give_up")
        if row[f"{slot}_delivered_at"] is not None
        and not any(
            r.t_ms == row[f"{slot}_delivered_at"]
            for r in context.events("hook:delivered", path, runId=row["run_id"], slot=slot)
        )
    ]


def released(context: CheckContext) -> list[Any]:
    """Runs whose committed claim was given back (set to NULL)."""
    return [
        change.key
        for path in context.paths()
        for change in row_changes(context.journals[path], "cf_agent_tool_runs", "run_id")
        if change.value("finish_claimed_at", "before") is not None
        and change.after is not None
        and change.value("finish_claimed_at") is None
    ]


@pytest.mark.parametrize("story", sorted(STORIES))
def test_the_ledgers_closings_that_deliver_nothing_are_not_findings(story: str) -> None:
    """A finish slot closed silently after the give-up (S7), a give-up closed once the run's
    real result was delivered, and a claim given back when the terminal write failed."""
    with Simulation(seed=1) as sim:
        STORIES[story](sim)
        context = context_from(sim)
    expected = {
        "finish-closed-silently": ([("import", "finish")], []),
        "superseded-give-up-closed": ([("r", "give_up")], []),
        "unused-claim-released": ([], ["r"]),
    }
    assert (unearned(context), released(context)) == expected[story]
    assert check(context, NAMES) == []


# -- delivered_marks_earned -----------------------------------------------------------------------
def test_a_mark_written_before_its_handlers_returned_is_caught(ledgers: CheckContext) -> None:
    """The mark written as the slow handler began (170 s), not when it returned (175 s); and a
    mark with no delivery at all."""
    early = with_row(
        ledgers, P, "cf_agent_tool_runs", {"run_id": "slow"}, finish_delivered_at=170_000
    )
    assert messages(early, "delivered_marks_earned") == [
        f"run slow of {P} has its finish slot marked delivered at 00:02:50.000, but its "
        "deliveries completed at 00:02:55.000; a slot is marked delivered only once its handlers "
        "returned"
    ]
    lost = without(ledgers, lambda r: r.event == "hook:delivered" and r.get("runId") == "flaky")
    assert messages(lost, "delivered_marks_earned") == [
        f"run flaky of {P} has its finish slot marked delivered at 00:02:55.000, but no delivery "
        "of it ever completed; a slot is marked delivered only once its handlers returned"
    ]


def test_a_milestone_marked_before_its_hook_returned_is_caught(milestone: CheckContext) -> None:
    lost = without(milestone, lambda r: r.event == "hook:milestone_delivered")
    (hook,) = milestone.events("hook:milestone_delivered", THINK)
    assert messages(lost, "delivered_marks_earned") == [
        f"milestone sources of run research on {THINK} is marked delivered at "
        f"{_time(hook.t_ms)}, but its hook returned never; a milestone is marked delivered only "
        "once the chat host's hook returned"
    ]


# -- claims_wait_for_lease ------------------------------------------------------------------------
def test_a_claim_taken_over_inside_its_lease_is_caught(ledgers: CheckContext) -> None:
    """The redelivery's claim of `slow` moved to 31 s, inside the lease of the 2 s claim."""

    def early(write: Any) -> Any:
        statement, params = write
        if "SET finish_claimed_at = ?" in statement and tuple(params[:2]) == (170_000, "slow"):
            return statement, (31_000, *params[1:])
        return write

    assert messages(with_journal(ledgers, P, early), "claims_wait_for_lease") == [
        f"run slow of {P}: its finish slot, claimed at 00:00:02.000, was claimed again at "
        "00:00:31.000, before that claim's 60 s lease ran out at 00:01:02.000"
    ]


def test_a_released_claim_may_be_taken_at_once_but_never_after_delivery(
    ledgers: CheckContext,
) -> None:
    """A claim given back (NULL) is no lease; a claim written over after the mark is caught."""
    start = [
        (AGENT_TOOL_RUNS_DDL[0], ()),
        (
            "INSERT INTO cf_agent_tool_runs (run_id, agent_type, status, started_at) "
            "VALUES (?, ?, ?, ?)",
            ("r", "Child", "running", 0),
        ),
    ]
    released = [(CLAIM, (1_000, "r")), (RELEASE, ("r",)), (CLAIM, (2_000, "r"))]
    context = CheckContext(records=(), journals={P: (tuple(start), *((w,) for w in released))})
    assert check(context, ["claims_wait_for_lease"]) == []
    inside = with_turn(context, P, (CLAIM, (30_000, "r")))
    assert messages(inside, "claims_wait_for_lease") == [
        f"run r of {P}: its finish slot, claimed at 00:00:02.000, was claimed again at "
        "00:00:30.000, before that claim's 60 s lease ran out at 00:01:02.000"
    ]
    done = with_turn(ledgers, P, (CLAIM, (400_000, "flaky")))
    assert messages(done, "claims_wait_for_lease") == [
        f"run flaky of {P}: its finish slot, claimed at 00:02:55.000, was claimed again at "
        "00:06:40.000, after the slot was delivered at 00:02:55.000"
    ]


# -- managed_status_final -------------------------------------------------------------------------
def fiber_of(context: CheckContext, name: str) -> dict[str, Any]:
    (row,) = [r for r in context.table(J, "cf_agents_fibers") if r["name"] == name]
    return dict(row)


def test_settled_managed_fibers_keep_their_status(fibers: CheckContext) -> None:
    """`reply` completed, `export` was cancelled (aborted), `watch` was interrupted by the
    deploy and its hook threw: each status was written once, guarded."""
    statuses = {name: fiber_of(fibers, name)["status"] for name in ("reply", "export", "watch")}
    assert statuses == {"reply": "completed", "export": "aborted", "watch": "interrupted"}
    assert check(fibers, NAMES) == []


def test_a_settled_fiber_turned_completed_is_caught(fibers: CheckContext) -> None:
    """The completion UPDATE without its status guard, run after the cancel; a resolution of the
    interrupted fiber is allowed, and so is a deleted row written again."""
    export, watch = fiber_of(fibers, "export"), fiber_of(fibers, "watch")
    complete = (
        "UPDATE cf_agents_fibers SET status = 'completed', completed_at = ? WHERE fiber_id = ?"
    )
    unguarded = with_turn(fibers, J, (complete, (90_000, export["fiber_id"])))
    assert messages(unguarded, "managed_status_final") == [
        f"managed fiber {export['fiber_id']} (export) of {J} was settled aborted at "
        f"{_time(export['completed_at'])}, and a later write turned it completed at "
        "00:01:30.000; a settled fiber's status never changes (only an interrupted one is "
        "resolved)"
    ]
    resolved = with_turn(fibers, J, (complete, (500_000, watch["fiber_id"])))
    assert messages(resolved, "managed_status_final") == []
    rerun = with_turn(
        fibers,
        J,
        ("DELETE FROM cf_agents_fibers WHERE fiber_id = ?", (export["fiber_id"],)),
        (
            "INSERT INTO cf_agents_fibers (fiber_id, name, status, created_at) "
            "VALUES (?, 'export', 'running', 500000)",
            (export["fiber_id"],),
        ),
    )
    assert messages(rerun, "managed_status_final") == []
    reopened = with_turn(
        fibers,
        J,
        ("UPDATE cf_agents_fibers SET status = 'running' WHERE fiber_id = ?", (watch["fiber_id"],)),
    )
    assert len(messages(reopened, "managed_status_final")) == 1


def _time(t_ms: int) -> str:
    return format_sim_time(int(t_ms))


@pytest.mark.parametrize(
    ("name", "test", "fixture"),
    [
        (
            "delivered_marks_earned",
            test_a_mark_written_before_its_handlers_returned_is_caught,
            "ledgers",
        ),
        (
            "delivered_marks_earned",
            test_a_milestone_marked_before_its_hook_returned_is_caught,
            "milestone",
        ),
        ("claims_wait_for_lease", test_a_claim_taken_over_inside_its_lease_is_caught, "ledgers"),
        (
            "claims_wait_for_lease",
            test_a_released_claim_may_be_taken_at_once_but_never_after_delivery,
            "ledgers",
        ),
        ("managed_status_final", test_a_settled_fiber_turned_completed_is_caught, "fibers"),
    ],
)
def test_the_catching_tests_fail_with_a_blind_checker(
    name: str,
    test: Callable[[CheckContext], None],
    fixture: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each test above goes red when its checker is replaced by one that finds nothing."""
    fails_with_a_blind_checker(monkeypatch, name, test, request.getfixturevalue(fixture))
