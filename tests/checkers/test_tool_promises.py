"""The agent-tool promises of `sim.checkers.tool_promises`, `tool_notices`, `tool_children` and
`tool_registry` pass real runs (library stories and inline tools workloads) and catch crafted
failures with their exact sentences: `retryable_only_interrupted`, `silent_runs_given_up`,
`finish_notified_once`, `child_turn_once`, `recovered_child_turn_rebound`,
`clear_cancels_child_first`, `drill_in_gated` and `agent_tools_under_instance_cap`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from scenarios.workloads.tools import DetachedPlan, RunPlan, tools_workload
from sim import Simulation
from sim.checkers import CheckContext, check, context_from
from sim.checkers.tool_children import timed_changes
from sim.sqlite import Write
from sim.trace import TraceRecord
from tests.checkers.agents import (
    MILESTONE,
    fails_with_a_blind_checker,
    found_context,
    inserted,
    record,
    scenario_context,
    with_journal,
    with_record,
    with_row,
    with_rows,
    with_turn,
    without,
)

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"
RUNS = "cf_agent_tool_runs"
MESSAGES = "cf_ai_chat_agent_messages"
TOOLS = "ToolsWorkload/parent"
CHAT = "AiChatToolsWorkload/parent"
STORY = "StoryParent/parent"

SILENT = """
    name: silent
    description: a detached run that signals once and hangs, and one that keeps signalling
    seed: 10
    agents:
      parent:
        workload: tools
        runs:
          - run_id: quiet
            detached: {no_progress_budget: 1m}
            steps: [{progress: {fraction: 0.5}}, {hang: true}]
          - run_id: chatty
            detached: {no_progress_budget: 1m}
            steps:
              - {progress: {fraction: 0.2}}
              - {sleep: 40s}
              - {milestone: halfway}
              - {sleep: 40s}
              - {progress: {fraction: 0.6}}
              - {sleep: 40s}
              - {finish: completed}
    steps:
      - call: {agent: parent, method: dispatch}
      - run_until: 10m
"""
NOTIFY = """
    name: notify
    description: an AIChatAgent-like parent narrates a detached run given up past its budget
    seed: 8
    agents:
      parent:
        workload: tools
        host: chat
        runs:
          - run_id: research
            detached: {notify: true, max_budget: 2m}
            steps: [{sleep: 3m}, {finish: {status: completed, summary: done}}]
    steps:
      - call: {agent: parent, method: dispatch}
      - run_until: 20m
"""
REISSUE = """
    name: reissue
    description: a detached run dispatched, then dispatched again under its run id
    seed: 12
    agents:
      parent:
        workload: tools
        runs:
          - run_id: r1
            detached: true
            steps: [{sleep: 1m}, {finish: completed}]
    steps:
      - call: {agent: parent, method: dispatch}
      - at: 30s
        call: {agent: parent, method: dispatch, args: [r1]}
      - run_until: 5m
"""


def messages(context: CheckContext, name: str) -> list[str]:
    return [v.message for v in check(context, [name])]


def library(name: str, sdk: str | None = None) -> CheckContext:
    return scenario_context((LIBRARY / f"{name}.yaml").read_text(encoding="utf-8"), sdk=sdk)


def changed(context: CheckContext, target: TraceRecord, **changes: object) -> CheckContext:
    """The context with `target`'s fields (and `t_ms`, if given) changed in place."""
    t_ms = changes.pop("t_ms", target.t_ms)
    new = dataclasses.replace(target, t_ms=t_ms, fields={**target.fields, **changes})
    return dataclasses.replace(
        context, records=tuple(new if r is target else r for r in context.records)
    )


def no_liveness(context: CheckContext) -> CheckContext:
    """The same run, cut before its liveness phase."""
    cut = without(context, lambda r: r.event in ("quiesce:begin", "quiesce:end"))
    return dataclasses.replace(cut, quiet=None)


