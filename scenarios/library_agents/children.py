"""Agent-tool children for the seed page "agents as tools" (seed 000).

`StoryChild` implements the child adapter by hand and plays a script from its input: these
stories are about the parent's side of the contract, and a script says exactly when the child
streams, signals, waits or resets, with no model in between. The script and the child's place
in it are durable, so a restarted child resumes where it was, as a chat host's own recovery
would.
"""

from __future__ import annotations

import json
from typing import Any

from agents_core import Request, Response
from scenarios.library_agents.story import StoryAgent

__all__ = ["CHILDREN", "MiddleChild", "StoryChild", "StubbornChild"]

CHILD_DDL = (
    "CREATE TABLE IF NOT EXISTS child_runs (run_id TEXT PRIMARY KEY, status TEXT NOT NULL, "
    "summary TEXT, error TEXT, started_at INTEGER, completed_at INTEGER, progress_json TEXT, "
    "last_signal_at INTEGER, steps_json TEXT NOT NULL, cursor INTEGER NOT NULL DEFAULT 0, "
    "sleep_until INTEGER, approved INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS child_chunks (run_id TEXT, seq INTEGER, body TEXT, "
    "PRIMARY KEY (run_id, seq))",
    "CREATE TABLE IF NOT EXISTS child_milestones (run_id TEXT, sequence INTEGER, name TEXT, "
    "data_json TEXT, at INTEGER, PRIMARY KEY (run_id, sequence))",
)


