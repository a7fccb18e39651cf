"""Errors of the runtime, with the SDK's messages (so a trace reads the same) and the value."""

from __future__ import annotations

__all__ = ["AgentReset", "AgentsError", "InvalidArgument", "NotInFiber"]


class AgentsError(Exception):
    """Base of the runtime's own errors."""


class InvalidArgument(AgentsError, ValueError):
    """A runtime API was called with a value it does not accept."""


class NotInFiber(AgentsError, RuntimeError):
    """`stash()` (or another fiber-only call) was made outside a fiber."""


class AgentReset(AgentsError):
    """The agent a call went to was reset (evicted, redeployed, crashed, deleted) before the call
    finished. Hosts raise a subclass of this from stub calls; `reason` says why (`deploy`,
    `idle`, `crash`, `deleted`, ...)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path} was reset ({reason}) before the call finished")
        self.path = path
        self.reason = reason
