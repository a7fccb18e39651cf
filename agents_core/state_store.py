"""`StateStore`: where an agent's state is persisted, one row of `cf_agents_state`.

The row's id is `cf_state_row_id`; its existence alone says the state was set (any JSON value,
null too). On 0.21.0 the agent schema creates the table when the agent is constructed, so the
store only reads and writes the row; 0.32.0's State capability owns the table itself
(`releases/v0_32/state.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agents_core.context import AgentContext

__all__ = ["STATE_ROW_ID", "StateStore"]

STATE_ROW_ID = "cf_state_row_id"

_UPSERT = (
    "INSERT INTO cf_agents_state (id, state) VALUES (?, ?) "
    "ON CONFLICT(id) DO UPDATE SET state = excluded.state"
)


class StateStore:
    """One agent's state row (one per agent instance)."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: AgentContext) -> None:
        self._ctx = ctx

    def load(self) -> str | None:
        """The stored state's JSON text, or None when the state was never set."""
        rows = self._ctx.sql("SELECT state FROM cf_agents_state WHERE id = ?", STATE_ROW_ID)
        return str(rows[0]["state"]) if rows else None

    def save(self, encoded: str) -> None:
        """Store the state's JSON text."""
        self._ctx.sql(_UPSERT, STATE_ROW_ID, encoded)