# -- retryable_only_interrupted ------------------------------------------------------------------
@pytest.fixture(scope="module")
def retried() -> CheckContext:
    return library("child-reset-is-retryable")


def attempt(context: CheckContext, number: int) -> TraceRecord:
    return context.events("story:attempt", STORY, attempt=number)[0]


def test_an_interrupted_attempt_retried_as_the_same_call_passes(retried: CheckContext) -> None:
    """S6's reset child: the first attempt is interrupted and retryable, the re-issue completes
    (no envelope)."""
    notes = [(n.get("status"), n.get("retryable")) for n in retried.events("story:attempt")]
    assert notes == [("interrupted", True), ("completed", None)]
    assert messages(retried, "retryable_only_interrupted") == []


def test_an_envelope_retryable_for_anything_but_interrupted_is_caught(
    retried: CheckContext,
) -> None:
    final = changed(retried, attempt(retried, 0), retryable=False)
    assert messages(final, "retryable_only_interrupted") == [
        f"attempt 0 of run lookup of {STORY} ended interrupted at 00:00:01.000 with a failure "
        "envelope saying retryable false; only an interrupted run is retryable"
    ]
    error = changed(retried, attempt(retried, 1), status="error", retryable=True)
    assert messages(error, "retryable_only_interrupted") == [
        f"attempt 1 of run lookup of {STORY} ended error at 00:00:01.500 with a failure "
        "envelope saying retryable true; only an interrupted run is retryable"
    ]
    unjudged = changed(retried, attempt(retried, 1), status="error", retryable=None)
    assert messages(unjudged, "retryable_only_interrupted") == []


def test_a_tool_output_in_a_chat_that_misstates_retryable_is_caught(
    retried: CheckContext,
) -> None:
    """`agentTool()`'s envelope as a chat host stores it in a tool part's output."""

    def chat(output: dict[str, object]) -> CheckContext:
        part = {"type": "tool-research", "toolCallId": "c1", "state": "output-available"}
        message = {"id": "m1", "role": "assistant", "parts": [{**part, "output": output}]}
        row = {"id": "m1", "message": json.dumps(message), "created_at": 0}
        return with_rows(retried, STORY, MESSAGES, [row])

    aborted = {"ok": False, "status": "aborted", "error": "stop", "retryable": True}
    assert messages(chat(aborted), "retryable_only_interrupted") == [
        f"message m1 of the chat of {STORY} holds a tool output that is a failure envelope "
        "with status aborted and retryable true; only an interrupted run is retryable"
    ]
    interrupted = {"ok": False, "status": "interrupted", "error": "reset", "retryable": True}
    assert messages(chat(interrupted), "retryable_only_interrupted") == []
    assert messages(chat({"ok": True, "retryable": True}), "retryable_only_interrupted") == []


# -- silent_runs_given_up ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def silent() -> CheckContext:
    return scenario_context(SILENT)


def never_given_up(context: CheckContext, run_id: str) -> CheckContext:
    """The run as if no tick had given it up: no give-up claim, no give-up call, and its child
    still running."""
    child = f"{TOOLS}/ScriptedToolChild/{run_id}"
    cut = without(
        context,
        lambda r: r.get("runId") == run_id and r.get("slot") == "give_up",
    )
    cut = with_journal(cut, TOOLS, lambda write: None if _closes(write, run_id) else write)
    cut = with_row(
        cut,
        TOOLS,
        RUNS,
        {"run_id": run_id},
        status="running",
        give_up_claimed_at=None,
        give_up_delivered_at=None,
        finish_claimed_at=None,
        finish_delivered_at=None,
    )
    return with_row(
        cut, child, "child_runs", {"run_id": run_id}, status="running", completed_at=None
    )


def _closes(write: Write, run_id: str) -> bool:
    """A committed write that claims, delivers or seals one of the run's slots."""
    statement, params = write
    return (
        statement.startswith("UPDATE cf_agent_tool_runs")
        and run_id in params
        and "last_progress_at" not in statement
        and "status = 'running'" not in statement
    )


