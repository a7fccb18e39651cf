"""The runtime's SQLite tables, named and typed exactly as the SDK's (schema version 11), so a
storage snapshot can be diffed against the real SDK's. Time units differ per table on purpose:
schedules in Unix seconds, fiber tables in epoch milliseconds."""

from __future__ import annotations

import hashlib

from agents_core.host import Host, SqlStorage

__all__ = ["CURRENT_SCHEMA_VERSION", "SCHEMA_V11", "SCHEMA_VERSION_ROW_ID", "ensure_schema"]

CURRENT_SCHEMA_VERSION = 11
SCHEMA_VERSION_ROW_ID = "cf_schema_version"
EXTRA_SCHEMA_ROW_ID = "agentsim_schema_extras"
LEGACY_STATE_FLAG_ROW_ID = "cf_state_was_changed"
"""The flag row of the earlier two-row state layout; the state row's existence says it now."""

STATE_DDL = "CREATE TABLE IF NOT EXISTS cf_agents_state (id TEXT PRIMARY KEY NOT NULL, state TEXT)"

DDL = (
    """CREATE TABLE IF NOT EXISTS cf_agents_schedules (
        id TEXT PRIMARY KEY NOT NULL DEFAULT (randomblob(9)),
        callback TEXT,
        payload TEXT,
        type TEXT NOT NULL CHECK(type IN ('scheduled', 'delayed', 'cron', 'interval')),
        time INTEGER,
        delayInSeconds INTEGER,
        cron TEXT,
        intervalSeconds INTEGER,
        running INTEGER DEFAULT 0,
        created_at INTEGER DEFAULT (unixepoch()),
        execution_started_at INTEGER,
        retry_options TEXT,
        owner_path TEXT,
        owner_path_key TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS cf_agents_runs (
        id TEXT PRIMARY KEY NOT NULL,
        name TEXT NOT NULL,
        snapshot TEXT,
        created_at INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS cf_agents_fibers (
        fiber_id TEXT PRIMARY KEY,
        idempotency_key TEXT UNIQUE,
        name TEXT NOT NULL,
        status TEXT NOT NULL,
        snapshot TEXT,
        metadata_json TEXT,
        error_message TEXT,
        created_at INTEGER NOT NULL,
        started_at INTEGER,
        completed_at INTEGER
    )""",
    "CREATE INDEX IF NOT EXISTS idx_fibers_status_created "
    "ON cf_agents_fibers (status, created_at, fiber_id)",
    "CREATE INDEX IF NOT EXISTS idx_fibers_name_status_created "
    "ON cf_agents_fibers (name, status, created_at, fiber_id)",
    "CREATE INDEX IF NOT EXISTS idx_fibers_status_completed "
    "ON cf_agents_fibers (status, completed_at, created_at)",
    """CREATE TABLE IF NOT EXISTS cf_agents_facet_runs (
        owner_path TEXT NOT NULL,
        owner_path_key TEXT NOT NULL,
        run_id TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (owner_path_key, run_id)
    )""",
    "CREATE INDEX IF NOT EXISTS idx_facet_runs_owner ON cf_agents_facet_runs (owner_path_key)",
    """CREATE TABLE IF NOT EXISTS cf_agents_sub_agents (
        class TEXT NOT NULL,
        name TEXT NOT NULL,
        created_at INTEGER,
        identity_version TEXT,
        identity_name TEXT,
        PRIMARY KEY (class, name)
    )""",
)


def ensure_schema(sql: SqlStorage, extra_ddl: tuple[str, ...] = ()) -> None:
    """Create the tables unless the stored version is current (the SDK's `_ensureSchema`).

    `extra_ddl` (tables of this port beyond the SDK's core ones: agent-tool runs, MCP servers)
    is versioned by a digest of its text under its own row, so `cf_schema_version` keeps the
    SDK's value and an unchanged schema costs two reads per construction, not every DDL."""
    sql.execute(STATE_DDL)
    rows = sql.query(
        "SELECT id, state FROM cf_agents_state WHERE id IN (?, ?)",
        (SCHEMA_VERSION_ROW_ID, EXTRA_SCHEMA_ROW_ID),
    )
    stored = {row["id"]: str(row["state"]) for row in rows}
    version = stored.get(SCHEMA_VERSION_ROW_ID, "")
    extras = _digest(extra_ddl)
    current = version.isdigit() and int(version) >= CURRENT_SCHEMA_VERSION
    if current and stored.get(EXTRA_SCHEMA_ROW_ID, _digest(())) == extras:
        return
    for statement in (*DDL, *extra_ddl):
        sql.execute(statement)
    if not current:
        # Part of the SDK's migration: a runtime of the two-row state layout left this row.
        sql.execute("DELETE FROM cf_agents_state WHERE id = ?", (LEGACY_STATE_FLAG_ROW_ID,))
    upsert = (
        "INSERT INTO cf_agents_state (id, state) VALUES (?, ?) "
        "ON CONFLICT(id) DO UPDATE SET state = excluded.state"
    )
    sql.execute(upsert, (SCHEMA_VERSION_ROW_ID, str(CURRENT_SCHEMA_VERSION)))
    if extra_ddl:
        sql.execute(upsert, (EXTRA_SCHEMA_ROW_ID, extras))


def _digest(statements: tuple[str, ...]) -> str:
    return hashlib.sha256("\n".join(statements).encode()).hexdigest()[:16]


class _SchemaV11:
    """0.21.0's agent schema as a release picks it: `ensure(host, extra_ddl)` at construction."""

    __slots__ = ()

    def ensure(self, host: Host, extra_ddl: tuple[str, ...] = ()) -> None:
        ensure_schema(host.sql, extra_ddl)


SCHEMA_V11 = _SchemaV11()
"""The agent schema of version 11, kept in `cf_agents_state` (0.21.0)."""
