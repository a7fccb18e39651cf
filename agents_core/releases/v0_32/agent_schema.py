"""0.32.0's agent schema: version 14, kept in the key-value store (spec sdk-0.32 §6.1, §5.1).

The version is the number under `cf_agents:schema_version` in the synchronous KV (0.21.0 kept
the string row `cf_agents_state('cf_schema_version')`). Reading it: the KV value when there is
one; else a legacy row, when `cf_agents_state` exists and holds it, is moved to the key
(`Number(state) || 0`) and deleted; else 0. Below 14, every statement runs once (all of them
`IF NOT EXISTS`, the columns added since 0.21.0 by tolerant `ALTER TABLE … ADD COLUMN`) and 14
is put: the steps from 11 to 14 are one path, not four. At 14 nothing runs.

What 0.32.0 adds to the tables: `cf_agents_runs.completed_at`, `.outcome`, `.error_message`
(a fiber's outcome, written in its `finally`) and `cf_agent_tool_runs.event_delivery`.

The Agent no longer creates `cf_agents_state` (the State capability does, at startup and on
first need: `state.py`) nor `cf_agents_schedules` (the Scheduler migrates that table to jobs
and drops it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agents_core.schema import DDL as DDL_V11
from agents_core.schema import SCHEMA_VERSION_ROW_ID

if TYPE_CHECKING:
    from agents_core.host import Host

__all__ = [
    "ADDED_COLUMNS",
    "AGENT_DDL",
    "CURRENT_SCHEMA_VERSION",
    "SCHEDULES_DDL",
    "SCHEMA_VERSION_KEY",
    "AgentSchema",
    "read_schema_version",
]

CURRENT_SCHEMA_VERSION = 14
SCHEMA_VERSION_KEY = "cf_agents:schema_version"

RUNS_DDL = """CREATE TABLE IF NOT EXISTS cf_agents_runs (
        id TEXT PRIMARY KEY NOT NULL,
        name TEXT NOT NULL,
        snapshot TEXT,
        created_at INTEGER NOT NULL,
        completed_at INTEGER,
        outcome TEXT,
        error_message TEXT
    )"""

SCHEDULES_DDL = next(s for s in DDL_V11 if "cf_agents_schedules" in s)
"""0.21.0's schedules table, for a build whose Scheduler is still 0.21.0's."""

AGENT_DDL: tuple[str, ...] = tuple(
    RUNS_DDL if "TABLE IF NOT EXISTS cf_agents_runs" in s else s
    for s in DDL_V11
    if s is not SCHEDULES_DDL
)
"""The tables 0.32.0's Agent creates itself: run rows (with the outcome columns), the fiber
ledger and its indexes, the sub-agents' fiber leases, the sub-agent registry."""

ADDED_COLUMNS = (
    "ALTER TABLE cf_agents_runs ADD COLUMN completed_at INTEGER",
    "ALTER TABLE cf_agents_runs ADD COLUMN outcome TEXT",
    "ALTER TABLE cf_agents_runs ADD COLUMN error_message TEXT",
    "ALTER TABLE cf_agent_tool_runs ADD COLUMN event_delivery TEXT",
)
"""The columns added since 0.21.0, to tables a 0.21.0 agent created without them."""


def read_schema_version(host: Host) -> int:
    """The agent's schema version (the SDK's `_readSchemaVersion`): the KV number, else a
    0.21.0 row moved to the key, else 0."""
    stored = host.kv.get(SCHEMA_VERSION_KEY)
    if stored is not None:
        return int(stored)
    state_table = host.sql.query(
        "SELECT 1 AS x FROM sqlite_master WHERE type = 'table' AND name = 'cf_agents_state'", ()
    )
    if not state_table:
        return 0
    rows = host.sql.query(
        "SELECT state FROM cf_agents_state WHERE id = ?", (SCHEMA_VERSION_ROW_ID,)
    )
    if not rows:
        return 0
    version = _number(rows[0]["state"])
    host.kv.put(SCHEMA_VERSION_KEY, version)
    host.sql.execute("DELETE FROM cf_agents_state WHERE id = ?", (SCHEMA_VERSION_ROW_ID,))
    return version


def _number(text: object) -> int:
    """JavaScript's `Number(text) || 0` for a stored version (an integer, or 0)."""
    try:
        value = float(str(text).strip() or "0")
    except ValueError:
        return 0
    return int(value) if value == value and abs(value) != float("inf") else 0


@dataclass(frozen=True, slots=True)
class AgentSchema:
    """The agent schema of version 14. `tables`: the statements run below 14 before the extra
    tables and the added columns (`AGENT_DDL`, with what the build's other components keep)."""

    tables: tuple[str, ...]

    def ensure(self, host: Host, extra_ddl: tuple[str, ...] = ()) -> None:
        if read_schema_version(host) >= CURRENT_SCHEMA_VERSION:
            return
        for statement in (*self.tables, *extra_ddl):
            host.sql.execute(statement)
        for statement in ADDED_COLUMNS:
            _add_column_if_not_exists(host, statement)
        host.kv.put(SCHEMA_VERSION_KEY, CURRENT_SCHEMA_VERSION)


def _add_column_if_not_exists(host: Host, statement: str) -> None:
    try:
        host.sql.execute(statement)
    except Exception as exc:
        if "duplicate column" not in str(exc).lower():
            raise