def test_a_silent_run_given_up_at_a_tick_and_a_chatty_one_left_alone_pass(
    silent: CheckContext,
) -> None:
    """The quiet run signals at 0 and is given up at the 2m50s tick (window out at 1 min, ticks
    at 5, 20, 50, 170 s); the chatty one signals every 40 s and completes."""
    rows = {r["run_id"]: r for r in silent.table(TOOLS, RUNS)}
    assert rows["quiet"]["interrupted_reason"] == "no-progress"
    assert rows["chatty"]["status"] == "completed"
    (give_up,) = silent.events("hook:on_agent_tool_finish", TOOLS, runId="quiet", slot="give_up")
    assert give_up.t_ms == 170_000
    assert silent.events("hook:on_agent_tool_finish", TOOLS, runId="chatty", slot="give_up") == []
    assert messages(silent, "silent_runs_given_up") == []


def test_a_silent_run_never_given_up_is_caught(silent: CheckContext) -> None:
    hung = never_given_up(silent, "quiet")
    assert messages(hung, "silent_runs_given_up") == [
        f"detached run quiet of {TOOLS} signalled at 00:00:00.000 and then stayed silent: its "
        "60000 ms no-progress window ran out at 00:01:00.000, but it was not given up by "
        "00:04:00.000 (its child was still running, and the backbone looks at an open run at "
        "least every 120 s)"
    ]


def test_a_later_signal_moves_the_give_up_and_a_finished_child_owes_none(
    silent: CheckContext,
) -> None:
    hung = never_given_up(silent, "quiet")
    later = with_row(hung, TOOLS, RUNS, {"run_id": "quiet"}, last_progress_at=200_000)
    assert messages(later, "silent_runs_given_up") == [
        f"detached run quiet of {TOOLS} signalled at 00:03:20.000 and then stayed silent: its "
        "60000 ms no-progress window ran out at 00:04:20.000, but it was not given up by "
        "00:07:20.000 (its child was still running, and the backbone looks at an open run at "
        "least every 120 s)"
    ]
    child = f"{TOOLS}/ScriptedToolChild/quiet"
    done = with_row(hung, child, "child_runs", {"run_id": "quiet"}, status="completed")
    done = with_row(done, child, "child_runs", {"run_id": "quiet"}, completed_at=230_000)
    assert messages(done, "silent_runs_given_up") == []


def test_a_silent_run_is_judged_only_after_a_liveness_phase(silent: CheckContext) -> None:
    assert messages(no_liveness(never_given_up(silent, "quiet")), "silent_runs_given_up") == []


def test_a_tick_held_up_past_the_deadline_moves_it(silent: CheckContext) -> None:
    """An alarm run still going at the deadline (a tick busy delivering another run) moves it
    to that run's end, plus the same lateness again."""
    hung = never_given_up(silent, "quiet")
    fired = next(r for r in hung.events("alarm:fired", TOOLS) if r.t_ms == 170_000)
    done = hung.first_after(hung.events("alarm:done", TOOLS), fired.seq)
    assert done is not None
    long = changed(hung, done, t_ms=300_000)
    assert [v.message.split(", but ")[1] for v in check(long, ["silent_runs_given_up"])] == [
        "it was not given up by 00:08:00.000 (its child was still running, and the backbone "
        "looks at an open run at least every 120 s)"
    ]


# -- finish_notified_once ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def narrated() -> CheckContext:
    return scenario_context(NOTIFY)


def notice_rows(context: CheckContext) -> list[dict[str, object]]:
    return [dict(r) for r in context.table(CHAT, MESSAGES)]


def test_a_give_up_narrated_once_passes(narrated: CheckContext) -> None:
    """Given up at 2m50s: one notice, `interrupted`; the abort of the parent's own teardown
    delivers nothing more (S7), so nothing more is announced."""
    ids = [r["id"] for r in notice_rows(narrated)]
    assert ids[0] == "detached-finish:research:interrupted"
    assert messages(narrated, "finish_notified_once") == []


