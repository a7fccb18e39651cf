"""Conformance on SDK 0.32.0: agent tools' `event_delivery` and positionless chunks (spec
sdk-0.32 §7, catalogue J-77 … J-80)."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest

from agents_core import Agent
from agents_core.errors import InvalidArgument
from sim import AgentRef, Simulation
from tests.agent_tools.scripted_child import ScriptedChild

SCRIPT = [
    ["sleep", 50],
    ["text", "Hello "],
    ["progress", {"fraction": 0.5, "message": "half"}],
    ["milestone", "drafted", {"pages": 2}],
    ["text", "world"],
    ["finish", "completed", "all done"],
]
"""Its first step waits until the parent's tail is open (progress is live only)."""


class TellingChild(ScriptedChild):
    """Records the `event_delivery` its parent told it."""

    async def start_agent_tool_run(
        self, input: Any, run_id: str, event_delivery: str | None = None
    ) -> dict[str, Any]:
        self.host.trace.emit("test:child_started", runId=run_id, eventDelivery=event_delivery)
        return await super().start_agent_tool_run(input, run_id, event_delivery)


class Parent(Agent):
    async def go(self, steps: list[Any], run_id: str, **options: Any) -> dict[str, Any]:
        result = await self.run_agent_tool(
            TellingChild, input={"steps": steps}, run_id=run_id, **options
        )
        return result.to_dict()


def frames(sim: Simulation, client: Any, run_id: str) -> list[dict[str, Any]]:
    out = []
    for raw in client.frames:
        message = json.loads(raw) if isinstance(raw, str) else raw
        if message.get("type") == "agent-tool-event" and message["event"]["runId"] == run_id:
            out.append(message)
    return out


def bodies(messages: list[dict[str, Any]]) -> list[tuple[int, str, str | None]]:
    """(sequence, kind, part type of a chunk) per frame."""
    out = []
    for m in messages:
        event = m["event"]
        part = json.loads(event["body"]).get("type") if event["kind"] == "chunk" else None
        out.append((m["sequence"], event["kind"], part))
    return out


def tool_row(sim: Simulation, ref: AgentRef, run_id: str) -> dict[str, Any]:
    (row,) = sim.query(ref, "SELECT * FROM cf_agent_tool_runs WHERE run_id = ?", run_id)
    return row


def test_J077_terminal_delivery_is_refused_for_a_detached_run(sim: Simulation) -> None:
    """`event_delivery="terminal"` with `detached` throws, before the run id is looked up (so
    for an existing run id too), and no row or child is made."""
    parent = sim.agent(Parent, "p")
    message = 'runAgentTool: eventDelivery "terminal" is not supported for detached runs.'
    with pytest.raises(InvalidArgument) as raised:
        sim.call(parent, "go", SCRIPT, "d1", event_delivery="terminal", detached=True)
    assert str(raised.value) == message
    assert sim.query(parent, "SELECT run_id FROM cf_agent_tool_runs") == []
    sim.call(parent, "go", SCRIPT, "done")
    with pytest.raises(InvalidArgument, match="not supported for detached runs"):
        sim.call(parent, "go", SCRIPT, "done", event_delivery="terminal", detached=True)


def test_J078_an_unknown_event_delivery_is_refused(sim: Simulation) -> None:
    """`event_delivery="partial"` throws with the value as JSON, even for an existing run id;
    `"full"` is accepted and stores nothing."""
    parent = sim.agent(Parent, "p")
    expected = 'runAgentTool: eventDelivery must be "full" or "terminal", got "partial".'
    with pytest.raises(InvalidArgument) as raised:
        sim.call(parent, "go", SCRIPT, "r1", event_delivery="partial")
    assert str(raised.value) == expected
    assert sim.call(parent, "go", SCRIPT, "r1", event_delivery="full")["status"] == "completed"
    assert tool_row(sim, parent, "r1")["event_delivery"] is None
    with pytest.raises(InvalidArgument, match='got "partial"'):
        sim.call(parent, "go", SCRIPT, "r1", event_delivery="partial")


def test_J079_a_terminal_run_shows_only_lifecycle_chunks_and_its_ends(sim: Simulation) -> None:
    """A terminal-delivery run stores `event_delivery = 'terminal'`, tells its child, and its
    parent broadcasts `started`, the progress and milestone chunks and `finished`, but no text
    chunk; a default run stores NULL and shows its text. The child keeps every chunk."""
    parent = sim.agent(Parent, "p")
    client = sim.connect(parent)
    sim.run_for(10)
    assert sim.call(parent, "go", SCRIPT, "t", event_delivery="terminal")["status"] == "completed"
    assert sim.call(parent, "go", SCRIPT, "f")["status"] == "completed"
    sim.run_for(10)
    assert tool_row(sim, parent, "t")["event_delivery"] == "terminal"
    assert tool_row(sim, parent, "f")["event_delivery"] is None
    told = {r.get("runId"): r.get("eventDelivery") for r in sim.trace.select("test:child_started")}
    assert told == {"t": "terminal", "f": None}
    terminal = [(kind, part) for _, kind, part in bodies(frames(sim, client, "t"))]
    assert terminal == [
        ("started", None),
        ("chunk", "data-agent-progress"),
        ("chunk", "data-agent-milestone"),
        ("finished", None),
    ]
    full = [(kind, part) for _, kind, part in bodies(frames(sim, client, "f"))]
    assert full.count(("chunk", "text-delta")) + full.count(("chunk", "text-start")) > 0
    child = sim.facet(parent, TellingChild, "t")
    stored = sim.call(child, "get_agent_tool_chunks", "t", -1)
    texts = [c["body"] for c in stored if "Hello" in c["body"] or "world" in c["body"]]
    assert len(texts) == 2


def test_J080_progress_takes_no_position_between_two_text_chunks(sim: Simulation) -> None:
    """Forwarded text, progress, text: their sequences are 1, 2, 2 (the progress frame carries
    the next sequence without consuming it); a milestone likewise, so the terminal frame has
    the milestone's sequence."""
    parent = sim.agent(Parent, "p")
    client = sim.connect(parent)
    sim.run_for(10)
    steps = [
        ["sleep", 50],
        ["text", "one"],
        ["progress", {"fraction": 0.5}],
        ["text", "two"],
        ["milestone", "m", None],
        ["finish", "completed", "ok"],
    ]
    sim.call(parent, "go", steps, "s")
    sim.run_for(10)
    assert bodies(frames(sim, client, "s")) == [
        (0, "started", None),
        (1, "chunk", "text-delta"),
        (2, "chunk", "data-agent-progress"),
        (2, "chunk", "text-delta"),
        (3, "chunk", "data-agent-milestone"),
        (3, "finished", None),
    ]


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_forwarded_chunk_sequences_on_each_release(sdk: str) -> None:
    """0.21.0 gives every forwarded chunk the next sequence (text 1, progress 2, text 3);
    0.32.0 lets the progress frame carry the next one unconsumed (1, 2, 2)."""
    with Simulation(seed=zlib.crc32(f"positions-{sdk}".encode()), sdk=sdk) as sim:
        parent = sim.agent(Parent, "p")
        client = sim.connect(parent)
        sim.run_for(10)
        steps = [["sleep", 50], ["text", "a"], ["progress", {"fraction": 0.5}], ["text", "b"]]
        sim.call(parent, "go", [*steps, ["finish", "completed", "ok"]], "s")
        sim.run_for(10)
        chunks = [seq for seq, kind, _ in bodies(frames(sim, client, "s")) if kind == "chunk"]
        assert chunks == ([1, 2, 3] if sdk == "0.21.0" else [1, 2, 2])
