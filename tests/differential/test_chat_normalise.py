"""Normalising chat records and rows: a camelCase callback name is never an id, the ids of UI
parts, chat messages, chat response frames and the chat tables' rows are numbered in spaces of
their own (so a schedule only the SDK's chat agent makes cannot shift them), the SDK's chat
events are left out, and the allow-list forgives what T11 and T12 say, nothing more."""

from __future__ import annotations

import json

from scenarios.diff.compare import compare
from scenarios.diff.normalise import BASE_MS, normalise


def _record(t: int, kind: str, **payload: object) -> dict:
    return {"t": t, "agent": "parent", "type": kind, "payload": payload}


def _chunk(t: int, body: dict, request: str = "reqAAAAAAAAAAAAAAAAAA") -> dict:
    frame = {"type": "cf_agent_use_chat_response", "id": request, "body": json.dumps(body)}
    return _record(t, "harness:frame", client="browser", frame=frame)


def test_a_camel_case_callback_of_a_nanoids_length_is_kept() -> None:
    """`_cleanupStreamBuffers` and `_chatRecoveryContinue` have 21 characters, as a nanoid does,
    but read as the method names they are; a random 21-character id is still numbered."""
    story = normalise(
        [
            _record(
                0, "schedule:create", callback="_cleanupStreamBuffers", id="Ab3xYz0qLmN8pQrStUvWx"
            ),
            _record(1, "schedule:create", callback="_chatRecoveryContinue", id="b"),
            _record(2, "story:note", text="fiber Zz9yXx8wVv7uUt6sSr5qQ failed"),
        ],
        {},
        real=True,
    )
    callbacks = [payload["callback"] for _t, _a, kind, payload in story.records[:2]]
    assert callbacks == ["_cleanupStreamBuffers", "_chatRecoveryContinue"]
    assert story.records[0][3]["id"] == "#1"
    assert story.records[2][3]["text"] == "fiber #1 failed"


def test_an_extra_schedule_on_one_side_does_not_shift_part_message_or_frame_ids() -> None:
    """The real side schedules its stream cleanup first (a schedule id under `id`); the text
    part, the chat message and the chat response frame are numbered alike on both sides all the
    same, and the stored message's row and its JSON share one numbering."""
    message = {"id": "msg1", "role": "assistant", "parts": [{"type": "text", "text": "hi"}]}
    common = [
        _chunk(1000, {"type": "text-start", "id": "text_abc_0"}),
        _record(
            1000,
            "harness:frame",
            client="browser",
            frame={"type": "cf_agent_chat_messages", "messages": [message]},
        ),
    ]
    extra = _record(
        0, "schedule:create", callback="_cleanupStreamBuffers", id="sched0000000000000001"
    )
    rows = {
        "parent": {"cf_ai_chat_agent_messages": [{"id": "msg1", "message": json.dumps(message)}]}
    }
    ours = normalise(common, rows, real=False)
    theirs = normalise([extra, *common], rows, real=True)
    drop = [r for r in theirs.records if r[2] != "schedule:create"]
    assert [r[3] for r in ours.records] == [r[3] for r in drop]
    row = theirs.tables["parent"]["cf_ai_chat_agent_messages"][0]
    assert row["id"] == row["message"]["id"] == "#1"
    frame = next(
        r[3]["frame"] for r in drop if r[3]["frame"]["type"] == "cf_agent_use_chat_response"
    )
    assert frame["id"] == "#1" and frame["body"]["id"] == "#1"


def test_the_sdks_chat_events_are_not_compared() -> None:
    """`message:response` and `chat:recovery:*` of the real side are left out; a fiber event of
    a chat turn is kept."""
    story = normalise(
        [
            _record(5, "message:response"),
            _record(5, "chat:recovery:attempt", attempt=1),
            _record(5, "fiber:run:completed", fiberName="__cf_internal_chat_turn:x"),
        ],
        {},
        real=True,
    )
    assert [r[2] for r in story.records] == ["fiber:run:completed"]


def _tables(chunk_rows: list[dict], created_at: object, schedules: list[dict]) -> dict:
    message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "go"}]}
    return {
        "child": {
            "cf_ai_chat_stream_chunks": chunk_rows,
            "cf_ai_chat_agent_messages": [
                {"id": "m1", "message": json.dumps(message), "created_at": created_at}
            ],
            "cf_agents_schedules": schedules,
        }
    }


def test_t11_and_t12_forgive_the_chat_rows_they_name_and_nothing_else() -> None:
    """Packed chunk rows, the cleanup schedule's row and a message's real-clock `created_at`
    are forgiven (T11, T12); another schedule only the real side has is not."""
    ours = normalise(
        [], _tables([{"id": "c1", "body": "{}", "chunk_index": 0}] * 3, 0, []), real=False
    )
    cleanup = {"id": "s1", "callback": "_cleanupStreamBuffers", "time": BASE_MS // 1000 + 600}
    theirs = normalise(
        [],
        _tables(
            [{"id": "c9", "body": "[{}, {}, {}]", "chunk_index": 0}],
            "2026-12-01 23:22:24",
            [cleanup],
        ),
        real=True,
    )
    outcome = compare(ours, theirs, "any-story")
    assert outcome.agree and outcome.allowed == ["T11", "T12"]
    other = {**cleanup, "callback": "_somethingElse"}
    theirs = normalise([], _tables([], 0, [other]), real=True)
    outcome = compare(normalise([], _tables([], 0, []), real=False), theirs, "any-story")
    assert not outcome.agree and "cf_agents_schedules" in outcome.differences[0]
