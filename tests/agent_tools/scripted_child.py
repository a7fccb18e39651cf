"""A scripted agent-tool child for the parent-side tests: a plain Agent that hand-implements the
child adapter (as the SDK's own tests use one), driven by a script in its input.

Input: `{"steps": [...], ...}` where each step is one of
  ["text", "some words"]            a stored UI text chunk
  ["progress", {fraction, message}] an ephemeral progress frame (not stored)
  ["milestone", "name", data]       a stored milestone part (seed decision S2) + milestone row
  ["sleep", ms]                     virtual time passes
  ["finish", "completed", summary]  terminal (also "error", message)
  ["hang"]                          never finishes
`NoTailChild` lacks the tail method, to reach `not-tailable`.
"""

from __future__ import annotations

import json
from typing import Any

from agents_core import Agent

DDL = (
    "CREATE TABLE IF NOT EXISTS child_runs (run_id TEXT PRIMARY KEY, status TEXT, summary TEXT, "
    "output_json TEXT, error TEXT, started_at INTEGER, completed_at INTEGER, progress_json TEXT, "
    "last_signal_at INTEGER)",
    "CREATE TABLE IF NOT EXISTS child_chunks (run_id TEXT, seq INTEGER, body TEXT, "
    "PRIMARY KEY (run_id, seq))",
    "CREATE TABLE IF NOT EXISTS child_milestones (run_id TEXT, sequence INTEGER, name TEXT, "
    "data_json TEXT, at INTEGER, PRIMARY KEY (run_id, sequence))",
)


