"""Outbound streams: services outside the agents (the model provider) that stream chunks back.

A service is a function from the request to a list of `(delay_ms, chunk)` pairs; a chunk that is
an exception instance makes the stream raise it at that point (a stalled or failed provider). The
stream waits on the agent's own clock, so it dies with the incarnation: after an eviction no
further chunk is delivered and the connection is simply gone, as a real socket would be.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.host import SimHost
    from sim.prng import Stream

__all__ = ["Service", "Upstream"]

Service = Callable[[Mapping[str, Any], "Stream"], Sequence[tuple[int, Any]]]
"""A scripted service: (request, its seeded `latency` stream) -> [(delay_ms, chunk), ...]."""


class Upstream:
    """The services agents can open streams to, by name."""

    def __init__(self, latency: Stream) -> None:
        self._services: dict[str, Service] = {}
        self._latency = latency

    def register(self, name: str, service: Service) -> None:
        self._services[name] = service

    def open_stream(
        self, host: SimHost, service: str, request: Mapping[str, Any]
    ) -> AsyncIterator[Any]:
        try:
            script = self._services[service]
        except KeyError:
            raise LookupError(
                f"no upstream service {service!r}; registered services: {sorted(self._services)}"
            ) from None
        return _stream(host, service, list(script(request, self._latency)))


async def _stream(host: SimHost, service: str, chunks: list[tuple[int, Any]]) -> AsyncIterator[Any]:
    for index, (delay_ms, chunk) in enumerate(chunks):
        await host.clock.sleep(delay_ms)
        if isinstance(chunk, BaseException):
            host.trace.emit("upstream:error", service=service, index=index, error=chunk)
            raise chunk
        yield chunk
