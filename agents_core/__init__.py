"""agents_core: the durable agent runtime, ported from the Agents SDK, host-agnostic.

Everything it needs from the world comes through the `Host` port (`agents_core.host`); it never
imports the simulator, an event loop, a clock or a random source.
"""

from agents_core.agent import Agent, Request, Response
from agents_core.errors import AgentReset, AgentsError, InvalidArgument, NotInFiber
from agents_core.fiber_ledger import FiberInspection, FiberRecoveryResult, StartFiberResult
from agents_core.fibers import FiberContext
from agents_core.recovery import FiberRecoveryContext
from agents_core.schedules import Schedule
from agents_core.signals import AbortController, AbortSignal

__all__ = [
    "AbortController",
    "AbortSignal",
    "Agent",
    "AgentReset",
    "AgentsError",
    "FiberContext",
    "FiberInspection",
    "FiberRecoveryContext",
    "FiberRecoveryResult",
    "InvalidArgument",
    "NotInFiber",
    "Request",
    "Response",
    "Schedule",
    "StartFiberResult",
]