def test_a_think_host_s_submitted_notice_passes() -> None:
    think = scenario_context(MILESTONE)
    submissions = think.table("ThinkToolsWorkload/parent", "cf_think_submissions")
    assert [s["idempotency_key"] for s in submissions] == ["detached-finish:research:completed"]
    assert messages(think, "finish_notified_once") == []
    bare = with_rows(think, "ThinkToolsWorkload/parent", MESSAGES, [])
    assert messages(bare, "finish_notified_once") == [
        "detached run research of ThinkToolsWorkload/parent delivered its finish slot "
        "(completed) through the notify hook at 00:06:50.000, but no message of its chat "
        "announces it by the end (00:20:00.000, quiet)"
    ]


def test_a_notice_injected_twice_is_caught(narrated: CheckContext) -> None:
    rows = notice_rows(narrated)
    doubled = with_rows(narrated, CHAT, MESSAGES, [*rows, {**rows[0], "id": "again"}])
    assert messages(doubled, "finish_notified_once") == [
        f"run research was announced interrupted 2 times in the chat of {CHAT} (messages "
        "detached-finish:research:interrupted, again); notify injects one message per finish "
        "status"
    ]


def test_a_notice_of_a_run_whose_on_finish_wins_is_caught(narrated: CheckContext) -> None:
    own = with_row(narrated, CHAT, RUNS, {"run_id": "research"}, detached_on_finish="on_done")
    assert messages(own, "finish_notified_once") == [
        f"the chat of {CHAT} announces run research interrupted (message "
        "detached-finish:research:interrupted, at 00:02:50.000), but its row names 'on_done' "
        "as its finish callback: an explicit onFinish wins over notify"
    ]
    later = with_row(own, CHAT, RUNS, {"run_id": "research"}, started_at=600_000)
    assert messages(later, "finish_notified_once") == []


def test_a_notify_delivery_with_no_notice_is_caught(narrated: CheckContext) -> None:
    rows = [r for r in notice_rows(narrated) if "detached-finish" not in str(r["id"])]
    bare = with_rows(narrated, CHAT, MESSAGES, rows)
    assert messages(bare, "finish_notified_once") == [
        f"detached run research of {CHAT} delivered its give_up slot (interrupted) through the "
        "notify hook at 00:02:50.096, but no message of its chat announces it by the end "
        "(00:20:00.000, quiet)"
    ]
    assert messages(no_liveness(bare), "finish_notified_once") == []


def test_an_explicit_on_finish_wins_over_notify_in_a_real_run() -> None:
    """A run given both (the scenario language refuses it, the runtime must not): the run's
    own on_finish is called, and the chat stays silent."""
    plan = RunPlan(
        "both",
        detached=DetachedPlan(on_finish=True, notify=True),
        steps=(("finish", "completed", "done"),),
    )
    parent = tools_workload([plan], host="chat")
    with Simulation(3) as sim:
        sim.call(sim.agent(parent, "parent"), "dispatch")
        sim.quiesce(3_600_000)
        context = context_from(sim)
    assert [r.get("runId") for r in context.events("workload:on_finish")] == ["both"]
    (row,) = context.table(CHAT, RUNS)
    assert row["detached_on_finish"] == "workload_on_finish"
    assert messages(context, "finish_notified_once") == []
    metadata = {"runId": "both", "status": "completed"}
    message = {"id": "n", "role": "user", "parts": [], "metadata": metadata}
    notice = {"id": "n", "message": json.dumps(message), "created_at": row["started_at"]}
    injected = with_rows(context, CHAT, MESSAGES, [notice])
    assert messages(injected, "finish_notified_once") == [
        f"the chat of {CHAT} announces run both completed (message n, at 00:00:00.000), but "
        "its row names 'workload_on_finish' as its finish callback: an explicit onFinish wins "
        "over notify"
    ]


