"""Errors the simulated platform raises to callers."""

from __future__ import annotations

from agents_core.errors import AgentReset

__all__ = ["AgentEvicted"]


class AgentEvicted(AgentReset):
    """The incarnation handling a call died before the call finished (or the sub-agent it was
    for has been deleted)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.args = (f"{path} was evicted ({reason}) before the call finished",)
