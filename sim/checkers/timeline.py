"""The client-side invariant of agent tools: `client_timeline_exact` (seed decision S5: a client's
reduced timeline never drops a genuine frame and never doubles one).

A client's frames are the `connection:frame` records of the connections it opened
(`connection:open {client}`) to one agent, across reconnects, in order — what it received. The
checker has them reduced, once each, by the runtime's own client reducer (`sim.client_views`: the
subject under check) and compares the runs it ends with against a reference built from the same
frames by identity with the independent model `sim.checkers.models.ui_parts` (written from the
spec, sharing no code with the reducer): a stored chunk is the child's chunk number
`chunkSequence` of its run, whatever its wire `sequence` or `replay` flag, so each
(run, chunkSequence) is one genuine frame. It also compares each received stored
chunk with the chunk the child itself stored under that number (the scripted child's
`child_chunks`, a chat host's `cf_ai_chat_stream_chunks`), when the child's storage shows it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.models.ui_parts import ClientRunModel, project
from sim.checkers.registry import invariant
from sim.checkers.storage import row_changes
from sim.client_views import reduce_client_frames
from sim.trace import TraceRecord, format_sim_time

__all__ = ["child_chunks", "client_frames", "client_timeline_exact", "decode_frame"]

FRAME_TYPE = "agent-tool-event"
PROGRESS = "data-agent-progress"


def client_frames(context: CheckContext) -> dict[tuple[str, str], list[TraceRecord]]:
    """(agent, client name) -> the `connection:frame` records that client received, in order.

    A run cleared by its parent and started again under the same id is a second run a client
    cannot tell from the first: clearing sends no frame, and a client keeps a cleared run until
    it resets (agent-tools §8.1 step 4, E22), so its reducer takes the new run's frames for
    ones it has seen. The frames of such a run that reach a client after the clear, when that
    client had seen the run before it, are left out: what a client shows of a reused run id is
    not judged past the clear."""
    owner: dict[tuple[str, Any], str] = {}
    out: dict[tuple[str, str], list[TraceRecord]] = defaultdict(list)
    cleared = _cleared_runs(context)
    first_seen: dict[tuple[str, str, str], int] = {}
    for record in context.records:
        if record.event == "connection:open":
            owner[(record.agent, record.get("connection"))] = str(record.get("client"))
        elif record.event == "connection:frame":
            client = owner.get((record.agent, record.get("connection")))
            if client is None:
                continue
            frame = decode_frame(record.get("frame"))
            if frame is not None:
                run = str(frame["event"]["runId"])
                seen = first_seen.setdefault((record.agent, client, run), record.t_ms)
                clears = cleared.get((record.agent, run), ())
                if any(seen < at <= record.t_ms for at in clears):
                    continue
            out[(record.agent, client)].append(record)
    return out


def _cleared_runs(context: CheckContext) -> dict[tuple[str, str], list[int]]:
    """(parent, run id) -> the instants its `cf_agent_tool_runs` row was deleted, from the
    parent's journal of committed turns."""
    out: dict[tuple[str, str], list[int]] = defaultdict(list)
    for path in sorted(context.journals):
        instants = context.journal_ms.get(path, ())
        for change in row_changes(context.journals[path], "cf_agent_tool_runs", "run_id"):
            if change.after is None and change.before is not None and change.turn <= len(instants):
                out[(path, str(change.key))].append(instants[change.turn - 1])
    return out


def decode_frame(frame: Any) -> dict[str, Any] | None:
    """A client frame (as recorded: text or dict) as a dict when it is an agent-tool event of a
    run (its `event` a dict with a string `runId`), else None."""
    if isinstance(frame, str):
        try:
            frame = json.loads(frame)
        except ValueError:
            return None
    if not isinstance(frame, dict) or frame.get("type") != FRAME_TYPE:
        return None
    event = frame.get("event")
    if not isinstance(event, dict) or not isinstance(event.get("runId"), str):
        return None
    return frame


def _parse(body: Any) -> Any:
    try:
        return json.loads(body) if isinstance(body, str) else None
    except ValueError:
        return None


def _chunk_sequence(event: Mapping[str, Any]) -> int | None:
    value = event.get("chunkSequence")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


@dataclass
class _Reference:
    """What a client must show of one run when each genuine frame is applied exactly once."""

    started: bool = False
    model: ClientRunModel = field(default_factory=ClientRunModel)
    held: list[Any] = field(default_factory=list)
    unknown: bool = False
    """A content chunk without `chunkSequence` arrived: its identity cannot be told."""

    def apply(self, chunk: Any) -> None:
        if not self.started:
            self.held.append(chunk)
            return
        self.model.apply(chunk)

    def start(self) -> None:
        self.started = True
        held, self.held = self.held, []
        for chunk in held:
            self.apply(chunk)


