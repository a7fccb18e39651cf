"""Conformance, child side of awaited runs (spec agent-tools §2.5, §3.3, catalogue group B): a
chat host driven over RPC as a parent would drive it — start, inspect, chunks, the tail, cancel.
Where an item speaks of the parent's events, these tests pin what the child gives the parent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sim import Simulation
from sim.model import ScriptedModel, asked, fail, stall, text, when
from tests.chat.chat_agents import (
    HOSTS,
    AiChatChild,
    ThinkChild,
    chunk_types,
    read_tail,
    row,
    user,
    wait_settled,
)
from tests.releases import alarm_computation, on_both_releases

both_hosts = pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
TEXT_CHUNKS = ["start", "text-start", "text-delta", "text-end", "finish"]


def error_frames(frames: list[Any]) -> list[dict[str, Any]]:
    return [f for f in frames if isinstance(f, dict) and f.get("error") is True]


# -- completion ------------------------------------------------------------------------------------
def test_T013_a_think_child_completes_with_its_answer_as_summary(sim: Simulation) -> None:
    """A Think child started over RPC answers `running` at once and settles `completed` with the
    assistant text as summary, having been asked the input as pretty JSON."""
    model = sim.register_model(ScriptedModel(default=text("The answer is 42.", 3)))
    ref = sim.agent(ThinkChild, "c")
    started_at = sim.now_ms
    assert sim.call(ref, "start_agent_tool_run", {"q": "x"}, "run-1") == {
        "runId": "run-1",
        "status": "running",
        "startedAt": started_at,
    }
    wait_settled(sim, ref, "run-1")
    inspection = sim.call(ref, "inspect_agent_tool_run", "run-1")
    assert inspection["status"] == "completed"
    assert inspection["summary"] == "The answer is 42."
    assert "error" not in inspection and "output" not in inspection
    assert model.requests[0]["messages"][-1]["parts"][0]["text"] == '{\n  "q": "x"\n}'


def test_T014_an_ai_chat_child_gives_summary_and_output_and_five_chunks(sim: Simulation) -> None:
    """An AIChatAgent child's summary and output are both the final assistant text, and a tail
    attached at start carries its five chunks in order (what the parent forwards between its
    `started` and `finished`)."""
    sim.register_model(ScriptedModel(default=text("Summary text", delay_ms=100)))
    ref = sim.agent(AiChatChild, "c")
    sim.call(ref, "start_agent_tool_run", "summarise this", "run-1")
    tail = sim.call(ref, "open_agent_tool_tail", "run-1")
    records = read_tail(sim, ref, tail)
    assert chunk_types(records) == TEXT_CHUNKS
    assert [r["sequence"] for r in records] == [0, 1, 2, 3, 4]
    inspection = sim.call(ref, "inspect_agent_tool_run", "run-1")
    assert inspection["status"] == "completed"
    assert inspection["summary"] == inspection["output"] == "Summary text"


def test_T015_stored_chunks_are_contiguous_single_chunks(sim: Simulation) -> None:
    """A completed AIChatAgent run's chunks are numbered 0..n-1, each body one UI chunk object,
    and `after_sequence=0` returns exactly the rest."""
    sim.register_model(ScriptedModel(default=text("one two three", chunks=3)))
    ref = sim.agent(AiChatChild, "c")
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    wait_settled(sim, ref, "run-1")
    chunks = sim.call(ref, "get_agent_tool_chunks", "run-1")
    assert [c["sequence"] for c in chunks] == list(range(len(chunks))) and len(chunks) == 7
    assert all(isinstance(json.loads(c["body"]), dict) for c in chunks)
    assert all("type" in json.loads(c["body"]) for c in chunks)
    assert sim.call(ref, "get_agent_tool_chunks", "run-1", 0) == chunks[1:]


@on_both_releases
def test_T016_think_summary_is_the_answer_and_no_text_still_completes(sim: Simulation) -> None:
    """A Think run's summary is its assistant text with no error; a run whose model says
    nothing still completes, with summary ""."""
    sim.register_model(
        ScriptedModel(rules=[when(asked("silent"), reply=text(""))], default=text("Spoken."))
    )
    ref = sim.agent(ThinkChild, "c")
    sim.call(ref, "start_agent_tool_run", "speak", "run-1")
    sim.call(ref, "start_agent_tool_run", "be silent", "run-2")
    wait_settled(sim, ref, "run-2")
    spoken = sim.call(ref, "inspect_agent_tool_run", "run-1")
    silent = sim.call(ref, "inspect_agent_tool_run", "run-2")
    assert (spoken["status"], spoken["summary"], "error" in spoken) == (
        "completed",
        "Spoken.",
        False,
    )
    assert (silent["status"], silent["summary"], "error" in silent) == ("completed", "", False)


# -- bookkeeping and errors ------------------------------------------------------------------------
@both_hosts
def test_T020_a_completed_run_leaves_no_bookkeeping(sim: Simulation, host: type) -> None:
    """After a run completes — one whose tail made the snoop negatively cache an unrelated turn's
    request id — the last-error, pre-turn-id, request-id and live-sequence maps are empty."""
    sim.register_model(ScriptedModel(default=text("abc", chunks=3, delay_ms=200)))
    ref = sim.agent(host, "c")
    unrelated = sim.start_call(ref, "save_messages", [user("unrelated")])
    sim.run_for(100)
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    tail = sim.call(ref, "open_agent_tool_tail", "run-1")
    sim.run_for(150)
    assert None in sim.call(ref, "bookkeeping")["requestCache"].values()
    assert sim.wait(unrelated)["status"] == "completed"
    records = read_tail(sim, ref, tail)
    assert chunk_types(records) == [
        "start",
        "text-start",
        *["text-delta"] * 3,
        "text-end",
        "finish",
    ]
    assert sim.call(ref, "bookkeeping") == {
        "controllers": [],
        "requestCache": {},
        "lastErrors": {},
        "preTurnIds": {},
        "liveSeq": {},
        "tails": 0,
    }


def test_T021_an_ai_chat_stream_error_fails_the_run_and_is_broadcast(sim: Simulation) -> None:
    """A model stream failing with "model stream failed" settles the AIChatAgent run `error`
    with that message, and the child broadcasts one error frame for it."""
    sim.register_model(ScriptedModel(default=fail("model stream failed", 3)))
    ref = sim.agent(AiChatChild, "c")
    client = sim.connect(ref)
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    tail = sim.call(ref, "open_agent_tool_tail", "run-1")
    read_tail(sim, ref, tail)
    inspection = sim.call(ref, "inspect_agent_tool_run", "run-1")
    assert (inspection["status"], inspection["error"]) == ("error", "model stream failed")
    assert [f["body"] for f in error_frames(client.frames)] == ["model stream failed"]
    assert sim.call(ref, "bookkeeping")["lastErrors"] == {}


@both_hosts
def test_T022_an_unrelated_error_never_contaminates_a_run(sim: Simulation, host: type) -> None:
    """An unrelated turn's error frame, and a sibling run's stream error, leave a run that
    streamed cleanly `completed` with no error; only the failing run is `error`."""
    sim.register_model(
        ScriptedModel(
            rules=[
                when(
                    asked("unrelated"), reply=fail("unrelated boom", 2, in_band=True, delay_ms=50)
                ),
                when(asked("bad"), reply=fail("bad run", 2, in_band=True, delay_ms=50)),
            ],
            default=text("fine", delay_ms=50),
        )
    )
    ref = sim.agent(host, "c")
    unrelated = sim.start_call(ref, "save_messages", [user("unrelated")])
    sim.call(ref, "start_agent_tool_run", "good one", "good")
    sim.call(ref, "start_agent_tool_run", "bad one", "bad")
    tails = [sim.call(ref, "open_agent_tool_tail", run) for run in ("good", "bad")]
    assert sim.wait(unrelated)["status"] == "error"
    for tail in tails:
        read_tail(sim, ref, tail)
    good = sim.call(ref, "inspect_agent_tool_run", "good")
    bad = sim.call(ref, "inspect_agent_tool_run", "bad")
    assert (good["status"], "error" in good, good["summary"]) == ("completed", False, "fine")
    assert (bad["status"], bad["error"]) == ("error", "bad run")


@both_hosts
def test_T023_an_in_band_error_without_a_tailer_fails_the_run(sim: Simulation, host: type) -> None:
    """With nobody tailing, an in-band error chunk still settles the run `error` with the
    stream's message."""
    sim.register_model(ScriptedModel(default=fail("quota exceeded", 2, in_band=True)))
    ref = sim.agent(host, "c")
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    wait_settled(sim, ref, "run-1")
    inspection = sim.call(ref, "inspect_agent_tool_run", "run-1")
    assert (inspection["status"], inspection["error"]) == ("error", "quota exceeded")


