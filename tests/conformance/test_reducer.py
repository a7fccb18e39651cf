"""The client reducer and its `useAgentToolEvents` analogue (agent-tools §3.5, §5.6, T-131…T-141).

Frames are built here the way the server sends them (§3.1), with `chunkSequence` on stored chunks.
Where seed decision S5 (never drop a genuine frame, never double one) overrides the SDK, the test
checks the S5 behaviour and its docstring says so; `sdk_client` replays the SDK's own dedupe key
beside it, to show each such scenario really is one where the SDK's rule goes wrong.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from agents_core.agent_tools import (
    AgentToolEvents,
    AgentToolEventsState,
    apply_agent_tool_event,
    parts_text,
)


class Clock:
    """The client's clock, moved by hand."""

    def __init__(self, now_ms: int = 1_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


# --- frames as the server sends them ---------------------------------------------------------


def frame(
    sequence: int, event: dict[str, Any], parent: str | None = "tool-1", replay: bool = False
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "agent-tool-event"}
    if parent is not None:
        out["parentToolCallId"] = parent
    out["sequence"] = sequence
    if replay:
        out["replay"] = True
    out["event"] = event
    return out


def started(sequence: int = 0, run: str = "r", order: int = 0, **kw: Any) -> dict[str, Any]:
    event = {"kind": "started", "runId": run, "agentType": "Researcher", "order": order}
    return frame(sequence, event, **kw)


def chunk(
    sequence: int, body: dict[str, Any], cs: int | None = None, run: str = "r", **kw: Any
) -> dict[str, Any]:
    event: dict[str, Any] = {"kind": "chunk", "runId": run, "body": json.dumps(body)}
    if cs is not None:
        event["chunkSequence"] = cs
    return frame(sequence, event, **kw)


def terminal(
    sequence: int,
    kind: str,
    run: str = "r",
    parent: str | None = "tool-1",
    replay: bool = False,
    **fields: Any,
) -> dict[str, Any]:
    return frame(sequence, {"kind": kind, "runId": run, **fields}, parent=parent, replay=replay)


TEXT_START = {"type": "text-start", "id": "t"}


def delta(text: str) -> dict[str, Any]:
    return {"type": "text-delta", "id": "t", "delta": text}


def progress(fraction: float) -> dict[str, Any]:
    return {"type": "data-agent-progress", "transient": True, "data": {"fraction": fraction}}


def milestone(name: str, sequence: int, at: int = 500) -> dict[str, Any]:
    return {"type": "data-agent-milestone", "data": {"name": name, "sequence": sequence, "at": at}}


def client(frames: list[dict[str, Any]], clock: Clock | None = None) -> AgentToolEvents:
    events = AgentToolEvents(clock or Clock())
    for f in frames:
        events.receive(json.dumps(f))
    return events


def sdk_client(frames: list[dict[str, Any]]) -> AgentToolEventsState:
    """The SDK's hook: drop any frame whose (parentToolCallId, runId, sequence) was seen."""
    seen: set[tuple[str, str, int]] = set()
    state = AgentToolEventsState()
    for f in frames:
        key = (f.get("parentToolCallId") or "", f["event"]["runId"], f["sequence"])
        if key not in seen:
            seen.add(key)
            state = apply_agent_tool_event(state, f, Clock())
    return state


def part_types(events: AgentToolEvents, run: str = "r") -> list[str]:
    return [p["type"] for p in events.runs_by_id[run].parts]


# --- K. catalogue ------------------------------------------------------------------------------


def test_T131_runs_grouped_by_tool_call_in_display_order_and_parentless_runs_unbound() -> None:
    """Runs started with order 1 then 0 under one tool call come back ordered; a parentless run is
    only unbound.
    """
    events = client(
        [started(run="b", order=1), started(run="a", order=0), started(run="solo", parent=None)]
    )
    assert [r.run_id for r in events.get_runs_for_tool_call("tool-1")] == ["a", "b"]
    assert [r.run_id for r in events.unbound_runs] == ["solo"]
    assert events.state.runs_by_tool_call_id.keys() == {"tool-1"}
    assert events.get_runs_for_tool_call("other") == []
    assert events.runs_by_id["a"].sub_agent == {"agent": "Researcher", "name": "a"}


LOCALE_ORDER = [
    "_x",
    "-y",
    "0a",
    "a_",
    "a-",
    "a0",
    "a1",
    "A1",
    "ab",
    "aB",
    "Ab",
    "AB",
    "alpha",
    "Beta",
    "z",
    "Z",
]
"""These ids as `[...].sort((a, b) => a.localeCompare(b))` orders them in Node 20 (the default
locale's collation): `_`, `-`, digits, letters without case, then lower case first."""


def test_T131_order_ties_are_broken_by_locale_compare_of_the_run_id() -> None:
    """Runs of one `order` are listed as `localeCompare` sorts their ids (§3.5), not by code
    point, which would put `Beta` before `alpha` and `-y` before `_x`."""
    shuffled = sorted(LOCALE_ORDER, key=lambda run: (len(run), run[::-1]))
    events = client([started(run=run, order=0, parent=None) for run in shuffled])
    assert [r.run_id for r in events.unbound_runs] == LOCALE_ORDER
    grouped = client([started(run=run, order=0) for run in reversed(shuffled)])
    assert [r.run_id for r in grouped.get_runs_for_tool_call("tool-1")] == LOCALE_ORDER


def test_T134_milestones_deduped_by_sequence_and_progress_names_the_newest() -> None:
    """Milestone chunks with sequences 0, 1, 0 give milestones [0, 1], progress on the newest, and
    (S5) no doubled part.
    """
    state = AgentToolEventsState()
    for f in (
        started(),
        chunk(1, milestone("a", 0, at=10)),
        chunk(2, milestone("b", 1, at=20)),
        chunk(3, milestone("a", 0, at=10)),
    ):
        state = apply_agent_tool_event(state, f, Clock())
    run = state.runs_by_id["r"]
    assert [(m["sequence"], m["name"]) for m in run.milestones] == [(0, "a"), (1, "b")]
    assert run.progress == {"milestone": "b", "at": 20}
    # the SDK appends a third data-agent-milestone part here (E18); S5 shows a milestone once
    assert [p["type"] for p in run.parts] == ["data-agent-milestone"] * 2


def test_T135_interrupted_state_mirrors_reason_and_child_still_running() -> None:
    """An interrupted event sets status, error, reason and childStillRunning exactly as sent, with
    or without a reason.
    """
    with_reason = client(
        [
            started(),
            terminal(
                1, "interrupted", error="gave up", reason="no-progress", childStillRunning=True
            ),
        ]
    )
    run = with_reason.runs_by_id["r"]
    assert (run.status, run.error, run.reason, run.child_still_running) == (
        "interrupted",
        "gave up",
        "no-progress",
        True,
    )
    bare = client([started(), terminal(1, "interrupted", error="parent restarted")])
    run = bare.runs_by_id["r"]
    assert (run.status, run.error, run.reason, run.child_still_running) == (
        "interrupted",
        "parent restarted",
        None,
        None,
    )


def test_T136_replay_of_a_chunk_seen_live_is_dropped_by_identity_not_wire_sequence() -> None:
    """S5: a replayed chunk already applied live is dropped by its chunkSequence, a replay colliding
    only on the wire key is applied, and distinct chunks all apply.
    """
    live = [started(), chunk(1, TEXT_START, cs=0), chunk(2, delta("A"), cs=1)]
    replay = [
        started(replay=True),
        chunk(1, TEXT_START, cs=0, replay=True),
        chunk(7, delta("A"), cs=1, replay=True),  # seen live, different wire sequence
        chunk(2, delta("B"), cs=2, replay=True),  # new chunk on a wire key seen live
    ]
    events = client(live + replay)
    assert parts_text(events.runs_by_id["r"].parts) == "AB"
    assert parts_text(sdk_client(live + replay).runs_by_id["r"].parts) == "AA"  # doubled A, lost B


def test_T137_stray_started_replay_does_not_reopen_a_completed_run() -> None:
    """A replayed started with a new sequence after the run completed leaves status and summary
    unchanged.
    """
    events = client(
        [
            started(),
            chunk(1, delta("x"), cs=0),
            terminal(2, "finished", summary="done"),
            started(5, replay=True),
        ]
    )
    run = events.runs_by_id["r"]
    assert (run.status, run.summary) == ("completed", "done")
    assert parts_text(run.parts) == "x"


def test_T138_reset_local_state_lets_the_same_frames_apply_again() -> None:
    """After reset_local_state the same frames are applied again from nothing, where before they
    were duplicates.
    """
    frames = [started(), chunk(1, TEXT_START, cs=0), chunk(2, delta("hi"), cs=1)]
    events = client(frames)
    assert [events.receive(f) for f in frames[1:]] == [False, False]
    events.reset_local_state()
    assert events.runs_by_id == {}
    assert [events.receive(f) for f in frames] == [True, True, True]
    assert parts_text(events.runs_by_id["r"].parts) == "hi"


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ({"kind": "finished", "summary": "sum"}, ("completed", "sum", None)),
        ({"kind": "error", "error": "bad"}, ("error", None, "bad")),
        ({"kind": "aborted", "reason": "user cancelled"}, ("aborted", None, "user cancelled")),
        ({"kind": "aborted"}, ("aborted", None, None)),
        ({"kind": "interrupted", "error": "stopped"}, ("interrupted", None, "stopped")),
    ],
)
def test_T139_each_terminal_event_maps_to_its_status_and_fields(
    event: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    """finished/error/aborted/interrupted give completed/error/aborted/interrupted, with aborted's
    reason as the error.
    """
    events = client([started(), terminal(1, **event)])
    run = events.runs_by_id["r"]
    assert (run.status, run.summary, run.error) == expected


def test_T141_chunk_before_its_started_is_held_and_applied_when_started_arrives() -> None:
    """S5: a chunk (and a terminal) for a run with no started yet is held, then applied after the
    started; the SDK loses it.
    """
    frames = [chunk(1, delta("early"), cs=0), terminal(2, "finished", summary="s"), started()]
    events = client(frames)
    assert events.runs_by_id["r"].status == "completed"
    assert parts_text(events.runs_by_id["r"].parts) == "early"
    assert sdk_client(frames).runs_by_id["r"].parts == []


# --- S5: never drop, never double ----------------------------------------------------------


def test_S5_reconnect_replay_with_different_wire_sequences_shows_every_text_part_once() -> None:
    """S5: a client that saw a run live (sequences counting progress frames) then got a replay ends
    with each text once and nothing lost.
    """
    live = [
        started(),
        chunk(1, TEXT_START, cs=0),
        chunk(2, progress(0.2)),
        chunk(3, delta("A"), cs=1),
        chunk(4, progress(0.5)),
        chunk(5, delta("B"), cs=2),
        # the socket drops here; the server goes on with delta C (cs 3) and finishes
    ]
    replay = [
        started(replay=True),
        chunk(1, TEXT_START, cs=0, replay=True),
        chunk(2, delta("A"), cs=1, replay=True),
        chunk(3, delta("B"), cs=2, replay=True),
        chunk(4, delta("C"), cs=3, replay=True),
        terminal(5, "finished", summary="ABC", replay=True),
    ]
    events = client(live + replay)
    run = events.runs_by_id["r"]
    assert run.parts == [{"type": "text", "text": "ABC", "state": "streaming"}]
    assert run.status == "completed"
    sdk_run = sdk_client(live + replay).runs_by_id["r"]
    assert (parts_text(sdk_run.parts), sdk_run.status) == ("AB", "running")  # C and the finish lost


def test_S5_reattach_numbering_chunks_from_one_after_a_replay_loses_nothing() -> None:
    """S5 (E17): after a replay, re-attach chunks and terminal numbered from 1 again are all
    applied.
    """
    replay = [
        started(replay=True),
        chunk(1, TEXT_START, cs=0, replay=True),
        chunk(2, delta("A"), cs=1, replay=True),
        chunk(3, delta("B"), cs=2, replay=True),
    ]
    reattach = [
        chunk(1, delta("C"), cs=3),
        chunk(2, delta("D"), cs=4),
        terminal(3, "finished", summary="done"),
    ]
    events = client(replay + reattach)
    run = events.runs_by_id["r"]
    assert (parts_text(run.parts), run.status, run.summary) == ("ABCD", "completed", "done")
    sdk_run = sdk_client(replay + reattach).runs_by_id["r"]
    assert (parts_text(sdk_run.parts), sdk_run.status) == ("AB", "running")


def test_S5_milestone_replayed_after_being_seen_live_is_not_doubled() -> None:
    """S5: a milestone seen live and then replayed (it is stored, S2) shows once in parts and in
    milestones.
    """
    live = [
        started(),
        chunk(1, TEXT_START, cs=0),
        chunk(2, progress(0.3)),
        chunk(3, milestone("sources", 0), cs=1),
        chunk(4, delta("A"), cs=2),
    ]
    replay = [
        started(replay=True),
        chunk(1, TEXT_START, cs=0, replay=True),
        chunk(2, milestone("sources", 0), cs=1, replay=True),
        chunk(3, delta("A"), cs=2, replay=True),
        terminal(4, "finished", summary="A", replay=True),
    ]
    events = client(live + replay)
    assert part_types(events) == ["text", "data-agent-milestone"]
    assert [m["name"] for m in events.runs_by_id["r"].milestones] == ["sources"]
    assert parts_text(events.runs_by_id["r"].parts) == "A"
    # the same milestone under another chunk identity is still shown once (its data.sequence)
    events.receive(chunk(9, milestone("sources", 0), cs=8))
    assert part_types(events) == ["text", "data-agent-milestone"]


def test_progress_chunks_apply_every_time_and_add_no_part() -> None:
    """Progress (no chunkSequence) replaces the projection each time, stamped with the client clock,
    even on a wire key seen before.
    """
    clock = Clock(2_000)
    events = client([started(), chunk(1, progress(0.25))], clock)
    assert events.runs_by_id["r"].progress == {"fraction": 0.25, "at": 2_000}
    clock.now_ms = 3_000
    assert events.receive(
        chunk(1, {"type": "data-agent-progress", "data": {"fraction": 0.75, "phase": "p"}})
    )
    assert events.runs_by_id["r"].progress == {"fraction": 0.75, "phase": "p", "at": 3_000}
    assert events.runs_by_id["r"].parts == []


def test_a_milestone_older_than_the_current_progress_does_not_replace_it() -> None:
    """A new milestone updates progress only when its own `at` is not older than progress.at; it is
    recorded either way.
    """
    clock = Clock(1_000)
    events = client(
        [started(), chunk(1, progress(0.5)), chunk(2, milestone("old", 0, at=900), cs=0)], clock
    )
    run = events.runs_by_id["r"]
    assert run.progress == {"fraction": 0.5, "at": 1_000}
    assert [m["name"] for m in run.milestones] == ["old"]
    events.receive(chunk(3, milestone("new", 1, at=1_000), cs=1))
    assert events.runs_by_id["r"].progress == {"milestone": "new", "at": 1_000}


def test_chunks_from_an_older_server_fall_back_to_the_sdk_key() -> None:
    """A stored-kind chunk without chunkSequence is deduped by (parentToolCallId, runId, sequence),
    as in the SDK.
    """
    events = client(
        [started(), chunk(1, delta("a")), chunk(1, delta("a"), replay=True), chunk(2, delta("b"))]
    )
    assert parts_text(events.runs_by_id["r"].parts) == "ab"
    other_parent = chunk(1, delta("c"), parent="tool-2")
    assert events.receive(other_parent)  # a different key, so it is applied
    assert parts_text(events.runs_by_id["r"].parts) == "abc"


def test_a_repeated_terminal_is_a_no_op_but_a_later_different_one_repairs() -> None:
    """A terminal identical to the last applied one changes nothing; a different later terminal is
    applied (interrupted → completed).
    """
    events = client(
        [
            started(),
            terminal(1, "interrupted", error="e", reason="no-progress", childStillRunning=True),
        ]
    )
    before = events.state
    repeat = terminal(
        99, "interrupted", error="e", reason="no-progress", childStillRunning=True, replay=True
    )
    assert events.receive(repeat) is False
    assert events.state is before
    assert events.receive(terminal(100, "finished", summary="late")) is True
    run = events.runs_by_id["r"]
    # a repaired run drops the interrupt's cause (the SDK keeps it, E18; see divergences R1)
    assert (run.status, run.summary, run.error, run.reason, run.child_still_running) == (
        "completed",
        "late",
        None,
        None,
        None,
    )
    events.receive(
        terminal(1, "interrupted", error="e", reason="no-progress", childStillRunning=True)
    )
    assert (
        events.runs_by_id["r"].status == "completed"
    )  # an exact repeat of an old frame cannot downgrade


def test_messages_that_are_not_well_formed_agent_tool_events_are_ignored() -> None:
    """Non-string, unparseable, foreign and malformed messages change nothing."""
    events = client([started()])
    before = events.state
    for message in (
        b"binary",
        42,
        "{not json",
        json.dumps({"type": "cf_agent_state"}),
        {"type": "agent-tool-event", "sequence": 1},
        {"type": "agent-tool-event", "sequence": 1, "event": {"kind": "nope", "runId": "r"}},
        {"type": "agent-tool-event", "event": {"kind": "finished", "runId": "r"}},
    ):
        assert events.receive(message) is False
    assert events.state is before


def test_a_chunk_whose_body_does_not_parse_or_apply_leaves_the_run_unchanged() -> None:
    """An unparseable body or a malformed UI chunk leaves the run exactly as it was."""
    events = client([started(), chunk(1, delta("ok"), cs=0)])
    before = events.runs_by_id["r"]
    bad_json = frame(2, {"kind": "chunk", "runId": "r", "body": "{oops", "chunkSequence": 1})
    for f in (
        bad_json,
        chunk(3, {"delta": "no type"}, cs=2),
        chunk(4, {"type": "text-delta", "delta": 5}, cs=3),
    ):
        events.receive(f)
    assert events.runs_by_id["r"] is before


def test_started_refreshes_metadata_of_a_running_run_and_keeps_its_parts() -> None:
    """A second started for a running run overwrites its metadata and keeps the parts built."""
    events = client([started(), chunk(1, delta("kept"), cs=0)])
    events.receive(
        frame(
            0,
            {
                "kind": "started",
                "runId": "r",
                "agentType": "Writer",
                "order": 3,
                "inputPreview": "p",
            },
            replay=True,
        )
    )
    run = events.runs_by_id["r"]
    assert (run.agent_type, run.order, run.input_preview, run.sub_agent) == (
        "Writer",
        3,
        "p",
        {"agent": "Writer", "name": "r"},
    )
    assert parts_text(run.parts) == "kept"


def test_the_pure_reducer_ignores_events_for_unknown_runs_and_never_mutates_its_input() -> None:
    """apply_agent_tool_event returns the same state for an unknown run, and a new one (input
    untouched) otherwise.
    """
    empty = AgentToolEventsState()
    assert apply_agent_tool_event(empty, chunk(1, delta("x")), Clock()) is empty
    assert apply_agent_tool_event(empty, terminal(1, "finished", summary=""), Clock()) is empty
    state = apply_agent_tool_event(empty, started(), Clock())
    state = apply_agent_tool_event(state, chunk(1, delta("x")), Clock())
    snapshot = copy.deepcopy(state)
    after = apply_agent_tool_event(state, chunk(2, delta("y")), Clock())
    assert state == snapshot
    assert parts_text(after.runs_by_id["r"].parts) == "xy"
    bare_event = {"kind": "started", "runId": "bare", "agentType": "A", "order": 0}
    assert [r.run_id for r in apply_agent_tool_event(after, bare_event, Clock()).unbound_runs] == [
        "bare"
    ]


def test_S5_a_second_run_reusing_the_first_runs_chunk_indexes_loses_nothing() -> None:
    """Stored chunk indexes count per child run, so two runs (under one tool call or two, live or
    replayed, interleaved) both carry chunkSequence 0, 1, ...: each run still shows every one of
    its own chunks once, and a replay of either run doubles nothing."""
    first = [
        started(run="a", order=0),
        chunk(1, TEXT_START, cs=0, run="a"),
        chunk(2, delta("first"), cs=1, run="a"),
    ]
    second = [
        started(run="b", order=1),
        chunk(1, TEXT_START, cs=0, run="b"),
        chunk(2, delta("second"), cs=1, run="b"),
    ]
    other_call = [
        started(run="c", parent="tool-2"),
        chunk(1, TEXT_START, cs=0, run="c", parent="tool-2"),
        chunk(2, delta("third"), cs=1, run="c", parent="tool-2"),
    ]
    replay = [
        chunk(5, TEXT_START, cs=0, run="b", replay=True),
        chunk(6, delta("second"), cs=1, run="b", replay=True),
    ]
    interleaved = [f for pair in zip(first, second, strict=True) for f in pair]
    events = client(interleaved + other_call + replay)
    texts = {run: parts_text(events.runs_by_id[run].parts) for run in ("a", "b", "c")}
    assert texts == {"a": "first", "b": "second", "c": "third"}