class StoryChild(StoryAgent):
    """An agent-tool child driven by a script in its input (`{"steps": [...]}`), implementing the
    adapter by hand (start, cancel, inspect, stored chunks and a live tail).

    Steps: `["text", s]` a stored text chunk; `["progress", {...}]` an ephemeral progress frame;
    `["milestone", name, data?]` a stored milestone (S2); `["sleep", ms]` (durable: a restart
    sleeps only what is left); `["await-approval"]` until `approve(run_id)`; `["reset"]` the
    child's own isolate resets (its parent lives); `["fan-out", n, steps]` n awaited grandchild
    runs in parallel; `["finish", status, summary_or_error]`; `["hang"]`. The script and its
    cursor are durable, so a restarted child resumes where it was (as chat recovery would)."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        for statement in CHILD_DDL:
            self.sql(statement)
        self._tails: dict[str, dict[str, Any]] = {}
        self._live_sequence: dict[str, int] = {}
        self._approvals: dict[str, Any] = {}
        self._stops: dict[str, Any] = {}

    async def on_start(self) -> None:
        for row in self.sql("SELECT run_id FROM child_runs WHERE completed_at IS NULL"):
            self._note("child-resumed", run=row["run_id"])
            self._drive_in_background(row["run_id"])

    async def on_request(self, request: Request) -> Response:
        """A drill-in (`/sub/StoryChild/<run id>/...` on the parent) reads the run's status."""
        rows = self.sql("SELECT status FROM child_runs WHERE run_id = ?", self.name)
        return Response(200, {"run": self.name, "status": rows[0]["status"] if rows else None})

    # -- the adapter ------------------------------------------------------------------------
    async def start_agent_tool_run(self, input: Any, run_id: str) -> dict[str, Any]:
        existing = await self.inspect_agent_tool_run(run_id)
        if existing is not None:
            return existing
        now = self.host.clock.now_ms()
        steps = list((input or {}).get("steps", [["finish", "completed", "done"]]))
        self.sql(
            "INSERT INTO child_runs (run_id, status, started_at, steps_json) "
            "VALUES (?, 'running', ?, ?)",
            run_id,
            now,
            json.dumps(steps),
        )
        self._drive_in_background(run_id)
        return {"runId": run_id, "status": "running", "startedAt": now}

    async def cancel_agent_tool_run(self, run_id: str, reason: Any = None) -> None:
        if self._settle(run_id, "aborted", error=None if reason is None else str(reason)):
            self._note(
                "child-cancelled", run=run_id, reason=None if reason is None else str(reason)
            )

    async def inspect_agent_tool_run(self, run_id: str) -> dict[str, Any] | None:
        rows = self.sql("SELECT * FROM child_runs WHERE run_id = ?", run_id)
        if not rows:
            return None
        row = rows[0]
        out: dict[str, Any] = {"runId": run_id, "status": row["status"]}
        out["startedAt"] = row["started_at"]
        for key in ("summary", "error"):
            if row[key] is not None:
                out[key] = row[key]
        if row["completed_at"] is not None:
            out["completedAt"] = row["completed_at"]
        if row["progress_json"] is not None and row["last_signal_at"] is not None:
            out["progress"] = {**json.loads(row["progress_json"]), "at": row["last_signal_at"]}
        milestones = self.sql(
            "SELECT name, sequence, at, data_json FROM child_milestones WHERE run_id = ? "
            "ORDER BY sequence",
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

    async def get_agent_tool_chunks(self, run_id: str, after_sequence: int = -1) -> list[dict]:
        rows = self.sql(
            "SELECT seq, body FROM child_chunks WHERE run_id = ? AND seq > ? ORDER BY seq",
            run_id,
            after_sequence,
        )
        return [{"sequence": r["seq"], "body": r["body"]} for r in rows]

    async def open_agent_tool_tail(self, run_id: str, after_sequence: int = -1) -> str:
        tail_id = self.host.entropy.nanoid(8)
        backlog = await self.get_agent_tool_chunks(run_id, after_sequence)
        queue = [{**c, "chunkSequence": c["sequence"]} for c in backlog]
        tail = {"run_id": run_id, "queue": queue, "waiter": None, "closed": self._terminal(run_id)}
        self._tails[tail_id] = tail
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
        if tail is not None:
            tail["closed"] = True
            self._wake(tail)

    async def approve(self, run_id: str) -> None:
        """What the parent's reaction to `needs-approval` does: let the script go on."""
        self.sql("UPDATE child_runs SET approved = 1 WHERE run_id = ?", run_id)
        waiter = self._approvals.pop(run_id, None)
        if waiter is not None:
            waiter.resolve(None)

    # -- the script -------------------------------------------------------------------------
    def _drive_in_background(self, run_id: str) -> None:
        self.host.tasks.wait_until(self.keep_alive_while(lambda: self._drive(run_id)))

    async def _drive(self, run_id: str) -> None:
        while True:
            row = self.sql("SELECT * FROM child_runs WHERE run_id = ?", run_id)[0]
            steps = json.loads(row["steps_json"])
            if row["completed_at"] is not None or row["cursor"] >= len(steps):
                return
            step = steps[row["cursor"]]
            if step[0] == "reset":
                self._advance(run_id, row["cursor"])
                await self.host.clock.sleep(0)  # commit the cursor before the isolate goes
                self._note("child-reset", run=run_id)
                self.host.lifecycle.abort("reset")
                return
            if not await self._step(run_id, row, step):
                return
            self._advance(run_id, row["cursor"])

    def _advance(self, run_id: str, cursor: int) -> None:
        self.sql(
            "UPDATE child_runs SET cursor = ?, sleep_until = NULL WHERE run_id = ?",
            cursor + 1,
            run_id,
        )

    async def _step(self, run_id: str, row: dict[str, Any], step: list[Any]) -> bool:
        """Run one step; False when the script ends here."""
        kind, now = step[0], self.host.clock.now_ms()
        if kind == "sleep":
            until = row["sleep_until"]
            if until is None:
                until = now + int(step[1])
                self.sql("UPDATE child_runs SET sleep_until = ? WHERE run_id = ?", until, run_id)
            await self._unless_settled(run_id, self.host.clock.sleep(max(0, until - now)))
        elif kind == "text":
            self._store_chunk(run_id, {"type": "text-delta", "id": "t", "delta": step[1]})
        elif kind == "progress":
            self.sql(
                "UPDATE child_runs SET progress_json = ?, last_signal_at = ? WHERE run_id = ?",
                json.dumps(step[1]),
                now,
                run_id,
            )
            self._push(run_id, {"type": "data-agent-progress", "transient": True, "data": step[1]})
        elif kind == "milestone":
            self._milestone(run_id, step[1], step[2] if len(step) > 2 else None)
        elif kind == "await-approval":
            while not self.sql("SELECT approved FROM child_runs WHERE run_id = ?", run_id)[0][
                "approved"
            ]:
                self._approvals[run_id] = self.host.tasks.deferred()
                await self._unless_settled(run_id, self._approvals[run_id])
        elif kind == "fan-out":
            await self._fan_out(run_id, int(step[1]), step[2])
        elif kind == "finish":
            detail = step[2] if len(step) > 2 else None
            if step[1] == "completed":
                self._settle(run_id, "completed", summary=detail or "")
            else:
                self._settle(run_id, step[1], error=detail)
            return False
        elif kind == "hang":
            await self._unless_settled(run_id, self.host.tasks.deferred())
        return True

    async def _unless_settled(self, run_id: str, awaitable: Any) -> None:
        """Wait for `awaitable`, or less if the run is settled meanwhile (a cancel), so that a
        cancelled script lets go of its keepAlive lease."""
        stop = self._stops.get(run_id)
        if stop is None:
            stop = self._stops[run_id] = self.host.tasks.deferred()
        await self.host.tasks.race(awaitable, stop)

    async def _fan_out(self, run_id: str, count: int, steps: list[Any]) -> None:
        runs = [
            self.run_agent_tool(StoryChild, input={"steps": steps}, run_id=f"{run_id}-g{i}")
            for i in range(count)
        ]
        for result in await self.host.tasks.gather(*runs):
            self._note("grandchild", run=result.run_id, status=result.status, error=result.error)

    def _milestone(self, run_id: str, name: str, data: Any) -> None:
        now = self.host.clock.now_ms()
        sequence = self.sql(
            "SELECT COALESCE(MAX(sequence), -1) + 1 AS n FROM child_milestones WHERE run_id = ?",
            run_id,
        )[0]["n"]
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
        seq = self.sql(
            "SELECT COALESCE(MAX(seq), -1) + 1 AS n FROM child_chunks WHERE run_id = ?", run_id
        )[0]["n"]
        self.sql(
            "INSERT INTO child_chunks VALUES (?, ?, ?)",
            run_id,
            seq,
            json.dumps(chunk, separators=(",", ":")),
        )
        self._push(run_id, chunk, seq)

    def _push(self, run_id: str, chunk: dict[str, Any], chunk_sequence: int | None = None) -> None:
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

    def _settle(self, run_id: str, status: str, *, summary: Any = None, error: Any = None) -> bool:
        changed = self.host.sql.execute(
            "UPDATE child_runs SET status = ?, summary = ?, error = ?, completed_at = ? "
            "WHERE run_id = ? AND completed_at IS NULL",
            (status, summary, error, self.host.clock.now_ms(), run_id),
        )
        if changed:
            stop = self._stops.pop(run_id, None)
            if stop is not None:
                stop.resolve(None)
            for tail in self._tails.values():
                if tail["run_id"] == run_id:
                    tail["closed"] = True
                    self._wake(tail)
        return bool(changed)

    def _terminal(self, run_id: str) -> bool:
        rows = self.sql("SELECT completed_at FROM child_runs WHERE run_id = ?", run_id)
        return bool(rows) and rows[0]["completed_at"] is not None

    @staticmethod
    def _wake(tail: dict[str, Any]) -> None:
        if tail["waiter"] is not None:
            tail["waiter"].resolve(None)
            tail["waiter"] = None


class StubbornChild(StoryChild):
    """A child that cannot be cancelled: its script runs to its own end whatever the parent
    decided (a give-up cannot tear it down)."""

    async def cancel_agent_tool_run(self, run_id: str, reason: Any = None) -> None:
        raise RuntimeError("this child cannot be cancelled")


class MiddleChild(StoryChild):
    """A child that is itself a parent, with its own cap of one concurrent agent tool."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.max_concurrent_agent_tools = 1


CHILDREN = {cls.__name__: cls for cls in (StoryChild, StubbornChild, MiddleChild)}
