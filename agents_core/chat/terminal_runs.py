"""Whether a chat child shows an agent-tool run's chunks to its own clients, by release (spec
sdk-0.32 §7.1).

0.21.0 (`EveryRunShown`): a child knows nothing of `event_delivery`; every frame it broadcasts
reaches its clients.

0.32.0 (`TerminalRunsHidden`, the chat hosts' `_agentToolTerminalOnlyRuns`): a run its parent
started with `event_delivery="terminal"` has no client watching its chunks, so the child does
not broadcast them to its own clients. The frames kept back are those the snoop attributes to
the run as its chunks (a chat-response frame of the run's request with a non-empty body that is
not an `error` frame); progress and milestone parts are such chunks too. The done frame, error
frames and the transcript still go out. The child still stores every chunk and still hands each
to its tails, so its parent sees what `event_delivery` lets it show.

The child writes `event_delivery = 'terminal'` on the run's row (a column of its runs table,
added the first time a terminal run starts there, so a child that never gets one keeps its
table as it was), and remembers the run in memory until the run is released. A later isolate
learns it again from the row: when the snoop looks up which run a request serves, and when a
recovered turn is bound to the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents_core.context import AgentContext

__all__ = ["TERMINAL", "EveryRunShown", "TerminalRunsHidden"]

TERMINAL = "terminal"
COLUMN = "event_delivery"


class EveryRunShown:
    """0.21.0: every run's chunks reach the child's own clients."""

    __slots__ = ()

    def terminal(self, event_delivery: Any) -> bool:
        """Whether a run started with this `event_delivery` is kept from the child's clients."""
        return False

    def row_terminal(self, row: Mapping[str, Any]) -> bool:
        """The same, read from the run's row."""
        return False

    def mark(self, ctx: AgentContext, table: str, run_id: str) -> None:
        """Write on the run's row that it is a terminal one."""


class TerminalRunsHidden(EveryRunShown):
    """0.32.0: a terminal run's chunks are kept from the child's own clients."""

    __slots__ = ()

    def terminal(self, event_delivery: Any) -> bool:
        return bool(event_delivery == TERMINAL)

    def row_terminal(self, row: Mapping[str, Any]) -> bool:
        return bool(row.get(COLUMN) == TERMINAL)

    def mark(self, ctx: AgentContext, table: str, run_id: str) -> None:
        columns = ctx.sql(f"SELECT name FROM pragma_table_info('{table}') WHERE name = ?", COLUMN)
        if not columns:
            ctx.sql(f"ALTER TABLE {table} ADD COLUMN {COLUMN} TEXT")
        ctx.sql(f"UPDATE {table} SET {COLUMN} = ? WHERE run_id = ?", TERMINAL, run_id)