class ScriptedChild(Agent):
    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        for statement in DDL:
            self.sql(statement)
        self._tails: dict[str, dict[str, Any]] = {}
        self._live_sequence: dict[str, int] = {}

    # -- the adapter --------------------------------------------------------------------------
    async def start_agent_tool_run(self, input: Any, run_id: str) -> dict[str, Any]:
        existing = await self.inspect_agent_tool_run(run_id)
        if existing is not None:
            return existing
        now = self.host.clock.now_ms()
        self.sql(
            "INSERT INTO child_runs (run_id, status, started_at) VALUES (?, 'running', ?)",
            run_id,
            now,
        )
        steps = list((input or {}).get("steps", [["finish", "completed", "done"]]))
        self.host.tasks.wait_until(self.keep_alive_while(lambda: self._drive(run_id, steps)))
        return {"runId": run_id, "status": "running", "startedAt": now}

    async def cancel_agent_tool_run(self, run_id: str, reason: Any = None) -> None:
        self._settle(run_id, "aborted", error=None if reason is None else str(reason))

    async def inspect_agent_tool_run(self, run_id: str) -> dict[str, Any] | None:
        rows = self.sql("SELECT * FROM child_runs WHERE run_id = ?", run_id)
        if not rows:
            return None
        row = rows[0]
        out: dict[str, Any] = {
            "runId": run_id,
            "status": row["status"],
            "startedAt": row["started_at"],
        }
        for key, column in (
            ("summary", "summary"),
            ("error", "error"),
            ("completedAt", "completed_at"),
        ):
            if row[column] is not None:
                out[key] = row[column]
        if row["output_json"] is not None:
            out["output"] = json.loads(row["output_json"])
        if row["progress_json"] is not None and row["last_signal_at"] is not None:
            out["progress"] = {**json.loads(row["progress_json"]), "at": row["last_signal_at"]}
        milestones = self.sql(
            "SELECT name, sequence, at, data_json FROM child_milestones "
            "WHERE run_id = ? ORDER BY sequence",
            run_id,
        )
        if milestones:
            out["milestones"] = [
                {
                    "name": m["name"],
                    "sequence": m["sequence"],
                    "at": m["at"],
                    **({"data": json.loads(m["data_json"])} if m["data_json"] else {}),
                }
                for m in milestones
            ]
        return out

    async def get_agent_tool_chunks(
        self, run_id: str, after_sequence: int = -1
    ) -> list[dict[str, Any]]:
        rows = self.sql(
            "SELECT seq, body FROM child_chunks WHERE run_id = ? AND seq > ? ORDER BY seq",
            run_id,
            after_sequence,
        )
        return [{"sequence": r["seq"], "body": r["body"]} for r in rows]

    async def open_agent_tool_tail(self, run_id: str, after_sequence: int = -1) -> str:
        tail_id = self.host.entropy.nanoid(8)
        tail = {"run_id": run_id, "queue": [], "waiter": None, "closed": False}
        self._tails[tail_id] = tail
        for chunk in await self.get_agent_tool_chunks(run_id, after_sequence):
            tail["queue"].append(
                {
                    "sequence": chunk["sequence"],
                    "body": chunk["body"],
                    "chunkSequence": chunk["sequence"],
                }
            )
        if await self._is_terminal(run_id):
            tail["closed"] = True
        return tail_id

    async def read_agent_tool_tail(self, tail_id: str) -> list[dict[str, Any]] | None:
        tail = self._tails.get(tail_id)
        if tail is None:
            return None
        while not tail["queue"] and not tail["closed"]:
            tail["waiter"] = self.host.tasks.deferred()
            await tail["waiter"]
        if tail["queue"]:
            batch, tail["queue"] = tail["queue"], []
            return batch
        return None

    async def close_agent_tool_tail(self, tail_id: str) -> None:
        tail = self._tails.pop(tail_id, None)
        if tail is not None and tail["waiter"] is not None:
            tail["closed"] = True
            tail["waiter"].resolve(None)

    # -- the script ---------------------------------------------------------------------------
    async def _drive(self, run_id: str, steps: list[Any]) -> None:
        for step in steps:
            if await self._is_terminal(run_id):
                return
            kind = step[0]
            if kind == "sleep":
                await self.host.clock.sleep(step[1])
            elif kind == "text":
                self._store_chunk(run_id, {"type": "text-delta", "id": "t", "delta": step[1]})
            elif kind == "progress":
                now = self.host.clock.now_ms()
                self.sql(
                    "UPDATE child_runs SET progress_json = ?, last_signal_at = ? WHERE run_id = ?",
                    json.dumps(step[1]),
                    now,
                    run_id,
                )
                self._push(
                    run_id,
                    {"type": "data-agent-progress", "transient": True, "data": step[1]},
                    None,
                )
            elif kind == "milestone":
                self._milestone(run_id, step[1], step[2] if len(step) > 2 else None)
            elif kind == "finish":
                if step[1] == "completed":
                    self._settle(
                        run_id,
                        "completed",
                        summary=step[2] if len(step) > 2 else "",
                        output=step[3] if len(step) > 3 else None,
                    )
                else:
                    self._settle(run_id, step[1], error=step[2] if len(step) > 2 else None)
                return
            elif kind == "hang":
                await self.host.tasks.deferred()

    def _milestone(self, run_id: str, name: str, data: Any) -> None:
        now = self.host.clock.now_ms()
        rows = self.sql(
            "SELECT COALESCE(MAX(sequence), -1) + 1 AS n FROM child_milestones WHERE run_id = ?",
            run_id,
        )
        sequence = rows[0]["n"]
        self.sql(
            "INSERT INTO child_milestones VALUES (?, ?, ?, ?, ?)",
            run_id,
            sequence,
            name,
            None if data is None else json.dumps(data),
            now,
        )
        self.sql("UPDATE child_runs SET last_signal_at = ? WHERE run_id = ?", now, run_id)
        payload: dict[str, Any] = {"name": name, "sequence": sequence, "at": now}
        if data is not None:
            payload["data"] = data
        self._store_chunk(run_id, {"type": "data-agent-milestone", "data": payload})

    def _store_chunk(self, run_id: str, chunk: dict[str, Any]) -> None:
        body = json.dumps(chunk, separators=(",", ":"))
        seq = self.sql(
            "SELECT COALESCE(MAX(seq), -1) + 1 AS n FROM child_chunks WHERE run_id = ?", run_id
        )[0]["n"]
        self.sql("INSERT INTO child_chunks VALUES (?, ?, ?)", run_id, seq, body)
        self._push(run_id, chunk, seq)

    def _push(self, run_id: str, chunk: dict[str, Any], chunk_sequence: int | None) -> None:
        sequence = self._live_sequence.get(run_id, 0)
        self._live_sequence[run_id] = sequence + 1
        record = {
            "sequence": sequence,
            "body": json.dumps(chunk, separators=(",", ":")),
            "chunkSequence": chunk_sequence,
        }
        for tail in self._tails.values():
            if tail["run_id"] == run_id and not tail["closed"]:
                tail["queue"].append(record)
                self._wake(tail)

    def _settle(
        self,
        run_id: str,
        status: str,
        *,
        summary: str | None = None,
        error: str | None = None,
        output: Any = None,
    ) -> None:
        changed = self.host.sql.execute(
            "UPDATE child_runs SET status = ?, summary = ?, error = ?, output_json = ?, "
            "completed_at = ? WHERE run_id = ? AND completed_at IS NULL",
            (
                status,
                summary,
                error,
                None if output is None else json.dumps(output),
                self.host.clock.now_ms(),
                run_id,
            ),
        )
        if changed:
            for tail in self._tails.values():
                if tail["run_id"] == run_id:
                    tail["closed"] = True
                    self._wake(tail)

    @staticmethod
    def _wake(tail: dict[str, Any]) -> None:
        if tail["waiter"] is not None:
            tail["waiter"].resolve(None)
            tail["waiter"] = None

    async def _is_terminal(self, run_id: str) -> bool:
        rows = self.sql("SELECT completed_at FROM child_runs WHERE run_id = ?", run_id)
        return bool(rows) and rows[0]["completed_at"] is not None


class NoTailChild(ScriptedChild):
    """An in-process adapter without a live tail (reaches `not-tailable`)."""

    open_agent_tool_tail = None  # type: ignore[assignment]
