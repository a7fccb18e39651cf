"""Conformance on SDK 0.32.0: chat recovery's incidents and how they end (spec sdk-0.32 §8.1, as
@cloudflare/ai-chat 0.12.2 builds it): an incident is the request first interrupted and the
latest user message, a completed recovery deletes it (`chat:recovery:completed`), a failed one
keeps it `failed` (`chat:recovery:failed`), and a give-up tells `on_exhausted` before the
clients get the terminal message."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from agents_core.chat.recovery_incidents import ChatRecoveryExhaustedContext
from sim import AgentRef, Simulation
from sim.model import ScriptedModel, fail, text
from tests.chat.chat_agents import HOSTS, user

TERMINAL = "The assistant was interrupted and could not recover. Please try again."


def with_options(host: type, **options: Any) -> type:
    """`host` with `chat_recovery` set to `options`."""
    return type(f"Opt{host.__name__}", (host,), {"chat_recovery": options})


def interrupt_mid_answer(sim: Simulation, host: type, model: ScriptedModel) -> tuple[AgentRef, Any]:
    """A connected client, a turn that streams a few chunks of its answer, and an eviction
    2.5 s in; the agent is woken again and the client reconnects."""
    sim.register_model(model)
    ref = sim.agent(host, "c")
    client = sim.connect(ref)
    sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(2_500)
    sim.evict(ref)
    sim.agent(host, "c")
    client.reconnect()
    return ref, client


def question_id(sim: Simulation, ref: AgentRef) -> str:
    (question,) = [m for m in sim.instance_of(ref).messages if m["role"] == "user"]
    return str(question["id"])


def terminal_frames(client: Any) -> list[dict[str, Any]]:
    return [
        f
        for f in client.frames
        if f.get("type") == "cf_agent_use_chat_response" and f.get("body") == TERMINAL
    ]


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_an_incident_is_the_root_request_and_the_latest_user_message(
    sim: Simulation, host: type
) -> None:
    """The incident's id is `<request first interrupted>:<latest user message id>` and its KV key
    that id URI-encoded (`:` as `%3A`); the continuation carries the id."""
    model = ScriptedModel(default=text("the answer", chunks=4, delay_ms=1_000))
    ref, _client = interrupt_mid_answer(sim, host, model)
    sim.run_for(1)
    (detected,) = sim.trace.select("chat:recovery:detected")
    origin = detected.get("originRequestId")
    expected = f"{origin}:{question_id(sim, ref)}"
    incidents = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX)
    assert list(incidents) == [INCIDENT_PREFIX + expected.replace(":", "%3A")]
    assert incidents[INCIDENT_PREFIX + expected.replace(":", "%3A")]["incidentId"] == expected


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_completed_recovery_deletes_its_incident(sim: Simulation, host: type) -> None:
    """The recovered turn completes: the incident is deleted, `chat:recovery:completed` names it
    (with the interrupted request, its attempt, `maxAttempts` and kind), and the recovering flag
    is cleared."""
    model = ScriptedModel(default=text("the answer", chunks=4, delay_ms=1_000))
    ref, _client = interrupt_mid_answer(sim, host, model)
    sim.run_for(60_000)
    (detected,) = sim.trace.select("chat:recovery:detected")
    origin = detected.get("originRequestId")
    assert sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX) == {}
    (completed,) = sim.trace.select("chat:recovery:completed")
    assert completed.get("incidentId") == f"{origin}:{question_id(sim, ref)}"
    assert (completed.get("requestId"), completed.get("originRequestId")) == (origin, origin)
    assert (completed.get("attempt"), completed.get("maxAttempts")) == (1, 10)
    assert completed.get("recoveryKind") == "continue"
    assert sim.trace.select("chat:recovery:failed") == []
    assert sim.instance_of(ref).host.kv.get("cf:chat:recovering") is None
    assert sim.probes["chat.recovery_completed_incident_deleted"] == 1


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_recovery_whose_turn_fails_keeps_its_incident_failed(sim: Simulation, host: type) -> None:
    """The recovered turn ends in a model error: the incident stays, `failed` with the error as
    its reason, `chat:recovery:failed` says so, and the recovering flag is cleared."""
    model = ScriptedModel(
        default=[text("the answer", chunks=4, delay_ms=1_000), fail("provider down")]
    )
    ref, _client = interrupt_mid_answer(sim, host, model)
    sim.run_for(60_000)
    (stored,) = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    assert (stored["status"], stored["reason"]) == ("failed", "provider down")
    (failed,) = sim.trace.select("chat:recovery:failed")
    assert failed.get("reason") == "provider down"
    assert failed.get("incidentId") == stored["incidentId"]
    assert sim.trace.select("chat:recovery:completed") == []
    assert sim.instance_of(ref).host.kv.get("cf:chat:recovering") is None


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_on_exhausted_is_told_the_give_up_before_the_clients(sim: Simulation, host: type) -> None:
    """A turn given up (here at the wake, its one interrupted attempt allowed spent): the
    awaited `on_exhausted` hook gets the incident, the reason, the partial answer and the
    terminal message, after `chat:recovery:exhausted` and before any client has the terminal
    frame."""
    told: list[tuple[ChatRecoveryExhaustedContext, int, int]] = []

    async def on_exhausted(ctx: ChatRecoveryExhaustedContext) -> None:
        exhausted = len(sim.trace.select("chat:recovery:exhausted"))
        told.append((ctx, exhausted, len(terminal_frames(client))))

    given_up = with_options(host, max_interrupted_attempts=1, on_exhausted=on_exhausted)
    model = ScriptedModel(default=text("the whole answer", chunks=4, delay_ms=1_000))
    ref, client = interrupt_mid_answer(sim, given_up, model)
    sim.run_for(10)
    ((ctx, exhausted_before, frames_before),) = told
    assert (exhausted_before, frames_before) == (1, 0)
    origin = ctx.recovery_root_request_id
    assert ctx.incident_id == f"{origin}:{question_id(sim, ref)}"
    assert (ctx.request_id, ctx.attempt, ctx.max_attempts) == (origin, 1, 10)
    assert (ctx.reason, ctx.recovery_kind) == ("interrupted_attempts_exceeded", "continue")
    assert ctx.terminal_message == TERMINAL
    assert ctx.partial_text and "the whole answer".startswith(ctx.partial_text)
    assert [p["type"] for p in ctx.partial_parts] == ["text"]
    (stream,) = sim.query(
        ref, "SELECT id, created_at FROM cf_ai_chat_stream_metadata WHERE request_id = ?", origin
    )
    assert ctx.stream_id == stream["id"]
    assert ctx.created_at <= stream["created_at"]
    assert len(terminal_frames(client)) == 1
    assert len(model.requests) == 1


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_an_on_exhausted_that_raises_does_not_keep_the_outcome_from_clients(
    sim: Simulation, host: type
) -> None:
    """`on_exhausted` raising is logged and the give-up goes on: the clients get the terminal
    frame, it is kept as the last terminal outcome, and the incident is `exhausted`."""

    def on_exhausted(ctx: ChatRecoveryExhaustedContext) -> None:
        raise RuntimeError("banner service down")

    given_up = with_options(host, max_interrupted_attempts=1, on_exhausted=on_exhausted)
    model = ScriptedModel(default=text("the whole answer", chunks=4, delay_ms=1_000))
    ref, client = interrupt_mid_answer(sim, given_up, model)
    sim.run_for(10)
    assert sim.probes["chat.recovery_on_exhausted_raised"] == 1
    assert len(terminal_frames(client)) == 1
    assert sim.instance_of(ref).host.kv.get("cf:chat:last-terminal")["body"] == TERMINAL
    (stored,) = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    assert (stored["status"], stored["reason"]) == ("exhausted", "interrupted_attempts_exceeded")
