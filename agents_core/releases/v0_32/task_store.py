"""The tables of 0.32.0's Tasks capability, their row access and what a run's row reads as
(spec sdk-0.32 §6.5).

`cf_agents_task_runs` holds one row per run, `cf_agents_task_steps` its step journal; both are
made at startup while `cf_agents:tasks_schema_version` is below 1 (`tasks.py`). A run's
snapshot (`snapshot`, what `get`, `list` and a handle answer) is a dict in the SDK's JSON shape,
its keys by state:

- every state: `runId`, `definition`, `state`, `createdAt`, and `metadata` when it has any;
- `running`: `attempt`, `startedAt`, `statusMessage` (when set);
- `waiting`: `reason` (`sleep` or `retry`), `wakeAt`, `statusMessage` (when set);
- `completed`: `result`, `settledAt`; `failed`: `error` `{name, message}`, `settledAt`;
  `cancelled`: `reason` (when given), `settledAt`.

`list_rows` is newest first (`created_at`, then `run_id`, both descending), 100 by default;
`settled_rows` picks what `delete` removes: settled runs of the given states, oldest settlement
first, 100 by default.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agents_core.releases.v0_32.task_values import deserialize

if TYPE_CHECKING:
    from agents_core.context import AgentContext

__all__ = [
    "DEFAULT_LIST_LIMIT",
    "LIVE_STATES",
    "RUN_STATES",
    "TASK_RUNS_DDL",
    "TASK_RUNS_INDEX_DDL",
    "TASK_STEPS_DDL",
    "TERMINAL_STATES",
    "TaskStore",
    "snapshot",
]

DEFAULT_LIST_LIMIT = 100
LIVE_STATES = ("pending", "waiting", "running")
TERMINAL_STATES = ("completed", "failed", "cancelled")
RUN_STATES = (*LIVE_STATES, *TERMINAL_STATES)

TASK_RUNS_DDL = """CREATE TABLE IF NOT EXISTS cf_agents_task_runs (
        run_id TEXT PRIMARY KEY,
        definition TEXT NOT NULL,
        input TEXT,
        state TEXT NOT NULL CHECK (state IN (
          'pending', 'running', 'waiting',
          'completed', 'failed', 'cancelled'
        )),
        result TEXT,
        error_name TEXT,
        error_message TEXT,
        status_message TEXT,
        metadata TEXT,
        idempotency_key TEXT UNIQUE,
        retain INTEGER NOT NULL DEFAULT 1,
        attempt INTEGER NOT NULL DEFAULT 0,
        generation TEXT,
        next_at INTEGER,
        wait_reason TEXT,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        cancel_reason TEXT,
        created_at INTEGER NOT NULL,
        started_at INTEGER,
        updated_at INTEGER NOT NULL,
        settled_at INTEGER
      ) WITHOUT ROWID"""
TASK_RUNS_INDEX_DDL = """CREATE INDEX IF NOT EXISTS cf_agents_task_runs_definition
      ON cf_agents_task_runs (definition, created_at)"""
TASK_STEPS_DDL = """CREATE TABLE IF NOT EXISTS cf_agents_task_steps (
        run_id TEXT NOT NULL,
        step_name TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('do', 'sleep')),
        state TEXT NOT NULL CHECK (state IN (
          'running', 'waiting', 'completed', 'failed'
        )),
        result TEXT,
        error_name TEXT,
        error_message TEXT,
        attempt INTEGER NOT NULL DEFAULT 0,
        next_at INTEGER,
        created_at INTEGER NOT NULL,
        started_at INTEGER,
        updated_at INTEGER NOT NULL,
        completed_at INTEGER,
        PRIMARY KEY (run_id, step_name)
      ) WITHOUT ROWID"""


class TaskStore:
    """The two tables of one agent's Tasks."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: AgentContext) -> None:
        self._ctx = ctx

    def ensure_tables(self) -> None:
        self._ctx.sql(TASK_RUNS_DDL)
        self._ctx.sql(TASK_RUNS_INDEX_DDL)
        self._ctx.sql(TASK_STEPS_DDL)

    def run(self, run_id: str) -> dict[str, Any] | None:
        rows = self._ctx.sql("SELECT * FROM cf_agents_task_runs WHERE run_id = ?", run_id)
        return rows[0] if rows else None

    def run_by_key(self, idempotency_key: str) -> dict[str, Any] | None:
        rows = self._ctx.sql(
            "SELECT * FROM cf_agents_task_runs WHERE idempotency_key = ?", idempotency_key
        )
        return rows[0] if rows else None

    def delete_run(self, run_id: str) -> None:
        self._ctx.sql("DELETE FROM cf_agents_task_steps WHERE run_id = ?", run_id)
        self._ctx.sql("DELETE FROM cf_agents_task_runs WHERE run_id = ?", run_id)

    def write(self, query: str, *params: Any) -> int:
        """One statement; the number of rows it changed."""
        return self._ctx.host.sql.execute(query, params)

    def fenced(self, query: str, run_id: str, generation: str, *leading: Any) -> bool:
        """A write guarded by an attempt's generation (`... AND generation = ?`); whether it
        changed the row."""
        return self.write(query, *leading, run_id, generation) > 0

    def list_rows(
        self, definition: str | None, states: Iterable[str], limit: int
    ) -> list[dict[str, Any]]:
        query = "SELECT * FROM cf_agents_task_runs WHERE 1 = 1"
        params: list[Any] = []
        if definition is not None:
            query += " AND definition = ?"
            params.append(definition)
        wanted = list(states)
        if wanted:
            query += f" AND state IN ({', '.join('?' for _ in wanted)})"
            params.extend(wanted)
        query += " ORDER BY created_at DESC, run_id DESC LIMIT ?"
        params.append(limit)
        return self._ctx.sql(query, *params)

    def settled_rows(
        self, states: Iterable[str], settled_before_ms: int | None, limit: int
    ) -> list[dict[str, Any]]:
        wanted = list(states)
        query = (
            "SELECT run_id, definition FROM cf_agents_task_runs "
            f"WHERE state IN ({', '.join('?' for _ in wanted)})"
        )
        params: list[Any] = [*wanted]
        if settled_before_ms is not None:
            query += " AND settled_at < ?"
            params.append(settled_before_ms)
        query += " ORDER BY settled_at ASC LIMIT ?"
        params.append(limit)
        return self._ctx.sql(query, *params)


