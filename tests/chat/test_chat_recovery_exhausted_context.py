"""What a chat recovery that gives up reports, on 0.32.0 (the dist's `runChatRecoveryExhaustion`
and `exhaustRecoveryGiveUp`): `chat:recovery:exhausted` carries the whole context `on_exhausted`
is told, and a recovery sealed by the alarm memory-limit breaker tells the partial answer read
off the stream of its recovery root request."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from agents_core.chat.recovery_incidents import ChatRecoveryExhaustedContext
from sim import AgentRef, Simulation
from sim.model import ScriptedModel, text
from tests.chat.chat_agents import HOSTS, user
from tests.chat.interrupted_turns import striking_once_in_recovery
from tests.releases import on_release

each_host = pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
on_0_32 = on_release("0.32.0")
EVENT_FIELDS = {
    "incident_id": "incidentId",
    "request_id": "requestId",
    "recovery_root_request_id": "recoveryRootRequestId",
    "attempt": "attempt",
    "max_attempts": "maxAttempts",
    "recovery_kind": "recoveryKind",
    "stream_id": "streamId",
    "created_at": "createdAt",
    "partial_text": "partialText",
    "partial_parts": "partialParts",
    "reason": "reason",
    "terminal_message": "terminalMessage",
}
"""`ChatRecoveryExhaustedContext`'s fields and the dist's names of them."""


def telling(host: type, told: list[ChatRecoveryExhaustedContext], **options: Any) -> type:
    """`host` whose `on_exhausted` keeps what it is told, with `options`."""
    options = {**options, "on_exhausted": told.append}
    return type(f"Telling{host.__name__}", (host,), {"chat_recovery": options})


def interrupted_mid_answer(sim: Simulation, host: type) -> AgentRef:
    """A turn that streamed part of `the whole answer`, its isolate killed 2.5 s in, woken."""
    sim.register_model(ScriptedModel(default=text("the whole answer", chunks=4, delay_ms=1_000)))
    ref = sim.agent(host, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(2_500)
    sim.evict(ref)
    sim.agent(host, "c")
    return ref


def stream_of(sim: Simulation, ref: AgentRef, request_id: str) -> str:
    (row,) = sim.query(
        ref, "SELECT id FROM cf_ai_chat_stream_metadata WHERE request_id = ?", request_id
    )
    return str(row["id"])


@on_0_32
@each_host
def test_the_exhausted_event_carries_the_whole_context(sim: Simulation, host: type) -> None:
    """A turn given up at the wake: the event has every field of the context `on_exhausted`
    gets, under the dist's names and with the same values (and the port's `originRequestId`)."""
    told: list[ChatRecoveryExhaustedContext] = []
    ref = interrupted_mid_answer(sim, telling(host, told, max_interrupted_attempts=1))
    sim.run_for(10)
    (ctx,) = told
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    expected = {EVENT_FIELDS[name]: value for name, value in asdict(ctx).items()}
    assert expected.keys() == set(EVENT_FIELDS.values())
    assert exhausted.fields == {**expected, "originRequestId": ctx.recovery_root_request_id}
    assert ctx.partial_text and ctx.stream_id == stream_of(sim, ref, ctx.request_id)


@on_0_32
@each_host
def test_a_sealed_recovery_tells_on_exhausted_the_partial_answer(
    sim: Simulation, host: type
) -> None:
    """The recovered turn hits a memory-limit reset and the breaker seals at once: the give-up
    reads the interrupted answer off the stream of the incident's recovery root request and
    tells it, cut short as it was, to `on_exhausted` and in the event."""
    told: list[ChatRecoveryExhaustedContext] = []
    ref = interrupted_mid_answer(sim, striking_once_in_recovery(telling(host, told), limit=1))
    sim.run_for(60_000)
    (ctx,) = told
    assert ctx.reason == "out_of_memory"
    root = ctx.recovery_root_request_id
    assert ctx.stream_id == stream_of(sim, ref, root)
    assert ctx.partial_text and "the whole answer".startswith(ctx.partial_text)
    assert ctx.partial_parts == [{"type": "text", "text": ctx.partial_text, "state": "streaming"}]
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    assert exhausted.get("partialText") == ctx.partial_text
