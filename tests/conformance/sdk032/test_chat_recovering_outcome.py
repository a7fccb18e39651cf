"""Conformance on SDK 0.32.0: the `recovering` turn outcome (spec sdk-0.32 §8.2). A turn whose
model stream stalls past `chat_stream_stall_timeout_ms` is routed back into chat recovery: the
request stops with the outcome `recovering`, and the same turn goes on under a new request; the
client keeps such a turn open rather than ended."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from sim import AgentRef, Simulation
from sim.chat_client_view import ChatTurnEnd, chat_client_view
from sim.model import Reply, ScriptedModel, stall, text
from tests.chat.chat_agents import HOSTS, AiChatChild, user

STALL_MS = 60_000
SILENCE_MS = 3_600_000
TERMINAL = "The assistant was interrupted and could not recover. Please try again."


@dataclass(frozen=True)
class HalfThenSilence(Reply):
    """Starts an answer, streams half of it, then sends nothing for an hour."""

    def events(self, ctx: Any) -> list[Any]:
        return [
            (100, {"type": "start"}),
            (0, {"type": "text-start", "id": "t"}),
            (10, {"type": "text-delta", "id": "t", "delta": "half an "}),
            (SILENCE_MS, {"type": "text-delta", "id": "t", "delta": "answer"}),
            (0, {"type": "text-end", "id": "t"}),
            (0, {"type": "finish"}),
        ]


def watched(host: type, **options: Any) -> type:
    """`host` with the stall watchdog at 60 s (and `chat_recovery` options, if any)."""
    fields: dict[str, Any] = {"chat_stream_stall_timeout_ms": STALL_MS}
    if options:
        fields["chat_recovery"] = options
    return type(f"Watched{host.__name__}", (host,), fields)


def responses(client: Any) -> list[dict[str, Any]]:
    return [f for f in client.frames if f.get("type") == "cf_agent_use_chat_response"]


def stream_status(sim: Simulation, ref: AgentRef, request_id: str) -> str:
    (row,) = sim.query(
        ref, "SELECT status FROM cf_ai_chat_stream_metadata WHERE request_id = ?", request_id
    )
    return str(row["status"])


def incident(sim: Simulation, ref: AgentRef) -> dict[str, Any]:
    (only,) = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    return only


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_stalled_stream_stops_its_request_as_recovering_and_the_turn_goes_on(
    sim: Simulation, host: type
) -> None:
    """The stream goes silent after half an answer: 60 s later the request ends with `done`
    and `outcome: "recovering"` (its stream `recovering`, its partial answer persisted, its
    status `aborted`), the recovering indicator goes on, and recovery continues the same
    answer under a new request, which ends `completed`; the incident is then deleted."""
    agent = watched(host)
    model = sim.register_model(
        ScriptedModel(default=[HalfThenSilence(), text("answer", delay_ms=20_000)])
    )
    ref = sim.agent(agent, "c")
    client = sim.connect(ref)
    call = sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(STALL_MS + 1_000)
    first = sim.wait(call)
    assert first["status"] == "aborted"
    stopped = [f for f in responses(client) if f.get("done")]
    assert stopped == [
        {
            "type": "cf_agent_use_chat_response",
            "id": first["requestId"],
            "body": "",
            "done": True,
            "outcome": "recovering",
        }
    ]
    assert stream_status(sim, ref, first["requestId"]) == "recovering"
    recovering = [f for f in client.frames if f.get("type") == "cf_agent_chat_recovering"]
    assert recovering[0] == {
        "type": "cf_agent_chat_recovering",
        "recovering": True,
        "id": first["requestId"],
    }
    sim.run_for(60_000)
    assert len(model.requests) == 2 and model.requests[1].get("continuation") is True
    (answer,) = [m for m in sim.instance_of(ref).messages if m["role"] == "assistant"]
    assert "".join(p.get("text", "") for p in answer["parts"]) == "half an answer"
    ends = [f for f in responses(client) if f.get("done")]
    assert len(ends) == 2 and ends[1]["id"] != first["requestId"] and "outcome" not in ends[1]
    assert stream_status(sim, ref, ends[1]["id"]) == "completed"
    assert sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX) == {}
    (completed,) = sim.trace.select("chat:recovery:completed")
    assert completed.get("originRequestId") == first["requestId"]
    assert sim.instance_of(ref).host.kv.get("cf:chat:recovering") is None
    assert [r.get("reason") for r in sim.trace.select("chat:recovery:exhausted")] == []
    assert len(sim.trace.select("chat:recovery:detected")) == 1


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_the_client_keeps_a_recovering_turn_open(sim: Simulation, host: type) -> None:
    """What the client shows: after the stalled request's `recovering` frame the turn is open
    (being recovered, the indicator on, nothing ended); once the continuation ends, exactly one
    request ended, `completed`, and the stalled one never did."""
    agent = watched(host)
    sim.register_model(ScriptedModel(default=[HalfThenSilence(), text("answer", delay_ms=20_000)]))
    ref = sim.agent(agent, "c")
    client = sim.connect(ref)
    call = sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(STALL_MS + 1_000)
    stalled = sim.wait(call)["requestId"]
    view = chat_client_view(client.frames)
    assert view["recovering_request_id"] == stalled
    assert view["is_recovering"] is True and view["busy"] is True
    assert view["ended"] == []
    sim.run_for(60_000)
    view = chat_client_view(client.frames)
    (end,) = view["ended"]
    assert end.outcome == "completed" and end.request_id != stalled
    assert view["recovering_request_id"] is None and view["busy"] is False


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_stall_with_nothing_streamed_retries_the_turn(sim: Simulation, host: type) -> None:
    """A stream silent from the start stops as `recovering` too, and the turn is run again
    from the same transcript (a retry, no continuation)."""
    agent = watched(host)
    model = sim.register_model(
        ScriptedModel(default=[stall(SILENCE_MS, then=text("late")), text("the answer")])
    )
    ref = sim.agent(agent, "c")
    client = sim.connect(ref)
    sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(STALL_MS + 30_000)
    assert [f.get("outcome") for f in responses(client) if f.get("done")] == ["recovering", None]
    (attempt,) = sim.trace.select("chat:recovery:attempt")
    assert attempt.get("recoveryKind") == "retry"
    assert len(model.requests) == 2 and "continuation" not in model.requests[1]
    assert sim.instance_of(ref).messages[-1]["parts"][0]["text"] == "the answer"


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_continuation_that_stalls_again_past_the_budget_is_given_up(
    sim: Simulation, host: type
) -> None:
    """`max_attempts = 1`: the first stall is routed (one transient retry), the continuation
    stalls too and the budget is spent: `max_attempts_exceeded`; the terminal message is the
    second request's last frame (no `done` of its own), its stream ends `error`, and the client
    shows that request ended in an error while the first never ended."""
    agent = watched(host, max_attempts=1)
    model = sim.register_model(ScriptedModel(default=HalfThenSilence()))
    ref = sim.agent(agent, "c")
    client = sim.connect(ref)
    call = sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(3 * STALL_MS)
    stalled = sim.wait(call)["requestId"]
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    assert exhausted.get("reason") == "max_attempts_exceeded"
    second = exhausted.get("requestId")
    assert second != stalled and len(model.requests) == 2
    terminal = [f for f in responses(client) if f.get("id") == second and f.get("done")]
    assert terminal == [
        {
            "type": "cf_agent_use_chat_response",
            "id": second,
            "body": TERMINAL,
            "done": True,
            "error": True,
        }
    ]
    assert stream_status(sim, ref, second) == "error"
    # The recovery callback whose turn that was then settles the incident `failed`, as the
    # SDK's `_chatRecoveryContinue` does for a turn that did not complete; the reason stays.
    stored = incident(sim, ref)
    assert (stored["status"], stored["reason"]) == ("failed", "max_attempts_exceeded")
    assert sim.instance_of(ref).host.kv.get("cf:chat:recovering") is None
    view = chat_client_view(client.frames)
    assert view["ended"] == [ChatTurnEnd(second, "error", error=TERMINAL)]
    assert view["busy"] is False
    sim.run_for(120_000)
    assert len(model.requests) == 2, "a given-up turn is never run again"


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_declined_stall_is_an_ordinary_error(sim: Simulation, host: type) -> None:
    """`on_chat_recovery` answering `skip`: no recovery, the stall fails the request (an error
    frame naming the stall, then `done` without an outcome), the incident is `skipped`."""

    class Declining(watched(host)):  # type: ignore[misc]
        async def on_chat_recovery(self, ctx: Any) -> str | None:
            return "skip"

    model = sim.register_model(ScriptedModel(default=HalfThenSilence()))
    ref = sim.agent(Declining, "c")
    client = sim.connect(ref)
    call = sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(STALL_MS + 30_000)
    result = sim.wait(call)
    assert result["status"] == "error" and "stalled" in result["error"]
    frames = [f for f in responses(client) if f.get("error") or f.get("done")]
    assert [(f.get("error"), f.get("done"), f.get("outcome")) for f in frames] == [
        (True, False, None),
        (None, True, None),
    ]
    assert stream_status(sim, ref, result["requestId"]) == "error"
    assert incident(sim, ref)["status"] == "skipped"
    assert len(model.requests) == 1
    (end,) = chat_client_view(client.frames)["ended"]
    assert end.outcome == "error" and "stalled" in str(end.error)


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_an_on_chat_recovery_that_raises_for_a_stall_fails_the_recovery(
    sim: Simulation, host: type
) -> None:
    """`on_chat_recovery` raising for a stalled turn: the stall fails the request, and the
    incident is `failed` with the error as its reason, reported by `chat:recovery:failed`."""

    class Raising(watched(host)):  # type: ignore[misc]
        async def on_chat_recovery(self, ctx: Any) -> str | None:
            raise RuntimeError("policy service down")

    sim.register_model(ScriptedModel(default=HalfThenSilence()))
    ref = sim.agent(Raising, "c")
    call = sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(STALL_MS + 30_000)
    result = sim.wait(call)
    assert result["status"] == "error" and "stalled" in result["error"]
    stored = incident(sim, ref)
    assert (stored["status"], stored["reason"]) == ("failed", "policy service down")
    (failed,) = sim.trace.select("chat:recovery:failed")
    assert failed.get("reason") == "policy service down"
    assert failed.get("originRequestId") == result["requestId"]
    assert sim.trace.select("chat:recovery:scheduled") == []


def test_without_the_watchdog_a_silent_stream_is_waited_for(sim: Simulation) -> None:
    """`chat_stream_stall_timeout_ms` is 0 unless set: an hour of silence is waited out."""
    sim.register_model(ScriptedModel(default=HalfThenSilence()))
    ref = sim.agent(AiChatChild, "c")
    call = sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(SILENCE_MS + 10_000)
    assert sim.wait(call)["status"] == "completed"
    assert not sim.trace.select("chat:recovery:scheduled")


def test_0_21_0_models_no_watchdog() -> None:
    """0.21.0 keeps no stall watchdog: the same host waits the silence out and never sends an
    outcome."""
    with Simulation(seed=5, sdk="0.21.0") as sim:
        sim.register_model(ScriptedModel(default=HalfThenSilence()))
        ref = sim.agent(watched(AiChatChild), "c")
        client = sim.connect(ref)
        call = sim.start_call(ref, "save_messages", [user("go")])
        sim.run_for(SILENCE_MS + 10_000)
        assert sim.wait(call)["status"] == "completed"
        assert not [f for f in responses(client) if "outcome" in f]
