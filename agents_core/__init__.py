"""agents_core: the durable agent runtime, ported from the Agents SDK, host-agnostic.

Everything it needs from the world comes through the `Host` port (`agents_core.host`); it never
imports the simulator, an event loop, a clock or a random source.
"""

from agents_core.agent import Agent, Request, Response

__all__ = ["Agent", "Request", "Response"]
