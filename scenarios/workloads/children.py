"""Agent-tool children a `tools` workload dispatches: a scripted one and the two chat hosts.

`ScriptedToolChild` implements the child adapter by hand (start, cancel, inspect, chunks, a live
tail) and plays a script given in its input, `{"steps": [...], "resume": bool}`, each step a
list:

    ["text", "some words"]              a stored text chunk
    ["progress", {fraction, message}]   an ephemeral progress frame (not stored; last one kept)
    ["milestone", "name", data]         a stored milestone chunk and milestone row
    ["sleep", ms]                       virtual time passes
    ["finish", "completed", summary, output]
                                        terminal, with an optional structured output ("error"
                                        with a message instead)
    ["hang"]                            never finishes
    ["chunk", {type, ...}]              any UI message chunk, stored and streamed as it is (a
                                        transient one is streamed, not stored)

No steps (or none given) means a run that completes at once with the summary 'done'. The script
and the child's place in it are durable: with `resume` (the default) a new incarnation picks the
script up where it stopped, as a chat host's own recovery resumes its turn; without it the run
stays silent after a restart, for the parent's budgets to catch. A subclass sets `resume` (the
default when the input leaves it out), adds steps by overriding `_step`, routes its waits through
`_wait` and `_pause`, and resumes through `_resume`.
`ThinkToolChild` and `ChatToolChild` are the chat hosts: their input is the user message, and
they answer from the scenario's model. They have one server tool, `work`, that a model's tool
call runs: its input `{"steps": [...]}` lists `{"progress": {fraction, message, phase}}`,
`{"milestone": name}` (or `{"milestone": {name, data}}`) and `{"sleep": ms}` steps, and the tool
reports each progress and milestone through `report_progress` (the agent-tool run the turn
serves: progress frames, milestone chunks stored in the turn's stream), records what it answered
(`workload:reported {runId, kind, outcome, fraction | name}`) and returns a summary.
"""

from __future__ import annotations

import json
from typing import Any

from agents_core import Agent
from agents_core.chat import ChatAgent, ThinkAgent, tool
from scenarios.workloads.self_types import WorkToolSelf

__all__ = ["CHILD_CLASSES", "ChatToolChild", "ScriptedToolChild", "ThinkToolChild"]

_DDL = (
    "CREATE TABLE IF NOT EXISTS child_runs (run_id TEXT PRIMARY KEY, status TEXT, summary TEXT, "
    "output_json TEXT, error TEXT, started_at INTEGER, completed_at INTEGER, progress_json TEXT, "
    "last_signal_at INTEGER)",
    "CREATE TABLE IF NOT EXISTS child_chunks (run_id TEXT, seq INTEGER, body TEXT, "
    "PRIMARY KEY (run_id, seq))",
    "CREATE TABLE IF NOT EXISTS child_milestones (run_id TEXT, sequence INTEGER, name TEXT, "
    "data_json TEXT, at INTEGER, PRIMARY KEY (run_id, sequence))",
    "CREATE TABLE IF NOT EXISTS child_scripts (run_id TEXT PRIMARY KEY, steps_json TEXT, "
    "resume INTEGER NOT NULL, cursor INTEGER NOT NULL DEFAULT 0, sleep_until INTEGER)",
)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


