"""Conformance: the SDK's `connect` and `disconnect` observability events (lifecycle channel), as
SDK 0.21.0 emits them (index.ts, the wrapped `onConnect` / `onClose`): `connect {connectionId}`
once the protocol frames are sent, before the agent-tool replay and the user's `on_connect`;
`disconnect {connectionId, code, reason}` when a close is delivered, before the user's
`on_close`. A connection that dies with its incarnation delivers no close, so no `disconnect`."""

from __future__ import annotations

from typing import Any

from agents_core import Agent, observability
from sim import Simulation


class Greeter(Agent):
    initial_state = {"count": 0}

    async def on_connect(self, connection: Any) -> None:
        self.host.trace.emit("test:on_connect", connection=connection.id)
        connection.send({"type": "welcome"})

    async def on_close(self, connection: Any, code: int, reason: str) -> None:
        self.host.trace.emit("test:on_close", connection=connection.id)


def events(sim: Simulation, *types: str) -> list[tuple[str, dict[str, Any]]]:
    return [(r.event, dict(r.fields)) for r in sim.trace if r.event in types]


def test_connect_is_emitted_after_the_protocol_frames_and_before_on_connect(
    sim: Simulation,
) -> None:
    ref = sim.agent(Greeter, "g")
    client = sim.connect(ref)
    sim.run_for(10)
    (opened,) = sim.trace.select("connection:open")
    connection_id = opened.get("connection")
    seen = events(sim, "connection:frame", "connect", "test:on_connect")
    assert [(kind, fields.get("frame", {}).get("type")) for kind, fields in seen] == [
        ("connection:frame", "cf_agent_identity"),
        ("connection:frame", "cf_agent_state"),
        ("connection:frame", "cf_agent_mcp_servers"),
        ("connect", None),
        ("test:on_connect", None),
        ("connection:frame", "welcome"),
    ]
    assert seen[3][1] == {"connectionId": connection_id}
    assert client.connected


def test_disconnect_carries_the_code_and_reason_before_on_close(sim: Simulation) -> None:
    ref = sim.agent(Greeter, "g")
    client = sim.connect(ref)
    sim.run_for(10)
    connection_id = sim.trace.select("connection:open")[0].get("connection")
    client.disconnect(4000, "going away")
    sim.run_for(10)
    assert events(sim, "disconnect", "test:on_close") == [
        ("disconnect", {"connectionId": connection_id, "code": 4000, "reason": "going away"}),
        ("test:on_close", {"connection": connection_id}),
    ]


def test_the_events_are_published_on_the_lifecycle_channel(sim: Simulation) -> None:
    seen: list[observability.ObservabilityEvent] = []
    stop = observability.subscribe("lifecycle", seen.append)
    try:
        ref = sim.agent(Greeter, "g")
        client = sim.connect(ref)
        sim.run_for(10)
        client.disconnect()
        sim.run_for(10)
    finally:
        stop()
    assert [(e.type, e.agent, e.name) for e in seen] == [
        ("connect", "Greeter", "g"),
        ("disconnect", "Greeter", "g"),
    ]
    assert seen[1].payload["code"] == 1000


def test_a_connection_closed_by_eviction_emits_no_disconnect(sim: Simulation) -> None:
    ref = sim.agent(Greeter, "g")
    sim.connect(ref)
    sim.run_for(10)
    sim.evict(ref)
    sim.run_for(10)
    assert [r.get("code") for r in sim.trace.select("connection:close")] == [1006]
    assert events(sim, "connect") and not events(sim, "disconnect", "test:on_close")
