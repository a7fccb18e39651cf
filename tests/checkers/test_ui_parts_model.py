"""The checkers' client-reducer model (`sim.checkers.models.ui_parts`): the spec's examples, and,
on drawn chunk sequences, agreement with the runtime's reducer (read through `sim.client_views`)
so that a difference between the spec as the model reads it and the code is a failing test."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.checkers.models.ui_parts import ClientRunModel, project
from sim.client_views import reduce_client_frames
from sim.trace import TraceRecord


def model_of(chunks: list[dict[str, Any]]) -> ClientRunModel:
    model = ClientRunModel()
    for chunk in chunks:
        model.apply(chunk)
    return model


def runtime_of(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The runtime's reducer after `started` and each chunk once (its own chunk number)."""

    def frame(sequence: int, event: dict[str, Any]) -> TraceRecord:
        body = {"type": "agent-tool-event", "sequence": sequence, "event": {"runId": "r", **event}}
        return TraceRecord(sequence, sequence, "P/p", 1, "connection:frame", {"frame": body})

    records = [frame(0, {"kind": "started", "agentType": "Child", "order": 0})]
    records += [
        frame(n + 1, {"kind": "chunk", "body": json.dumps(c), "chunkSequence": n})
        for n, c in enumerate(chunks)
    ]
    return reduce_client_frames(records)["r"]


def test_text_deltas_append_and_end_marks_done() -> None:
    """§3.5: text deltas append to their part."""
    model = model_of(
        [
            {"type": "start"},
            {"type": "text-start", "id": "a"},
            {"type": "text-delta", "id": "a", "delta": "Hel"},
            {"type": "text-delta", "id": "a", "delta": "lo"},
            {"type": "text-end", "id": "a"},
            {"type": "finish"},
        ]
    )
    assert model.parts == [{"type": "text", "text": "Hello", "state": "done"}]


def test_tool_parts_update_and_data_parts_replace_by_id() -> None:
    """§3.5: tool parts update; a non-transient data part of the same type and id is updated,
    a transient one and a progress chunk add nothing."""
    model = model_of(
        [
            {"type": "tool-input-available", "toolCallId": "c", "toolName": "w", "input": {"x": 1}},
            {"type": "tool-output-available", "toolCallId": "c", "output": "ok"},
            {"type": "data-note", "id": "n", "data": 1},
            {"type": "data-note", "id": "n", "data": 2},
            {"type": "data-note", "transient": True, "data": 3},
            {"type": "data-agent-progress", "data": {"fraction": 0.5}},
        ]
    )
    done = {"state": "output-available", "input": {"x": 1}, "output": "ok"}
    assert model.parts == [
        {"type": "tool-w", "toolCallId": "c", **done},
        {"type": "data-note", "id": "n", "data": 2},
    ]


def test_milestones_are_deduped_by_sequence_and_kept_sorted() -> None:
    """T-134 (sequences 1, 0, 1 -> [0, 1]) and S5: a milestone already shown adds no part."""

    def milestone(name: str, seq: int) -> dict[str, Any]:
        return {"type": "data-agent-milestone", "data": {"name": name, "sequence": seq}}

    model = model_of([milestone("b", 1), milestone("a", 0), milestone("b", 1)])
    assert model.milestones == [("a", 0), ("b", 1)]
    assert len(model.parts) == 2


def test_a_chunk_that_cannot_apply_changes_nothing() -> None:
    model = model_of(
        [
            {"type": "tool-output-available", "toolCallId": "nobody", "output": 1},
            {"type": "text-end", "id": "never-opened"},
            "not an object",
        ]
    )
    assert model.parts == [] and model.milestones == []


# -- drawn chunk sequences against the runtime -------------------------------------------------
IDS = st.sampled_from(["a", "b"])
CALLS = st.sampled_from(["c1", "c2"])
WORDS = st.text("xyz ", max_size=4)
NUMBERS = st.integers(0, 3)


