"""Errors of the runtime, with the SDK's messages (so a trace reads the same) and the value."""

from __future__ import annotations

__all__ = ["AgentsError", "InvalidArgument", "NotInFiber"]


class AgentsError(Exception):
    """Base of the runtime's own errors."""


class InvalidArgument(AgentsError, ValueError):
    """A runtime API was called with a value it does not accept."""


class NotInFiber(AgentsError, RuntimeError):
    """`stash()` (or another fiber-only call) was made outside a fiber."""
