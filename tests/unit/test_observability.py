"""Observability: the SDK's events on named channels, with the SDK's envelope, also in the trace."""

from __future__ import annotations

import pytest

from agents_core import Agent, observability
from sim import Simulation


class Worker(Agent):
    async def work(self) -> str:
        async def body(ctx):
            await self.host.clock.sleep(10)
            return "ok"

        await self.schedule(60, "later")
        return await self.run_fiber("job", body)

    async def later(self, payload, row) -> None:
        return None


@pytest.fixture
def channels():
    seen: dict[str, list[observability.ObservabilityEvent]] = {
        k: [] for k in observability.CHANNELS
    }
    stops = [observability.subscribe(k, seen[k].append) for k in observability.CHANNELS]
    yield seen
    for stop in stops:
        stop()


def test_events_reach_their_channel_with_the_sdk_envelope(sim: Simulation, channels) -> None:
    """fiber:* goes to `fiber`, schedule:* to `schedule`, each with type, agent, name, payload
    and a sim-time timestamp; the same event is a trace record."""
    ref = sim.agent(Worker, "w")
    sim.run_for(1_000)
    sim.call(ref, "work")
    assert [e.type for e in channels["fiber"]] == ["fiber:run:started", "fiber:run:completed"]
    completed = channels["fiber"][-1]
    assert (completed.agent, completed.name, completed.timestamp) == ("Worker", "w", 1_010)
    assert completed.payload["fiberName"] == "job" and completed.payload["elapsedMs"] == 10
    assert [e.type for e in channels["schedule"]] == ["schedule:create"]
    assert channels["lifecycle"] == [] and channels["agentTool"] == []
    (record,) = sim.trace.select("fiber:run:completed")
    assert dict(record.fields) == dict(completed.payload)


def test_channel_for_routes_by_prefix() -> None:
    """The SDK's routing: fiber, schedule (and queue), agent_tool, everything else lifecycle."""
    assert observability.channel_for("fiber:recovery:skipped") == "fiber"
    assert observability.channel_for("queue:retry") == "schedule"
    assert observability.channel_for("agent_tool:recovery:row") == "agentTool"
    assert observability.channel_for("alarm:memory_limit_reset") == "lifecycle"


def test_subscribing_by_channel_name_and_unsubscribing(sim: Simulation) -> None:
    """A raw channel name works too; after unsubscribe nothing more arrives."""
    got: list[str] = []
    stop = observability.subscribe("agents:fiber", lambda e: got.append(e.type))
    ref = sim.agent(Worker, "w")
    sim.call(ref, "work")
    stop()
    sim.call(ref, "work")
    assert got == ["fiber:run:started", "fiber:run:completed"]


def test_a_failing_subscriber_never_breaks_the_runtime(sim: Simulation, channels) -> None:
    """A subscriber that raises is skipped; the run and the other subscribers go on."""

    def broken(event):
        raise RuntimeError("observer bug")

    stop = observability.subscribe("fiber", broken)
    try:
        ref = sim.agent(Worker, "w")
        assert sim.call(ref, "work") == "ok"
    finally:
        stop()
    assert len(channels["fiber"]) == 2


def test_unknown_channel_lists_the_known_ones() -> None:
    """A typo in a channel name is an error that names the choices."""
    with pytest.raises(ValueError, match=r"unknown observability channel 'fibers'; known: \["):
        observability.subscribe("fibers", print)
