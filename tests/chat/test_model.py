"""The scripted model provider: replies, rules, sequences, stalls, failures and seeded latency."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core import Agent
from sim import Simulation
from sim.model import (
    ModelError,
    ScriptedModel,
    after_tool,
    asked,
    call,
    continuing,
    fail,
    offers,
    stall,
    text,
    tool_calls,
    when,
)
from sim.prng import Seeds


def request(*texts: str, tools: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    messages = [{"role": "user", "parts": [{"type": "text", "text": t}]} for t in texts]
    return {"messages": messages, "tools": list(tools), **extra}


def stream(model: ScriptedModel, req: dict[str, Any], seed: int = 0) -> list[tuple[int, Any]]:
    return model(req, Seeds(seed).stream("latency"))


def chunks(events: list[tuple[int, Any]]) -> list[Any]:
    return [chunk for _, chunk in events]


class Reader(Agent):
    """Reads a model stream the way a chat host does, noting when each chunk arrived."""

    async def read(self, req: dict[str, Any]) -> list[Any]:
        got = []
        try:
            async for chunk in self.host.outbound.open_stream("model", req):
                got.append([self.host.clock.now_ms(), chunk])
        except ModelError as exc:
            got.append([self.host.clock.now_ms(), f"raised: {exc}"])
        return got


def test_text_streams_start_text_parts_and_finish() -> None:
    """`text(..., chunks=3)` is start, text-start, three deltas with one id, text-end, finish."""
    got = chunks(stream(ScriptedModel(default=text("abcdefg", chunks=3)), request("hi")))
    assert [c["type"] for c in got] == [
        "start",
        "text-start",
        "text-delta",
        "text-delta",
        "text-delta",
        "text-end",
        "finish",
    ]
    assert "".join(c["delta"] for c in got if c["type"] == "text-delta") == "abcdefg"
    assert len({c["id"] for c in got if "id" in c}) == 1


def test_an_empty_text_streams_only_start_and_finish() -> None:
    """A model that says nothing still opens and closes its message."""
    got = chunks(stream(ScriptedModel(default=text("")), request("hi")))
    assert got == [{"type": "start"}, {"type": "finish"}]


def test_tool_calls_carry_id_name_and_input() -> None:
    """Each call is one tool-input-available chunk with toolCallId, toolName and input."""
    model = ScriptedModel(
        default=tool_calls(call("researcher", {"topic": "x"}), call("researcher", {"topic": "y"}))
    )
    got = chunks(stream(model, request("go")))
    calls = [c for c in got if c["type"] == "tool-input-available"]
    assert [(c["toolName"], c["input"]) for c in calls] == [
        ("researcher", {"topic": "x"}),
        ("researcher", {"topic": "y"}),
    ]
    assert len({c["toolCallId"] for c in calls}) == 2
    assert got[0] == {"type": "start"} and got[-1] == {"type": "finish"}


def test_tool_call_ids_follow_the_request_not_a_counter() -> None:
    """The same request gets the same ids (a retried turn re-issues the same calls); another
    request gets others; an explicit id wins."""
    model = ScriptedModel(default=tool_calls(call("t"), call("t", id="fixed")))
    first = chunks(stream(model, request("go")))
    again = chunks(stream(model, request("go")))
    other = chunks(stream(model, request("something else")))

    def ids(got: list[Any]) -> list[str]:
        return [c["toolCallId"] for c in got if c["type"] == "tool-input-available"]

    assert ids(first) == ids(again)
    assert ids(first)[0] != ids(other)[0]
    assert ids(first)[1] == "fixed"


def test_the_first_matching_rule_answers_else_the_default() -> None:
    """Rules are tried in order; predicates see the request."""
    model = ScriptedModel(
        rules=[
            when(asked("weather"), reply=text("sunny")),
            when(offers("search"), reply=tool_calls(call("search"))),
        ],
        default=text("default"),
    )

    def answer(req: dict[str, Any]) -> str:
        got = chunks(stream(model, req))
        deltas = [c["delta"] for c in got if c["type"] == "text-delta"]
        return "".join(deltas) or got[1]["type"]

    assert answer(request("the weather?", tools=("search",))) == "sunny"
    assert answer(request("find it", tools=("search",))) == "tool-input-available"
    assert answer(request("find it")) == "default"
    assert len(model.requests) == 3


def test_a_list_of_replies_answers_matches_in_order_then_repeats_the_last() -> None:
    """First call -> A, second -> B, every later one -> B."""
    model = ScriptedModel(default=[text("A"), text("B")])
    got = ["".join(c.get("delta", "") for c in chunks(stream(model, request("x")))) for _ in "123"]
    assert got == ["A", "B", "B"]


def test_after_tool_and_continuing_read_the_host_request() -> None:
    """`after_tool` sees a settled tool part at the end; `continuing` a continuation request."""
    tool_part = {"type": "tool-work", "toolCallId": "c1", "state": "output-available"}
    req = request("go")
    req["messages"].append({"role": "assistant", "parts": [tool_part]})
    assert after_tool("work")(req) and after_tool()(req) and not after_tool("other")(req)
    assert not after_tool()(request("go"))
    assert continuing()(request("go", continuation=True)) and not continuing()(request("go"))


def test_stall_delays_the_reply_and_alone_times_out(sim: Simulation) -> None:
    """`stall(ms, then=...)` holds the first chunk back by `ms`; a bare stall raises after it."""
    sim.register_model(
        ScriptedModel(
            rules=[when(asked("late"), reply=stall(5_000, then=text("x", delay_ms=10)))],
            default=stall(3_000),
        )
    )
    ref = sim.agent(Reader, "r")
    start = sim.now_ms
    got = sim.call(ref, "read", request("late"))
    assert got[0] == [start + 5_010, {"type": "start"}]
    start = sim.now_ms
    assert sim.call(ref, "read", request("never")) == [
        [start + 3_000, "raised: model stream stalled: no chunk for 3000 ms"]
    ]


def test_fail_streams_some_chunks_then_raises_or_sends_an_error_chunk() -> None:
    """`fail(after_chunks=3)` gives start, text-start, one delta, then the failure."""
    raised = stream(ScriptedModel(default=fail("overloaded", after_chunks=3)), request("x"))
    assert [c["type"] for c in chunks(raised)[:3]] == ["start", "text-start", "text-delta"]
    assert isinstance(raised[3][1], ModelError) and str(raised[3][1]) == "overloaded"
    in_band = chunks(stream(ScriptedModel(default=fail("bad", in_band=True)), request("x")))
    assert in_band == [{"type": "error", "errorText": "bad"}]


def test_latency_is_seeded() -> None:
    """The same seed gives the same delays; another seed others."""
    model = ScriptedModel(default=text("abcdefghij", chunks=10))
    delays = [[d for d, _ in stream(model, request("x"), seed=s)] for s in (1, 1, 2)]
    assert delays[0] == delays[1] != delays[2]
    assert all(0 <= d <= 150 for d in delays[0])


def test_a_reader_sees_chunks_at_their_delays(sim: Simulation) -> None:
    """Through the platform, each chunk arrives after its delay on the agent's clock."""
    sim.register_model(ScriptedModel(default=text("abc", chunks=3, delay_ms=100)))
    ref = sim.agent(Reader, "r")
    start = sim.now_ms
    times = [t - start for t, _ in sim.call(ref, "read", request("x"))]
    assert times == [100, 100, 200, 300, 400, 400, 400]


def test_misuse_is_named() -> None:
    """Bad arguments say what was wrong and show the value."""
    with pytest.raises(ValueError, match=r"text\(chunks=\) must be an integer >= 1, got 0"):
        text("x", chunks=0)
    with pytest.raises(TypeError, match=r"when\(reply=\) takes a reply"):
        when(lambda r: True, reply="hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="register_model takes a ScriptedModel"):
        Simulation(seed=1).register_model(object())  # type: ignore[arg-type]
