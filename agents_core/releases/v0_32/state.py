"""0.32.0's State capability: the state table under its own schema key (spec sdk-0.32 §6.2).

The agent schema no longer creates `cf_agents_state`. At startup, right after MCP's, the State
capability reads `cf_agents:state_schema_version` (absent is 0): at 1 it trusts the table to
exist; below 1 it creates the table, deletes the legacy flag row `cf_state_was_changed` (a
runtime of the two-row state layout left it) and puts 1. A read or write of the state before
any startup (a plain RPC to a cold agent does not start it, §1.3) creates the table first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents_core.releases.v0_32.schema_keys import STATE_SCHEMA
from agents_core.schema import LEGACY_STATE_FLAG_ROW_ID, STATE_DDL
from agents_core.state_store import StateStore

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.lifecycle import StartupStep

__all__ = ["CapabilityStarts", "StateCapability"]


class StateCapability(StateStore):
    """One agent's state on 0.32.0: the table made on first need or at a startup below v1."""

    __slots__ = ("_table_ensured",)

    def __init__(self, ctx: AgentContext) -> None:
        super().__init__(ctx)
        self._table_ensured = False

    def on_start(self) -> None:
        kv = self._ctx.host.kv
        stored = kv.get(STATE_SCHEMA.key)
        if (0 if stored is None else int(stored)) >= STATE_SCHEMA.current:
            self._table_ensured = True
            return
        self._ensure_table()
        self._ctx.sql("DELETE FROM cf_agents_state WHERE id = ?", LEGACY_STATE_FLAG_ROW_ID)
        kv.put(STATE_SCHEMA.key, STATE_SCHEMA.current)

    def _ensure_table(self) -> None:
        if not self._table_ensured:
            self._ctx.sql(STATE_DDL)
            self._table_ensured = True

    def load(self) -> str | None:
        self._ensure_table()
        return super().load()

    def save(self, encoded: str) -> None:
        self._ensure_table()
        super().save(encoded)


class CapabilityStarts:
    """The capabilities' part of startup that 0.21.0's startup step order gives to MCP: MCP's
    `on_start`, then State's (the SDK installs them in that order)."""

    __slots__ = ("_steps",)

    def __init__(self, *steps: StartupStep) -> None:
        self._steps = steps

    def on_start(self) -> None:
        for step in self._steps:
            step.on_start()
