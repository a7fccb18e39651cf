"""Behaviour of ``agents_core.agent_tools.ui_chunks``: folding AI SDK UI-message chunks into parts,
chunk type by chunk type, its purity, and the errors a malformed chunk raises."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from agents_core.agent_tools import ui_chunks
from agents_core.agent_tools.ui_chunks import MalformedChunk, apply_chunk, parts_text


def fold(*chunks: dict[str, Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for chunk in chunks:
        parts = apply_chunk(parts, chunk)
    return parts


def test_public_api_is_pinned() -> None:
    """The module exports the builder, the text reader, the part alias and the error."""
    assert sorted(ui_chunks.__all__) == ["MalformedChunk", "Part", "apply_chunk", "parts_text"]


# --- text and reasoning ---------------------------------------------------------------------


def test_text_deltas_append_to_the_newest_text_part_whatever_their_id() -> None:
    """The SDK's builder keeps no ids: deltas and the end go to the newest text part, so two
    interleaved streams write into the second one opened."""
    parts = fold(
        {"type": "text-start", "id": "a"},
        {"type": "text-delta", "id": "a", "delta": "Hel"},
        {"type": "text-start", "id": "b"},
        {"type": "text-delta", "id": "b", "delta": "Wor"},
        {"type": "text-delta", "id": "a", "delta": "lo"},
        {"type": "text-end", "id": "a"},
    )
    assert parts == [
        {"type": "text", "text": "Hel", "state": "streaming"},
        {"type": "text", "text": "Worlo", "state": "done"},
    ]


def test_a_delta_without_its_start_begins_a_part_instead_of_losing_text() -> None:
    """A stream resumed mid-part (no text-start seen) keeps its text in a new streaming part;
    an end with no part of its type changes nothing."""
    parts = fold({"type": "text-delta", "id": "t", "delta": "late"})
    assert parts == [{"type": "text", "text": "late", "state": "streaming"}]
    assert fold({"type": "text-end", "id": "ghost"}) == []


def test_reasoning_parts_stream_like_text_but_are_not_visible_text() -> None:
    """Reasoning collects its deltas in a `reasoning` part that parts_text leaves out."""
    parts = fold(
        {"type": "reasoning-start", "id": "r"},
        {"type": "reasoning-delta", "id": "r", "delta": "think"},
        {"type": "reasoning-end", "id": "r"},
        {"type": "text-delta", "id": "t", "delta": "answer"},
    )
    assert parts[0] == {"type": "reasoning", "text": "think", "state": "done"}
    assert parts_text(parts) == "answer"


def test_parts_text_joins_text_parts_in_order() -> None:
    """The visible text is every text part's text, in order, with nothing in between."""
    parts = fold(
        {"type": "text-delta", "id": "1", "delta": "one "},
        {"type": "start-step"},
        {"type": "text-delta", "id": "2", "delta": "two"},
    )
    assert parts_text(parts) == "one two"
    assert parts_text([]) == ""


# --- tool calls -----------------------------------------------------------------------------


def test_tool_part_goes_from_input_streaming_to_output_available() -> None:
    """One `tool-<name>` part per call goes input-streaming, input-available, output-available."""
    parts = fold({"type": "tool-input-start", "toolCallId": "c1", "toolName": "search"})
    assert parts == [
        {
            "type": "tool-search",
            "toolCallId": "c1",
            "toolName": "search",
            "state": "input-streaming",
            "input": None,
        }
    ]
    parts = apply_chunk(
        parts, {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"q": "x'}
    )
    assert parts[0]["input"] is None  # the AI SDK's deltas carry text, not an input
    parts = apply_chunk(
        parts,
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "", "input": {"q": 1}},
    )
    assert parts[0]["input"] == {"q": 1}  # a delta that carries its input writes it
    parts = apply_chunk(
        parts,
        {
            "type": "tool-input-available",
            "toolCallId": "c1",
            "toolName": "search",
            "input": {"q": "x"},
        },
    )
    assert (parts[0]["state"], parts[0]["input"]) == ("input-available", {"q": "x"})
    parts = apply_chunk(
        parts, {"type": "tool-output-available", "toolCallId": "c1", "output": [1, 2]}
    )
    assert len(parts) == 1
    assert parts[0]["state"] == "output-available"
    assert parts[0]["output"] == [1, 2]
    assert parts[0]["input"] == {"q": "x"}


