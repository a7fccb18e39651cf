"""The agent-tool delivery invariants — `exactly_once_finish` (S8), `budget_interrupts` (S7) and
`reattach_terminal` (§7) — pass a healthy run on the simulated platform and catch crafted
failures: the same run's context with records duplicated or dropped, or final rows changed."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from sim import Simulation, format_sim_time
from sim.checkers import CheckContext, check, context_from
from sim.trace import TraceRecord
from tests.checkers.agents import (
    ToolParent,
    inserted,
    record,
    scenario_context,
    with_record,
    with_row,
    without,
)

P = "ToolParent/p"
RUNS = "cf_agent_tool_runs"


@pytest.fixture(scope="module")
def healthy() -> Iterator[CheckContext]:
    """A parent with three runs across a deploy, then a quiet liveness phase: detached `d1`
    (its child resumes after the deploy and completes; delivered by the backbone at 50 s),
    detached `b1` (hangs; given up at its 1 s budget by the 5 s tick, the abort its teardown
    causes closes the finish slot silently) and awaited `a1` (re-attached after the restart,
    completed and delivered at 10.31 s)."""
    with Simulation(5) as sim:
        p = sim.agent(ToolParent, "p")
        sim.call(
            p,
            "dispatch",
            "d1",
            [["sleep", 30_000], ["finish", "completed", "ok"]],
            [["sleep", 5_000], ["finish", "completed", "ok"]],
        )
        sim.call(p, "dispatch", "b1", [["hang"]], max_budget_ms=1_000)
        sim.start_call(
            p, "go", "a1", [["text", "a"], ["hang"]], [["sleep", 300], ["finish", "completed", "x"]]
        )
        sim.run_for(10_000)
        sim.deploy()
        sim.run_for(10)
        sim.agent(ToolParent, "p")
        assert sim.quiesce(3_600_000) is True
        yield context_from(sim)


def one(context: CheckContext, event: str, **fields: object):
    (found,) = context.events(event, P, **fields)
    return found


def messages(context: CheckContext, name: str) -> list[str]:
    return [v.message for v in check(context, [name])]


# -- exactly_once_finish ---------------------------------------------------------------------------
def test_the_healthy_run_keeps_every_delivery_promise(healthy: CheckContext) -> None:
    """Across the deploy, every slot of every run is delivered once and nothing is owed."""
    assert check(healthy, ["exactly_once_finish", "budget_interrupts", "reattach_terminal"]) == []


def test_a_second_delivery_with_no_crash_between_is_caught(healthy: CheckContext) -> None:
    """A duplicated `hook:delivered` 65 s later is named with both times and both records."""
    first = one(healthy, "hook:delivered", runId="d1", slot="finish")
    broken = with_record(healthy, first.seq, first, t_ms=first.t_ms + 65_000)
    (violation,) = check(broken, ["exactly_once_finish"])
    assert violation.message == (
        "run d1 of ToolParent/p delivered its finish slot twice (at 00:00:50.000 and "
        "00:01:55.000) with no crash between"
    )
    assert (violation.agent, violation.subject) == (P, "d1")
    assert violation.seqs == (first.seq, first.seq + 1)


def test_a_second_delivery_after_a_same_instant_crash_is_at_least_once(
    healthy: CheckContext,
) -> None:
    """When the incarnation crashed in the instant of the first delivery (its delivered mark
    rolled back), a later second delivery is allowed; a crash a millisecond later is no excuse."""
    first = one(healthy, "hook:delivered", runId="d1", slot="finish")
    crash = record(0, first.t_ms, P, first.inc, "incarnation:end", reason="crash")
    crashed = inserted(healthy, first.seq, crash)
    end = crashed.records[-1]
    again = with_record(crashed, end.seq, first, t_ms=end.t_ms, inc=3)
    assert check(again, ["exactly_once_finish"]) == []
    # A crash 1 ms later cannot have rolled the first delivery's turn back.
    later = inserted(healthy, first.seq, dataclasses.replace(crash, t_ms=first.t_ms + 1))
    end = later.records[-1]
    (violation,) = check(with_record(later, end.seq, first, t_ms=end.t_ms), ["exactly_once_finish"])
    assert violation.message.endswith("with no crash between")


def test_a_handler_called_twice_without_a_crash_is_caught(healthy: CheckContext) -> None:
    """A second `on_finish` call for one slot, with nothing between, is a duplicate delivery."""
    call = one(healthy, "hook:on_finish", runId="d1")
    broken = with_record(healthy, call.seq, call)
    assert messages(broken, "exactly_once_finish") == [
        "run d1 of ToolParent/p called on_finish for its finish slot twice (at 00:00:50.000 and "
        "00:00:50.000) with no crash between"
    ]


def test_a_handler_called_again_after_its_delivered_mark_failed_is_at_least_once(
    healthy: CheckContext,
) -> None:
    """A storage error on the write of the delivered mark leaves the claim to go stale: the
    second call is at-least-once; a storage error on another statement excuses nothing."""
    call = one(healthy, "hook:on_finish", runId="d1")
    twice = with_record(healthy, call.seq, call, t_ms=call.t_ms + 120_000)
    statement = "UPDATE cf_agent_tool_runs SET finish_delivered_at = ? WHERE run_id = ?"
    fault = record(0, call.t_ms, P, call.inc, "fault:storage_error", statement=statement)
    assert check(inserted(twice, call.seq, fault), ["exactly_once_finish"]) == []
    other = dataclasses.replace(fault, fields={"statement": "SELECT 1"})
    assert len(check(inserted(twice, call.seq, other), ["exactly_once_finish"])) == 1


def test_a_handler_called_again_after_delivery_is_caught(healthy: CheckContext) -> None:
    """Even across a restart, a handler is not called for a slot already delivered."""
    call = one(healthy, "hook:on_agent_tool_finish", runId="a1")
    last = healthy.records[-1]
    broken = with_record(healthy, last.seq, call, t_ms=last.t_ms, inc=3)
    assert messages(broken, "exactly_once_finish") == [
        "run a1 of ToolParent/p called on_agent_tool_finish for its finish slot again at "
        "00:02:44.406, after the slot was delivered at 00:00:10.310"
    ]


def finish_call(seq: int, t_ms: int, inc: int, event: str = "hook:on_agent_tool_finish"):
    return record(seq, t_ms, P, inc, event, runId="r", slot="finish", status="completed")


def test_repeated_calls_across_a_parent_restart_are_at_least_once() -> None:
    """Two handler calls for one slot with the parent's incarnation ending between them (the
    first delivery never marked) pass; so do two around a `delivery_failed` of that slot."""
    records = (
        finish_call(0, 1_000, 1),
        record(1, 1_000, P, 1, "incarnation:end", reason="deploy"),
        finish_call(2, 9_000, 2),
        record(3, 9_000, P, 2, "agent_tool:detached:delivery_failed", runId="r", kind="finish"),
        finish_call(4, 70_000, 2),
        finish_call(5, 70_000, 2, "hook:delivered"),
    )
    assert check(CheckContext(records=records), ["exactly_once_finish"]) == []
    no_failure = CheckContext(records=records[:3] + records[4:])
    assert messages(no_failure, "exactly_once_finish") == [
        "run r of ToolParent/p called on_agent_tool_finish for its finish slot twice (at "
        "00:00:09.000 and 00:01:10.000) with no crash between"
    ]


def test_an_undelivered_finish_of_a_finished_detached_run_is_caught(
    healthy: CheckContext,
) -> None:
    """A detached run whose row and child both ended `completed` but whose finish slot has no
    delivered mark, in a quiet run, owes its finish."""
    broken = with_row(healthy, P, RUNS, {"run_id": "d1"}, finish_delivered_at=None)
    assert messages(broken, "exactly_once_finish") == [
        "detached run d1 of ToolParent/p: its row ended completed and its child "
        "ToolParent/p/ResumingChild/d1 reached completed at 00:00:25.000, but its finish slot "
        "was never delivered by the end (00:02:44.406, quiet)"
    ]


def test_a_claimed_but_undelivered_finish_of_an_awaited_run_is_caught(
    healthy: CheckContext,
) -> None:
    """S8 for every run: an awaited run whose finish was claimed (its handler may have died
    with its isolate) is delivered again once the parent runs again; a parent that never ran
    startup again after dying could not, and a row inserted terminal, never claimed, owes
    nothing."""
    claimed = with_row(healthy, P, RUNS, {"run_id": "a1"}, finish_delivered_at=None)
    (row,) = [r for r in claimed.table(P, RUNS) if r["run_id"] == "a1"]
    assert check(claimed, ["exactly_once_finish"]) == []  # it idled out, nothing woke it
    last = claimed.records[-1]
    woken = inserted(claimed, last.seq - 1, record(0, last.t_ms, P, 3, "startup:done"))
    assert messages(woken, "exactly_once_finish") == [
        "awaited run a1 of ToolParent/p: its row ended completed and its finish slot was claimed "
        f"at {format_sim_time(row['finish_claimed_at'])}, but it was never delivered by the end "
        "(00:02:44.406, quiet)"
    ]
    never = with_row(woken, P, RUNS, {"run_id": "a1"}, finish_claimed_at=None)
    assert check(never, ["exactly_once_finish"]) == []


def test_an_owed_finish_is_only_late_after_the_grace_when_not_quiet(
    healthy: CheckContext,
) -> None:
    """Not quiet: a finish owed for less than LIVENESS_GRACE_MS is not yet a violation; one owed
    for longer is. Without a liveness phase the rule does not apply."""
    owed = with_row(healthy, P, RUNS, {"run_id": "d1"}, finish_delivered_at=None)
    fresh = dataclasses.replace(owed, quiet=False, end_ms=25_000 + 599_999)
    stale = dataclasses.replace(owed, quiet=False, end_ms=25_000 + 600_000)
    assert check(fresh, ["exactly_once_finish"]) == []
    assert len(check(stale, ["exactly_once_finish"])) == 1
    no_liveness = CheckContext(
        records=[r for r in owed.records if not r.event.startswith("quiesce:")],
        storage=owed.storage,
    )
    assert check(no_liveness, ["exactly_once_finish"]) == []


# -- budget_interrupts ---------------------------------------------------------------------------
def hung_past_budget(healthy: CheckContext) -> CheckContext:
    """`b1` as if the backbone never gave it up: child and row still running, no give-up."""
    context = without(healthy, lambda r: r.get("runId") == "b1" and r.event.startswith("hook:"))
    context = with_row(
        context,
        P,
        RUNS,
        {"run_id": "b1"},
        status="running",
        give_up_delivered_at=None,
        give_up_claimed_at=None,
        finish_claimed_at=None,
        finish_delivered_at=None,
        interrupted_reason=None,
    )
    return with_row(
        context,
        f"{P}/ResumingChild/b1",
        "child_runs",
        {"run_id": "b1"},
        status="running",
        completed_at=None,
    )


def test_a_run_past_its_budget_with_no_give_up_is_caught(healthy: CheckContext) -> None:
    """A detached run still running an hour after its 1 s budget, never given up."""
    assert messages(hung_past_budget(healthy), "budget_interrupts") == [
        "detached run b1 of ToolParent/p passed its budget at 00:00:01.000 and was still not "
        "finished at the end (00:02:44.406, quiet), but no give-up (interrupted) was delivered"
    ]


def test_a_give_up_with_another_status_is_caught(healthy: CheckContext) -> None:
    """Every give-up delivery is `interrupted`."""
    delivered = one(healthy, "hook:delivered", runId="b1", slot="give_up")
    broken = with_record(healthy, delivered.seq, delivered, status="aborted")
    broken = without(broken, lambda r: r.seq == delivered.seq)
    assert messages(broken, "budget_interrupts") == [
        "detached run b1 of ToolParent/p gave up with status 'aborted' at 00:00:05.000; a "
        "give-up is always 'interrupted'"
    ]


def test_a_give_up_that_hides_a_later_completion_is_caught(healthy: CheckContext) -> None:
    """A row that ends `completed` after its give-up needs a `completed` finish call after it;
    adding one makes the run pass."""
    completed = with_row(
        healthy, P, RUNS, {"run_id": "b1"}, status="completed", finish_claimed_at=90_000
    )
    assert messages(completed, "budget_interrupts") == [
        "detached run b1 of ToolParent/p gave up at 00:00:05.000 and its row then ended "
        "completed, but no on_agent_tool_finish with status completed followed: the give-up hid "
        "the real completion"
    ]
    call = one(completed, "hook:on_agent_tool_finish", runId="b1")
    given_up = one(completed, "hook:delivered", runId="b1", slot="give_up")
    repaired = with_record(completed, given_up.seq, call, slot="finish", status="completed")
    assert check(repaired, ["budget_interrupts"]) == []


def test_the_abort_of_the_parents_own_teardown_is_never_delivered(healthy: CheckContext) -> None:
    """After a budget give-up, a row ending `aborted` with the teardown's own cancel reason
    means that abort was delivered (S7 says nothing more is)."""
    broken = with_row(
        healthy,
        P,
        RUNS,
        {"run_id": "b1"},
        status="aborted",
        error_message="detached budget exceeded",
    )
    assert messages(broken, "budget_interrupts") == [
        "detached run b1 of ToolParent/p gave up at 00:00:05.000, then the abort its own "
        "teardown caused ('detached budget exceeded') was delivered as a second terminal; the "
        "teardown the parent itself caused delivers nothing more"
    ]


# -- reattach_terminal ---------------------------------------------------------------------------
def test_an_awaited_run_left_running_after_its_parent_died_is_caught(
    healthy: CheckContext,
) -> None:
    """`a1` was open when the deploy ended the parent's first incarnation; it must not still be
    running at the end."""
    broken = without(healthy, lambda r: r.get("runId") == "a1" and r.event.startswith("hook:"))
    broken = with_row(broken, P, RUNS, {"run_id": "a1"}, status="running", finish_delivered_at=None)
    (violation,) = check(broken, ["reattach_terminal"])
    assert violation.message == (
        "awaited run a1 of ToolParent/p was open when incarnation 1 of its parent ended (deploy) "
        "at 00:00:10.000, and was still running at the end (00:02:44.406, quiet), though the "
        "parent started again at 00:00:10.010"
    )
    assert broken.records[violation.seqs[0]].event == "incarnation:end"


def test_an_awaited_run_whose_parent_never_ran_startup_again_is_not_owed_recovery(
    healthy: CheckContext,
) -> None:
    """Without a later startup of the parent (a plain RPC starts an incarnation without one),
    nothing recovers an awaited run: not a violation."""
    broken = without(healthy, lambda r: r.get("runId") == "a1" and r.event.startswith("hook:"))
    broken = with_row(broken, P, RUNS, {"run_id": "a1"}, status="running", finish_delivered_at=None)
    died = one(broken, "incarnation:end", reason="deploy")
    no_restart = without(broken, lambda r: r.event == "startup:done" and r.seq > died.seq)
    assert check(no_restart, ["reattach_terminal"]) == []


def test_a_restart_that_died_in_its_recovery_owes_nothing_yet(healthy: CheckContext) -> None:
    """A restart whose incarnation crashed before its agent-tool recovery ended (and never
    started again) could not recover the run; had its recovery ended first, it owes it."""
    broken = without(healthy, lambda r: r.get("runId") == "a1" and r.event.startswith("hook:"))
    broken = with_row(broken, P, RUNS, {"run_id": "a1"}, status="running", finish_delivered_at=None)
    died = one(broken, "incarnation:end", reason="deploy")
    restart = [r for r in broken.events("startup:done", P) if r.seq > died.seq][0]
    crash = record(0, restart.t_ms, P, restart.inc, "incarnation:end", reason="crash")
    cut = without(
        inserted(broken, restart.seq, crash),
        lambda r: r.agent == P and r.inc == restart.inc and r.t_ms > restart.t_ms,
    )
    cut = without(cut, lambda r: r.event.startswith("agent_tool:recovery:"))
    assert check(cut, ["reattach_terminal"]) == []
    completed = record(0, restart.t_ms, P, restart.inc, "agent_tool:recovery:complete")
    assert len(check(inserted(cut, restart.seq, completed), ["reattach_terminal"])) == 1


def test_an_awaited_run_interrupted_but_never_delivered_is_caught(healthy: CheckContext) -> None:
    """A re-attach that ended `interrupted` owes its give_up slot."""
    broken = with_row(
        healthy,
        P,
        RUNS,
        {"run_id": "a1"},
        status="interrupted",
        give_up_claimed_at=10_310,
        give_up_delivered_at=None,
    )
    assert messages(broken, "reattach_terminal") == [
        "awaited run a1 of ToolParent/p was open when incarnation 1 of its parent ended (deploy) "
        "at 00:00:10.000 and ended interrupted, but its give_up slot was never delivered by the "
        "end (00:02:44.406, quiet)"
    ]


def test_runs_never_open_at_a_death_are_not_reattach_cases(healthy: CheckContext) -> None:
    """A cap-rejected row (terminal, never claimed) and runs without a liveness phase pass."""
    rejected = with_row(
        healthy,
        P,
        RUNS,
        {"run_id": "a1"},
        status="error",
        finish_claimed_at=None,
        finish_delivered_at=None,
    )
    assert check(rejected, ["reattach_terminal"]) == []
    running = with_row(healthy, P, RUNS, {"run_id": "a1"}, status="running")
    no_liveness = CheckContext(
        records=[r for r in running.records if not r.event.startswith("quiesce:")],
        storage=running.storage,
    )
    assert check(no_liveness, ["reattach_terminal"]) == []


REUSED = """
    name: reused
    description: a run cleared, and its id used again for a new run
    seed: 19
    agents:
      parent: {class: "scenarios.library_agents:StoryParent"}
    steps:
      - call:
          agent: parent
          method: run_awaited
          args: [report-1, [[text, "All good."], [finish, completed, All good.]]]
      - at: 1m
        call: {agent: parent, method: clear, args: [[completed]]}
      - at: 1m1s
        call:
          agent: parent
          method: run_awaited
          args: [report-1, [[text, "Again."], [finish, completed, Again.]]]