def child_chunks(context: CheckContext, child: str, run_id: str) -> dict[int, Any] | None:
    """The chunks the child stored for a run, by number (parsed), or None when its storage
    shows none in a known shape."""
    tables = context.storage.get(child)
    if not tables:
        return None
    if "child_chunks" in tables:
        return {
            int(r["seq"]): _parse(r.get("body"))
            for r in tables["child_chunks"]
            if r.get("run_id") == run_id and isinstance(r.get("seq"), int)
        }
    stream = None
    for row in tables.get("cf_agent_tool_child_runs", ()):
        if row.get("run_id") == run_id:
            stream = row.get("stream_id")
    for row in tables.get("cf_ai_chat_agent_tool_runs", ()):
        if row.get("run_id") == run_id:
            ids = [
                m.get("id")
                for m in tables.get("cf_ai_chat_stream_metadata", ())
                if m.get("request_id") == row.get("request_id")
            ]
            stream = ids[0] if len(ids) == 1 else None
    if stream is None:
        return None
    return {
        int(r["chunk_index"]): _parse(r.get("body"))
        for r in tables.get("cf_ai_chat_stream_chunks", ())
        if r.get("stream_id") == stream and isinstance(r.get("chunk_index"), int)
    }


@invariant("client_timeline_exact")
def client_timeline_exact(context: CheckContext) -> list[Violation]:
    """S5 — a client's reduced timeline never drops a genuine frame and never doubles one,
    across replays, live frames and reconnects.

    For every client of every agent (its frames as in the module docstring):
    1. every received `chunk` frame with `chunkSequence` k of run R (not written in a turn that
       may have rolled back) carries the chunk the child stored as number k of R, when the child's
       storage shows it;
    2. the runtime's reducer, fed every frame once, ends with, for each run whose `started` frame
       arrived, the parts (the fields the spec names, `project`) and milestones (name, sequence)
       the independent model builds: each (R, k) applied once, in order of first arrival, chunks
       of a run held until its `started`, progress chunks adding no part and a milestone already
       shown adding nothing. Runs that received a
       content chunk without `chunkSequence` are skipped (no identity to check by).
    """
    out: list[Violation] = []
    cleared = _cleared_runs(context)
    for (agent, client), records in sorted(client_frames(context).items()):
        shown_runs = reduce_client_frames(records)
        references: dict[str, _Reference] = defaultdict(_Reference)
        seen: set[tuple[str, int]] = set()
        agent_types: dict[str, Any] = {}
        stored: dict[str, dict[int, Any] | None] = {}
        wrong: list[str] = []
        for record in records:
            frame = decode_frame(record.get("frame"))
            if frame is None:
                continue
            event = frame["event"]
            run_id, kind = event["runId"], event.get("kind")
            reference = references[run_id]
            if kind == "started":
                agent_types.setdefault(run_id, event.get("agentType"))
                if not reference.started:
                    reference.start()
                continue
            if kind != "chunk":
                continue
            chunk = _parse(event.get("body"))
            number = _chunk_sequence(event)
            if number is None:
                if not (isinstance(chunk, dict) and chunk.get("type") == PROGRESS):
                    reference.unknown = True
                continue
            if run_id not in stored and run_id in agent_types:
                # A run cleared at some point: its child's storage now is a later run's, or none.
                stored[run_id] = (
                    None
                    if (agent, run_id) in cleared
                    else child_chunks(context, f"{agent}/{agent_types[run_id]}/{run_id}", run_id)
                )
            child = stored.get(run_id)
            if (
                child is not None
                and number in child
                and child[number] != chunk
                and not context.may_have_rolled_back(record)
                and not wrong
            ):
                wrong.append(
                    f"received chunk {number} of run {run_id} at {format_sim_time(record.t_ms)} "
                    f"as {_short(event.get('body'))}, but the child stored {_short(child[number])}"
                    f" as chunk {number}"
                )
            if (run_id, number) in seen:
                continue
            seen.add((run_id, number))
            reference.apply(chunk)
        for run_id, reference in sorted(references.items()):
            if not reference.started or reference.unknown:
                continue
            run = shown_runs.get(run_id)
            shown = [] if run is None else run["milestones"]
            parts = None if run is None else project(run["parts"])
            model = reference.model
            if run is not None and parts == model.parts and shown == model.milestones:
                continue
            wrong.append(
                f"shows run {run_id} with parts {_short(parts)} and "
                f"milestones {shown}, where its frames, each applied once, give parts "
                f"{_short(model.parts)} and milestones {model.milestones}"
            )
        for problem in wrong[:1]:
            out.append(
                Violation(
                    "client_timeline_exact",
                    agent,
                    client,
                    f"client {client} of {agent} {problem}",
                )
            )
    return out


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."
