"""0.32.0's agent-tool event delivery: `event_delivery` of a run, and positionless chunks
(spec sdk-0.32 §7.1, §7.2).

`run_agent_tool(cls, event_delivery="full" | "terminal")`, `"full"` by default. Another value
throws `runAgentTool: eventDelivery must be "full" or "terminal", got <json>.`, and `"terminal"`
with `detached` throws `runAgentTool: eventDelivery "terminal" is not supported for detached
runs.`; both before the run id is looked up, so they throw for an existing run id too. A
terminal run's row stores `event_delivery = 'terminal'` (NULL otherwise), and its child is told
(`start_agent_tool_run(input, run_id, event_delivery="terminal")`).

Forwarding a terminal run, the parent shows its clients only lifecycle chunks (a JSON body whose
`type` is `data-agent-progress` or `data-agent-milestone`); `started` and the terminal event are
unaffected, progress is still observed (`on_progress`) for the chunks it does not show, and the
child keeps everything (a 0.32.0 chat child keeps the run's chunks from its own clients,
`agents_core/chat/terminal_runs.py`).

Positionless chunks: forwarded live, a lifecycle chunk, or one too large to store (a record
with `unstoredId`, carried onto its frame: a 0.32.0 chat child makes such a record for a chunk
over `CHUNK_MAX_BYTES`, which it does not store, `agents_core/chat/chunk_limit.py`), takes the
next sequence without consuming it. A terminal run's suppressed chunks still take their
position. Stored chunks sent again (a replay) each take their own sequence, whatever they are:
`replay_numbering.py`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agents_core.agent_tools.chunk_kinds import is_lifecycle_chunk
from agents_core.agent_tools.delivery_policy import EventDeliveryPolicy
from agents_core.errors import InvalidArgument

if TYPE_CHECKING:
    from agents_core.agent_tools.run_store import RunStore

__all__ = ["TERMINAL", "TerminalDelivery", "is_lifecycle_chunk"]

TERMINAL = "terminal"


class TerminalDelivery(EventDeliveryPolicy):
    """0.32.0: `event_delivery` ("full" or "terminal") and positionless chunks."""

    __slots__ = ()

    def option(self, value: Any, detached: bool) -> str | None:
        delivery = "full" if value is None else value
        if delivery not in ("full", TERMINAL):
            raise InvalidArgument(
                f'runAgentTool: eventDelivery must be "full" or "terminal", got '
                f"{json.dumps(delivery, default=str)}."
            )
        if detached and delivery == TERMINAL:
            raise InvalidArgument(
                'runAgentTool: eventDelivery "terminal" is not supported for detached runs.'
            )
        return TERMINAL if delivery == TERMINAL else None

    def terminal_only(self, store: RunStore, run_id: str) -> bool:
        row = store.read(run_id)
        return row is not None and self.row_terminal_only(row)

    def row_terminal_only(self, row: Mapping[str, Any]) -> bool:
        return row.get("event_delivery") == TERMINAL

    def shows(self, body: str, terminal_only: bool) -> bool:
        return not terminal_only or is_lifecycle_chunk(body)

    def takes_position(self, body: str, record: Mapping[str, Any]) -> bool:
        return record.get("unstoredId") is None and not is_lifecycle_chunk(body)

    def unstored_id(self, record: Mapping[str, Any]) -> str | None:
        value = record.get("unstoredId")
        return value if isinstance(value, str) else None
