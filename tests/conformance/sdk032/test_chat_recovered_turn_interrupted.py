"""A recovered chat turn interrupted in its turn on 0.32.0 (spec sdk-0.32 §2.5, §8.1, §8.3;
the 0.32.0 dist's chat-turn Task definition and ai-chat's fiber recovery).

An eviction leaves the recovered turn's snapshot in KV: it names the recovery's root request and
the user message it answers, so the next incarnation's recovery joins the same incident. A
memory-limit reset ends the turn's body first, and the turn's step deletes its snapshot as it
unwinds (the breaker syncs storage before the reset): the run, left claimed, is recovered with
no snapshot, as a new incident `<requestId>:` that can only continue the transcript's last
answer. With no answer to continue it is skipped, and the re-enqueued continuation answers the
user message once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from sim import AgentRef, Simulation
from sim.chat_client_view import chat_client_view
from sim.model import ScriptedModel, text
from tests.chat.chat_agents import HOSTS, user
from tests.chat.interrupted_turns import interrupt_a_turn, striking_once_in_recovery

on_0_32 = pytest.mark.parametrize("sim", ["0.32.0"], indirect=True)
each_host = pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)


def recovery_events(sim: Simulation, name: str) -> list[Any]:
    return sim.trace.select(f"chat:recovery:{name}")


def answers(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    return [m for m in sim.instance_of(ref).messages if m["role"] == "assistant"]


@on_0_32
@each_host
def test_a_struck_recovered_turn_is_answered_once(sim: Simulation, host: type) -> None:
    """The recovered turn hits a memory-limit reset: its own run comes back with no snapshot
    as a second incident, which finds no answer to continue and is skipped; the continuation
    enqueued again answers the user message, once; the client sees one completed turn."""
    ref, model = interrupt_a_turn(sim, striking_once_in_recovery(host))
    sim.run_for(500)  # past the reset: a client of the incarnation that recovers
    client = sim.connect(ref)
    sim.run_for(60_000)
    assert len(model.requests) == 2  # the interrupted turn and the one recovery that answers
    (answer,) = answers(sim, ref)
    assert answer["parts"][0]["text"] == "the answer"
    first, second = recovery_events(sim, "detected")
    origin, struck = first.get("originRequestId"), second.get("originRequestId")
    assert struck != origin and second.get("recoveryKind") == "continue"
    (skipped,) = recovery_events(sim, "skipped")
    assert skipped.get("originRequestId") == struck
    (completed,) = recovery_events(sim, "completed")
    assert completed.get("incidentId") == f"{origin}:{sim.instance_of(ref).messages[0]['id']}"
    (left,) = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    assert (left["incidentId"], left["status"]) == (f"{struck}:", "skipped")
    ends = chat_client_view(client.frames)["ended"]
    assert [(end.outcome, end.error) for end in ends] == [("completed", None)]


@on_0_32
@each_host
def test_a_struck_recovered_turn_continues_the_last_answer(sim: Simulation, host: type) -> None:
    """With an answer in the transcript, the snapshot-less incident continues it (the SDK's
    continuation of the last turn), and the user's earlier answer is the one extended."""
    model = sim.register_model(ScriptedModel(default=text("the answer", chunks=4, delay_ms=5_000)))
    striking = striking_once_in_recovery(host)
    ref = sim.agent(striking, "c")
    earlier = [user("hi"), {"role": "assistant", "parts": [{"type": "text", "text": "hello"}]}]
    sim.start_call(ref, "save_messages", [*earlier, user("go")])
    sim.run_for(2_000)
    sim.evict(ref)
    sim.agent(striking, "c")
    sim.run_for(60_000)
    continued = [e for e in recovery_events(sim, "attempt") if e.get("mode") == "continue"]
    assert len(continued) == 1
    assert sim.probes["chat.recovery_continued"] == 1
    texts = [json.dumps(m["parts"]) for m in answers(sim, ref)]
    assert len(texts) == 2 and "hello" in texts[0] and "the answer" in texts[0]
    assert len(model.requests) == 3


@on_0_32
@each_host
def test_a_struck_continuation_keeps_the_partial_answer_once(sim: Simulation, host: type) -> None:
    """The interrupted turn had streamed a part: its recovery persists it and continues it, and
    is struck. The snapshot-less incident continues that answer, and so does the continuation
    enqueued again (the SDK's continuation of the last assistant message, which a turn that
    extends it does not change): one answer, the interrupted part in it once."""
    model = sim.register_model(
        ScriptedModel(default=text("the answer is long", chunks=4, delay_ms=5_000))
    )
    striking = striking_once_in_recovery(host)
    ref = sim.agent(striking, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(12_000)  # two chunks streamed
    sim.evict(ref)
    sim.agent(striking, "c")
    sim.run_for(80_000)
    (answer,) = answers(sim, ref)
    texts = [part["text"] for part in answer["parts"]]
    assert texts == ["the a", "the answer is long", "the answer is long"]
    detected = recovery_events(sim, "detected")
    assert [e.get("recoveryKind") for e in detected] == ["continue", "continue"]
    assert len(recovery_events(sim, "completed")) == 2
    assert len(model.requests) == 3


@on_0_32
@each_host
def test_an_evicted_recovered_turn_stays_one_incident(sim: Simulation, host: type) -> None:
    """A recovered turn evicted mid-stream keeps its snapshot: the next incarnation recovers
    it under the same incident (same root, same user message), and the turn is answered once."""
    ref, model = interrupt_a_turn(sim, host)
    sim.run_for(7_000)  # the recovered turn has streamed a chunk
    sim.evict(ref)
    sim.agent(host, "c")
    sim.run_for(40_000)
    (detected,) = recovery_events(sim, "detected")
    attempts = recovery_events(sim, "attempt")
    assert [e.get("originRequestId") for e in attempts] == [detected.get("originRequestId")] * 2
    assert [e.get("mode") for e in attempts] == ["retry", "continue"]
    (completed,) = recovery_events(sim, "completed")
    assert completed.get("originRequestId") == detected.get("originRequestId")
    assert recovery_events(sim, "skipped") == []
    assert len(model.requests) == 3
    (answer,) = answers(sim, ref)
    assert "the answer" in json.dumps(answer["parts"])
    assert sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX) == {}