def test_tool_output_error_records_the_error_text() -> None:
    """A failed call ends in output-error with the chunk's errorText."""
    parts = fold(
        {"type": "tool-input-available", "toolCallId": "c", "toolName": "fetch", "input": {}},
        {"type": "tool-output-error", "toolCallId": "c", "errorText": "boom"},
    )
    assert parts == [
        {
            "type": "tool-fetch",
            "toolCallId": "c",
            "toolName": "fetch",
            "state": "output-error",
            "input": {},
            "errorText": "boom",
        }
    ]


def test_replayed_tool_input_chunks_do_not_regress_a_finished_call() -> None:
    """A second tool-input-start / input-available for a call with an output changes nothing."""
    done = fold(
        {"type": "tool-input-available", "toolCallId": "c", "toolName": "t", "input": {"a": 1}},
        {"type": "tool-output-available", "toolCallId": "c", "output": "ok"},
    )
    again = fold(
        *[
            {"type": "tool-input-available", "toolCallId": "c", "toolName": "t", "input": {"a": 1}},
            {"type": "tool-output-available", "toolCallId": "c", "output": "ok"},
            {"type": "tool-input-start", "toolCallId": "c", "toolName": "t"},
            {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "{"},
            {"type": "tool-input-available", "toolCallId": "c", "toolName": "t", "input": {"b": 2}},
        ]
    )
    assert again == done


def test_an_output_or_delta_for_an_unknown_tool_call_changes_nothing() -> None:
    """An output, an output error or a delta for a call that has no part adds nothing."""
    for chunk in (
        {"type": "tool-output-available", "toolCallId": "nope", "output": 1},
        {"type": "tool-output-error", "toolCallId": "nope", "errorText": "e"},
        {"type": "tool-input-delta", "toolCallId": "nope", "inputTextDelta": "{"},
    ):
        assert apply_chunk([], chunk) == []


def test_a_tool_input_is_kept_as_an_object() -> None:
    """An input that is a string of a JSON object is parsed; any other non-object is `{}`."""
    inputs = [{"a": 1}, '{"a": 2}', "[1]", 3, None, "{broken"]
    kept = [
        fold({"type": "tool-input-available", "toolCallId": "c", "toolName": "t", "input": raw})[0][
            "input"
        ]
        for raw in inputs
    ]
    assert kept == [{"a": 1}, {"a": 2}, {}, {}, {}, {}]


# --- data parts and message-level chunks ----------------------------------------------------


def test_transient_data_chunks_add_no_part() -> None:
    """A transient data chunk (live progress) is a signal and leaves the parts unchanged."""
    parts = fold({"type": "data-agent-progress", "transient": True, "data": {"fraction": 0.5}})
    assert parts == []


def test_data_chunks_append_or_replace_by_type_and_id() -> None:
    """A data chunk replaces the part with its type and id, and otherwise appends a part."""
    parts = fold(
        {"type": "data-weather", "id": "w", "data": {"t": 1}},
        {"type": "data-agent-milestone", "data": {"name": "m", "sequence": 0}},
        {"type": "data-weather", "id": "w", "data": {"t": 2}},
        {"type": "data-other", "id": "w", "data": "x"},
        {"type": "data-agent-milestone", "data": {"name": "m", "sequence": 0}},
    )
    assert parts == [
        {"type": "data-weather", "id": "w", "data": {"t": 2}},
        {"type": "data-agent-milestone", "data": {"name": "m", "sequence": 0}},
        {"type": "data-other", "id": "w", "data": "x"},
        {"type": "data-agent-milestone", "data": {"name": "m", "sequence": 0}},
    ]