# -- the tail --------------------------------------------------------------------------------------
@both_hosts
def test_T028_a_chunk_landing_during_the_backlog_drain_is_forwarded(
    sim: Simulation, host: type
) -> None:
    """A chunk stored and broadcast while a new tail drains its backlog reaches the tail, once,
    between the backlog and the later live chunks."""
    sim.register_model(ScriptedModel(default=text("abcd", chunks=4, delay_ms=1_000)))
    ref = sim.agent(host, "c")
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    sim.run_for(2_500)
    sim.call(ref, "arm_drain_injection", "chunk")
    tail = sim.call(ref, "open_agent_tool_tail", "run-1")
    records = read_tail(sim, ref, tail)
    types = chunk_types(records)
    assert types.count("data-window") == 1
    assert types[types.index("data-window") + 1 :] == [*["text-delta"] * 3, "text-end", "finish"]
    sequences = [r["sequence"] for r in records]
    assert sequences == sorted(set(sequences))
    stored = sim.call(ref, "get_agent_tool_chunks", "run-1")
    assert "data-window" in chunk_types(stored)


@both_hosts
def test_T029_progress_and_milestone_frames_in_the_attach_window_are_forwarded(
    sim: Simulation, host: type
) -> None:
    """A progress frame (never stored) and a milestone (stored, S2) landing during the drain
    both reach the tail with their bodies verbatim."""
    sim.register_model(ScriptedModel(default=text("abcd", chunks=4, delay_ms=1_000)))
    ref = sim.agent(host, "c")
    client = sim.connect(ref)
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    sim.run_for(2_500)
    sim.call(ref, "arm_drain_injection", "signals")
    tail = sim.call(ref, "open_agent_tool_tail", "run-1")
    records = read_tail(sim, ref, tail)
    bodies = {json.loads(r["body"])["type"]: r["body"] for r in records}
    broadcast = {
        json.loads(f["body"])["type"]: f["body"]
        for f in client.frames
        if isinstance(f, dict) and f.get("body")
    }
    for part in ("data-agent-progress", "data-agent-milestone"):
        assert bodies[part] == broadcast[part]
    assert json.loads(bodies["data-agent-progress"])["data"] == {"fraction": 0.5, "phase": "p"}
    milestone = next(r for r in records if '"data-agent-milestone"' in r["body"])
    progress = next(r for r in records if '"data-agent-progress"' in r["body"])
    assert milestone["chunkSequence"] is not None and progress["chunkSequence"] is None


