"""Chat agents the chat tests drive, and helpers that read what they did.

`ThinkChild` and `AiChatChild` are the two hosts with one scripted server tool, `work`, whose
input is a list of steps (`["progress", {...}]`, `["sleep", ms]`, `["note", label]`,
`["raise", message]`); each progress outcome and note is written to a `journal` table (which
survives eviction) with the time and the tool call id. A few
public methods expose what only memory knows (bookkeeping, the snoop), so tests reach them over
RPC like any other caller.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agents_core.chat import ChatAgent, ThinkAgent, tool
from sim import AgentRef, Simulation
from sim.model import (
    ScriptedModel,
    after_tool,
    call,
    offers,
    stall,
    text,
    tool_calls,
    when,
)

__all__ = [
    "AiChatChild",
    "HOSTS",
    "ThinkChild",
    "chunk_types",
    "journal",
    "progress_frames",
    "read_tail",
    "row",
    "runs_table",
    "user",
    "wait_settled",
    "worker_model",
]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "text": text}]}


class _Scripted:
    """The shared test surface of both hosts."""

    _drain_injection: str | None = None

    def get_tools(self: Any) -> dict[str, Any]:
        return {"work": tool("Do scripted work.", self._work)}

    async def _work(self: Any, input: Any, tool_call_id: str, signal: Any) -> str:
        self.sql("CREATE TABLE IF NOT EXISTS journal (t INTEGER, kind TEXT, data TEXT)")
        for kind, arg in input.get("steps", []):
            if kind == "sleep":
                await self.host.clock.sleep(arg)
                continue
            if kind == "raise":
                raise RuntimeError(arg)
            outcome = arg if kind == "note" else await self.report_progress(**arg)
            self.sql(
                "INSERT INTO journal VALUES (?, ?, ?)",
                self.host.clock.now_ms(),
                kind,
                json.dumps({"arg": arg, "outcome": outcome, "call": tool_call_id}),
            )
        return "worked"

    # -- memory, over RPC ----------------------------------------------------------------------
    def bookkeeping(self: Any) -> dict[str, Any]:
        return {
            "controllers": sorted(self._agent_tool_controllers),
            "requestCache": dict(self._agent_tool_request_runs),
            "lastErrors": dict(self._agent_tool_last_errors),
            "preTurnIds": {k: sorted(v) for k, v in self._agent_tool_pre_turn_ids.items()},
            "liveSeq": dict(self._agent_tool_live_seq),
            "tails": len(self._agent_tool_tails),
        }

    def snoop(self: Any, frame: Any) -> None:
        """Broadcast `frame` as the child's own code would (it passes the snoop)."""
        self.broadcast(frame)

    def arm_drain_injection(self: Any, kind: str) -> None:
        """Make the next tail's backlog drain land `kind` (`chunk` or `signals`) mid-drain."""
        self._drain_injection = kind

    async def _read_agent_tool_backlog(self: Any, run_id: str, after_sequence: int) -> Any:
        backlog = await super()._read_agent_tool_backlog(run_id, after_sequence)
        kind, self._drain_injection = self._drain_injection, None
        if kind is not None:
            request_id = self._child_adapter.row(run_id)["request_id"]
            if kind == "chunk":
                state = self._turn_states[request_id]
                self._turns.emit_chunk(state, {"type": "data-window", "data": {"landed": "drain"}})
            else:
                self._progress.report(run_id, request_id, fraction=0.5, phase="p")
                self._progress.report(run_id, request_id, milestone="m", data={"k": 1})
        return backlog


class ThinkChild(_Scripted, ThinkAgent):
    pass


class AiChatChild(_Scripted, ChatAgent):
    pass


HOSTS = [ThinkChild, AiChatChild]


def runs_table(cls: type) -> str:
    return cls._agent_tool_runs_table


def row(sim: Simulation, ref: AgentRef, run_id: str) -> dict[str, Any] | None:
    rows = sim.query(ref, f"SELECT * FROM {runs_table(ref.cls)} WHERE run_id = ?", run_id)
    return rows[0] if rows else None


def wait_settled(sim: Simulation, ref: AgentRef, run_id: str, limit_ms: int = 600_000) -> None:
    """Run until the child's row for `run_id` leaves starting/running."""
    active = ref.cls._agent_tool_active_statuses
    sim.run_while(
        lambda: (row(sim, ref, run_id) or {"status": "starting"})["status"] in active, limit_ms
    )


def read_tail(sim: Simulation, ref: AgentRef, tail_id: str) -> list[dict[str, Any]]:
    """Every record of a tail until it closes."""
    records: list[dict[str, Any]] = []
    while True:
        batch = sim.call(ref, "read_agent_tool_tail", tail_id)
        if batch is None:
            return records
        records += batch


def chunk_types(records: Sequence[dict[str, Any]]) -> list[str]:
    return [json.loads(r["body"])["type"] for r in records]


def journal(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    rows = sim.query(ref, "SELECT t, kind, data FROM journal ORDER BY rowid")
    return [{"t": r["t"], "kind": r["kind"], **json.loads(r["data"])} for r in rows]


def progress_frames(frames: Sequence[Any], part: str = "data-agent-progress") -> list[dict]:
    """The chat-response frames a client got whose body is a `part` chunk, bodies parsed."""
    out = []
    for frame in frames:
        if isinstance(frame, dict) and frame.get("type") == "cf_agent_use_chat_response":
            body = frame.get("body")
            if body and not frame.get("error"):
                parsed = json.loads(body)
                if parsed.get("type") == part:
                    out.append({**frame, "parsed": parsed})
    return out


def worker_model(sim: Simulation, steps: list[Any], answer: str = "done") -> ScriptedModel:
    """A model that calls `work` with `steps` once, then answers `answer`."""
    return sim.register_model(
        ScriptedModel(
            rules=[
                when(after_tool("work"), reply=text(answer, delay_ms=10)),
                when(offers("work"), reply=tool_calls(call("work", {"steps": steps}), delay_ms=10)),
            ]
        )
    )


def busy_after_the_wake(
    sim: Simulation, host: type, **options: Any
) -> tuple[AgentRef, ScriptedModel, Any]:
    """A turn of `host` (with `chat_recovery` options) whose model never answers, interrupted
    at 5 s; after the wake a second turn keeps the host busy, so the recovery waits for a stable
    host in vain. The agent, its model and the connected client."""
    busy = type(f"Busy{host.__name__}", (host,), {"chat_recovery": options})
    model = sim.register_model(ScriptedModel(default=stall(3_600_000)))
    ref = sim.agent(busy, "c")
    client = sim.connect(ref)
    sim.start_call(ref, "save_messages", [user("first")])
    sim.run_for(5_000)
    sim.evict(ref)
    sim.agent(busy, "c")
    client.reconnect()
    sim.start_call(ref, "save_messages", [user("second")])
    return ref, model, client
