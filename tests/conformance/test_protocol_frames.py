"""Conformance: the SDK's protocol frames. A new connection gets `cf_agent_identity`, then
`cf_agent_state` (when the agent has state), then `cf_agent_mcp_servers`, before the agent-tool
replay and `on_connect`; `cf_agent_mcp_servers` is also broadcast at every startup and when a
server is added or removed. Shapes as the SDK sends them (`agents@0.21.0`, index.ts
`onConnect` / `getMcpServers`)."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core import Agent
from agents_core.agent import kebab_case
from agents_core.agent_tools import AgentToolEvents
from sim import Simulation

EMPTY_MCP = {"prompts": [], "resources": [], "servers": {}, "tools": []}


class StatefulAgent(Agent):
    initial_state = {"count": 0}

    async def on_connect(self, connection: Any) -> None:
        connection.send({"type": "welcome"})

    async def add_server(self, name: str, url: str) -> str:
        return self.add_mcp_server(name, url)

    async def drop_server(self, server_id: str) -> None:
        self.remove_mcp_server(server_id)

    async def bump(self) -> None:
        self.set_state({"count": self.state["count"] + 1})


class StatelessAgent(Agent):
    pass


class Anonymous(StatefulAgent):
    options = {"send_identity_on_connect": False}


class BinaryOnly(StatefulAgent):
    def should_send_protocol_messages(self, connection: Any) -> bool:
        return False


class BroadcastWatcher(StatefulAgent):
    """Records every broadcast in the trace: a broadcast made at startup reaches no connection
    on this platform (eviction closes them all), so only this shows that it happened."""

    def broadcast(self, frame: Any, exclude: tuple[str, ...] = ()) -> None:
        self.host.trace.emit("test:broadcast", frame_type=frame.get("type"), frame=frame)
        super().broadcast(frame, exclude)


def test_connect_sends_identity_state_and_mcp_servers_first(sim: Simulation) -> None:
    """The three protocol frames come first, in the SDK's order and shapes; `agent` is the
    class name in kebab case."""
    ref = sim.agent(StatefulAgent, "alpha")
    client = sim.connect(ref)
    sim.run_for(10)
    assert client.frames == [
        {"type": "cf_agent_identity", "name": "alpha", "agent": "stateful-agent"},
        {"type": "cf_agent_state", "state": {"count": 0}},
        {"type": "cf_agent_mcp_servers", "mcp": EMPTY_MCP},
        {"type": "welcome"},
    ]
    assert client.identity == {"name": "alpha", "agent": "stateful-agent"}
    assert client.mcp_servers == EMPTY_MCP


def test_an_agent_without_state_sends_identity_and_mcp_servers_only(sim: Simulation) -> None:
    ref = sim.agent(StatelessAgent, "beta")
    client = sim.connect(ref)
    sim.run_for(10)
    assert [f["type"] for f in client.frames] == ["cf_agent_identity", "cf_agent_mcp_servers"]


def test_registered_servers_are_listed_and_changes_are_broadcast(sim: Simulation) -> None:
    """Adding or removing a server broadcasts the new list; a later connect lists it too."""
    ref = sim.agent(StatefulAgent, "alpha")
    watching = sim.connect(ref)
    server_id = sim.call(ref, "add_server", "search", "https://mcp.example/search")
    listed = {
        server_id: {
            "auth_url": None,
            "capabilities": None,
            "error": None,
            "instructions": None,
            "name": "search",
            "server_url": "https://mcp.example/search",
            "state": "ready",
        }
    }
    assert watching.mcp_servers == {**EMPTY_MCP, "servers": listed}
    late = sim.connect(ref)
    sim.run_for(10)
    assert late.mcp_servers == {**EMPTY_MCP, "servers": listed}
    sim.call(ref, "drop_server", server_id)
    assert watching.mcp_servers == EMPTY_MCP and late.mcp_servers == EMPTY_MCP


def test_every_startup_broadcasts_the_restored_servers(sim: Simulation) -> None:
    """Each startup restores the registered servers and broadcasts `cf_agent_mcp_servers`."""
    ref = sim.agent(BroadcastWatcher, "w")
    sim.run_for(0)
    server_id = sim.call(ref, "add_server", "search", "https://mcp.example/search")
    sim.evict(ref)
    sim.agent(BroadcastWatcher, "w")
    sim.run_for(0)
    mcp = [
        r
        for r in sim.trace.select("test:broadcast")
        if r.get("frame_type") == "cf_agent_mcp_servers"
    ]
    # startup 1 (no server yet), the add, startup 2 (the restored server)
    assert [sorted(r.get("frame")["mcp"]["servers"]) for r in mcp] == [[], [server_id], [server_id]]
    starts = sim.trace.select("incarnation:start", agent=ref.path)
    assert len(starts) == 2
    assert mcp[-1].seq > starts[-1].seq


def test_send_identity_on_connect_false_leaves_out_only_the_identity(sim: Simulation) -> None:
    ref = sim.agent(Anonymous, "secret")
    client = sim.connect(ref)
    sim.run_for(10)
    assert [f["type"] for f in client.frames] == [
        "cf_agent_state",
        "cf_agent_mcp_servers",
        "welcome",
    ]
    assert client.identity is None


def test_a_connection_without_protocol_messages_gets_none_of_them(sim: Simulation) -> None:
    """`should_send_protocol_messages` False: no identity, state or MCP frame on connect, and
    no state broadcast later; the agent's own frames still arrive."""
    ref = sim.agent(BinaryOnly, "device")
    client = sim.connect(ref)
    sim.call(ref, "bump")
    sim.run_for(10)
    assert client.frames == [{"type": "welcome"}]


def test_state_broadcasts_still_reach_protocol_connections(sim: Simulation) -> None:
    ref = sim.agent(StatefulAgent, "alpha")
    client = sim.connect(ref)
    sim.call(ref, "bump")
    assert client.frames[-1] == {"type": "cf_agent_state", "state": {"count": 1}}


def test_the_agent_tool_reducer_ignores_protocol_frames() -> None:
    """The client's agent-tool reducer keeps only `agent-tool-event` frames: the protocol frames
    change nothing and are not held for a run."""
    events = AgentToolEvents(lambda: 0)
    for frame in (
        {"type": "cf_agent_identity", "name": "alpha", "agent": "stateful-agent"},
        {"type": "cf_agent_mcp_servers", "mcp": EMPTY_MCP},
    ):
        assert events.receive(frame) is False
    assert events.runs_by_id == {}


@pytest.mark.parametrize(
    ("name", "kebab"),
    [
        ("StoryParent", "story-parent"),
        ("MyAgent", "my-agent"),
        ("agent", "agent"),
        ("HTTP", "http"),
        ("MY_AGENT", "my-agent"),
        ("Chat_Agent", "chat--agent"),
        ("AgentV2", "agent-v2"),
    ],
)
def test_class_names_in_identity_follow_the_sdks_kebab_case(name: str, kebab: str) -> None:
    assert kebab_case(name) == kebab