def snapshot(row: dict[str, Any]) -> dict[str, Any]:
    """A run row as `get` and `list` answer it (the keys of its state, module docstring)."""
    view: dict[str, Any] = {
        "runId": row["run_id"],
        "definition": row["definition"],
        "state": row["state"],
        "createdAt": row["created_at"],
    }
    if row["metadata"] is not None:
        view["metadata"] = deserialize(row["metadata"])
    state = row["state"]
    settled_at = row["settled_at"] if row["settled_at"] is not None else row["updated_at"]
    if state == "running":
        view["attempt"] = row["attempt"]
        started_at = row["started_at"]
        view["startedAt"] = started_at if started_at is not None else row["created_at"]
    elif state == "waiting":
        view["reason"] = row["wait_reason"] or "sleep"
        view["wakeAt"] = row["next_at"] if row["next_at"] is not None else row["updated_at"]
    elif state == "completed":
        view["result"] = deserialize(row["result"])
        view["settledAt"] = settled_at
    elif state == "failed":
        view["error"] = {
            "name": row["error_name"] or "Error",
            "message": row["error_message"] or "Task run failed",
        }
        view["settledAt"] = settled_at
    elif state == "cancelled":
        if row["cancel_reason"] is not None:
            view["reason"] = row["cancel_reason"]
        view["settledAt"] = settled_at
    if state in ("running", "waiting") and row["status_message"] is not None:
        view["statusMessage"] = row["status_message"]
    return view
