"""The chat-host invariants — `chat_turns_serial`, `progress_done_sent` (S4), `milestones_stored`
(S2) and `chat_recovery_attempts_count` — pass a Think-like research child whose work tool
reports progress and a milestone while two deploys interrupt its turn (recovered twice), and a
support chat answering three messages in a row; and catch crafted overlapping turns, a finished
progress report coalesced, a milestone row without its stored chunk and recovery attempts that
count again from 1."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from sim.checkers import CheckContext, check
from sim.trace import TraceRecord
from tests.checkers.agents import (
    fails_with_a_blind_checker,
    found_context,
    record,
    scenario_context,
    with_record,
    with_rows,
    without,
)

SUPPORT = "AiChatWorkload/support"
RESEARCH = "ThinkToolsWorkload/assistant/ThinkToolChild/research"
CHUNKS = "cf_ai_chat_stream_chunks"
MILESTONES = "cf_agent_tool_milestones"
CHATS = """
    name: chat-checks
    description: >
      a Think-like assistant runs a research child whose work tool reports progress and a
      milestone across two deploys, and a support chat answers three messages in a row
    seed: 17
    agents:
      assistant:
        workload: tools
        host: think
        runs:
          - run_id: research
            child: think
            input: "research durable fibers"
            detached: true
      support:
        workload: chat
        host: chat
        model: {reply: "Happy to help.", chunks: 3, chunk_delay: 400ms}
    model:
      rules:
        - after_tool: work
          reply: {text: "Found three sources.", chunks: 3, delay: 200ms}
        - asked: research
          offers: work
          reply:
            tool_calls:
              - name: work
                input:
                  steps:
                    - progress: {fraction: 0.2}
                    - sleep: 20000
                    - milestone: {name: sources, data: {n: 3}}
                    - progress: {fraction: 0.9}
                    - progress: {fraction: 1.0}
      default: {text: "Noted.", chunks: 2, delay: 100ms}
    steps:
      - call: {agent: assistant, method: dispatch}
      - call: {agent: support, method: say, args: ["my export failed"], wait: false}
      - call: {agent: support, method: say, args: ["it says quota exceeded"], wait: false}
      - call: {agent: support, method: say, args: ["can you raise it?"], wait: false}
      - at: 10s
        deploy_all: {}
      - at: 25s
        deploy_all: {}
      - run_until: 5m
"""
NAMES = [
    "chat_turns_serial",
    "progress_done_sent",
    "milestones_stored",
    "chat_recovery_attempts_count",
]


@pytest.fixture(scope="module")
def chats() -> CheckContext:
    return scenario_context(CHATS, sdk="0.21.0")  # turns as fibers, 0.21.0's recovery


def messages(context: CheckContext, name: str) -> list[str]:
    return [v.message for v in check(context, [name])]


def rewritten(context: CheckContext, target: TraceRecord, **fields: object) -> CheckContext:
    """The context with the fields of one record changed."""
    records = [
        dataclasses.replace(r, fields={**r.fields, **fields}) if r == target else r
        for r in context.records
    ]
    return dataclasses.replace(context, records=records)


def test_turns_progress_milestones_and_recovery_pass(chats) -> None:
    """Three support turns one after another; the research turn recovered twice (attempts 1,
    2), its milestone stored and its finished progress sent."""
    turns = [
        r
        for r in chats.events("fiber:run:started", SUPPORT)
        if str(r.get("fiberName")).startswith("__cf_internal_chat_turn:")
    ]
    assert [r.t_ms for r in turns] == [0, 1_600, 3_200]
    attempts = chats.events("chat:recovery:attempt", RESEARCH)
    assert [r.get("attempt") for r in attempts] == [1, 2]
    assert [r["name"] for r in chats.table(RESEARCH, MILESTONES)] == ["sources"]
    assert check(chats, NAMES) == []


# -- chat_turns_serial --------------------------------------------------------------------------
def test_a_turn_started_while_another_runs_is_caught(chats) -> None:
    """Without the end of the first support turn, the second starts while it runs; a turn left
    running by a dead incarnation does not hold the next incarnation's turns back."""
    first_end = chats.events("fiber:run:completed", SUPPORT)[0]
    overlapping = without(chats, lambda r: r == first_end)
    starts = overlapping.events("fiber:run:started", SUPPORT)
    second, first = (str(r.get("fiberName")).split(":")[-1] for r in (starts[1], starts[0]))
    assert messages(overlapping, "chat_turns_serial") == [
        f"chat turn {second} of {SUPPORT} started at 00:00:01.600 while turn {first} (started "
        "at 00:00:00.000) was still running; turns run one at a time"
    ]
    cut = chats.events("fiber:run:started", RESEARCH)[0]
    assert not chats.events("fiber:run:completed", RESEARCH, fiberId=cut.get("fiberId"))
    assert messages(chats, "chat_turns_serial") == []