"""


def test_a_cleared_run_s_id_used_again_is_a_new_run() -> None:
    """Clearing a run deletes its child; a run started later with the same id is a new run,
    whose finish and whose child's leases count afresh. Without the deletion and the new
    run's child turn the same records are one run delivered twice, and one lease released
    twice."""
    context = scenario_context(REUSED)
    delivered = context.events("hook:delivered", runId="report-1")
    assert [r.t_ms for r in delivered] == [0, 61_000]
    assert check(context, ["exactly_once_finish", "fiber_leases_released"]) == []
    kept = without(
        context,
        lambda r: (
            r.event == "facet:deleted"
            or (r.event == "rpc" and r.get("method") == "start_agent_tool_run")
        ),
    )
    found = {v.invariant for v in check(kept, ["exactly_once_finish", "fiber_leases_released"])}
    assert found == {"exactly_once_finish", "fiber_leases_released"}


def test_a_finish_handed_over_after_its_run_was_cleared_belongs_to_that_run() -> None:
    """Clearing a running run deletes its child before the cancelled run's own finish is handed
    over; that finish is the cleared run's, and the finish of the run started again under the
    id (its child started anew) is the new run's. Two finishes before the clear are still one
    run's twice; and a new run whose child never started is a new run too, once the cleared one
    had its finish."""
    child = f"{P}/Child/r"

    def life(seq: int, event: str) -> TraceRecord:
        return record(seq, 0, child, 1, event)

    cleared_then_again = (
        life(0, "incarnation:start"),
        life(1, "facet:deleted"),
        finish_call(2, 0, 1),
        life(3, "incarnation:start"),
        finish_call(4, 150, 1),
    )
    assert check(CheckContext(records=cleared_then_again), ["exactly_once_finish"]) == []
    twice_before_the_clear = (
        life(0, "incarnation:start"),
        finish_call(1, 0, 1),
        finish_call(2, 100, 1),
        life(3, "facet:deleted"),
        life(4, "incarnation:start"),
        finish_call(5, 150, 1),
    )
    assert messages(CheckContext(records=twice_before_the_clear), "exactly_once_finish") == [
        "run r of ToolParent/p called on_agent_tool_finish for its finish slot twice (at "
        "00:00:00.000 and 00:00:00.100) with no crash between"
    ]
    new_run_without_a_child = (
        life(0, "incarnation:start"),
        finish_call(1, 0, 1),
        life(2, "facet:deleted"),
        finish_call(3, 500, 1),
    )
    assert check(CheckContext(records=new_run_without_a_child), ["exactly_once_finish"]) == []


def test_a_child_turn_started_again_after_the_finish_is_a_new_run() -> None:
    """A clear that could not reach the run's child deletes the row and leaves the child: the
    id's next run starts a turn on that child, so a start after the finish was delivered is a
    new run whose finish counts afresh; two starts before any delivery (a re-issue of a run
    still going) are one run, which delivers once."""
    child = f"{P}/Child/r"

    def start(seq: int) -> TraceRecord:
        return record(seq, 0, child, 1, "rpc", method="start_agent_tool_run")

    def delivered(seq: int, t_ms: int) -> TraceRecord:
        return finish_call(seq, t_ms, 1, "hook:delivered")

    again = (start(0), delivered(1, 0), start(2), delivered(3, 250_000))
    assert check(CheckContext(records=again), ["exactly_once_finish"]) == []
    reissued = (start(0), start(1), delivered(2, 0), delivered(3, 250_000))
    assert messages(CheckContext(records=reissued), "exactly_once_finish") == [
        "run r of ToolParent/p delivered its finish slot twice (at 00:00:00.000 and "
        "00:04:10.000) with no crash between"
    ]


REISSUED_WHILE_HOOK_RUNS = """
name: reissued-while-its-hook-runs
description: >
  a detached run gives up at once and its on_finish works for 1m40s; the runs are cleared
  meanwhile and the same run id is dispatched again, hanging past its own budget
