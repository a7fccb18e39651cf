"""What a simulated client shows: the runtime's client-side reducer (`AgentToolEvents`, the
`useAgentToolEvents` analogue) fed the frames one client received, read back as plain data.

`chat_turns_view` is the chat side: which requests ended and how, and the turn being recovered
(`sim.chat_client_view`, spec sdk-0.32 §8.2).

This is the subject a checker judges, not an oracle: `client_timeline_exact` compares what
`reduce_client_frames` returns with the independent model in `sim.checkers.models.ui_parts`, and
the checkers of `sim.checkers.reducer_promises` compare what `client_view` returns with the one
in `sim.checkers.models.client_runs`. It is kept out of `sim.checkers` so that no checker imports
the runtime (`tests/checkers/test_independence.py`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agents_core.agent_tools import AgentToolEvents
from sim.chat_client_view import chat_client_view
from sim.trace import TraceRecord

__all__ = ["ClientRunView", "ClientView", "chat_turns_view", "client_view", "reduce_client_frames"]

ClientRunView = dict[str, Any]
"""`{"parts": [...], "milestones": [(name, sequence), ...], "status": str}` of one run."""

ClientView = dict[str, Any]
"""`{"runs": {runId: fields}, "groups": {toolCallId: [runId, ...]}, "unbound": [runId, ...]}`:
each run's metadata and terminal fields, and the two lists a UI renders, in the reducer's order."""


def _reduced(records: Iterable[TraceRecord]) -> AgentToolEvents:
    """The reducer once every `connection:frame` record (in order, its clock at each record's
    time) went through it once."""
    now = [0]
    reducer = AgentToolEvents(lambda: now[0])
    for record in records:
        now[0] = record.t_ms
        reducer.receive(record.get("frame"))
    return reducer


def reduce_client_frames(records: Iterable[TraceRecord]) -> dict[str, ClientRunView]:
    """Run id -> what the client's reducer shows of its parts, milestones and status."""
    return {
        run_id: {
            "parts": [dict(part) for part in run.parts],
            "milestones": [(m.get("name"), m.get("sequence")) for m in run.milestones],
            "status": run.status,
        }
        for run_id, run in _reduced(records).runs_by_id.items()
    }


def client_view(records: Iterable[TraceRecord]) -> ClientView:
    """What the client's reducer shows once every frame went through it once: each run's
    metadata and terminal fields, its runs grouped by parent tool call and its unbound runs."""
    state = _reduced(records).state
    return {
        "runs": {
            run_id: {
                "agentType": run.agent_type,
                "parentToolCallId": run.parent_tool_call_id,
                "order": run.order,
                "status": run.status,
                "summary": run.summary,
                "error": run.error,
                "reason": run.reason,
                "childStillRunning": run.child_still_running,
                "progress": None if run.progress is None else dict(run.progress),
            }
            for run_id, run in state.runs_by_id.items()
        },
        "groups": {
            tool_call: [run.run_id for run in runs]
            for tool_call, runs in state.runs_by_tool_call_id.items()
        },
        "unbound": [run.run_id for run in state.unbound_runs],
    }


def chat_turns_view(records: Iterable[TraceRecord]) -> dict[str, Any]:
    """What the client's chat-turn bookkeeping shows once every `connection:frame` record went
    through it once (`sim.chat_client_view.chat_client_view`)."""
    return chat_client_view(record.get("frame") for record in records)