class ScriptedToolChild(Agent):
    """Plays its input's script as an agent-tool run (see the module docstring)."""

    resume: bool = True
    """Whether a new incarnation resumes a run whose input does not say."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        for statement in _DDL:
            self.sql(statement)
        self._tails: dict[str, dict[str, Any]] = {}
        self._live_sequence: dict[str, int] = {}
        self._stops: dict[str, Any] = {}
        self._cancels: dict[str, str | None] = {}
        """run id -> the error of a cancel whose seal failed, for its stopped script to seal."""

    async def on_start(self) -> None:
        pending = self.sql(
            "SELECT s.run_id, s.steps_json FROM child_scripts s JOIN child_runs r "
            "ON r.run_id = s.run_id WHERE r.completed_at IS NULL AND s.resume = 1 ORDER BY s.rowid"
        )
        for row in pending:
            self._resume(row["run_id"], json.loads(row["steps_json"]))

    def _resume(self, run_id: str, steps: list[Any]) -> None:
        """Pick an unfinished run's script up again in a new incarnation."""
        self._play(run_id, steps)

    # -- the adapter ------------------------------------------------------------------------------
    async def start_agent_tool_run(
        self, input: Any, run_id: str, event_delivery: str | None = None
    ) -> dict[str, Any]:
        """`event_delivery`: `"terminal"` from a 0.32.0 parent that asked for it (the child
        stores every chunk either way)."""
        existing = await self.inspect_agent_tool_run(run_id)
        if existing is not None:
            return existing
        now = self.host.clock.now_ms()
        script = input if isinstance(input, dict) else {}
        steps = list(script.get("steps") or [["finish", "completed", "done"]])
        # The script first: the run row makes the run exist (inspect, resume), so a start that
        # fails between the two must not leave a `running` row with no script to drive it.
        self.sql(
            "INSERT OR REPLACE INTO child_scripts (run_id, steps_json, resume) VALUES (?, ?, ?)",
            run_id,
            _compact(steps),
            int(bool(script.get("resume", self.resume))),
        )
        self.sql(
            "INSERT INTO child_runs (run_id, status, started_at) VALUES (?, 'running', ?)",
            run_id,
            now,
        )
        self._play(run_id, steps)
        return {"runId": run_id, "status": "running", "startedAt": now}

    async def cancel_agent_tool_run(self, run_id: str, reason: Any = None) -> None:
        self._cancel(run_id, reason)

    def _cancel(self, run_id: str, reason: Any) -> bool:
        """Stop the run's script, then seal the run `aborted`; True when this call sealed it.

        The script stops first, as the SDK's chat hosts abort the live run before they write
        its row: if that write fails, the stopped script seals the run itself as it lets go, so
        a cancel that failed never leaves the script hanging on to its keepAlive lease."""
        error = None if reason is None else str(reason)
        self._cancels[run_id] = error
        self._stop(run_id)
        sealed = self._settle(run_id, "aborted", error=error)
        del self._cancels[run_id]
        return sealed

    async def inspect_agent_tool_run(self, run_id: str) -> dict[str, Any] | None:
        rows = self.sql("SELECT * FROM child_runs WHERE run_id = ?", run_id)
        if not rows:
            return None
        row = rows[0]
        out: dict[str, Any] = {"runId": run_id, "status": row["status"]}
        out["startedAt"] = row["started_at"]
        for key, column in (("summary", "summary"), ("error", "error")):
            if row[column] is not None:
                out[key] = row[column]
        if row["completed_at"] is not None:
            out["completedAt"] = row["completed_at"]
        if row["output_json"] is not None:
            out["output"] = json.loads(row["output_json"])
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
        tail: dict[str, Any] = {"run_id": run_id, "queue": [], "waiter": None, "closed": False}
        self._tails[tail_id] = tail
        for chunk in await self.get_agent_tool_chunks(run_id, after_sequence):
            seq = chunk["sequence"]
            tail["queue"].append({"sequence": seq, "body": chunk["body"], "chunkSequence": seq})
        # As the chat hosts' tails: closed at once for a settled run or one this child never got.
        known = self.sql("SELECT 1 AS x FROM child_runs WHERE run_id = ?", run_id)
        tail["closed"] = not known or self._is_settled(run_id)
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

    # -- the script -------------------------------------------------------------------------------
    def _play(self, run_id: str, steps: list[Any]) -> None:
        self.host.tasks.wait_until(self._play_leased(run_id, steps))

    async def _play_leased(self, run_id: str, steps: list[Any]) -> None:
        try:
            await self.keep_alive_while(lambda: self._drive(run_id, steps))
        except Exception as exc:
            # As a chat host settles a failing turn (its lease or a step threw): a script that
            # can no longer run must not look live to a parent tailing it.
            self._settle(run_id, "error", error=str(exc) or type(exc).__name__)
            raise

    async def _drive(self, run_id: str, steps: list[Any]) -> None:
        """Play the script from its durable place."""
        place = self.sql("SELECT cursor FROM child_scripts WHERE run_id = ?", run_id)
        await self._perform(run_id, steps, place[0]["cursor"] if place else 0)
        if run_id in self._cancels:
            # Cancelled, and the cancel's own seal failed: the run ends here all the same.
            self._settle(run_id, "aborted", error=self._cancels.pop(run_id))

    async def _perform(self, run_id: str, steps: list[Any], start: int = 0) -> None:
        """Play `steps` from `start`, advancing the durable place after each step."""
        for index in range(start, len(steps)):
            if run_id in self._cancels or self._is_settled(run_id):
                return
            if not await self._step(run_id, index, steps[index]) or run_id in self._cancels:
                return
            self._advance(run_id, index)

    def _advance(self, run_id: str, index: int) -> None:
        self.sql(
            "UPDATE child_scripts SET cursor = ?, sleep_until = NULL WHERE run_id = ?",
            index + 1,
            run_id,
        )

    async def _step(self, run_id: str, index: int, step: list[Any]) -> bool:
        """Run step `index` of the script; False when the script ends here."""
        if step[0] == "hang":
            await self._wait(run_id, self.host.tasks.deferred())
        elif step[0] == "sleep":
            await self._sleep(run_id, step[1])
        else:
            self._act(run_id, step)
        return True

    async def _wait(self, run_id: str, awaitable: Any) -> None:
        """Wait for `awaitable` on behalf of the run, or less if the run is settled meanwhile
        (a cancel), so that a cancelled script lets go of its keepAlive lease."""
        stop = self._stops.get(run_id)
        if stop is None:
            stop = self._stops[run_id] = self.host.tasks.deferred()
        await self.host.tasks.race(awaitable, stop)

    async def _pause(self, run_id: str, remaining_ms: int) -> None:
        """Let the rest of a sleep pass."""
        if remaining_ms > 0:
            await self._wait(run_id, self.host.clock.sleep(remaining_ms))

    async def _sleep(self, run_id: str, ms: int) -> None:
        # The wake-up time is durable, so a resumed sleep ends when the first one would have.
        now = self.host.clock.now_ms()
        rows = self.sql("SELECT sleep_until FROM child_scripts WHERE run_id = ?", run_id)
        until = rows[0]["sleep_until"] if rows else None
        if until is None:
            until = now + ms
            self.sql("UPDATE child_scripts SET sleep_until = ? WHERE run_id = ?", until, run_id)
        await self._pause(run_id, until - now)

    def _act(self, run_id: str, step: list[Any]) -> None:
        kind, now = step[0], self.host.clock.now_ms()
        if kind == "text":
            self._store_chunk(run_id, {"type": "text-delta", "id": "t", "delta": step[1]})
        elif kind == "chunk" and step[1].get("transient") is True:
            self._push(run_id, step[1], None)
        elif kind == "chunk":
            self._store_chunk(run_id, step[1])
        elif kind == "progress":
            self.sql(
                "UPDATE child_runs SET progress_json = ?, last_signal_at = ? WHERE run_id = ?",
                _compact(step[1]),
                now,
                run_id,
            )
            chunk = {"type": "data-agent-progress", "transient": True, "data": step[1]}
            self._push(run_id, chunk, None)
        elif kind == "milestone":
            self._milestone(run_id, step[1], step[2] if len(step) > 2 else None, now)
        elif kind == "finish" and step[1] == "completed":
            summary, output = step[2] if len(step) > 2 else "", step[3] if len(step) > 3 else None
            self._settle(run_id, "completed", summary=summary, output=output)
        elif kind == "finish":
            self._settle(run_id, step[1], error=step[2] if len(step) > 2 else None)

    def _milestone(self, run_id: str, name: str, data: Any, now: int) -> None:
        sequence = self.sql(
            "SELECT COALESCE(MAX(sequence), -1) + 1 AS n FROM child_milestones WHERE run_id = ?",
            run_id,
        )[0]["n"]
        self.sql(
            "INSERT INTO child_milestones VALUES (?, ?, ?, ?, ?)",
            run_id,
            sequence,
            name,
            None if data is None else _compact(data),
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
        self.sql("INSERT INTO child_chunks VALUES (?, ?, ?)", run_id, seq, _compact(chunk))
        self._push(run_id, chunk, seq)

    def _push(self, run_id: str, chunk: dict[str, Any], chunk_sequence: int | None) -> None:
        sequence = self._live_sequence.get(run_id, 0)
        self._live_sequence[run_id] = sequence + 1
        record = {"sequence": sequence, "body": _compact(chunk), "chunkSequence": chunk_sequence}
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
    ) -> bool:
        """Settle the run once; True when this call did."""
        changed = self.host.sql.execute(
            "UPDATE child_runs SET status = ?, summary = ?, error = ?, output_json = ?, "
            "completed_at = ? WHERE run_id = ? AND completed_at IS NULL",
            (
                status,
                summary,
                error,
                None if output is None else _compact(output),
                self.host.clock.now_ms(),
                run_id,
            ),
        )
        if changed:
            self._settled(run_id)
            for tail in self._tails.values():
                if tail["run_id"] == run_id:
                    tail["closed"] = True
                    self._wake(tail)
        return bool(changed)

    def _settled(self, run_id: str) -> None:
        """Called once when the run settles, before its tails close: a waiting script lets go."""
        self._stop(run_id)

    def _stop(self, run_id: str) -> None:
        """A script waiting on behalf of the run lets go."""
        stop = self._stops.pop(run_id, None)
        if stop is not None:
            stop.resolve(None)

    @staticmethod
    def _wake(tail: dict[str, Any]) -> None:
        if tail["waiter"] is not None:
            tail["waiter"].resolve(None)
            tail["waiter"] = None

    def _is_settled(self, run_id: str) -> bool:
        rows = self.sql("SELECT completed_at FROM child_runs WHERE run_id = ?", run_id)
        return bool(rows) and rows[0]["completed_at"] is not None


