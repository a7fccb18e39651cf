"""A chat recovery that finds the conversation moved on, on 0.32.0 (ai-chat's
`_chatRecoveryContinueDetached` and `_chatRecoveryRetryDetached`): once the host is stable, a
continuation whose target answer is no longer the transcript's last is skipped with
`conversation_changed`, a retry whose transcript no longer ends with a user message with
`no_unanswered_user_message`; no model call is made for the interrupted turn."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from sim import AgentRef, Simulation
from sim.model import Reply, ScriptedModel, stall, text
from tests.chat.chat_agents import HOSTS, user
from tests.releases import on_release

each_host = pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
on_0_32 = on_release("0.32.0")


def incident(sim: Simulation, ref: AgentRef) -> dict[str, Any]:
    (only,) = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    return dict(only)


def answered_while_recovering(
    sim: Simulation, host: type, first: Reply, *, second: str | None = "second"
) -> tuple[AgentRef, ScriptedModel]:
    """A turn answering `first`, interrupted 2.5 s in; after the wake the user asks `second`,
    whose turn takes 2 s, longer than the recovery waits for a stable host (1 s), so the
    recovery runs 3 s later, after that turn answered (`second=None`: nobody asks)."""
    patient = type(f"P{host.__name__}", (host,), {"chat_recovery": {"stable_timeout_ms": 1_000}})
    answers = [first, text("the second answer", chunks=2, delay_ms=1_000), text("more")]
    model = sim.register_model(ScriptedModel(default=answers))
    ref = sim.agent(patient, "c")
    sim.start_call(ref, "save_messages", [user("first")])
    sim.run_for(2_500)
    sim.evict(ref)
    sim.agent(patient, "c")
    if second is not None:
        sim.start_call(ref, "save_messages", [user(second)])
    sim.run_for(60_000)
    return ref, model


@on_0_32
@each_host
def test_a_continuation_skips_a_conversation_that_moved_on(sim: Simulation, host: type) -> None:
    """The interrupted turn had streamed part of its answer (a continuation); another turn
    answered the user before the recovery ran: it is skipped with `conversation_changed`
    (reported, the recovering flag cleared) and the interrupted answer is not continued."""
    ref, model = answered_while_recovering(sim, host, text("the first answer", 4, delay_ms=1_000))
    stored = incident(sim, ref)
    assert (stored["recoveryKind"], stored["status"]) == ("continue", "skipped")
    assert stored["reason"] == "conversation_changed"
    (skipped,) = sim.trace.select("chat:recovery:skipped")
    assert skipped.get("reason") == "conversation_changed"
    assert sim.instance_of(ref).host.kv.get("cf:chat:recovering") is None
    assert len(model.requests) == 2, "the interrupted turn was not continued"
    texts = [p.get("text") for m in sim.instance_of(ref).messages for p in m["parts"]]
    assert texts == ["first", "second", "the second answer"]


@on_0_32
@each_host
def test_a_retry_skips_once_the_user_message_is_answered(sim: Simulation, host: type) -> None:
    """The interrupted turn had streamed nothing (a retry of the user message); the transcript
    now ends with another turn's answer: it is skipped with `no_unanswered_user_message`."""
    ref, model = answered_while_recovering(sim, host, stall(3_600_000))
    stored = incident(sim, ref)
    assert (stored["recoveryKind"], stored["status"]) == ("retry", "skipped")
    assert stored["reason"] == "no_unanswered_user_message"
    assert len(model.requests) == 2, "the interrupted turn was not retried"


@on_0_32
@each_host
def test_an_unchanged_conversation_is_recovered(sim: Simulation, host: type) -> None:
    """With nobody asking in between, the same recovery runs its turn and completes."""
    ref, model = answered_while_recovering(
        sim, host, text("the first answer", 4, delay_ms=1_000), second=None
    )
    assert sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX) == {}, "completed: deleted"
    assert sim.trace.select("chat:recovery:skipped") == []
    assert len(model.requests) == 2
