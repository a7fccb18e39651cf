"""A scripted agent-tool child for the parent-side tests: the shipped `ScriptedToolChild` (a plain
Agent that hand-implements the child adapter, as the SDK's own tests use one), driven by a script
in its input.

Input: `{"steps": [...], ...}` where each step is one of
  ["text", "some words"]            a stored UI text chunk
  ["progress", {fraction, message}] an ephemeral progress frame (not stored)
  ["milestone", "name", data]       a stored milestone part (seed decision S2) + milestone row
  ["sleep", ms]                     virtual time passes
  ["finish", "completed", summary, output?]  terminal (also "error", message)
  ["hang"]                          never finishes
Unlike the shipped child, it keeps no place in the script: `_drive(run_id, steps)` plays the given
steps from the first, a sleep is a plain one, and a run does not resume itself after an eviction.
`NoTailChild` lacks the tail method, to reach `not-tailable`.
"""

from __future__ import annotations

from typing import Any

from scenarios.workloads.children import ScriptedToolChild

__all__ = ["NoTailChild", "ScriptedChild"]


class ScriptedChild(ScriptedToolChild):
    """The scripted child, without self-resume: the parent's recovery is what the tests probe."""

    resume = False

    async def _drive(self, run_id: str, steps: list[Any]) -> None:
        await self._perform(run_id, steps)

    def _advance(self, run_id: str, index: int) -> None:
        return None

    async def _sleep(self, run_id: str, ms: int) -> None:
        await self.host.clock.sleep(ms)

    async def _is_terminal(self, run_id: str) -> bool:
        return self._is_settled(run_id)


class NoTailChild(ScriptedChild):
    """An in-process adapter without a live tail (reaches `not-tailable`)."""

    open_agent_tool_tail = None  # type: ignore[assignment]