# -- child_turn_once -----------------------------------------------------------------------------
def test_a_re_issued_run_and_a_reset_child_start_one_turn(retried: CheckContext) -> None:
    """The re-issue after S6's reset re-attaches; the child resumes its one turn."""
    child = f"{STORY}/StoryChild/lookup"
    assert len(retried.events("rpc", child, method="start_agent_tool_run")) == 1
    assert messages(retried, "child_turn_once") == []
    reissued = scenario_context(REISSUE)
    assert len(reissued.events("rpc", method="start_agent_tool_run")) == 1
    assert messages(reissued, "child_turn_once") == []


def test_a_child_run_row_written_new_twice_is_caught(retried: CheckContext) -> None:
    child = f"{STORY}/StoryChild/lookup"
    again = with_turn(
        retried,
        child,
        ("DELETE FROM child_runs WHERE run_id = ?", ("lookup",)),
        (
            "INSERT INTO child_runs (run_id, status, started_at) VALUES (?, 'running', ?)",
            ("lookup", 2_000),
        ),
    )
    turns = len(again.journals[child])
    born = [
        number
        for number, turn in enumerate(again.journals[child], 1)
        if any(statement.startswith("INSERT INTO child_runs") for statement, _ in turn)
    ]
    assert messages(again, "child_turn_once") == [
        f"the child {child} wrote its run row of lookup (child_runs) as new 2 times (committed "
        f"turns {born[0]}, {turns}): a child starts one turn per runId"
    ]


@pytest.fixture(scope="module")
def chatted() -> CheckContext:
    # 0.21.0's chat recovery: a recovered turn's rebind and its turn (sdk-0.32 §8).
    return library("hunt-chat-host-tools-progress-milestones", sdk="0.21.0")


def test_a_chat_child_s_recovered_turns_are_one_turn(chatted: CheckContext) -> None:
    child = "ThinkToolsWorkload/assistant/ThinkToolChild/research"
    starts = chatted.events("fiber:run:started", child)
    assert len(starts) >= 2 and chatted.events("chat:recovery:attempt", child)
    assert messages(chatted, "child_turn_once") == []


def test_a_chat_child_starting_a_second_turn_is_caught(chatted: CheckContext) -> None:
    child = "ThinkToolsWorkload/assistant/ThinkToolChild/research"
    first = chatted.events("fiber:run:started", child)[0]
    name = "__cf_internal_chat_turn:fresh-request"
    second = with_record(chatted, first.seq + 1, first, fiberName=name, fiberId="f2", t_ms=5_000)
    assert messages(second, "child_turn_once") == [
        f"the child {child} started a second turn for run research at 00:00:05.000 ({name}), "
        "after the one started at 00:00:00.000; only a chat recovery may run the turn again"
    ]
    crash = record(0, first.t_ms, child, first.inc, "incarnation:end", reason="crash")
    rolled_back = inserted(second, first.seq, crash)
    assert messages(rolled_back, "child_turn_once") == []


# -- recovered_child_turn_rebound ---------------------------------------------------------------
RESEARCH = "ThinkToolsWorkload/assistant/ThinkToolChild/research"


def test_a_chat_child_rebinds_its_run_before_each_recovered_turn(chatted: CheckContext) -> None:
    """Two deploys cut the research child's turn; each recovery names a new request id,
    re-binds the run to it, then runs the turn."""
    rebinds = chatted.events("chat:recovery:rebind", RESEARCH)
    attempts = chatted.events("chat:recovery:attempt", RESEARCH)
    assert [r.get("requestId") for r in rebinds] == [a.get("requestId") for a in attempts]
    assert len(attempts) == 2
    assert messages(chatted, "recovered_child_turn_rebound") == []


def test_a_recovered_turn_run_before_its_rebind_is_caught(chatted: CheckContext) -> None:
    first = chatted.events("chat:recovery:attempt", RESEARCH)[0]
    request = first.get("requestId")
    unbound = without(
        chatted, lambda r: r.event == "chat:recovery:rebind" and r.get("requestId") == request
    )
    turn = unbound.events(
        "fiber:run:started", RESEARCH, fiberName=f"__cf_internal_chat_turn:{request}"
    )[0]
    expected = [
        f"the child {RESEARCH} ran its recovered turn {request} at 00:00:50.001 while its run "
        "research was running, without re-binding the run to that request first, so the "
        "turn's frames are not attributed to the run"
    ]
    assert messages(unbound, "recovered_child_turn_rebound") == expected
    (rebind,) = chatted.events("chat:recovery:rebind", RESEARCH, requestId=request)
    late = with_record(unbound, turn.seq, rebind)
    assert messages(late, "recovered_child_turn_rebound") == expected
    never_ran = without(unbound, lambda r: r.seq == turn.seq)
    assert messages(never_ran, "recovered_child_turn_rebound") == []


def test_a_settled_child_run_rebound_is_caught(chatted: CheckContext) -> None:
    (row,) = chatted.table(RESEARCH, "cf_agent_tool_child_runs")
    assert row["status"] == "completed"
    rebound = with_turn(
        chatted,
        RESEARCH,
        (
            "UPDATE cf_agent_tool_child_runs SET request_id = ? WHERE run_id = ?",
            ("late", "research"),
        ),
    )
    turns = len(rebound.journals[RESEARCH])
    assert messages(rebound, "recovered_child_turn_rebound") == [
        f"the child {RESEARCH} re-bound its settled run research (completed) from request "
        f"{row['request_id']} to late in its committed turn {turns}"
    ]


def test_a_first_binding_of_a_row_a_cancel_sealed_is_no_rebind() -> None:
    """A Think child's turn binds its request id unguarded, also to a row a cancel sealed
    `aborted` just before it (agent-tools §3; found by agentsim generate on 0.32.0, kept as
    `found/think-child-bound-after-cancel.yaml`): a binding from no request is no re-bind."""
    context = found_context("think-child-bound-after-cancel")
    child = "AiChatToolsWorkload/parent2/ThinkToolChild/r1"
    bound = [
        change
        for _, change in timed_changes(context, child, "cf_agent_tool_child_runs", "run_id")
        if change.before is not None
        and change.after is not None
        and change.before.get("status") == "aborted"
        and change.before.get("request_id") is None
        and change.after.get("request_id") is not None
    ]
    assert bound, "the story no longer binds a request to a row a cancel sealed"
    assert messages(context, "recovered_child_turn_rebound") == []


# -- clear_cancels_child_first / drill_in_gated --------------------------------------------------
@pytest.fixture(scope="module")
def cleared() -> CheckContext:
    return library("clear-runs-and-gate-drill-in")


def test_clearing_a_live_run_cancels_its_child_first(cleared: CheckContext) -> None:
    """watch-1 was running when cleared: its child got the cancel before its facet went;
    report-1 was completed, and its child got none."""
    for run, cancels in (("watch-1", 1), ("report-1", 0)):
        child = f"{STORY}/StoryChild/{run}"
        assert len(cleared.events("rpc", child, method="cancel_agent_tool_run")) == cancels
        assert len(cleared.events("facet:deleted", child)) == 1
    assert messages(cleared, "clear_cancels_child_first") == []


def test_a_live_run_cleared_without_cancelling_its_child_is_caught(cleared: CheckContext) -> None:
    child = f"{STORY}/StoryChild/watch-1"
    uncancelled = without(
        cleared, lambda r: r.agent == child and r.get("method") == "cancel_agent_tool_run"
    )
    assert messages(uncancelled, "clear_cancels_child_first") == [
        f"run watch-1 of {STORY} was cleared while running, and its child {child} was deleted "
        "at 00:02:00.000 without being cancelled first"
    ]
    (cancel,) = cleared.events("rpc", child, method="cancel_agent_tool_run")
    (gone,) = uncancelled.events("facet:deleted", child)
    late = with_record(uncancelled, gone.seq, cancel)
    assert messages(late, "clear_cancels_child_first") == messages(
        uncancelled, "clear_cancels_child_first"
    )