seed: 0
agents:
  parent:
    workload: tools
    runs:
      - run_id: r1
        detached: {max_budget: "9m26s", no_progress_budget: "1s", on_finish_work: "1m40s"}
        steps: [{sleep: "1s"}, {progress: {fraction: 0.0}}, {hang: true}]
        resume: false
steps:
  - {at: 0s, call: {agent: parent, method: dispatch, wait: false}}
  - {at: 52s, call: {agent: parent, method: clear, wait: false}}
  - {at: 1m14s, call: {agent: parent, method: dispatch, args: [r1], wait: false}}
expect:
  - invariants: all
"""
"""Drawn by `agentsim generate --seed 2027` (shrunk), where the first run's late delivered mark
landed on the second run's row: its give-up was never delivered, its hanging child never torn
down, and its keepAlive lease kept the parent's heartbeat going for good."""


def test_a_run_id_reissued_while_its_old_hook_runs_gets_its_own_delivery() -> None:
    """The old run's mark lands on its own (deleted) row only (A20): the new run under the same
    id is given up and delivered in its own right, its child torn down, and the run settles.
    The checker counts the old run's late `hook:delivered` in the old run's life."""
    context = scenario_context(REISSUED_WHILE_HOOK_RUNS)
    P = "ToolsWorkload/parent"
    marks = context.events("hook:delivered", P, runId="r1", slot="give_up")
    calls = context.events("hook:on_finish", P, runId="r1", slot="give_up")
    assert len(marks) == 2 and len(calls) == 2
    assert calls[1].t_ms > context.events("rpc", P, method="dispatch")[-1].t_ms
    assert context.events("rpc", f"{P}/ScriptedToolChild/r1", method="cancel_agent_tool_run")
    assert check(context) == []
    (row,) = context.table(P, RUNS)
    assert row["give_up_delivered_at"] is not None
