"""0.32.0's replay numbering: how stored chunks are sent again, and where a re-attach numbers
from (spec sdk-0.32 §7.2; read from the 0.32.0 dist, `_broadcastAgentToolChunks`,
`_broadcastAgentToolMilestones`, `_reattachAgentToolRunToTerminal`).

Stored chunks sent again (a replay on connect, marked `replay`, to that connection; or
broadcast live when the parent gives a run up after a re-attach or settles it from its child's
inspection) are numbered from 1, every one at its own sequence: positionless chunks exist only
on the live path, so a stored milestone takes a place here as text does (a terminal run's
chunks it does not show take theirs too). Then the parent reads the child's inspection, without
letting the child reconcile a stale run on the way, and sends each of its milestones again as a
`data-agent-milestone` chunk `{name, sequence, at, data?}`, all at the next sequence, which none
of them consumes (so the run's terminal frame has it too). These frames carry no stored index;
the client keeps a milestone once by its own sequence. The SDK keeps milestones out of a child's
chunk log; a child of this port stores them there as well (seed decision S2), so a replay of
such a child sends each milestone twice, as the SDK does with a child that stores them.

One deadline bounds the whole read of a run, each step getting what the ones before it left
(never below 1 ms): on connect the recovery inspection timeout, across resolving the child,
reading its chunks and inspecting it (a child that cannot be resolved in time sends nothing);
otherwise the caller's bound, across the chunks and the inspection. A read that fails or runs
out sends nothing of its own and the rest goes on.

A re-attach numbers each of its tails on from the count of the child's stored chunks (the
first forwarded chunk of a child with two stored ones takes 3), not from the sequence it held;
when that count cannot be read, from 1, as the tail then starts from the first stored chunk.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from agents_core.agent_tools.bounded_calls import call, within
from agents_core.agent_tools.frames import chunk_event, frame
from agents_core.agent_tools.stored_replay import Send, StoredChunkReplay
from agents_core.jsontext import to_json_text

__all__ = ["MilestoneReplay"]

MILESTONE_PART = "data-agent-milestone"
MILESTONE_FIELDS = ("name", "sequence", "at", "data")
"""What a replayed milestone carries of the child's inspection, in this order (a field the
inspection does not have is left out)."""

Remaining = Callable[[], float | None]


class MilestoneReplay(StoredChunkReplay):
    """The replay of 0.32.0: every stored chunk at its own sequence, then the child's
    milestones again, unnumbered; a re-attach numbers on from the stored count."""

    __slots__ = ()

    async def to_connection(self, row: dict[str, Any], connection: Any) -> int:
        remaining = self._deadline(self._agent._agent_tool_recovery_timeout_ms)
        tag, child = await within(
            self._ctx.host, self._store.child(row["agent_type"], row["run_id"]), remaining()
        )
        if tag != "ok":
            return 1  # a child that cannot be reached replays nothing
        return await self._send_again(row, child, connection.send, remaining, replay=True)

    async def rebroadcast(self, row: dict[str, Any], child: Any, timeout_ms: float | None) -> int:
        remaining = self._deadline(timeout_ms)
        return await self._send_again(row, child, self._agent.broadcast, remaining, replay=False)

    def reattach_sequence(self, sequence: int, stored: int) -> int:
        return stored + 1

    def _deadline(self, timeout_ms: float | None) -> Remaining:
        """The time left of one bound shared by every step of a read (None: unbounded, as a
        bound that is absent, not positive or not finite is)."""
        if timeout_ms is None or not math.isfinite(timeout_ms) or timeout_ms <= 0:
            return lambda: None
        clock = self._ctx.host.clock
        deadline = clock.now_ms() + timeout_ms
        return lambda: max(1, deadline - clock.now_ms())

    async def _send_again(
        self, row: dict[str, Any], child: Any, send: Send, remaining: Remaining, *, replay: bool
    ) -> int:
        run_id = row["run_id"]
        host = self._ctx.host
        tag, chunks = await within(
            host, call(child, "get_agent_tool_chunks", run_id, -1), remaining()
        )
        sequence = self._send_stored(row, chunks if tag == "ok" else None, 1, send, replay=replay)
        tag, inspection = await within(host, self._inspect_as_is(child, run_id), remaining())
        milestones = inspection.get("milestones") if isinstance(inspection, dict) else None
        for milestone in milestones if tag == "ok" and isinstance(milestones, list) else []:
            if not isinstance(milestone, dict):
                continue
            data = {key: milestone[key] for key in MILESTONE_FIELDS if key in milestone}
            try:
                body = to_json_text({"type": MILESTONE_PART, "data": data}, "milestone")
            except TypeError:
                continue  # not JSON: nothing a client could read
            event = chunk_event(run_id, body, None)
            send(frame(row["parent_tool_call_id"], sequence, event, replay=replay))
        return sequence

    async def _inspect_as_is(self, child: Any, run_id: str) -> Any:
        """The child's inspection of the run, asking it not to reconcile a stale run first.
        A child whose adapter does not take that option is asked without it, as a JavaScript
        adapter ignores an argument it does not read."""
        if _takes_option(child, "inspect_agent_tool_run", "reconcile"):
            return await child.call("inspect_agent_tool_run", run_id, reconcile=False)
        return await child.call("inspect_agent_tool_run", run_id)


def _takes_option(child: Any, method: str, option: str) -> bool:
    """Whether the child's class declares `option` as a parameter of `method` (or takes any
    keyword)."""
    cls = getattr(getattr(child, "record", None), "cls", None)
    target = getattr(cls, method, None)
    if target is None:
        return False
    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return False
    return option in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )
