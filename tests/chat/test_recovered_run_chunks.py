"""Conformance, seed decision S5 across a child's own recovery: the chunk indices of an agent-tool
run never start over. A chat child evicted mid-answer continues the run in a recovered turn
(new request id); that turn continues the interrupted turn's stream, so the chunks a parent (and
its clients) already hold keep their numbers and the recovered turn's chunks come after them.
Before, the recovered turn opened a stream of its own numbered from 0, and a client that held
chunks 0..k dropped the recovered turn's first k + 1 chunks as duplicates (E17)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sim import Simulation
from sim.model import ScriptedModel, continuing, text, when
from tests.chat.chat_agents import HOSTS, AiChatChild, chunk_types, read_tail, row
from tests.releases import on_both_releases

pytestmark = [
    pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__),
    on_both_releases,
]  # divergence T9 holds on both releases

FIRST = text("AAAABBBBCCCCDDDD", chunks=4, delay_ms=1_000)
"""Start and text-start at 1 s, then one delta a second: 2.5 s in, chunks 0..2 are stored."""
RECOVERED = text("wxyz", chunks=4, delay_ms=500)


def evicted_mid_answer(sim: Simulation, host: type) -> tuple[Any, list[dict[str, Any]]]:
    """A run whose child is evicted 2.5 s into its answer, and what a tail had read by then."""
    sim.register_model(
        ScriptedModel(rules=[when(continuing(), reply=RECOVERED)], default=[FIRST, RECOVERED])
    )
    ref = sim.agent(host, "c")
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    tail = sim.call(ref, "open_agent_tool_tail", "run-1")
    seen: list[dict[str, Any]] = []
    while len(seen) < 3:
        seen += sim.call(ref, "read_agent_tool_tail", tail)
    sim.run_for(2_500 - sim.now_ms)
    sim.evict(ref)
    return ref, seen


def test_a_recovered_turn_numbers_its_chunks_after_those_the_run_had(
    sim: Simulation, host: type
) -> None:
    """A parent that held chunks 0..2 before the eviction re-attaches to the restarted child
    as it does after its own restart — after the last chunk the child shows it (2 for an
    AIChatAgent-like child; none for a Think-like one, which shows no stored chunk before the
    run ends, E16) — and receives the recovered turn's chunks under numbers above 2, in order,
    each the number the child stores that chunk under: never a number it already holds."""
    ref, seen = evicted_mid_answer(sim, host)
    assert [r["chunkSequence"] for r in seen] == [0, 1, 2]
    assert chunk_types(seen) == ["start", "text-start", "text-delta"]
    woken = sim.agent(host, "c")
    shown = sim.call(woken, "get_agent_tool_chunks", "run-1")
    after = shown[-1]["sequence"] if shown else -1
    assert after == (2 if host is AiChatChild else -1)
    tail = sim.call(woken, "open_agent_tool_tail", "run-1", after)
    later = read_tail(sim, woken, tail)
    (attempt,) = [r.fields for r in sim.trace.select("chat:recovery:attempt")]
    assert attempt["mode"] == "continue"
    numbers = [r["chunkSequence"] for r in later]
    assert min(numbers) > 2 and numbers == sorted(set(numbers))
    stored = {
        r["chunk_index"]: r["body"]
        for r in sim.query(ref, "SELECT chunk_index, body FROM cf_ai_chat_stream_chunks")
    }
    assert [(r["chunkSequence"], r["body"]) for r in later] == [(n, stored[n]) for n in numbers]
    assert chunk_types(later)[-1] == "finish"
    if host is AiChatChild:
        assert numbers == list(range(3, 3 + len(later)))
        assert chunk_types(later)[0] == "start"
        deltas = [json.loads(r["body"]).get("delta") for r in later]
        assert "".join(d for d in deltas if d) == "wxyz"
    assert row(sim, ref, "run-1")["status"] == "completed"


def test_the_run_keeps_one_stream_whose_first_chunks_are_those_sent_before(
    sim: Simulation, host: type
) -> None:
    """The recovered turn continues the interrupted turn's stream: the child still stores the
    chunks sent before the eviction under their numbers, and an AIChatAgent-like child (whose
    stored chunks are visible) replays them, then the recovered turn's, contiguously."""
    ref, seen = evicted_mid_answer(sim, host)
    sim.agent(host, "c")
    sim.run_while(lambda: (row(sim, ref, "run-1") or {})["status"] == "running", 60_000)
    streams = sim.query(ref, "SELECT id FROM cf_ai_chat_stream_metadata")
    assert len(streams) == 1
    stored = sim.query(
        ref, "SELECT chunk_index, body FROM cf_ai_chat_stream_chunks ORDER BY chunk_index"
    )
    assert [(r["chunk_index"], r["body"]) for r in stored[:3]] == [
        (r["chunkSequence"], r["body"]) for r in seen
    ]
    if host is AiChatChild:
        replay = sim.call(ref, "get_agent_tool_chunks", "run-1")
        assert [c["sequence"] for c in replay] == list(range(len(stored)))
        assert [c["body"] for c in replay[:3]] == [r["body"] for r in seen]


def test_a_recovered_turn_interrupted_again_rebuilds_only_its_own_chunks(
    sim: Simulation, host: type
) -> None:
    """When the recovered turn is itself evicted mid-answer, the next recovery rebuilds the
    answer from the persisted partial message plus the chunks that turn streamed — not the
    whole shared stream again, which would repeat the first turn's text — and the run's chunk
    numbers still only grow."""
    ref, _ = evicted_mid_answer(sim, host)
    woken = sim.agent(host, "c")
    sim.run_while(lambda: len(_deltas(sim, woken)) < 2)
    sim.evict(woken)
    woken = sim.agent(host, "c")
    sim.run_while(lambda: (row(sim, woken, "run-1") or {})["status"] == "running", 60_000)
    modes = [r.get("mode") for r in sim.trace.select("chat:recovery:attempt")]
    assert modes == ["continue", "continue"]
    (answer,) = [
        json.loads(r["message"])
        for r in sim.query(woken, "SELECT message FROM cf_ai_chat_agent_messages")
        if json.loads(r["message"])["role"] == "assistant"
    ]
    texts = [p["text"] for p in answer["parts"] if p["type"] == "text"]
    assert texts == ["AAAA", "w", "wxyz"]
    indices = [
        r["chunk_index"]
        for r in sim.query(woken, "SELECT chunk_index FROM cf_ai_chat_stream_chunks")
    ]
    assert sorted(indices) == list(range(len(indices)))


def _deltas(sim: Simulation, ref: Any) -> list[str]:
    rows = sim.query(ref, "SELECT body FROM cf_ai_chat_stream_chunks ORDER BY chunk_index")
    return [json.loads(r["body"])["delta"] for r in rows if '"text-delta"' in r["body"]]
