"""Agents that say which SDK release their isolate runs, for the tests of the release choice
and of the upgrade (a deploy that brings another release)."""

from __future__ import annotations

from agents_core import Agent

__all__ = ["ReleaseChild", "ReleaseReporter"]


class ReleaseChild(Agent):
    """A sub-agent: its release is its root's isolate's."""

    async def release(self) -> str:
        return self.host.release


class ReleaseReporter(Agent):
    """Says its own release, and its child's."""

    async def release(self) -> str:
        return self.host.release

    async def child_release(self) -> str:
        child = await self.sub_agent(ReleaseChild, "c")
        return await child.release()
