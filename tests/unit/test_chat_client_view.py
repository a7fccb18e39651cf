"""The chat client's turn bookkeeping (`sim.chat_client_view`, spec sdk-0.32 §8.2): a request
whose `done` frame says `recovering` stays open as the turn being recovered; every other request
ends once, with its outcome."""

from __future__ import annotations

from typing import Any

from sim.chat_client_view import ChatTurnEnd, ChatTurnReducer, chat_client_view


def response(request_id: str, **fields: Any) -> dict[str, Any]:
    return {"type": "cf_agent_use_chat_response", "id": request_id, "body": "", **fields}


def chunk(request_id: str) -> dict[str, Any]:
    return response(request_id, body='{"type":"text-delta"}', done=False)


def recovering(on: bool, request_id: str | None = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "cf_agent_chat_recovering", "recovering": on}
    if request_id:
        frame["id"] = request_id
    return frame


def test_a_recovering_request_stays_open_and_its_continuation_ends_the_turn() -> None:
    """`done` with `outcome: recovering` ends nothing: the turn is open (being recovered, busy)
    until the continuation's own `done` ends it, once, as `completed`."""
    reducer = ChatTurnReducer()
    for frame in (
        chunk("r1"),
        recovering(True, "r1"),
        response("r1", done=True, outcome="recovering"),
    ):
        reducer.receive(frame)
    assert reducer.ends == []
    assert reducer.recovering_request_id == "r1" and reducer.busy
    assert reducer.streaming == []
    reducer.receive(chunk("r2"))
    assert reducer.recovering_request_id is None, "a live frame of the continuation takes over"
    assert reducer.busy, "the continuation streams and the indicator is still on"
    reducer.receive(response("r2", done=True))
    reducer.receive(recovering(False, "r1"))
    assert reducer.ends == [ChatTurnEnd("r2", "completed")]
    assert not reducer.busy


def test_a_replayed_or_skipped_frame_of_another_request_keeps_the_recovering_turn() -> None:
    """Only a live frame of another request, not a replay nor a `skipped` end, moves the client
    off the turn being recovered; the server's `recovering: false` does."""
    view = chat_client_view(
        [
            response("r1", done=True, outcome="recovering"),
            response("old", done=True, replay=True),
            response("q", done=True, outcome="skipped"),
        ]
    )
    assert view["recovering_request_id"] == "r1" and view["busy"]
    assert [(e.request_id, e.outcome, e.replay) for e in view["ended"]] == [
        ("old", "completed", True),
        ("q", "skipped", False),
    ]
    view = chat_client_view([response("r1", done=True, outcome="recovering"), recovering(False)])
    assert view["recovering_request_id"] is None and not view["busy"]


def test_each_request_ends_once_with_its_outcome() -> None:
    """An error frame before `done` makes the end an error with that message; a `done` with
    `error` is an error with its body; a second terminal frame for a request reports nothing;
    an explicit outcome is kept."""
    view = chat_client_view(
        [
            response("a", body="boom", error=True, done=False),
            response("a", done=True),
            response("a", done=True, replay=True),
            response("b", body="gave up", error=True, done=True, messageIds=["u1"]),
            response("c", done=True, outcome="aborted"),
        ]
    )
    assert view["ended"] == [
        ChatTurnEnd("a", "error", error="boom"),
        ChatTurnEnd("b", "error", error="gave up", message_ids=("u1",)),
        ChatTurnEnd("c", "aborted"),
    ]


def test_a_clear_or_a_resumed_stream_drops_the_recovering_state() -> None:
    """`cf_agent_chat_clear` forgets every open turn; a resumed stream of another request ends
    the recovering one and turns the indicator off."""
    opened = [chunk("s"), recovering(True), response("r1", done=True, outcome="recovering")]
    cleared = chat_client_view([*opened, {"type": "cf_agent_chat_clear"}])
    assert (cleared["streaming"], cleared["recovering_request_id"], cleared["busy"]) == (
        [],
        None,
        False,
    )
    resumed = chat_client_view([*opened, {"type": "cf_agent_stream_resuming", "id": "r2"}])
    assert resumed["recovering_request_id"] is None and resumed["is_recovering"] is False
    same = chat_client_view([*opened, {"type": "cf_agent_stream_resuming", "id": "r1"}])
    assert same["recovering_request_id"] == "r1"