def chunk_of(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


def tool(kind: str, **fields: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda c, **f: chunk_of(kind, toolCallId=c, **f), CALLS, **fields)


CHUNK = st.one_of(
    st.sampled_from(["start", "finish", "start-step", "finish-step", "error"]).map(chunk_of),
    st.builds(chunk_of, st.sampled_from(["text-start", "text-end", "reasoning-start"]), id=IDS),
    st.builds(chunk_of, st.sampled_from(["text-delta", "reasoning-delta"]), id=IDS, delta=WORDS),
    st.builds(chunk_of, st.just("reasoning-end"), id=IDS),
    tool("tool-input-start", toolName=st.just("t")),
    tool("tool-input-delta", inputTextDelta=st.sampled_from(['{"a":', "1}", "2"])),
    tool("tool-input-delta", inputTextDelta=st.just("{"), input=st.builds(dict, a=NUMBERS)),
    tool("tool-input-available", toolName=st.just("t"), input=st.builds(dict, a=NUMBERS)),
    tool("tool-input-available", toolName=st.just("t"), input=st.sampled_from(['{"a":1}', "[1]"])),
    st.builds(chunk_of, st.sampled_from(["file", "source-url", "source-document", "step-start"])),
    tool("tool-input-available", toolName=st.just("t"), input=NUMBERS),
    tool("tool-input-error", toolName=st.just("t"), input=NUMBERS, errorText=WORDS),
    tool("tool-output-available", output=WORDS),
    tool("tool-output-error", errorText=WORDS),
    st.builds(chunk_of, st.just("data-note"), id=IDS, data=NUMBERS),
    st.builds(chunk_of, st.just("data-note"), transient=st.just(True), data=NUMBERS),
    st.builds(
        chunk_of,
        st.just("data-agent-progress"),
        transient=st.just(True),
        data=st.builds(dict, fraction=st.floats(0, 1)),
    ),
    st.builds(
        lambda n, s: chunk_of("data-agent-milestone", id=f"m:{s}", data={"name": n, "sequence": s}),
        IDS,
        NUMBERS,
    ),
)


@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(CHUNK, max_size=12))
def test_the_model_agrees_with_the_runtimes_reducer(chunks: list[dict[str, Any]]) -> None:
    model = model_of(chunks)
    shown = runtime_of(chunks)
    assert project(shown["parts"]) == model.parts
    assert shown["milestones"] == model.milestones


def test_a_tool_call_s_input_is_written_once_as_the_sdk_s_builder_writes_it() -> None:
    """A second input for a call whose input is given, or an input error after its output,
    changes nothing: the SDK's builder (`applyChunkToParts`, which its client reducer calls)
    moves a part on an input chunk only while its input streams. The model says so on its own,
    and the runtime's reducer agrees."""
    again = [
        chunk_of("tool-input-available", toolCallId="c", toolName="t", input={"n": 0}),
        chunk_of("tool-input-available", toolCallId="c", toolName="t", input={"n": 1}),
        chunk_of("tool-input-start", toolCallId="c", toolName="t"),
    ]
    shown = [(p["state"], p["input"]) for p in model_of(again).parts]
    assert shown == [("input-available", {"n": 0})]
    assert project(runtime_of(again)["parts"]) == model_of(again).parts
    late_error = [
        chunk_of("tool-input-available", toolCallId="c", toolName="t", input=0),
        chunk_of("tool-output-available", toolCallId="c", output="ok"),
        chunk_of("tool-input-error", toolCallId="c", toolName="t", input=2, errorText="bad"),
    ]
    assert [p["state"] for p in model_of(late_error).parts] == ["output-available"]
    assert project(runtime_of(late_error)["parts"]) == model_of(late_error).parts


def test_a_delta_extends_the_newest_part_of_its_type_whatever_its_id() -> None:
    """The SDK's builder keeps no ids: a delta (or an end) goes to the newest text part, so a
    stream that opens a second part and then names the first writes to the second."""
    chunks = [
        chunk_of("text-start", id="t1"),
        chunk_of("text-delta", id="t1", delta="a"),
        chunk_of("text-start", id="t2"),
        chunk_of("text-delta", id="t1", delta="b"),
        chunk_of("text-end", id="t1"),
        chunk_of("file", url="https://example.com/f.png", mediaType="image/png"),
    ]
    assert model_of(chunks).parts == [
        {"type": "text", "text": "a", "state": "streaming"},
        {"type": "text", "text": "b", "state": "done"},
        {"type": "file"},
    ]
    assert project(runtime_of(chunks)["parts"]) == model_of(chunks).parts
