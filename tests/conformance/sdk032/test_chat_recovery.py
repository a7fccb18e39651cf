"""Conformance on SDK 0.32.0: chat recovery always on, its options and the interrupted-attempts
bound (spec sdk-0.32 §8.1, catalogue J-81 … J-83)."""

from __future__ import annotations

import math
import zlib
from typing import Any

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from agents_core.chat.recovery_config import resolve_chat_recovery_config
from agents_core.chat.segment_progress import stream_segments
from sim import AgentRef, Simulation
from sim.model import ScriptedModel, fail, stall, text
from tests.chat.chat_agents import HOSTS, AiChatChild, busy_after_the_wake, user

EVICT_EVERY_MS = 60_000


def incident(sim: Simulation, ref: AgentRef) -> dict[str, Any]:
    (only,) = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    return only


def interrupt(sim: Simulation, host: type, ref: AgentRef, times: int) -> None:
    """Evict the agent every minute and wake it again, `times` times."""
    for _ in range(times):
        sim.run_for(EVICT_EVERY_MS)
        sim.evict(ref)
        sim.agent(host, ref.path.split("/")[-1])
        sim.run_for(1_000)


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_J081_chat_recovery_false_still_recovers_with_the_defaults(
    sim: Simulation, host: type
) -> None:
    """`chat_recovery = False`: an interrupted turn is recovered all the same, and the host's
    options are the defaults."""

    class Off(host):  # type: ignore[valid-type, misc]
        chat_recovery = False

    Off.__name__ = f"Off{host.__name__}"
    model = sim.register_model(ScriptedModel(default=text("the answer", chunks=4, delay_ms=5_000)))
    ref = sim.agent(Off, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(2_000)
    sim.evict(ref)
    sim.agent(Off, "c")
    sim.run_for(60_000)
    assert [r.get("mode") for r in sim.trace.select("chat:recovery:attempt")] in (
        ["continue"],
        ["retry"],
    )
    assert sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX) == {}, "completed: deleted"
    assert len(sim.trace.select("chat:recovery:completed")) == 1
    assert len(model.requests) == 2
    config = sim.instance_of(ref)._chat_recovery.config
    assert config == resolve_chat_recovery_config(None)
    assert sim.instance_of(ref).messages[-1]["role"] == "assistant"