def test_on_0_32_a_top_level_hosts_turns_are_task_runs_held_to_one_at_a_time() -> None:
    """0.32.0 runs a top-level chat host's turns as Task runs: they are one at a time too, and a
    turn's attempt started while the one before it runs is caught."""
    newer = scenario_context(CHATS.replace("    seed: 17", '    seed: 17\n    sdk: "0.32.0"'))
    assert newer.release == "0.32.0"
    starts = newer.events("task:attempt:started", SUPPORT, definition="__cf_internal_chat_turn")
    assert len(starts) >= 2
    assert messages(newer, "chat_turns_serial") == []
    early = with_record(newer, starts[0].seq, starts[1])
    (problem,) = messages(early, "chat_turns_serial")
    second, first = starts[1].get("runId"), starts[0].get("runId")
    assert f"chat turn {second} of {SUPPORT} started at" in problem
    assert f"while turn {first} (started at 00:00:00.000) was still running" in problem
    # A later attempt of a turn's run only hands the interrupted turn to chat recovery.
    handoff = with_record(newer, starts[0].seq, starts[1], attempt=2)
    assert messages(handoff, "chat_turns_serial") == []
    # So does a first attempt with no live turn to run (its caller failed): a chat recovery
    # detected within an attempt marks it as a hand-off, which is not judged.
    real = [r for r in early.events("task:attempt:started", SUPPORT) if r.get("runId") == second]
    detected = record(0, real[-1].t_ms, SUPPORT, real[-1].inc, "chat:recovery:detected")
    assert messages(with_record(early, real[-1].seq, detected), "chat_turns_serial") == []


REMADE = """
    name: chat-child-remade
    description: A chat child cut by a deploy mid-turn is cleared (deleted) and made again.
    seed: 13
    agents:
      parent:
        workload: tools
        start: on_start
        runs:
          - {run_id: r1, child: think, input: "research fibers"}
          - {run_id: r2, child: think, detached: {max_budget: 8m3s}, input: "research fibers"}
          - {run_id: r3}
    steps:
      - at: 0s
        call: {agent: parent, method: dispatch, args: [r1], wait: false, expect_error: AgentEvicted}
      - at: 0s
        deploy: {}
      - at: 2s
        call: {agent: parent, method: clear, wait: false}
      - at: 5s
        call: {agent: parent, method: dispatch, args: [r2], wait: false}
"""


def test_a_deleted_child_made_again_starts_its_turns_afresh() -> None:
    """A child whose turn a deploy cut is deleted by a clear, and made again under its name:
    its first incarnation is numbered 1 again, and the deleted child's turn that never ended
    holds the new child's first turn back no more than a dead incarnation's would (found by
    agentsim generate)."""
    context = scenario_context(REMADE)
    child = "ToolsWorkload/parent/ThinkToolChild/r2"
    starts = context.events("fiber:run:started", child)
    assert [r.inc for r in starts] == [1, 1]
    assert context.events("facet:deleted", child)
    assert messages(context, "chat_turns_serial") == []


def test_a_turn_whose_fiber_setup_failed_holds_no_later_turn_back(chats) -> None:
    """A turn fiber whose setup threw (its initial snapshot write failed) never ran its body: it
    took no keepAlive lease and, as in the SDK, has no end record (fibers §5.2), so the next
    turn starting is no overlap. A turn that took its lease and never ended still is one."""
    first = chats.events("fiber:run:started", SUPPORT)[0]
    fiber, holder = first.get("fiberId"), f"fiber:{first.get('fiberId')}"

    def setup_records(r: TraceRecord) -> bool:
        ended = r.event in ("fiber:run:completed", "fiber:run:failed") and r.get("fiberId") == fiber
        return r.agent == SUPPORT and (ended or r.get("holder") == holder)

    setup_failed = without(chats, setup_records)
    assert not setup_failed.events("keep_alive:acquire", SUPPORT, holder=holder)
    assert messages(setup_failed, "chat_turns_serial") == []
    leased_but_unended = without(chats, lambda r: setup_records(r) and r.get("holder") != holder)
    assert len(messages(leased_but_unended, "chat_turns_serial")) == 1


# -- progress_done_sent -------------------------------------------------------------------------
def test_a_finished_progress_report_coalesced_is_caught(chats) -> None:
    """A report of 1.0 answered `coalesced` is named; one outside an active run is not."""
    (done,) = [
        r
        for r in chats.events("workload:reported", RESEARCH, kind="progress")
        if r.get("fraction") == 1.0
    ]
    coalesced = rewritten(chats, done, outcome="coalesced")
    assert messages(coalesced, "progress_done_sent") == [
        f"run research of {RESEARCH} reported progress 1.0 at 00:01:10.001 and it was coalesced "
        "instead of sent; a finished progress report is always sent at once"
    ]
    outside = rewritten(chats, done, outcome="inactive", runId=None)
    assert messages(outside, "progress_done_sent") == []