class _WorkTool:
    """The chat children's server tool `work` (see the module docstring)."""

    def get_tools(self: WorkToolSelf) -> dict[str, Any]:
        return {
            "work": tool(
                "Do the task in steps, reporting progress and milestones as they happen.",
                self._workload_work,
            )
        }

    async def _workload_work(self: WorkToolSelf, input: Any, tool_call_id: Any, signal: Any) -> str:
        steps = input.get("steps") if isinstance(input, dict) else None
        reported = 0
        for step in steps if isinstance(steps, list) else []:
            if not isinstance(step, dict) or len(step) != 1:
                raise ValueError(f"a work step is one of progress, milestone, sleep; got {step!r}")
            ((kind, value),) = step.items()
            if kind == "sleep":
                await self.host.clock.sleep(int(value))
            elif kind == "progress":
                fields = {k: value[k] for k in PROGRESS_KEYS if k in value}
                outcome = await self.report_progress(**fields)
                self._reported("progress", outcome, fraction=fields.get("fraction"))
                reported += 1
            elif kind == "milestone":
                named = value if isinstance(value, dict) else {"name": value}
                outcome = await self.report_progress(
                    milestone=named["name"], data=named.get("data")
                )
                self._reported("milestone", outcome, name=named["name"])
                reported += 1
            else:
                raise ValueError(f"unknown work step {kind!r}; expected progress, milestone, sleep")
        return f"worked: {reported} reports"

    def _reported(self: WorkToolSelf, kind: str, outcome: str, **fields: Any) -> None:
        """`workload:reported {runId, kind, outcome, fraction | name}`: what report_progress
        answered (`emitted`, `coalesced` or `inactive`), for checks of S2 and S4."""
        run_id, _request_id = self._active_agent_tool_run()
        self.host.trace.emit(
            "workload:reported", runId=run_id, kind=kind, outcome=outcome, **fields
        )


PROGRESS_KEYS = ("fraction", "message", "phase")


class ThinkToolChild(_WorkTool, ThinkAgent):
    """A Think-like chat host as an agent-tool child; it answers from the `model` service."""


class ChatToolChild(_WorkTool, ChatAgent):
    """An AIChatAgent-like chat host as an agent-tool child; it answers from `model`."""


CHILD_CLASSES: dict[str, type] = {
    "scripted": ScriptedToolChild,
    "think": ThinkToolChild,
    "chat": ChatToolChild,
}
"""The `child:` of a run, to the class dispatched."""