def test_J082_the_defaults_and_the_max_oom_retries_alias(sim: Simulation) -> None:
    """No options: `max_interrupted_attempts = 5`, `max_recovery_work = 10 000`, 10 attempts, a
    5-minute window, the new terminal message. `{max_oom_retries: 2}` gives 3;
    `max_interrupted_attempts` wins over it, `inf` is kept and 0 becomes 1."""
    ref = sim.agent(AiChatChild, "c")
    sim.run_for(10)
    config = sim.instance_of(ref)._chat_recovery.config
    assert (config.max_interrupted_attempts, config.max_recovery_work) == (5, 10_000)
    assert (config.max_attempts, config.no_progress_timeout_ms) == (10, 300_000)
    assert config.terminal_message == (
        "The assistant was interrupted and could not recover. Please try again."
    )
    assert resolve_chat_recovery_config({"max_oom_retries": 2}).max_interrupted_attempts == 3
    both = {"max_oom_retries": 2, "max_interrupted_attempts": 7}
    assert resolve_chat_recovery_config(both).max_interrupted_attempts == 7
    unbounded = {"max_interrupted_attempts": math.inf}
    assert resolve_chat_recovery_config(unbounded).max_interrupted_attempts == math.inf
    assert (
        resolve_chat_recovery_config({"max_interrupted_attempts": 0}).max_interrupted_attempts == 1
    )
    assert resolve_chat_recovery_config({"max_recovery_work": -1}).max_recovery_work == 10_000


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_J083_five_interrupted_attempts_exhaust_the_turn(sim: Simulation, host: type) -> None:
    """The model never answers and every attempt's isolate dies (the original turn, then four
    recoveries): the next isolate gives the turn up with `interrupted_attempts_exceeded`, ahead
    of the no-progress window and the attempt cap, and nothing runs again."""
    model = sim.register_model(ScriptedModel(default=stall(3_600_000)))
    ref = sim.agent(host, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    interrupt(sim, host, ref, 5)
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    assert exhausted.get("reason") == "interrupted_attempts_exceeded"
    stored = incident(sim, ref)
    assert (stored["status"], stored["reason"]) == ("exhausted", "interrupted_attempts_exceeded")
    assert stored["interruptedAttempts"] == 5
    assert len(model.requests) == 5
    assert len(sim.trace.select("chat:recovery:detected")) == 1
    interrupt(sim, host, ref, 2)
    assert len(model.requests) == 5, "a given-up turn is never run again"


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_a_turn_interrupted_five_times_on_each_release(sdk: str) -> None:
    """0.21.0 has no interrupted-attempts bound: five interruptions in five minutes leave the
    turn recovering; 0.32.0 gives it up after the fifth."""
    with Simulation(seed=zlib.crc32(f"interrupted-{sdk}".encode()), sdk=sdk) as sim:
        sim.register_model(ScriptedModel(default=stall(3_600_000)))
        ref = sim.agent(AiChatChild, "c")
        sim.start_call(ref, "save_messages", [user("go")])
        interrupt(sim, AiChatChild, ref, 5)
        reasons = [r.get("reason") for r in sim.trace.select("chat:recovery:exhausted")]
        assert reasons == ([] if sdk == "0.21.0" else ["interrupted_attempts_exceeded"])


# -- §8.1 the budget, the debounce, the TTL, the stable timeout; §8.2 what clients learn ---------


def with_options(host: type, **options: Any) -> type:
    """`host` with `chat_recovery` set to `options`."""
    return type(f"Opt{host.__name__}", (host,), {"chat_recovery": options})


def evict_and_wake(sim: Simulation, host: type, ref: AgentRef, after_ms: int) -> None:
    sim.run_for(after_ms)
    sim.evict(ref)
    sim.agent(host, ref.path.split("/")[-1])
    sim.run_for(10)  # the wake alarm drives the Task run, then the recovery job (§8.3)


def frames_of(client: Any, frame_type: str) -> list[dict[str, Any]]:
    return [f for f in client.frames if isinstance(f, dict) and f.get("type") == frame_type]


def test_stream_segments_pack_ten_chunks_and_close_on_a_tool_result() -> None:
    """0.32.0 packs at most ten chunks into a segment, and a settled tool result ends its
    segment; a group counts from its first chunk."""
    delta = '{"type":"text-delta","id":"t","delta":"x"}'
    output = '{"type":"tool-output-available","toolCallId":"c","output":1}'
    assert stream_segments([]) == 0
    assert stream_segments([delta]) == 1
    assert stream_segments([delta] * 10) == 1
    assert stream_segments([delta] * 11) == 2
    assert stream_segments([delta] * 25) == 3
    assert stream_segments([delta, output, delta]) == 2
    assert stream_segments([output] * 3) == 3


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_work_budget_gives_up_a_turn_that_streams_but_never_finishes(
    sim: Simulation, host: type
) -> None:
    """`max_recovery_work = 2`: each attempt streams some 15 segments and dies; at the second
    wake the marker is more than 2 segments above where the incident opened, so the turn is
    given up with `work_budget_exceeded` (not the interrupted attempts: 2 of 5). The clients get
    the terminal message as the turn's error frame, and it is the last terminal outcome."""
    limited = with_options(host, max_recovery_work=2)
    model = sim.register_model(
        ScriptedModel(default=text(" ".join(["w"] * 400), chunks=400, delay_ms=100))
    )
    ref = sim.agent(limited, "c")
    client = sim.connect(ref)
    sim.start_call(ref, "save_messages", [user("go")])
    evict_and_wake(sim, limited, ref, 15_000)
    assert not sim.trace.select("chat:recovery:exhausted")
    evict_and_wake(sim, limited, ref, 15_000)
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    assert exhausted.get("reason") == "work_budget_exceeded"
    stored = incident(sim, ref)
    assert (stored["status"], stored["reason"]) == ("exhausted", "work_budget_exceeded")
    assert stored["progress"] - stored["workBaseline"] > 2
    rows = sim.query(
        ref, "SELECT stream_id, body FROM cf_ai_chat_stream_chunks ORDER BY stream_id, chunk_index"
    )
    streams: dict[str, list[str]] = {}
    for row in rows:
        streams.setdefault(row["stream_id"], []).append(row["body"])
    assert len(streams) == 2 and len(rows) > 250
    assert stored["progress"] == sum(stream_segments(b) for b in streams.values()), "segments"
    assert stored["interruptedAttempts"] == 2
    requests = len(model.requests)
    sim.run_for(60_000)
    assert len(model.requests) == requests, "a given-up turn is never run again"
    message = "The assistant was interrupted and could not recover. Please try again."
    kv = sim.instance_of(ref).host.kv
    record = kv.get("cf:chat:last-terminal")
    assert record == {"requestId": exhausted.get("requestId"), "body": message}
    # The wake gave it up during startup, before any client was back: a reconnecting client
    # learns it over the resume handshake.
    client.reconnect()
    sim.run_for(1)
    client.send({"type": "cf_agent_stream_resume_request"})
    sim.run_for(1)
    client.send({"type": "cf_agent_stream_resume_ack", "id": record["requestId"]})
    sim.run_for(1)
    terminal = [f for f in client.frames if f.get("error") and f.get("done")]
    assert [f["body"] for f in terminal] == [message]


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_an_unbounded_work_budget_keeps_recovering(sim: Simulation, host: type) -> None:
    """`max_recovery_work = inf`: the same streaming turn is not given up on its work."""
    unbounded = with_options(host, max_recovery_work=math.inf)
    sim.register_model(ScriptedModel(default=text(" ".join(["w"] * 400), chunks=400, delay_ms=100)))
    ref = sim.agent(unbounded, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    evict_and_wake(sim, unbounded, ref, 15_000)
    evict_and_wake(sim, unbounded, ref, 15_000)
    assert not sim.trace.select("chat:recovery:exhausted")
    assert incident(sim, ref)["status"] == "attempting"


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_wakes_within_30_s_are_one_attempt(sim: Simulation, host: type) -> None:
    """With no progress, wakes less than 30 s after the last attempt keep its number (the
    debounce), later ones count on; past `max_attempts` (2) the turn is given up. Every wake
    reports `chat:recovery:attempt`, only the first `chat:recovery:detected`."""
    capped = with_options(host, max_attempts=2, max_interrupted_attempts=math.inf)
    sim.register_model(ScriptedModel(default=stall(3_600_000)))
    ref = sim.agent(capped, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    for after_ms in (5_000, 10_000, 10_000, 40_000, 40_000):
        evict_and_wake(sim, capped, ref, after_ms)
    attempts = [r.get("attempt") for r in sim.trace.select("chat:recovery:attempt")]
    assert attempts == [1, 1, 1, 2, 3]
    assert len(sim.trace.select("chat:recovery:detected")) == 1
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    assert exhausted.get("reason") == "max_attempts_exceeded"


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_an_incident_idle_for_an_hour_is_swept(sim: Simulation, host: type) -> None:
    """A given-up turn's incident stays; the next wake more than an hour after its last attempt
    deletes it."""
    once = with_options(host, max_interrupted_attempts=1)
    sim.register_model(ScriptedModel(default=stall(3_600_000)))
    ref = sim.agent(once, "c")
    sim.start_call(ref, "save_messages", [user("first")])
    evict_and_wake(sim, once, ref, 5_000)
    first = incident(sim, ref)
    assert first["reason"] == "interrupted_attempts_exceeded"
    sim.run_for(1_800_000)
    sim.start_call(ref, "save_messages", [user("second")])
    evict_and_wake(sim, once, ref, 5_000)
    assert len(sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX)) == 2, "not yet an hour"
    sim.run_for(3_600_000)
    sim.start_call(ref, "save_messages", [user("third")])
    evict_and_wake(sim, once, ref, 5_000)
    origins = {
        i["originRequestId"] for i in sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    }
    assert first["originRequestId"] not in origins and len(origins) == 1


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_busy_host_delays_the_recovery_then_gives_it_up(sim: Simulation, host: type) -> None:
    """The recovery callback finds a turn running: after `stable_timeout_ms` (10 s) it is tried
    again 3 s later with the attempt one higher; once `max_attempts` (3) is reached it is given
    up with `stable_timeout` and the custom terminal message."""
    ref, model, client = busy_after_the_wake(sim, host, max_attempts=3, terminal_message="gave up")
    sim.run_for(100_000)
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    assert exhausted.get("reason") == "stable_timeout"
    stored = incident(sim, ref)
    assert (stored["status"], stored["attempt"]) == ("exhausted", 3)
    assert len(model.requests) == 2, "the recovery never ran the model"
    scheduled = [
        r
        for r in sim.trace.select("task:accepted")
        if r.get("definition") == "__cf_internal_chat_recovery"
    ]
    assert len(scheduled) == 3, "the wake's, then one retry per stable timeout below the cap"
    assert [f["body"] for f in client.frames if f.get("error") and f.get("done")] == ["gave up"]


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_turn_waiting_on_the_client_is_budget_free(sim: Simulation, host: type) -> None:
    """A transcript with a tool call waiting for approval: one interrupted attempt is the whole
    budget, yet the turn is not given up; the recovery, finding the turn still waiting after
    `stable_timeout_ms`, is parked (`skipped`, `awaiting_client_interaction`) and the recovering
    flag cleared."""
    once = with_options(host, max_interrupted_attempts=1)
    sim.register_model(ScriptedModel(default=stall(3_600_000)))
    ref = sim.agent(once, "c")
    sim.run_for(10)
    waiting = {
        "id": "a-1",
        "role": "assistant",
        "parts": [{"type": "tool-work", "toolCallId": "t", "state": "approval-requested"}],
    }
    sim.instance_of(ref)._messages.persist(waiting)
    sim.start_call(ref, "save_messages", [user("go")])
    evict_and_wake(sim, once, ref, 5_000)
    assert not sim.trace.select("chat:recovery:exhausted")
    assert sim.instance_of(ref).host.kv.get("cf:chat:recovering") is not None
    sim.run_for(20_000)
    (skipped,) = sim.trace.select("chat:recovery:skipped")
    assert skipped.get("reason") == "awaiting_client_interaction"
    assert incident(sim, ref)["status"] == "skipped"
    assert sim.instance_of(ref).host.kv.get("cf:chat:recovering") is None


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_the_recovering_flag_is_set_broadcast_and_cleared(sim: Simulation, host: type) -> None:
    """Scheduling a recovery sets `cf:chat:recovering` (the origin's request id) and tells the
    clients; the recovered turn's end clears it and tells them again."""
    sim.register_model(ScriptedModel(default=text("the answer", chunks=4, delay_ms=2_000)))
    ref = sim.agent(host, "c")
    client = sim.connect(ref)
    sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(3_000)
    sim.evict(ref)
    sim.agent(host, "c")
    client.reconnect()
    sim.run_for(1)
    origin = incident(sim, ref)["originRequestId"]
    assert sim.instance_of(ref).host.kv.get("cf:chat:recovering")["requestId"] == origin
    sim.run_for(30_000)
    assert sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX) == {}, "completed: deleted"
    recovering = frames_of(client, "cf_agent_chat_recovering")
    assert [(f["recovering"], f.get("id")) for f in recovering] == [(True, origin), (False, origin)]
    assert sim.instance_of(ref).host.kv.get("cf:chat:recovering") is None


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_connecting_client_learns_a_recovery_in_progress(sim: Simulation, host: type) -> None:
    """A client that connects while no turn streams gets the recovering frame of a flag set less
    than 15 minutes ago, and nothing for an older one."""
    ref = sim.agent(host, "c")
    sim.run_for(10)
    kv = sim.instance_of(ref).host.kv
    kv.put("cf:chat:recovering", {"requestId": "r-1", "at": sim.now_ms})
    fresh = sim.connect(ref)
    assert frames_of(fresh, "cf_agent_chat_recovering") == [
        {"type": "cf_agent_chat_recovering", "recovering": True, "id": "r-1"}
    ]
    sim.run_for(900_000)
    stale = sim.connect(ref)
    assert frames_of(stale, "cf_agent_chat_recovering") == []


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_the_last_terminal_outcome_is_replayed_to_a_reconnecting_client(
    sim: Simulation, host: type
) -> None:
    """A turn that fails records `cf:chat:last-terminal`; a client that reconnects and asks to
    resume is told the turn's id, and on its acknowledgement gets the error frame (as often as
    it asks); a new chat request clears the record."""
    sim.register_model(ScriptedModel(default=fail("the provider broke")))
    ref = sim.agent(host, "c")
    result = sim.call(ref, "save_messages", [user("go")])
    assert result["status"] == "error"
    kv = sim.instance_of(ref).host.kv
    record = kv.get("cf:chat:last-terminal")
    assert record == {"requestId": result["requestId"], "body": "the provider broke"}
    for _ in range(2):
        client = sim.connect(ref)
        client.send({"type": "cf_agent_stream_resume_request"})
        sim.run_for(1)
        assert frames_of(client, "cf_agent_stream_resuming") == [
            {"type": "cf_agent_stream_resuming", "id": result["requestId"]}
        ]
        client.send({"type": "cf_agent_stream_resume_ack", "id": result["requestId"]})
        sim.run_for(1)
        (terminal,) = [f for f in client.frames if f.get("error")]
        assert terminal["body"] == "the provider broke" and terminal["done"] is True
    sim.register_model(ScriptedModel(default=text("fine")))
    client.send({"type": "cf_agent_use_chat_request", "messages": [user("again")]})
    sim.run_for(1)
    assert kv.get("cf:chat:last-terminal") is None


def test_0_21_0_keeps_no_client_status() -> None:
    """0.21.0 has neither the recovering flag nor the last terminal outcome."""
    with Simulation(seed=7, sdk="0.21.0") as sim:
        sim.register_model(ScriptedModel(default=fail("the provider broke")))
        ref = sim.agent(AiChatChild, "c")
        assert sim.call(ref, "save_messages", [user("go")])["status"] == "error"
        assert sim.instance_of(ref).host.kv.get("cf:chat:last-terminal") is None