def test_the_drill_in_gate_admits_exactly_the_registry_s_runs(cleared: CheckContext) -> None:
    notes = [(n.get("run"), n.get("allowed")) for n in cleared.events("story:drill-in")]
    assert ("guessed-7", False) in notes and ("report-1", True) in notes
    assert messages(cleared, "drill_in_gated") == []


def test_a_gate_that_misreads_the_registry_is_caught(cleared: CheckContext) -> None:
    def note(run: str, child: str = "StoryChild") -> TraceRecord:
        return cleared.events("story:drill-in", STORY, run=run, child=child)[0]

    guessed = changed(cleared, note("guessed-7"), allowed=True)
    assert messages(guessed, "drill_in_gated") == [
        f"{STORY} admitted a drill-in to {STORY}/StoryChild/guessed-7 at 00:00:10.000, while "
        "its registry had no run guessed-7 of StoryChild"
    ]
    refused = changed(cleared, note("report-1"), allowed=False)
    assert messages(refused, "drill_in_gated") == [
        f"{STORY} refused a drill-in to {STORY}/StoryChild/report-1 at 00:00:10.000, while "
        "its registry held run report-1 of StoryChild"
    ]
    other_class = changed(cleared, note("report-1", "StubbornChild"), allowed=True)
    assert len(messages(other_class, "drill_in_gated")) == 1
    # At 1 min report-1 was cleared in the same instant: the gate's answer is not judged.
    same_instant = cleared.events("story:drill-in", STORY, run="report-1", child="StoryChild")[1]
    assert same_instant.t_ms == 60_000
    assert messages(changed(cleared, same_instant, allowed=True), "drill_in_gated") == []


def test_a_refused_drill_in_that_spawns_a_child_is_caught(cleared: CheckContext) -> None:
    refusal = cleared.events("story:drill-in", STORY, run="guessed-7")[0]
    path = f"{STORY}/StoryChild/guessed-7"
    start = record(0, refusal.t_ms, path, 1, "incarnation:start", trigger="facet")
    spawned = inserted(cleared, refusal.seq, start)
    assert messages(spawned, "drill_in_gated") == [
        f"{STORY} refused a drill-in to {path} at 00:00:10.000 (it never had that run), yet "
        "that facet has records: a refused request must not spawn a child"
    ]


# -- agent_tools_under_instance_cap --------------------------------------------------------------
MIDDLE = "StoryParent/top/MiddleChild/m0"
INSERT_RUN = (
    "INSERT INTO cf_agent_tool_runs (run_id, agent_type, status, started_at) VALUES (?, ?, ?, ?)"
)
REJECTED = "maxConcurrentAgentTools ({}) exceeded"


@pytest.fixture(scope="module")
def capped() -> CheckContext:
    return library("nested-agent-tools-own-caps")


def test_a_cap_set_on_the_instance_holds(capped: CheckContext) -> None:
    """MiddleChild sets its cap of 1 in its constructor: its second leaf is rejected while the
    first runs."""
    assert capped.option(MIDDLE, "max_concurrent_agent_tools") is None
    errors = [r["error_message"] for r in capped.table(MIDDLE, RUNS) if r["status"] == "error"]
    assert errors == ["maxConcurrentAgentTools (1) exceeded"]
    assert messages(capped, "agent_tools_under_instance_cap") == []


