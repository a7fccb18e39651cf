"""Outbound streams: scripted chunks with latency, errors mid-stream, and death with the
incarnation."""

from __future__ import annotations

import pytest

from agents_core import Agent
from sim import Simulation


def three_chunks(request, latency):
    return [(latency.int_between(10, 50), f"{request['prompt']}-{i}") for i in range(3)]


def failing(request, latency):
    return [(10, "first"), (10, RuntimeError("provider overloaded"))]


class Reader(Agent):
    async def read(self, service: str) -> list[object]:
        self.sql("CREATE TABLE IF NOT EXISTS chunks (body TEXT)")
        got = []
        async for chunk in self.host.outbound.open_stream(service, {"prompt": "p"}):
            self.sql("INSERT INTO chunks VALUES (?)", chunk)
            got.append(chunk)
        return got


def test_a_stream_delivers_its_chunks_with_seeded_latency(sim: Simulation) -> None:
    """Chunks arrive in order, each after its delay."""
    sim.register_service("model", three_chunks)
    ref = sim.agent(Reader, "r")
    assert sim.call(ref, "read", "model") == ["p-0", "p-1", "p-2"]
    assert 30 <= sim.now_ms <= 150


def test_a_stream_error_reaches_the_reader(sim: Simulation) -> None:
    """A scripted error is raised at its place in the stream."""
    sim.register_service("model", failing)
    ref = sim.agent(Reader, "r")
    with pytest.raises(RuntimeError, match="provider overloaded"):
        sim.call(ref, "read", "model")
    assert sim.query(ref, "SELECT body FROM chunks") == [{"body": "first"}]


def test_a_stream_dies_with_its_incarnation(sim: Simulation) -> None:
    """After an eviction no further chunk is delivered to anyone."""
    sim.register_service("model", lambda request, latency: [(1_000, i) for i in range(10)])
    ref = sim.agent(Reader, "r")
    sim.start_call(ref, "read", "model")
    sim.run_for(2_500)
    sim.evict(ref)
    sim.run_for(60_000)
    assert sim.query(ref, "SELECT body FROM chunks") == [{"body": "0"}, {"body": "1"}]


def test_an_unknown_service_is_named(sim: Simulation) -> None:
    """Opening a stream to a service nobody registered lists the ones that exist."""
    sim.register_service("model", three_chunks)
    ref = sim.agent(Reader, "r")
    with pytest.raises(
        LookupError, match=r"no upstream service 'search'; registered services: \['model'\]"
    ):
        sim.call(ref, "read", "search")
