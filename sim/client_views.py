"""What a simulated client shows: the runtime's client-side reducer (`AgentToolEvents`, the
`useAgentToolEvents` analogue) fed the frames one client received, read back as plain data.

This is the subject a checker judges, not an oracle: `client_timeline_exact` compares what this
returns with the independent model in `sim.checkers.models.ui_parts`. It is kept out of
`sim.checkers` so that no checker imports the runtime (`tests/checkers/test_independence.py`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agents_core.agent_tools import AgentToolEvents
from sim.trace import TraceRecord

__all__ = ["ClientRunView", "reduce_client_frames"]

ClientRunView = dict[str, Any]
"""`{"parts": [...], "milestones": [(name, sequence), ...], "status": str}` of one run."""


def reduce_client_frames(records: Iterable[TraceRecord]) -> dict[str, ClientRunView]:
    """Run id -> what the client's reducer shows once every `connection:frame` record (in
    order, its clock at each record's time) went through it once."""
    now = [0]
    reducer = AgentToolEvents(lambda: now[0])
    for record in records:
        now[0] = record.t_ms
        reducer.receive(record.get("frame"))
    return {
        run_id: {
            "parts": [dict(part) for part in run.parts],
            "milestones": [(m.get("name"), m.get("sequence")) for m in run.milestones],
            "status": run.status,
        }
        for run_id, run in reducer.runs_by_id.items()
    }
