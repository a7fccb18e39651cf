"""Conformance, the child's broadcast snoop (spec agent-tools §3.3 step 2, catalogue group L):
which frames advance a run's live sequence and reach its tails, and which pass untouched."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents_core.chat.turns import CHAT_RESPONSE_TYPE
from sim import Simulation
from sim.model import ScriptedModel, stall, text
from tests.chat.chat_agents import HOSTS, read_tail, row
from tests.releases import on_both_releases

pytestmark = [pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__), on_both_releases]


def stalled_run(sim: Simulation, host: type, tail: bool = True) -> tuple[Any, str, str | None]:
    """A run whose model says nothing for a minute; (ref, its request id, a tail id)."""
    sim.register_model(ScriptedModel(default=stall(60_000, then=text("late"))))
    ref = sim.agent(host, "c")
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    tail_id = sim.call(ref, "open_agent_tool_tail", "run-1") if tail else None
    sim.run_for(100)
    return ref, row(sim, ref, "run-1")["request_id"], tail_id


def test_T143_an_error_frame_records_the_last_error_without_a_sequence(
    sim: Simulation, host: type
) -> None:
    """An `error: true` frame of the run's request stores its body as the run's last error; the
    live sequence does not move and no tail receives it; clients still get the frame."""
    ref, request_id, tail = stalled_run(sim, host)
    client = sim.connect(ref)
    before = sim.call(ref, "bookkeeping")
    frame = {
        "type": CHAT_RESPONSE_TYPE,
        "id": request_id,
        "body": "stream exploded",
        "done": False,
        "error": True,
    }
    sim.call(ref, "snoop", frame)
    after = sim.call(ref, "bookkeeping")
    assert after["lastErrors"] == {"run-1": "stream exploded"}
    assert after["liveSeq"] == before["liveSeq"] == {"run-1": 0}
    assert client.frames[-1] == frame
    sim.call(ref, "cancel_agent_tool_run", "run-1")
    assert read_tail(sim, ref, tail) == []


def test_T144_frames_that_are_not_the_runs_chunks_pass_untouched(
    sim: Simulation, host: type
) -> None:
    """A foreign type, a non-string id, an unmapped request, a binary or unparseable frame and
    an empty body forward nothing, advance nothing and raise nothing; a proper chunk frame (as
    JSON text) after them is the only record the tail gets."""
    ref, request_id, tail = stalled_run(sim, host)
    client = sim.connect(ref)
    ignored = [
        {"type": "cf_agent_state", "id": request_id, "body": "{}"},
        {"type": CHAT_RESPONSE_TYPE, "id": 7, "body": "{}"},
        {"type": CHAT_RESPONSE_TYPE, "id": "nobody", "body": "{}"},
        b"\x00\x01binary",
        "{not json",
        {"type": CHAT_RESPONSE_TYPE, "id": request_id, "body": "", "done": True},
        {"type": CHAT_RESPONSE_TYPE, "id": request_id, "done": False},
    ]
    for frame in ignored:
        sim.call(ref, "snoop", frame)
    state = sim.call(ref, "bookkeeping")
    assert state["liveSeq"] == {"run-1": 0} and state["lastErrors"] == {}
    assert state["requestCache"].get("nobody", "absent") is None
    assert sim.trace.select("console:error", agent=ref.path) == []
    assert client.frames[-len(ignored) :] == ignored
    body = json.dumps({"type": "data-probe", "data": 1})
    proper = json.dumps({"type": CHAT_RESPONSE_TYPE, "id": request_id, "body": body})
    sim.call(ref, "snoop", proper)
    sim.call(ref, "cancel_agent_tool_run", "run-1")
    assert read_tail(sim, ref, tail) == [{"sequence": 0, "body": body, "chunkSequence": None}]


def test_T144_with_no_tail_and_no_live_sequence_the_snoop_does_nothing(
    sim: Simulation, host: type
) -> None:
    """Without any tail or live sequence the snoop short-circuits: not even a lookup is cached,
    and no live sequence starts."""
    ref, request_id, _ = stalled_run(sim, host, tail=False)
    before = sim.call(ref, "bookkeeping")
    for frame in (
        {"type": CHAT_RESPONSE_TYPE, "id": "nobody", "body": "{}"},
        {"type": CHAT_RESPONSE_TYPE, "id": request_id, "body": "{}"},
        {"type": CHAT_RESPONSE_TYPE, "id": request_id, "body": "x", "error": True},
    ):
        sim.call(ref, "snoop", frame)
    after = sim.call(ref, "bookkeeping")
    assert after == before
    assert "nobody" not in after["requestCache"] and after["liveSeq"] == {}
    assert after["lastErrors"] == {}