def test_start_step_appends_a_step_boundary_and_message_level_chunks_change_nothing() -> None:
    """start-step adds a step-start part; start, finish, finish-step, metadata and error do not."""
    parts = fold(
        {"type": "start", "messageId": "m1"},
        {"type": "start-step"},
        {"type": "text-delta", "id": "t", "delta": "hi"},
        {"type": "finish-step"},
        {"type": "message-metadata", "messageMetadata": {"k": 1}},
        {"type": "error", "errorText": "stream failed"},
        {"type": "finish"},
    )
    assert [p["type"] for p in parts] == ["step-start", "text"]


def test_sources_and_files_are_appended() -> None:
    """file, source-url and source-document chunks each append one part with their fields (a
    file keeps its media type and url only)."""
    parts = fold(
        {"type": "source-url", "sourceId": "s", "url": "https://e.x", "title": "E"},
        {"type": "file", "url": "data:,", "mediaType": "text/plain", "filename": "a.txt"},
    )
    assert parts == [
        {"type": "source-url", "sourceId": "s", "url": "https://e.x", "title": "E"},
        {"type": "file", "mediaType": "text/plain", "url": "data:,"},
    ]


def test_unknown_chunk_types_are_ignored() -> None:
    """A chunk type the builder does not know leaves the parts as they are (forward compatible)."""
    before = fold({"type": "text-delta", "id": "t", "delta": "x"})
    assert apply_chunk(before, {"type": "tool-approval-request", "approvalId": "a"}) == before
    assert apply_chunk(before, {"type": "something-new"}) == before


# --- malformed chunks and purity ------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunk", "message"),
    [
        ("text", r"must be a JSON object"),
        ({"delta": "x"}, r"needs a string 'type'"),
        ({"type": "text-delta", "delta": 5}, r"'text-delta' chunk needs a string 'delta'; got 5"),
        ({"type": "tool-input-start", "toolCallId": "c"}, r"needs a string 'toolName'"),
        (
            {"type": "tool-output-error", "toolCallId": 7, "errorText": "e"},
            r"needs a string 'toolCallId'; got 7",
        ),
        ({"type": "data-x", "id": 3, "data": {}}, r"'data-x' chunk's 'id' must be a string; got 3"),
        ({"type": "error"}, r"'error' chunk needs a string 'errorText'"),
    ],
)
def test_malformed_chunks_raise_a_value_error_naming_the_field(chunk: Any, message: str) -> None:
    """A malformed chunk raises MalformedChunk (a ValueError) that says what is wrong."""
    with pytest.raises(ValueError, match=message) as caught:
        apply_chunk([], chunk)
    assert isinstance(caught.value, MalformedChunk)


def test_apply_chunk_never_changes_its_inputs() -> None:
    """The given parts list, its parts and the chunk are untouched; the result is a new list."""
    parts = fold(
        {"type": "text-start", "id": "t"},
        {"type": "tool-input-start", "toolCallId": "c", "toolName": "x"},
        {"type": "data-d", "id": "d", "data": {"v": 1}},
    )
    frozen = copy.deepcopy(parts)
    for chunk in (
        {"type": "text-delta", "id": "t", "delta": "more"},
        {"type": "text-end", "id": "t"},
        {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "{}", "input": {}},
        {"type": "tool-output-available", "toolCallId": "c", "output": {"o": 1}},
        {"type": "data-d", "id": "d", "data": {"v": 2}},
    ):
        chunk_before = copy.deepcopy(chunk)
        result = apply_chunk(parts, chunk)
        assert result is not parts
        assert result != parts
        assert parts == frozen
        assert chunk == chunk_before


def test_values_taken_from_a_chunk_are_private_copies() -> None:
    """Mutating a chunk's data after applying it does not reach into the built parts."""
    chunk = {"type": "data-d", "data": {"items": [1]}}
    parts = apply_chunk([], chunk)
    chunk["data"]["items"].append(2)
    assert parts == [{"type": "data-d", "data": {"items": [1]}}]