def test_T030_a_cold_counter_is_realigned_after_a_child_restart(sim: Simulation) -> None:
    """After a real eviction the run's stream holds chunks 0, 1, 2 (the interrupted turn's, which
    the recovered turn continues) and there is no live counter; a tail drains 0..2, the counter
    is realigned to 3, and the next live chunk, the recovered turn's first, is sequence 3."""
    sim.register_model(
        ScriptedModel(
            default=[
                text("xxxxxxxx", chunks=8, delay_ms=1_000),
                text("rest", chunks=4, delay_ms=1_000),
            ]
        )
    )
    ref = sim.agent(AiChatChild, "c")
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    sim.run_for(2_500)
    sim.evict(ref)
    sim.agent(AiChatChild, "c")

    def visible() -> int:
        return len(
            sim.query(
                ref,
                "SELECT c.chunk_index FROM cf_ai_chat_agent_tool_runs r "
                "JOIN cf_ai_chat_stream_metadata m ON m.request_id = r.request_id "
                "JOIN cf_ai_chat_stream_chunks c ON c.stream_id = m.id WHERE r.run_id = 'run-1'",
            )
        )

    sim.run_while(lambda: visible() < 3 or sim.trace.select("chat:recovery:rebind") == [])
    assert sim.call(ref, "bookkeeping")["liveSeq"] == {}
    tail = sim.call(ref, "open_agent_tool_tail", "run-1")
    assert sim.call(ref, "bookkeeping")["liveSeq"] == {"run-1": 3}
    backlog = sim.call(ref, "read_agent_tool_tail", tail)
    assert [r["sequence"] for r in backlog] == [0, 1, 2]
    (live,) = sim.call(ref, "read_agent_tool_tail", tail)
    assert (live["sequence"], live["chunkSequence"]) == (3, 3)
    assert json.loads(live["body"])["type"] == "start"


@both_hosts
def test_T031_a_cancelled_tailer_does_not_starve_its_sibling(sim: Simulation, host: type) -> None:
    """Of two tails on one run, closing one leaves the other receiving every later chunk; the
    run itself goes on."""
    sim.register_model(ScriptedModel(default=text("abcd", chunks=4, delay_ms=500)))
    ref = sim.agent(host, "c")
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    first = sim.call(ref, "open_agent_tool_tail", "run-1")
    second = sim.call(ref, "open_agent_tool_tail", "run-1")
    assert chunk_types(sim.call(ref, "read_agent_tool_tail", first)) == ["start"]
    assert chunk_types(sim.call(ref, "read_agent_tool_tail", first)) == ["text-start"]
    pending = sim.start_call(ref, "read_agent_tool_tail", first)
    sim.run_for(100)
    sim.call(ref, "close_agent_tool_tail", first)
    assert sim.wait(pending) is None
    with pytest.raises(LookupError, match="no agent-tool tail"):
        sim.call(ref, "read_agent_tool_tail", first)
    assert chunk_types(read_tail(sim, ref, second)) == [
        "start",
        "text-start",
        *["text-delta"] * 4,
        "text-end",
        "finish",
    ]
    assert sim.call(ref, "inspect_agent_tool_run", "run-1")["status"] == "completed"