def test_an_instance_cap_broken_or_rejecting_early_is_caught(capped: CheckContext) -> None:
    over = with_turn(
        capped,
        MIDDLE,
        (INSERT_RUN, ("m0-g2", "StoryChild", "running", 2_000)),
        (INSERT_RUN, ("m0-g3", "StoryChild", "running", 2_000)),
    )
    turns = len(over.journals[MIDDLE])
    assert messages(over, "agent_tools_under_instance_cap") == [
        f"{MIDDLE} kept 2 agent-tool runs starting or running (m0-g2, m0-g3) after its "
        f"committed turn {turns}, over the cap of 1 its instance had shown"
    ]

    def raised(write: Write) -> Write:
        statement, params = write
        return statement, tuple(
            REJECTED.format(2) if p == REJECTED.format(1) else p for p in params
        )

    early = with_journal(capped, MIDDLE, raised)
    assert messages(early, "agent_tools_under_instance_cap") == [
        f"run m0-g1 of {MIDDLE} was rejected for its cap of 2 while only 1 run(s) were "
        "starting or running"
    ]
    static = dataclasses.replace(
        over, options={**over.options, MIDDLE: {"max_concurrent_agent_tools": 5}}
    )
    assert messages(static, "agent_tools_under_instance_cap") == []


# -- every checker here needs its checker ---------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "fixture", "test"),
    [
        (
            "retryable_only_interrupted",
            "retried",
            test_an_envelope_retryable_for_anything_but_interrupted_is_caught,
        ),
        ("silent_runs_given_up", "silent", test_a_silent_run_never_given_up_is_caught),
        ("finish_notified_once", "narrated", test_a_notice_injected_twice_is_caught),
        ("child_turn_once", "retried", test_a_child_run_row_written_new_twice_is_caught),
        ("recovered_child_turn_rebound", "chatted", test_a_settled_child_run_rebound_is_caught),
        (
            "clear_cancels_child_first",
            "cleared",
            test_a_live_run_cleared_without_cancelling_its_child_is_caught,
        ),
        ("drill_in_gated", "cleared", test_a_gate_that_misreads_the_registry_is_caught),
        (
            "agent_tools_under_instance_cap",
            "capped",
            test_an_instance_cap_broken_or_rejecting_early_is_caught,
        ),
    ],
)
def test_each_test_fails_with_a_blind_checker(
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    name: str,
    fixture: str,
    test: object,
) -> None:
    fails_with_a_blind_checker(monkeypatch, name, test, request.getfixturevalue(fixture))  # type: ignore[arg-type]


def test_a_notice_whose_submission_failed_is_not_called_lost() -> None:
    """generate found a Think-like host whose notify submission failed to start on a storage
    fault: the row keeps status `error` and its message, so the notice is not lost unseen."""
    from sim.checkers.tool_notices import _failed_submissions

    row = {"status": "error", "metadata_json": '{"runId": "r1", "status": "completed"}'}
    context = CheckContext(records=[], storage={"P": {"cf_think_submissions": [row]}})
    assert _failed_submissions(context, "P") == {("r1", "completed")}
    pending = {**row, "status": "pending"}
    context = CheckContext(records=[], storage={"P": {"cf_think_submissions": [pending]}})
    assert _failed_submissions(context, "P") == set()


DRAIN_FAILS = """
name: drain-fails
description: a Think-like host's notify submission whose first drain read fails on storage
seed: 3
agents:
  parent:
    workload: tools
    host: think
    runs:
      - run_id: r1
        detached: {notify: true}
        steps: [{sleep: 1s}, {finish: completed}]
steps:
  - arm_storage_fault:
      agent: parent
      kind: error
      match: "^SELECT \\\\* FROM cf_think_submissions WHERE status = 'pending'"
  - {at: 0s, call: {agent: parent, method: dispatch}}
  - run_until: 2m
"""


def test_a_failed_drain_read_is_tried_again_and_the_notice_lands() -> None:
    """generate found a notice left pending for good: the drain's read of the pending
    submissions hit a storage fault and nothing woke the host again. The drain reads again."""
    context = scenario_context(DRAIN_FAILS)
    assert context.events("fault:storage_error")
    assert check(context, ["finish_notified_once"]) == []
    rows = context.table("ThinkToolsWorkload/parent", "cf_think_submissions")
    assert [row.get("status") for row in rows] == ["completed"]
