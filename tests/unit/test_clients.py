"""Simulated WebSocket clients: frames, messages, closes, eviction and reconnect."""

from __future__ import annotations

import pytest

from agents_core import Agent
from sim import Simulation


class Echo(Agent):
    initial_state = {"greeting": "hi"}

    async def on_connect(self, connection) -> None:
        connection.send({"type": "welcome", "id": connection.id})

    async def on_message(self, connection, message) -> None:
        await self.host.clock.sleep(5)
        connection.send({"type": "echo", "body": message})
        if message == "bye":
            connection.close(4000, "asked to leave")

    async def on_close(self, connection, code, reason) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS closes (code INTEGER, reason TEXT)")
        self.sql("INSERT INTO closes VALUES (?, ?)", code, reason)

    async def announce(self, text: str) -> int:
        self.broadcast({"type": "announce", "text": text})
        return len(self.get_connections())


def test_a_client_gets_state_then_its_welcome_then_echoes(sim: Simulation) -> None:
    """On connect the protocol frames come first (identity, state, MCP servers), then
    on_connect's welcome; messages are answered in order."""
    ref = sim.agent(Echo, "e")
    client = sim.connect(ref)
    client.send("one")
    client.send("two")
    sim.run_for(100)
    kinds = [frame["type"] for frame in client.frames]
    assert kinds == [
        "cf_agent_identity",
        "cf_agent_state",
        "cf_agent_mcp_servers",
        "welcome",
        "echo",
        "echo",
    ]
    assert client.identity == {"name": "e", "agent": "echo"}
    assert [f["body"] for f in client.frames if f["type"] == "echo"] == ["one", "two"]


def test_broadcast_reaches_every_open_connection(sim: Simulation) -> None:
    """broadcast sends to each connected client; a disconnected one gets nothing more."""
    ref = sim.agent(Echo, "e")
    first, second = sim.connect(ref), sim.connect(ref)
    second.disconnect()
    assert sim.call(ref, "announce", "hello") == 1
    assert {"type": "announce", "text": "hello"} in first.frames
    assert {"type": "announce", "text": "hello"} not in second.frames
    assert sim.query(ref, "SELECT code, reason FROM closes") == [
        {"code": 1000, "reason": "client closed"}
    ]


def test_the_agent_can_close_a_connection(sim: Simulation) -> None:
    """connection.close ends it on the client side with the agent's code and reason."""
    ref = sim.agent(Echo, "e")
    client = sim.connect(ref)
    client.send("bye")
    sim.run_for(100)
    assert not client.connected
    assert client.timeline[-1].kind == "close"
    assert client.timeline[-1].data == {"code": 4000, "reason": "asked to leave"}


def test_eviction_drops_connections_and_reconnect_starts_a_new_incarnation(sim: Simulation) -> None:
    """A deploy closes clients with 1006; reconnecting wakes the agent and gets fresh frames."""
    ref = sim.agent(Echo, "e")
    client = sim.connect(ref)
    sim.deploy()
    assert not client.connected
    assert client.timeline[-1].data == {"code": 1006, "reason": "evicted: deploy"}
    sim.reconnect(client)
    assert client.connected
    assert sim.incarnation_of(ref) == 2
    # each connection: identity, state, MCP servers, welcome
    assert [e.kind for e in client.timeline] == ["open", *["frame"] * 4, "close", "open"] + [
        "frame"
    ] * 4


def test_sending_on_a_closed_client_is_an_error(sim: Simulation) -> None:
    """A client that is not connected cannot send, and says so."""
    ref = sim.agent(Echo, "e")
    client = sim.connect(ref, name="alice")
    client.disconnect()
    with pytest.raises(RuntimeError, match="client 'alice' of Echo/e is not connected"):
        client.send("x")


def test_frames_are_in_the_trace(sim: Simulation) -> None:
    """Every frame an agent sends is one trace record with its connection id."""
    ref = sim.agent(Echo, "e")
    client = sim.connect(ref)
    frames = sim.trace.select("connection:frame", agent=ref.path)
    assert [r.get("frame") for r in frames] == client.frames
    assert {r.get("connection") for r in frames} == {client.connection.id}


def test_connections_closed_by_an_eviction_name_the_dying_incarnation(sim: Simulation) -> None:
    """The close record of a connection ended by an eviction carries that incarnation's number."""
    ref = sim.agent(Echo, "e")
    sim.connect(ref)
    sim.deploy()
    (close,) = sim.trace.select("connection:close", agent=ref.path)
    assert close.inc == 1 and close.get("by") == "platform"