@both_hosts
def test_T032_a_child_cancelled_while_running_is_aborted(sim: Simulation, host: type) -> None:
    """Cancelling a running run stops its turn, closes its tails and seals it `aborted` (Think's
    inspection carries the reason, AIChatAgent's does not)."""
    model = sim.register_model(ScriptedModel(default=stall(60_000, then=text("late"))))
    ref = sim.agent(host, "c")
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    tail = sim.call(ref, "open_agent_tool_tail", "run-1")
    sim.run_for(1_000)
    sim.call(ref, "cancel_agent_tool_run", "run-1", "user stopped it")
    assert read_tail(sim, ref, tail) == []
    sim.run_for(120_000)
    inspection = sim.call(ref, "inspect_agent_tool_run", "run-1")
    assert inspection["status"] == "aborted"
    assert inspection.get("error") == ("user stopped it" if host is ThinkChild else None)
    assert row(sim, ref, "run-1")["completed_at"] == 1_000 + inspection["startedAt"]
    assert len(model.requests) == 1
    assert sim.call(ref, "bookkeeping")["controllers"] == []


@on_both_releases
@both_hosts
def test_a_run_whose_keep_alive_lease_fails_is_settled_as_error(
    sim: Simulation, host: type
) -> None:
    """When the headless turn cannot take its keepAlive lease (a storage error arming the
    heartbeat), the turn never starts: the run is settled `error` with that error and its tail
    closes, instead of looking live for good while a parent waits on it."""
    model = sim.register_model(ScriptedModel(default=text("never asked")))
    ref = sim.agent(host, "c")
    sim.run_for(1)
    sim.arm_storage_fault(ref, "error", match=alarm_computation(sim))
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    tail = sim.call(ref, "open_agent_tool_tail", "run-1")
    assert read_tail(sim, ref, tail) == []
    inspection = sim.call(ref, "inspect_agent_tool_run", "run-1")
    assert inspection["status"] == "error"
    assert "injected storage fault" in inspection["error"]
    assert model.requests == []
    assert sim.call(ref, "bookkeeping")["controllers"] == []
    assert sim.probes["chat.run_lease_failed_settled"] == 1


# -- host differences ------------------------------------------------------------------------------
def test_E16_think_shows_stored_chunks_only_once_settled(sim: Simulation) -> None:
    """Mid-run a Think child's chunks are hidden (its row has no stream id until the terminal
    update) while an AIChatAgent child's are visible; after an eviction reconciled the row,
    Think still shows none."""
    sim.register_model(ScriptedModel(default=text("abcd", chunks=4, delay_ms=1_000)))
    think, ai_chat = sim.agent(ThinkChild, "t"), sim.agent(AiChatChild, "a")
    for ref in (think, ai_chat):
        sim.call(ref, "start_agent_tool_run", "go", "run-1")
    sim.run_for(2_500)
    assert sim.call(think, "get_agent_tool_chunks", "run-1") == []
    assert chunk_types(sim.call(ai_chat, "get_agent_tool_chunks", "run-1")) == [
        "start",
        "text-start",
        "text-delta",
    ]
    sim.run_for(10_000)
    assert len(sim.call(think, "get_agent_tool_chunks", "run-1")) == 8
    sim.register_model(
        ScriptedModel(default=[stall(60_000, then=text("x")), text("recovered", delay_ms=100)])
    )
    sim.call(think, "start_agent_tool_run", "again", "run-2")
    sim.run_for(1_000)
    sim.evict(think)
    sim.agent(ThinkChild, "t")
    sim.run_for(10_000)
    assert sim.call(think, "inspect_agent_tool_run", "run-2")["status"] == "completed"
    assert sim.call(think, "get_agent_tool_chunks", "run-2") == []


def test_E25_the_hosts_differ_in_input_message_and_request_body(sim: Simulation) -> None:
    """AIChatAgent asks with message id `agent-tool-<runId>-input` and body
    `{"agentToolInput": input}`; Think asks with a random id and no body."""
    model = sim.register_model(ScriptedModel(default=text("ok", delay_ms=100)))
    think, ai_chat = sim.agent(ThinkChild, "t"), sim.agent(AiChatChild, "a")
    for ref in (think, ai_chat):
        sim.call(ref, "start_agent_tool_run", {"k": 1}, "run-1")
        wait_settled(sim, ref, "run-1")
    think_request, ai_request = model.requests
    assert think_request["messages"][-1]["id"] != "agent-tool-run-1-input"
    assert "body" not in think_request
    assert ai_request["messages"][-1]["id"] == "agent-tool-run-1-input"
    assert ai_request["body"] == {"agentToolInput": {"k": 1}}