# -- milestones_stored --------------------------------------------------------------------------
def test_a_milestone_without_its_stored_chunk_is_caught(chats) -> None:
    """The milestone row with no `data-agent-milestone` chunk in any stream of the child is
    named; a row written when no stream was open is not judged."""
    chunks = [r for r in chats.table(RESEARCH, CHUNKS) if "data-agent-milestone" not in r["body"]]
    assert len(chunks) == len(chats.table(RESEARCH, CHUNKS)) - 1
    unstored = with_rows(chats, RESEARCH, CHUNKS, chunks)
    assert messages(unstored, "milestones_stored") == [
        f"milestone sources (sequence 0) of run research on {RESEARCH} was reported at "
        "00:01:10.001 while its turn streamed, but no stream of the child stored it as a chunk; "
        "a milestone is stored in the turn's stream"
    ]
    (row,) = chats.table(RESEARCH, MILESTONES)
    late = with_rows(unstored, RESEARCH, MILESTONES, [{**row, "at": 200_000}])
    assert messages(late, "milestones_stored") == []


# -- chat_recovery_attempts_count ---------------------------------------------------------------
def test_recovery_attempts_counted_again_or_skipped_are_caught(chats) -> None:
    """A second attempt numbered 1 again is named, unless the first may have rolled back; an
    attempt skipping a number with no restart between is named."""
    first, second = chats.events("chat:recovery:attempt", RESEARCH)
    origin = first.get("originRequestId")
    again = rewritten(chats, second, attempt=1)
    assert messages(again, "chat_recovery_attempts_count") == [
        f"chat recovery of turn {origin} on {RESEARCH} numbered an attempt 1 again after "
        "attempt 1 (at 00:00:50.001); attempts count up 1, 2, 3… across restarts"
    ]
    crash = record(0, first.t_ms, RESEARCH, first.inc, "incarnation:end", reason="crash")
    assert messages(with_record(again, first.seq, crash), "chat_recovery_attempts_count") == []
    skipped = with_record(chats, first.seq, first, attempt=3)
    assert messages(skipped, "chat_recovery_attempts_count") == [
        f"chat recovery of turn {origin} on {RESEARCH} skipped from attempt 1 to 3 with no "
        "restart between (at 00:00:20.001); attempts count up 1, 2, 3… across restarts"
    ]


def test_on_0_32_an_attempt_may_repeat_or_go_back_to_one_but_not_skip(chats) -> None:
    """0.32.0 numbers a wake's attempt by the incident: a debounced wake repeats the last
    number and progress sends it back to 1, so neither is caught there; an attempt that goes
    down to another number, or skips one with no restart between, still is."""
    newer = dataclasses.replace(chats, release="0.32.0")
    first, second = newer.events("chat:recovery:attempt", RESEARCH)
    assert second.get("attempt") == 2
    name = "chat_recovery_attempts_count"
    assert messages(rewritten(newer, second, attempt=1), name) == []  # back to 1
    assert messages(with_record(newer, second.seq, second), name) == []  # 2 repeated
    third = with_record(newer, second.seq, second, attempt=3)
    (three,) = third.events("chat:recovery:attempt", RESEARCH, attempt=3)
    down = with_record(third, three.seq, three, attempt=2)
    (problem,) = messages(down, name)
    assert "numbered an attempt 2 again after attempt 3" in problem
    assert messages(with_record(newer, first.seq, first, attempt=3), name) != []  # a skip


@pytest.mark.parametrize(
    ("name", "test"),
    [
        ("chat_turns_serial", test_a_turn_started_while_another_runs_is_caught),
        ("progress_done_sent", test_a_finished_progress_report_coalesced_is_caught),
        ("milestones_stored", test_a_milestone_without_its_stored_chunk_is_caught),
        (
            "chat_recovery_attempts_count",
            test_recovery_attempts_counted_again_or_skipped_are_caught,
        ),
    ],
)
def test_the_catching_tests_fail_with_a_blind_checker(
    name: str,
    test: Callable[[CheckContext], None],
    chats: CheckContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each test above goes red when its checker is replaced by one that finds nothing."""
    fails_with_a_blind_checker(monkeypatch, name, test, chats)


def test_a_hand_off_that_failed_before_recovery_saw_it_is_no_turn() -> None:
    """A first attempt of a chat turn's Task run whose caller had failed hands the turn to chat
    recovery; here that hand-off fails at its first read (flaky storage), before recovery
    records it, while the next turn runs. Its body never began (it took no keepAlive), so it
    is no turn and overlaps nothing (found by agentsim generate on 0.32.0)."""
    context = found_context("chat-handoff-failed-before-detected")
    host = "ThinkWorkload/assistant"
    firsts = context.events(
        "task:attempt:started", host, definition="__cf_internal_chat_turn", attempt=1
    )
    leases = {r.t_ms for r in context.events("keep_alive:acquire", host, holder="keep_alive")}
    unleased = [r for r in firsts if r.t_ms not in leases]
    assert unleased, "the story no longer has a hand-off that failed before its body"
    assert not context.events("chat:recovery:detected", host)
    assert messages(context, "chat_turns_serial") == []
