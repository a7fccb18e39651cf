"""Chat turns on both hosts: streaming and the stored stream, the tools loop, the FIFO queue,
clearing, and a turn an eviction interrupted being continued or retried by chat recovery."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from sim import AgentEvicted, Simulation
from sim.model import (
    ScriptedModel,
    after_tool,
    asked,
    call,
    continuing,
    fail,
    stall,
    text,
    tool_calls,
    when,
)
from tests.chat.chat_agents import HOSTS, journal, user, worker_model
from tests.releases import on_both_releases, on_release

pytestmark = pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)


def chat_frames(frames: list[Any], request_id: str | None = None) -> list[dict[str, Any]]:
    return [
        f
        for f in frames
        if isinstance(f, dict)
        and f.get("type") == "cf_agent_use_chat_response"
        and (request_id is None or f["id"] == request_id)
    ]


def streams(sim: Simulation, ref) -> list[dict[str, Any]]:
    """Each stored stream with its chunk bodies (parsed), oldest first."""
    out = []
    for meta in sim.query(ref, "SELECT * FROM cf_ai_chat_stream_metadata ORDER BY rowid"):
        rows = sim.query(
            ref,
            "SELECT chunk_index, body FROM cf_ai_chat_stream_chunks WHERE stream_id = ? "
            "ORDER BY chunk_index",
            meta["id"],
        )
        out.append(
            {
                **meta,
                "indexes": [r["chunk_index"] for r in rows],
                "chunks": [json.loads(r["body"]) for r in rows],
            }
        )
    return out


def transcript(sim: Simulation, ref) -> list[dict[str, Any]]:
    rows = sim.query(ref, "SELECT message FROM cf_ai_chat_agent_messages ORDER BY rowid")
    return [json.loads(r["message"]) for r in rows]


def texts(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


def test_a_turn_streams_every_chunk_stores_it_and_persists_the_answer(
    sim: Simulation, host: type
) -> None:
    """Each UI chunk is stored (index 0, 1, …) and broadcast with the turn's id; a done frame
    ends the turn; the assistant message is persisted."""
    sim.register_model(ScriptedModel(default=text("Hello there", chunks=2)))
    ref = sim.agent(host, "c")
    client = sim.connect(ref)
    result = sim.call(ref, "save_messages", [user("hi")])
    assert result["status"] == "completed"
    frames = chat_frames(client.frames, result["requestId"])
    (stream,) = streams(sim, ref)
    assert stream["request_id"] == result["requestId"] and stream["status"] == "completed"
    assert stream["indexes"] == list(range(6))
    assert [json.loads(f["body"]) for f in frames[:-1]] == stream["chunks"]
    assert frames[-1] == {
        "type": "cf_agent_use_chat_response",
        "id": result["requestId"],
        "body": "",
        "done": True,
    }
    assert [m["role"] for m in transcript(sim, ref)] == ["user", "assistant"]
    assert texts(transcript(sim, ref)[1]) == "Hello there"


@on_both_releases
def test_the_tools_loop_calls_the_model_again_until_it_answers_with_text(
    sim: Simulation, host: type
) -> None:
    """A tool call runs the tool, streams its result, and the model is called back with it;
    the turn is one message with one start and one finish."""
    model = worker_model(sim, [["note", "ran"]], answer="All done.")
    ref = sim.agent(host, "c")
    assert sim.call(ref, "save_messages", [user("go")])["status"] == "completed"
    (stream,) = streams(sim, ref)
    assert [c["type"] for c in stream["chunks"]] == [
        "start",
        "tool-input-available",
        "tool-output-available",
        "text-start",
        "text-delta",
        "text-end",
        "finish",
    ]
    assert len(model.requests) == 2 and model.requests[0]["tools"] == ["work"]
    last = model.requests[1]["messages"][-1]
    assert last["role"] == "assistant"
    assert last["parts"][0]["type"] == "tool-work" and last["parts"][0]["output"] == "worked"
    answer = transcript(sim, ref)[-1]
    assert [p["type"] for p in answer["parts"]] == ["tool-work", "text"]


def test_tool_calls_run_in_parallel_and_a_failing_tool_is_reported(
    sim: Simulation, host: type
) -> None:
    """Two calls run side by side (each 1 s, both done after 1 s); a call that raises becomes
    a tool-output-error the model sees."""
    sim.register_model(
        ScriptedModel(
            rules=[when(after_tool(), reply=text("ok", delay_ms=10))],
            default=tool_calls(
                call("work", {"steps": [["sleep", 1_000], ["note", "a"]]}),
                call("work", {"steps": [["sleep", 1_000], ["note", "b"]]}),
                call("work", {"steps": [["raise", "boom"]]}),
                delay_ms=10,
            ),
        )
    )
    ref = sim.agent(host, "c")
    start = sim.now_ms
    sim.call(ref, "save_messages", [user("go")])
    notes = journal(sim, ref)
    assert [n["arg"] for n in notes] == ["a", "b"]
    assert all(n["t"] - start < 1_100 for n in notes)
    (stream,) = streams(sim, ref)
    errors = [c for c in stream["chunks"] if c["type"] == "tool-output-error"]
    assert [e["errorText"] for e in errors] == ["boom"]


def test_turns_run_one_at_a_time_in_submission_order(sim: Simulation, host: type) -> None:
    """Three turns submitted at once stream one after the other, first come first served."""
    model = sim.register_model(ScriptedModel(default=text("abc", chunks=3, delay_ms=100)))
    ref = sim.agent(host, "c")
    client = sim.connect(ref)
    pending = [sim.start_call(ref, "save_messages", [user(f"q{i}")]) for i in range(3)]
    results = [sim.wait(p) for p in pending]
    order = []
    for frame in chat_frames(client.frames):
        if not order or order[-1] != frame["id"]:
            order.append(frame["id"])
    assert order == [r["requestId"] for r in results]
    assert [m["requestId"] for m in model.requests] == order


def test_messages_saved_in_a_row_are_persisted_each_when_its_turn_starts(
    sim: Simulation, host: type
) -> None:
    """As the SDK's saveMessages: a message waits in the queue with its turn, so the second
    turn's model request holds the first question and its answer, not all three questions, and
    the transcript alternates question and answer."""
    model = sim.register_model(ScriptedModel(default=text("abc", chunks=3, delay_ms=100)))
    ref = sim.agent(host, "c")
    pending = [sim.start_call(ref, "save_messages", [user(f"q{i}")]) for i in range(3)]
    sim.run_for(10)
    assert [texts(m) for m in transcript(sim, ref)] == ["q0"]
    for p in pending:
        sim.wait(p)
    seen = [[(m["role"], texts(m)) for m in r["messages"]] for r in model.requests]
    assert seen[1] == [("user", "q0"), ("assistant", "abc"), ("user", "q1")]
    assert [m["role"] for m in transcript(sim, ref)] == ["user", "assistant"] * 3


def test_clearing_the_chat_aborts_the_running_turn_and_skips_queued_ones(
    sim: Simulation, host: type
) -> None:
    """`clear_messages` ends the running turn `aborted` and the queued one `skipped`."""
    sim.register_model(ScriptedModel(default=text("abc", chunks=3, delay_ms=1_000)))
    ref = sim.agent(host, "c")
    first = sim.start_call(ref, "save_messages", [user("one")])
    second = sim.start_call(ref, "save_messages", [user("two")])
    sim.run_for(1_500)
    sim.call(ref, "clear_messages")
    assert sim.wait(first)["status"] == "aborted"
    assert sim.wait(second)["status"] == "skipped"
    assert transcript(sim, ref) == []


def test_a_turn_interrupted_mid_answer_is_continued_by_recovery(
    sim: Simulation, host: type
) -> None:
    """Evicted after streaming part of its answer, the turn is continued after the restart: the
    partial answer is kept and extended in the same message, under a new request id."""
    model = sim.register_model(
        ScriptedModel(
            rules=[when(continuing(), reply=text(" and the rest.", delay_ms=100))],
            default=text("AAAABBBBCCCCDDDD", chunks=4, delay_ms=1_000),
        )
    )
    ref = sim.agent(host, "c")
    pending = sim.start_call(ref, "save_messages", [user("tell me")])
    sim.run_for(3_500)
    sim.evict(ref)
    with pytest.raises(AgentEvicted):
        sim.wait(pending)
    sim.agent(host, "c")
    sim.run_for(10_000)
    assert model.requests[-1]["continuation"] is True
    assert texts(model.requests[-1]["messages"][-1]) == "AAAABBBB"
    messages = transcript(sim, ref)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert texts(messages[1]) == "AAAABBBB and the rest."
    old, new = streams(sim, ref)
    assert old["status"] == "streaming" and new["status"] == "completed"
    assert old["request_id"] != new["request_id"]
    assert [r.get("mode") for r in sim.trace.select("chat:recovery:attempt")] == ["continue"]
    assert sim.probes["chat.recovery_continued"] == 1


@on_both_releases
def test_a_turn_that_died_in_its_last_step_is_completed_not_continued(
    sim: Simulation, host: type
) -> None:
    """The model answered in full and the process died while the turn persisted the answer: the
    finish chunk had committed in a step of its own, so recovery persists the answer rebuilt
    from the stream as it is (mode `complete`), with no second model call and no doubled text."""
    model = sim.register_model(ScriptedModel(default=text("All three files are ready.", chunks=3)))
    ref = sim.agent(host, "c")
    client = sim.connect(ref)
    # The first insert is the user's message, the second the answer.
    sim.arm_storage_fault(ref, "crash", match="INSERT INTO cf_ai_chat_agent_messages", skip=1)
    pending = sim.start_call(ref, "save_messages", [user("status?")])
    with pytest.raises(AgentEvicted):
        sim.wait(pending)
    (stream,) = streams(sim, ref)
    assert stream["status"] == "streaming"
    assert stream["chunks"][-1]["type"] == "finish"
    assert [m["role"] for m in transcript(sim, ref)] == ["user"]
    client = sim.connect(ref)
    sim.run_for(10_000)
    assert len(model.requests) == 1
    messages = transcript(sim, ref)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert texts(messages[1]) == "All three files are ready."
    (stream,) = streams(sim, ref)
    assert stream["status"] == "completed"
    attempts = sim.trace.select("chat:recovery:attempt")
    assert [(r.get("mode"), r.get("requestId")) for r in attempts] == [
        ("complete", stream["request_id"])
    ]
    done = [f for f in chat_frames(client.frames, stream["request_id"]) if f.get("done")]
    assert len(done) == 1
    assert sim.probes["chat.recovery_found_complete_answer"] == 1
    incidents = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX)
    if sim.platform.release == "0.21.0":
        # 0.21.0 keeps a recovered incident; 0.32.0 deletes it (chat:recovery:completed).
        assert [i["status"] for i in incidents.values()] == ["recovered"]
        assert sim.trace.select("chat:recovery:completed") == []
    else:
        assert incidents == {}
        assert len(sim.trace.select("chat:recovery:completed")) == 1


def test_a_turn_that_died_before_its_finish_chunk_committed_is_continued(
    sim: Simulation, host: type
) -> None:
    """A crash while the last text chunk is stored (the finish chunk never committed) leaves an
    answer cut short: recovery continues it, as for an eviction mid-answer."""
    model = sim.register_model(
        ScriptedModel(
            rules=[when(continuing(), reply=text(" and done."))],
            default=text("AAAABBBB", chunks=2),
        )
    )
    ref = sim.agent(host, "c")
    # Chunks: start, text-start, AAAA, BBBB, text-end, finish: die storing text-end.
    sim.arm_storage_fault(ref, "crash", match="INSERT INTO cf_ai_chat_stream_chunks", skip=4)
    pending = sim.start_call(ref, "save_messages", [user("tell me")])
    with pytest.raises(AgentEvicted):
        sim.wait(pending)
    sim.agent(host, "c")
    sim.run_for(10_000)
    assert [r.get("mode") for r in sim.trace.select("chat:recovery:attempt")] == ["continue"]
    assert model.requests[-1]["continuation"] is True
    assert texts(transcript(sim, ref)[1]) == "AAAABBBB and done."
    assert sim.probes.get("chat.recovery_found_complete_answer", 0) == 0


def test_a_turn_interrupted_before_any_chunk_is_retried(sim: Simulation, host: type) -> None:
    """Evicted before the model sent anything, the turn is run again from the same transcript."""
    model = sim.register_model(
        ScriptedModel(
            default=[stall(60_000, then=text("late")), text("Fresh answer", delay_ms=100)]
        )
    )
    ref = sim.agent(host, "c")
    sim.start_call(ref, "save_messages", [user("tell me")])
    sim.run_for(1_000)
    sim.evict(ref)
    sim.agent(host, "c")
    sim.run_for(5_000)
    assert len(model.requests) == 2
    assert "continuation" not in model.requests[1]
    assert model.requests[1]["messages"] == model.requests[0]["messages"]
    assert [texts(m) for m in transcript(sim, ref)] == ["tell me", "Fresh answer"]
    assert [r.get("mode") for r in sim.trace.select("chat:recovery:attempt")] == ["retry"]
    assert sim.probes["chat.recovery_retried"] == 1


def test_a_turn_interrupted_while_its_tool_ran_reruns_the_call_with_its_id(
    sim: Simulation, host: type
) -> None:
    """The continued turn runs the unfinished tool call again under the same toolCallId, then
    gives the model its result."""
    worker_model(sim, [["note", "started"], ["sleep", 5_000], ["note", "finished"]], "Done.")
    ref = sim.agent(host, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(2_000)
    sim.evict(ref)
    sim.agent(host, "c")
    sim.run_for(20_000)
    notes = [(n["arg"], n["call"]) for n in journal(sim, ref)]
    assert [label for label, _ in notes] == ["started", "started", "finished"]
    assert len({call_id for _, call_id in notes}) == 1
    answer = transcript(sim, ref)[-1]
    assert [p["type"] for p in answer["parts"]] == ["tool-work", "text"]
    assert answer["parts"][0]["state"] == "output-available" and texts(answer) == "Done."


@on_release("0.21.0")
def test_recovery_gives_up_after_max_attempts(sim: Simulation, host: type) -> None:
    """A turn interrupted more often than `max_chat_recovery_attempts` is not run again."""

    class Once(host):  # type: ignore[valid-type, misc]
        max_chat_recovery_attempts = 1

    Once.__name__ = f"Once{host.__name__}"
    model = sim.register_model(ScriptedModel(default=stall(60_000, then=text("x"))))
    ref = sim.agent(Once, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    for _ in range(2):
        sim.run_for(1_000)
        sim.evict(ref)
        sim.agent(Once, "c")
    sim.run_for(1_000)
    assert len(model.requests) == 2
    incident = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX)
    assert [i["status"] for i in incident.values()] == ["exhausted"]


@on_both_releases
def test_an_error_from_the_model_is_one_error_frame(sim: Simulation, host: type) -> None:
    """A provider failure mid-stream ends the turn `error` with one `error: true` frame."""
    sim.register_model(
        ScriptedModel(
            rules=[when(asked("in band"), reply=fail("bad chunk", after_chunks=2, in_band=True))],
            default=fail("provider overloaded", after_chunks=3),
        )
    )
    ref = sim.agent(host, "c")
    client = sim.connect(ref)
    for prompt, message in (("raise", "provider overloaded"), ("in band", "bad chunk")):
        result = sim.call(ref, "save_messages", [user(prompt)])
        assert result == {**result, "status": "error", "error": message}
        errors = [f for f in chat_frames(client.frames, result["requestId"]) if f.get("error")]
        assert [e["body"] for e in errors] == [message]


def test_a_storage_error_mid_turn_fails_the_run_and_leaves_nothing_behind(
    sim: Simulation, host: type
) -> None:
    """A storage error while a run's turn stores a chunk settles the run `error` with the
    storage message; no fiber row, controller or turn is left that would keep it "active"."""
    sim.register_model(ScriptedModel(default=text("abcd", chunks=4, delay_ms=100)))
    ref = sim.agent(host, "c")
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    sim.arm_storage_fault(ref, "error", match="INSERT INTO cf_ai_chat_stream_chunks", skip=2)
    sim.run_for(5_000)
    inspection = sim.call(ref, "inspect_agent_tool_run", "run-1")
    assert inspection["status"] == "error"
    assert inspection["error"].startswith("injected storage fault")
    assert sim.query(ref, "SELECT * FROM cf_agents_runs") == []
    assert sim.call(ref, "bookkeeping")["controllers"] == []
