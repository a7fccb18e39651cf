"""`chunk_numbers_stable` (seed decision S5): a chunk number names one chunk of a run, whatever
path delivers it.

A client's reducer dedupes a run's stored chunks by `chunkSequence` (the child's stored chunk
index), so two different chunks under one number make it drop a genuine frame. That is visible
in the frames alone, with no need of the child's storage (which `client_timeline_exact`
compares against when it can read it: a Think-like child shows no stored chunk for a run it
reconciled after an eviction). The frames are those of `sim.checkers.timeline.client_frames`.
"""

from __future__ import annotations

import json
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.checkers.timeline import client_frames, decode_frame
from sim.trace import TraceRecord, format_sim_time

__all__ = ["chunk_numbers_stable"]


def _chunk(frame: Any) -> tuple[str, int, Any] | None:
    """(run id, chunkSequence, parsed body) of a stored chunk's frame, else None."""
    decoded = decode_frame(frame)
    if decoded is None:
        return None
    event = decoded["event"]
    if event.get("kind") != "chunk":
        return None
    run_id, number = event["runId"], event.get("chunkSequence")
    if not isinstance(number, int) or isinstance(number, bool):
        return None
    body = event.get("body")
    try:
        parsed = json.loads(body) if isinstance(body, str) else body
    except ValueError:
        parsed = body
    return run_id, number, parsed


@invariant("chunk_numbers_stable")
def chunk_numbers_stable(context: CheckContext) -> list[Violation]:
    """S5 — a client never drops a genuine frame: each chunk number of a run names one chunk,
    live, replayed, re-attached or re-broadcast, across restarts of the parent and the child.

    For every client of every agent, any two `chunk` frames it received for one run with the
    same `chunkSequence` carry the same chunk (bodies equal as JSON), unless the later frame's
    record may have rolled back (its parent incarnation crashed in that instant).
    """
    out: list[Violation] = []
    for (agent, client), records in sorted(client_frames(context).items()):
        first: dict[tuple[str, int], tuple[TraceRecord, Any]] = {}
        for record in records:
            chunk = _chunk(record.get("frame"))
            if chunk is None:
                continue
            run_id, number, body = chunk
            seen = first.get((run_id, number))
            if seen is None:
                first[(run_id, number)] = (record, body)
                continue
            earlier, earlier_body = seen
            if earlier_body == body or context.may_have_rolled_back(record):
                continue
            out.append(
                Violation(
                    "chunk_numbers_stable",
                    agent,
                    client,
                    f"client {client} of {agent} received chunk {number} of run {run_id} as "
                    f"{_short(earlier_body)} at {format_sim_time(earlier.t_ms)} and as "
                    f"{_short(body)} at {format_sim_time(record.t_ms)}; one number names one "
                    "chunk, or the client drops the second as a duplicate",
                    (earlier.seq, record.seq),
                )
            )
            break
    return out


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."
