"""What 0.32.0's chat turns do with their UI stream beyond streaming it (spec sdk-0.32 §8.2,
divergence T16): a platform-transient read error of the model stream goes to chat recovery and
its continuation waits a backoff; the stall watchdog counts the time a tool call runs as
silence; and every response frame of a turn that continues an answer says
`continuation: true`. 0.21.0 does none of these."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core.chat import tool
from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from agents_core.chat.stream_watchdog import (
    is_recoverable_stream_read_error,
    transient_backoff_seconds,
)
from sim import AgentEvicted, AgentRef, Simulation
from sim.chat_client_view import chat_client_view
from sim.model import (
    ModelError,
    ScriptedModel,
    after_tool,
    call,
    continuing,
    fail,
    text,
    tool_calls,
    when,
)
from tests.chat.chat_agents import HOSTS, user
from tests.releases import on_release

LOST = "Network connection lost."
STALL_MS = 60_000


def responses(client: Any, request_id: str | None = None) -> list[dict[str, Any]]:
    return [
        f
        for f in client.frames
        if f.get("type") == "cf_agent_use_chat_response"
        and (request_id is None or f.get("id") == request_id)
    ]


def stream_status(sim: Simulation, ref: AgentRef, request_id: str) -> str:
    (row,) = sim.query(
        ref, "SELECT status FROM cf_ai_chat_stream_metadata WHERE request_id = ?", request_id
    )
    return str(row["status"])


def answer_text(sim: Simulation, ref: AgentRef) -> str:
    (answer,) = [m for m in sim.instance_of(ref).messages if m["role"] == "assistant"]
    return "".join(p.get("text", "") for p in answer["parts"])


# -- transient read errors ------------------------------------------------------------------------
def test_a_recoverable_read_error_is_a_platform_transient_but_no_reset() -> None:
    """A dropped connection or a `retryable` error is recoverable; a deploy or storage reset
    (the isolate is going away) and an ordinary provider error are not."""
    flagged = RuntimeError("upstream hiccup")
    flagged.retryable = True  # type: ignore[attr-defined]
    assert is_recoverable_stream_read_error(ModelError(LOST))
    assert is_recoverable_stream_read_error(flagged)
    wrapped = RuntimeError("read failed")
    wrapped.__cause__ = ModelError(LOST)
    assert is_recoverable_stream_read_error(wrapped)
    assert not is_recoverable_stream_read_error(ModelError("rate limited by the provider"))
    assert not is_recoverable_stream_read_error(
        RuntimeError("Durable Object reset because its code was updated.")
    )
    assert not is_recoverable_stream_read_error(
        RuntimeError("Internal error in Durable Object storage caused object to be reset.")
    )


def test_the_transient_backoff_doubles_up_to_30_seconds() -> None:
    """1, 2, 4, 8, 16, then 30 s for every later retry (the SDK's chatRecoveryBackoffSeconds)."""
    assert [transient_backoff_seconds(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


@on_release("0.32.0")
@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_transient_read_error_is_recovered_after_a_backoff(sim: Simulation, host: type) -> None:
    """The model stream drops its connection mid-answer: the request ends `done` with the
    outcome `recovering` (no error frame, its stream `recovering`), and the continuation runs
    1 s later; it drops again, and the next runs 2 s later and completes the answer."""
    model = sim.register_model(
        ScriptedModel(
            default=[
                fail(LOST, after_chunks=3, partial="half an "),
                fail(LOST, after_chunks=0),
                text("answer"),
            ]
        )
    )
    ref = sim.agent(host, "c")
    client = sim.connect(ref)
    call_ = sim.start_call(ref, "save_messages", [user("go")])
    first = sim.wait(call_)
    assert first["status"] == "aborted"
    assert [f for f in responses(client, first["requestId"]) if f.get("error")] == []
    (done,) = [f for f in responses(client, first["requestId"]) if f.get("done")]
    assert done.get("outcome") == "recovering"
    assert stream_status(sim, ref, first["requestId"]) == "recovering"
    sim.run_for(30_000)
    scheduled = sim.trace.select("chat:recovery:scheduled")
    turns = sim.trace.select("task:accepted", definition="__cf_internal_chat_turn")
    assert len(scheduled) == 2 and len(turns) == 3
    waits = [t.t_ms - s.t_ms for s, t in zip(scheduled, turns[1:], strict=True)]
    assert 1_000 <= waits[0] < 2_000 and 2_000 <= waits[1] < 3_000
    assert len(model.requests) == 3
    assert answer_text(sim, ref) == "half an answer"
    assert sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX) == {}
    (end,) = chat_client_view(client.frames)["ended"]
    assert end.outcome == "completed"


@on_release("0.32.0")
@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_declined_transient_read_error_fails_with_its_own_message(
    sim: Simulation, host: type
) -> None:
    """`on_chat_recovery` answering `skip`: the incident is `skipped` and the request fails
    with the read error's message (an error frame, then `done`)."""

    class Declining(host):
        async def on_chat_recovery(self, ctx: Any) -> str | None:
            return "skip"

    model = sim.register_model(ScriptedModel(default=fail(LOST, after_chunks=3)))
    ref = sim.agent(Declining, "c")
    client = sim.connect(ref)
    result = sim.wait(sim.start_call(ref, "save_messages", [user("go")]))
    assert result == {"requestId": result["requestId"], "status": "error", "error": LOST}
    errors = [f for f in responses(client) if f.get("error")]
    assert [f["body"] for f in errors] == [LOST]
    (stored,) = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    assert stored["status"] == "skipped"
    sim.run_for(30_000)
    assert len(model.requests) == 1


@on_release("0.32.0")
@pytest.mark.parametrize(
    "message",
    ["the provider rejected the request", "Durable Object reset because its code was updated."],
)
def test_other_read_errors_still_fail_the_turn(sim: Simulation, message: str) -> None:
    """An ordinary provider error, and a deploy reset (whose restart's own recovery owns the
    turn), fail the request as before: no incident, no second model call."""
    (host,) = HOSTS[:1]
    model = sim.register_model(ScriptedModel(default=fail(message, after_chunks=3)))
    ref = sim.agent(host, "c")
    result = sim.wait(sim.start_call(ref, "save_messages", [user("go")]))
    assert (result["status"], result["error"]) == ("error", message)
    sim.run_for(30_000)
    assert sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX) == {}
    assert len(model.requests) == 1


@on_release("0.21.0")
def test_0_21_0_fails_the_turn_on_a_transient_read_error(sim: Simulation) -> None:
    """0.21.0 routes no read error into recovery: a dropped connection fails the request."""
    (host,) = HOSTS[:1]
    model = sim.register_model(ScriptedModel(default=fail(LOST, after_chunks=3)))
    ref = sim.agent(host, "c")
    client = sim.connect(ref)
    result = sim.wait(sim.start_call(ref, "save_messages", [user("go")]))
    assert (result["status"], result["error"]) == ("error", LOST)
    assert [f["body"] for f in responses(client) if f.get("error")] == [LOST]
    sim.run_for(30_000)
    assert len(model.requests) == 1


# -- the watchdog times tool calls ----------------------------------------------------------------
def with_slow_tool(host: type, *durations_ms: int) -> Any:
    """`host` with the stall watchdog at 60 s and a tool `slow` whose n-th run takes
    `durations_ms[n]` (the last for every later run)."""

    class Slow(host):
        chat_stream_stall_timeout_ms = STALL_MS
        runs = 0

        def get_tools(self) -> dict[str, Any]:
            return {"slow": tool("Take a while.", self._slow)}

        async def _slow(self, input: Any, tool_call_id: str, signal: Any) -> str:
            index = min(type(self).runs, len(durations_ms) - 1)
            type(self).runs += 1
            await self.host.clock.sleep(durations_ms[index])
            return f"slept {durations_ms[index]}"

    return Slow


def tool_model() -> ScriptedModel:
    return ScriptedModel(
        rules=[when(after_tool("slow"), reply=text("done"))],
        default=tool_calls(call("slow", {}, id="s1")),
    )


@on_release("0.32.0")
@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_tool_call_running_past_the_window_stalls_the_turn(sim: Simulation, host: type) -> None:
    """A tool call that runs 90 s under a 60 s window stalls the turn 60 s after its input
    chunk: the request ends `recovering` with the call unanswered (its late output is never
    sent), and the continuation runs the call again and completes the turn."""
    agent = with_slow_tool(host, 90_000, 10)
    sim.register_model(tool_model())
    ref = sim.agent(agent, "c")
    client = sim.connect(ref)
    first = sim.wait(sim.start_call(ref, "save_messages", [user("go")]))
    assert first["status"] == "aborted"
    frames = responses(client, first["requestId"])
    assert frames[-1].get("outcome") == "recovering"
    assert not any('"tool-output-available"' in f["body"] for f in frames)
    (stalled_at,) = [r.t_ms for r in sim.trace.select("chat:recovery:scheduled")]
    sim.run_for(STALL_MS)
    assert agent.runs == 2
    (answer,) = [m for m in sim.instance_of(ref).messages if m["role"] == "assistant"]
    (call_part,) = [p for p in answer["parts"] if p.get("toolCallId") == "s1"]
    assert (call_part["state"], call_part["output"]) == ("output-available", "slept 10")
    assert answer["parts"][-1].get("text") == "done"
    frames = responses(client, first["requestId"])
    assert not any('"tool-output-available"' in f["body"] for f in frames)
    assert stalled_at >= STALL_MS


@on_release("0.32.0")
@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_each_tool_output_restarts_the_window(sim: Simulation, host: type) -> None:
    """Two calls in parallel, of 40 s and 80 s: the first output restarts the window, so the
    second lands 40 s into a fresh one and the turn completes without a stall."""
    agent = with_slow_tool(host, 40_000, 80_000)
    sim.register_model(
        ScriptedModel(
            rules=[when(after_tool("slow"), reply=text("done"))],
            default=tool_calls(call("slow", {}, id="a"), call("slow", {}, id="b")),
        )
    )
    ref = sim.agent(agent, "c")
    result = sim.wait(sim.start_call(ref, "save_messages", [user("go")]))
    assert result["status"] == "completed"
    assert sim.trace.select("chat:recovery:scheduled") == []


# -- the continuation flag ------------------------------------------------------------------------
def evicted_mid_answer(sim: Simulation, host: type) -> tuple[Any, str]:
    """A turn evicted after part of its answer, then continued by recovery on a client that
    connected after the restart; (that client, the continuation's request id)."""
    sim.register_model(
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
    client = sim.connect(ref)
    sim.run_for(10_000)
    ids = {f["id"] for f in responses(client)}
    (request_id,) = ids
    return client, request_id


@on_release("0.32.0")
@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_every_frame_of_a_continuation_turn_says_continuation(sim: Simulation, host: type) -> None:
    """The turn recovery continues sends its chunk frames and its `done` frame with
    `continuation: true`."""
    client, request_id = evicted_mid_answer(sim, host)
    frames = responses(client, request_id)
    assert frames and frames[-1]["done"] is True
    assert [f.get("continuation") for f in frames] == [True] * len(frames)


@on_release("0.32.0")
@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_the_error_frames_of_a_continuation_say_continuation_and_a_new_turn_s_do_not(
    sim: Simulation, host: type
) -> None:
    """The frames of a first request cut short by a dropped connection carry no flag; its
    continuation fails with an ordinary provider error, and that error frame and its `done`
    both carry `continuation: true`."""
    sim.register_model(
        ScriptedModel(
            rules=[when(continuing(), reply=fail("the provider rejected the request"))],
            default=fail(LOST, after_chunks=3),
        )
    )
    ref = sim.agent(host, "c")
    client = sim.connect(ref)
    first = sim.wait(sim.start_call(ref, "save_messages", [user("go")]))
    sim.run_for(30_000)
    assert all("continuation" not in f for f in responses(client, first["requestId"]))
    later = [f for f in responses(client) if f["id"] != first["requestId"]]
    ends = [(f.get("error"), f["done"], f.get("continuation")) for f in later]
    assert ends[-2:] == [(True, False, True), (None, True, True)]


@on_release("0.21.0")
@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_0_21_0_sends_no_continuation_flag(sim: Simulation, host: type) -> None:
    """0.21.0's continuation turn sends its frames without the flag."""
    client, request_id = evicted_mid_answer(sim, host)
    frames = responses(client, request_id)
    assert frames and all("continuation" not in f for f in frames)


@on_release("0.32.0")
@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_read_errors_continuation_is_skipped_once_the_conversation_moved_on(
    sim: Simulation, host: type
) -> None:
    """The stream drops mid-answer and its continuation waits its 1 s backoff; meanwhile the
    user asks again and is answered. The continuation's target (the partial answer) is no
    longer the transcript's last answer: it is skipped with `conversation_changed`, and the
    model is not asked again."""
    model = sim.register_model(
        ScriptedModel(default=[fail(LOST, after_chunks=3, partial="half an "), text("next")])
    )
    ref = sim.agent(host, "c")
    first = sim.wait(sim.start_call(ref, "save_messages", [user("go")]))
    assert first["status"] == "aborted"
    sim.wait(sim.start_call(ref, "save_messages", [user("something else")]))
    sim.run_for(30_000)
    (skipped,) = sim.trace.select("chat:recovery:skipped")
    assert skipped.get("reason") == "conversation_changed"
    assert len(model.requests) == 2
