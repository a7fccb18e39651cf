"""The timeline model behind the HTML report: lanes of spans and marks, built from records.

One lane per agent path (facets nested under their root, the platform first), each with rows:
incarnations (start trigger to end cause), alarm handler runs (fired to done / failed / killed /
interrupted) with alarm marks, an event row (faults, hook deliveries, errors), fibers (started
to their outcome, a dashed tail when the incarnation died before recovery settled them) and
agent-tool runs (first mention to their terminal status, a dashed tail to a later one). Every
span and mark keeps both its sim time and its record index, so the page can lay it out by time
or by event order, and the seq of the record a click should show.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reports._format import duration, one_line, sim_time
from reports.shortlog import detail

__all__ = ["Lane", "Mark", "Span", "Timeline", "build", "css_token"]

MAX_SUB_ROWS = 6
"""Fibers or runs that overlap in time share at most this many rows per lane (then overlap)."""
_RUN_STATUS_BY_KIND = {
    "finished": "completed",
    "error": "error",
    "aborted": "aborted",
    "interrupted": "interrupted",
}
_RUN_TERMINAL_EVENTS = frozenset(
    {"agent_tool:recovery:row", "agent_tool:child:reconciled", "hook:on_agent_tool_finish"}
)
_ALARM_OUTCOMES = {
    "alarm:done": "done",
    "alarm:failed": "failed",
    "alarm:killed": "killed",
    "alarm:interrupted": "interrupted",
}
_FIBER_OUTCOMES = {
    "fiber:run:completed": "completed",
    "fiber:run:failed": "failed",
    "fiber:run:interrupted": "interrupted",
    "fiber:recovery:handled": "recovered",
    "fiber:recovery:failed": "recovery-failed",
    "fiber:recovery:skipped": "skipped",
}
_ERRORS = frozenset(
    {
        "startup:failed",
        "rpc:error",
        "task:error",
        "upstream:error",
        "console:error",
        "schedule:error",
        "agent_tool:recovery:failed",
        "agent_tool:detached:delivery_failed",
    }
)
_WARNINGS = frozenset(
    {"console:warn", "schedule:duplicate_warning", "agent_tool:detached:live_count_warning"}
)
_RANK = {"fault": 0, "killed": 1, "error": 2, "failed": 3, "given-up": 4, "warning": 5}
_RANK |= {quiet: 7 for quiet in ("other", "set", "deleted", "deploy", "retry")}


def css_token(text: Any) -> str:
    """A trace value made safe to sit in a class name (`budget-exceeded`, `alarm-limit`)."""
    token = re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")
    return token[:32] or "unknown"


@dataclass
class Span:
    """Something that lasted: from (t0, s0) to (t1, s1), in sim ms and record index."""

    row: str
    t0: int
    s0: int
    t1: int
    s1: int
    status: str
    label: str
    lines: list[str]
    seq: int
    open_end: bool = False
    mid: tuple[int, int] | None = None
    """Where the solid part ends and a dashed tail begins (the incarnation died, or a later
    terminal followed the first)."""
    end_status: str | None = None
    sub: int = 0


@dataclass
class Mark:
    """Something that happened at one instant (several records at one time share a mark)."""

    row: str
    t: int
    s: int
    shape: str
    status: str
    lines: list[str]
    seq: int
    count: int = 1


@dataclass
class Lane:
    path: str
    label: str
    depth: int
    first: int
    spans: list[Span] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    rows: list[tuple[str, int]] = field(default_factory=list)
    """(row kind, sub-row) from top to bottom."""


@dataclass
class Timeline:
    lanes: list[Lane]
    deploys: list[Mark]
    regions: list[Span]
    end_t: int
    count: int
    times: list[int] = field(default_factory=list)
    """Sim time of each record, by record index."""
    seqs: list[int] = field(default_factory=list)


def record_line(record: Mapping[str, Any]) -> str:
    text = f"{sim_time(record['t'])}  {one_line(str(record['event']))}  {detail(record, 80)}"
    return text.rstrip()


@dataclass
class _Open:
    """A span still being built: its records and statuses so far."""

    t0: int
    s0: int
    seq: int
    inc: int
    name: str = ""
    records: list[tuple[int, Mapping[str, Any]]] = field(default_factory=list)
    terminals: list[tuple[int, int, str]] = field(default_factory=list)


class _Builder:
    def __init__(self, records: Sequence[Mapping[str, Any]]) -> None:
        self.records = records
        self.end_t = max((int(r["t"]) for r in records), default=0)
        self.last = max(len(records) - 1, 0)
        self.lanes: dict[str, Lane] = {}
        self.inc_open: dict[tuple[str, int], tuple[int, int, str, int]] = {}
        self.inc_end: dict[tuple[str, int], tuple[int, int]] = {}
        self.alarm_open: dict[str, tuple[int, int, int, Mapping[str, Any]]] = {}
        self.fibers: dict[tuple[str, str], _Open] = {}
        self.fibers_done: list[tuple[str, _Open]] = []
        self.runs: dict[tuple[str, str], _Open] = {}
        self.deploys: list[Mark] = []
        self.regions: list[Span] = []
        self.quiesce: tuple[int, int, int] | None = None

    # -- records ---------------------------------------------------------------------------
    def lane(self, path: str, index: int) -> Lane:
        if path not in self.lanes:
            self.lanes[path] = Lane(path=path, label=path or "platform", depth=0, first=index)
        return self.lanes[path]

    def feed(self, s: int, record: Mapping[str, Any]) -> None:
        agent, event = str(record["agent"]), str(record["event"])
        lane = self.lane(agent, s)
        if agent == "":
            self.platform(s, record, lane)
        elif event.startswith("incarnation:"):
            self.incarnation(s, record, lane)
        elif event.startswith("alarm:"):
            self.alarm(s, record, lane)
        elif event.startswith("fiber:") and ("fiberId" in record or "fiberName" in record):
            self.fiber(s, record, agent)
        elif event.startswith("fiber:"):
            # A record of the recovery scan itself (`fiber:recovery:pass`, `:backoff`) names
            # no fiber: it is a mark of the agent, not a fiber of its own.
            self.mark(lane, "event", s, record, "tick", "other")
        elif event.startswith("fault:"):
            shape = "fault-armed" if event == "fault:armed" else "fault"
            self.mark(lane, "event", s, record, shape, "fault")
        elif event.startswith("hook:"):
            slot = "give-up" if record.get("slot") == "give_up" else "hook"
            self.mark(lane, "event", s, record, slot, css_token(record.get("status", "")))
        elif event in _ERRORS:
            self.mark(lane, "event", s, record, "dot", "error")
        elif event in _WARNINGS:
            self.mark(lane, "event", s, record, "dot", "warning")
        elif event in ("storage:wiped", "facet:deleted"):
            self.mark(lane, "event", s, record, "square", "other")
        self.agent_tool_run(s, record, agent, event)

    def platform(self, s: int, record: Mapping[str, Any], lane: Lane) -> None:
        event, t = str(record["event"]), int(record["t"])
        if event == "platform:deploy":
            self.mark(lane, "event", s, record, "diamond", "deploy")
            self.deploys.append(
                Mark("all", t, s, "line", "deploy", [record_line(record)], _seq(record))
            )
        elif event == "quiesce:begin":
            self.quiesce = (t, s, _seq(record))
            self.mark(lane, "event", s, record, "tick", "other")
        elif event == "quiesce:end" and self.quiesce is not None:
            t0, s0, seq = self.quiesce
            self.regions.append(
                Span("all", t0, s0, t, s, "quiesce", "liveness phase", [record_line(record)], seq)
            )
            self.quiesce = None
            self.mark(lane, "event", s, record, "tick", "other")
        else:
            self.mark(lane, "event", s, record, "tick" if ":" in event else "dot", "other")

    def incarnation(self, s: int, record: Mapping[str, Any], lane: Lane) -> None:
        agent, inc, t = lane.path, int(record["inc"]), int(record["t"])
        key = (agent, inc)
        if record["event"] == "incarnation:start":
            self.inc_open[key] = (t, s, str(record.get("trigger", "?")), _seq(record))
        elif record["event"] == "incarnation:end":
            t0, s0, trigger, seq = self.inc_open.pop(key, (t, s, "?", _seq(record)))
            reason = str(record.get("reason", "?"))
            self.inc_end[key] = (t, s)
            lines = [
                f"{agent} incarnation #{inc}",
                f"started {sim_time(t0)} by {one_line(trigger)}",
                f"ended {sim_time(t)}: {one_line(reason)} (after {duration(t - t0)})",
            ]
            label = f"#{inc} {one_line(trigger)} → {one_line(reason)}"
            lane.spans.append(Span("inc", t0, s0, t, s, css_token(reason), label, lines, seq))

    def alarm(self, s: int, record: Mapping[str, Any], lane: Lane) -> None:
        event, t = str(record["event"]), int(record["t"])
        if event == "alarm:fired":
            if lane.path in self.alarm_open:  # the last firing never recorded an outcome
                t0, s0, seq, fired = self.alarm_open[lane.path]
                lines = [record_line(fired), "no outcome recorded before the next firing"]
                lane.spans.append(Span("alarm", t0, s0, t, s, "running", "alarm", lines, seq))
            self.alarm_open[lane.path] = (t, s, _seq(record), record)
            return
        if event in _ALARM_OUTCOMES:
            outcome = _ALARM_OUTCOMES[event]
            t0, s0, seq, fired = self.alarm_open.pop(lane.path, (t, s, _seq(record), record))
            lines = [record_line(fired)] if fired is not record else []
            lines += [record_line(record), f"handler ran {duration(t - t0)}"]
            label = f"alarm {outcome}"
            lane.spans.append(Span("alarm", t0, s0, t, s, outcome, label, lines, seq))
            if outcome != "done":
                self.mark(lane, "alarm", s, record, "cross", outcome)
            return
        shapes = {
            "alarm:set": ("tick", "set"),
            "alarm:deleted": ("tick", "deleted"),
            "alarm:retry": ("ring", "retry"),
            "alarm:given_up": ("square", "given-up"),
        }
        shape, status = shapes.get(event, ("dot", "warning"))
        self.mark(lane, "alarm", s, record, shape, status)

    def fiber(self, s: int, record: Mapping[str, Any], agent: str) -> None:
        event = str(record["event"])
        fiber_id = str(record.get("fiberId", record.get("fiberName")))
        key = (agent, fiber_id)
        if event == "fiber:run:started" and key in self.fibers:
            self.fibers_done.append((agent, self.fibers.pop(key)))
        if key not in self.fibers:
            name = one_line(str(record.get("fiberName", fiber_id)))
            self.fibers[key] = _Open(int(record["t"]), s, _seq(record), int(record["inc"]), name)
        state = self.fibers[key]
        state.records.append((s, record))
        if event in _FIBER_OUTCOMES:
            state.terminals.append((int(record["t"]), s, _FIBER_OUTCOMES[event]))
            if event in ("fiber:run:completed", "fiber:run:failed"):
                self.fibers_done.append((agent, self.fibers.pop(key)))

    def agent_tool_run(self, s: int, record: Mapping[str, Any], agent: str, event: str) -> None:
        """Frames, recovery rows and hooks that name a run (replayed frames are resends)."""
        fields: Mapping[str, Any] = record
        status: Any = None
        if event == "connection:frame":
            frame = record.get("frame")
            if not isinstance(frame, Mapping) or frame.get("type") != "agent-tool-event":
                return
            inner = frame.get("event")
            if frame.get("replay") or not isinstance(inner, Mapping):
                return
            fields, status = inner, _RUN_STATUS_BY_KIND.get(str(inner.get("kind")))
        elif event.startswith(("agent_tool:", "hook:")):
            if event in _RUN_TERMINAL_EVENTS:
                status = record.get("status")
        else:
            return
        run_id = fields.get("runId")
        if not isinstance(run_id, str) or not agent:
            return
        state = self._run(agent, run_id, s, record)
        if isinstance(fields.get("agentType"), str):
            state.name = one_line(fields["agentType"])
        if not state.records or state.records[-1][0] != s:
            state.records.append((s, record))
        if isinstance(status, str) and status not in {st for _, _, st in state.terminals}:
            state.terminals.append((int(record["t"]), s, status))

    def _run(self, agent: str, run_id: str, s: int, record: Mapping[str, Any]) -> _Open:
        key = (agent, run_id)
        if key not in self.runs:
            self.runs[key] = _Open(int(record["t"]), s, _seq(record), int(record["inc"]))
        return self.runs[key]

    def mark(
        self, lane: Lane, row: str, s: int, record: Mapping[str, Any], shape: str, status: str
    ) -> None:
        t = int(record["t"])
        for mark in reversed(lane.marks):
            if mark.row != row:
                continue
            if mark.t == t:
                mark.lines.append(record_line(record))
                mark.count += 1
                if _rank(status) < _rank(mark.status):
                    mark.shape, mark.status = shape, status
                return
            break
        lane.marks.append(Mark(row, t, s, shape, status, [record_line(record)], _seq(record)))

    # -- closing ---------------------------------------------------------------------------
    def finish(self) -> Timeline:
        for (agent, inc), (t0, s0, trigger, seq) in self.inc_open.items():
            lines = [f"{agent} incarnation #{inc}", f"started {sim_time(t0)} by {trigger}"]
            lines.append("still alive at the end of the run")
            label = f"#{inc} {one_line(trigger)} → alive"
            span = Span("inc", t0, s0, self.end_t, self.last, "alive", label, lines, seq, True)
            self.lanes[agent].spans.append(span)
        for agent, (t0, s0, seq, fired) in self.alarm_open.items():
            lines = [record_line(fired), "no outcome recorded"]
            end = (self.end_t, self.last)
            span = Span("alarm", t0, s0, *end, "running", "alarm", lines, seq, True)
            self.lanes[agent].spans.append(span)
        for agent, state in [*self.fibers_done, *((a, st) for (a, _), st in self.fibers.items())]:
            self.lanes[agent].spans.append(self._fiber_span(agent, state))
        for (agent, run_id), state in self.runs.items():
            self._run_child(agent, run_id, state)
            self.lanes[agent].spans.append(self._run_span(run_id, state))
        if self.quiesce is not None:
            t0, s0, seq = self.quiesce
            self.regions.append(
                Span("all", t0, s0, self.end_t, self.last, "quiesce", "liveness phase", [], seq)
            )
        lanes = _arrange(list(self.lanes.values()))
        for lane in lanes:
            lane.spans.sort(key=lambda sp: (sp.s0, sp.s1, sp.seq))
            _pack(lane)
        times = [int(r["t"]) for r in self.records]
        seqs = [_seq(r) for r in self.records]
        return Timeline(
            lanes, self.deploys, self.regions, self.end_t, len(self.records), times, seqs
        )

    def _fiber_span(self, agent: str, state: _Open) -> Span:
        lines = [f'fiber "{state.name}"', *(record_line(r) for _, r in state.records)]
        label = state.name
        died = self.inc_end.get((agent, state.inc))
        if state.terminals:
            t1, s1, status = state.terminals[-1]
            span = Span("fiber", state.t0, state.s0, t1, s1, status, label, lines, state.seq)
            if died is not None and died[1] < s1:
                span.mid, span.end_status = died, status
            return span
        if died is not None:
            lines.append(f"died with incarnation #{state.inc} at {sim_time(died[0])}")
            t1, s1 = died
            return Span("fiber", state.t0, state.s0, t1, s1, "interrupted", label, lines, state.seq)
        lines.append("still running at the end of the run")
        end = (self.end_t, self.last)
        return Span("fiber", state.t0, state.s0, *end, "running", label, lines, state.seq, True)

    def _run_child(self, agent: str, run_id: str, state: _Open) -> None:
        """A run's child is the facet `<agent>/<Class>/<runId>`: the run began no later than
        the child's first record, which may come before any frame or hook names the run."""
        for path, lane in self.lanes.items():
            rest = path[len(agent) + 1 :].split("/") if path.startswith(agent + "/") else []
            if len(rest) == 2 and rest[1] == run_id:
                if lane.first < state.s0:
                    first = self.records[lane.first]
                    state.t0, state.s0, state.seq = int(first["t"]), lane.first, _seq(first)
                state.name = state.name or one_line(rest[0])
                return

    def _run_span(self, run_id: str, state: _Open) -> Span:
        label = f"{one_line(run_id)} {state.name}".rstrip()
        lines = [f"agent-tool run {one_line(run_id)} {state.name}".rstrip()]
        lines += [record_line(r) for _, r in state.records]
        if not state.terminals:
            lines.append("no terminal status in the trace")
            end = (self.end_t, self.last)
            return Span("run", state.t0, state.s0, *end, "running", label, lines, state.seq, True)
        t1, s1, first = state.terminals[0]
        status = css_token(first)
        span = Span("run", state.t0, state.s0, t1, s1, status, label, lines, state.seq)
        if len(state.terminals) > 1:
            last_t, last_s, last = state.terminals[-1]
            span.mid, span.end_status = (t1, s1), css_token(last)
            span.t1, span.s1 = last_t, last_s
        return span


def _seq(record: Mapping[str, Any]) -> int:
    return int(record["seq"])


def _rank(status: str) -> int:
    """Which status a shared mark shows: the most alarming of its records'."""
    return _RANK.get(status, 6)


def _arrange(lanes: list[Lane]) -> list[Lane]:
    """Platform first, then each root in order of first appearance, its facets under it."""
    by_path = {lane.path: lane for lane in lanes}
    parent: dict[str, str | None] = {}
    for lane in lanes:
        owners = [p for p in by_path if p and lane.path.startswith(p + "/")]
        parent[lane.path] = max(owners, key=len) if owners else None
    children: dict[str | None, list[Lane]] = {}
    for lane in sorted(lanes, key=lambda ln: (ln.path != "", ln.first)):
        children.setdefault(parent[lane.path], []).append(lane)
    ordered: list[Lane] = []

    def visit(lane: Lane, depth: int) -> None:
        owner = parent[lane.path]
        lane.depth = depth
        lane.label = lane.path[len(owner) + 1 :] if owner else (lane.path or "platform")
        ordered.append(lane)
        for child in children.get(lane.path, []):
            visit(child, depth + 1)

    for root in children.get(None, []):
        visit(root, 0)
    return ordered


def _pack(lane: Lane) -> None:
    """Give overlapping fibers (and runs) their own sub-rows; decide the lane's rows."""
    rows: list[tuple[str, int]] = [("inc", 0)]
    if any(sp.row == "alarm" for sp in lane.spans) or any(m.row == "alarm" for m in lane.marks):
        rows.append(("alarm", 0))
    if any(m.row == "event" for m in lane.marks):
        rows.append(("event", 0))
    for kind in ("fiber", "run"):
        ends: list[tuple[int, int]] = []
        for span in (sp for sp in lane.spans if sp.row == kind):
            free = [i for i, (t, s) in enumerate(ends) if t <= span.t0 and s < span.s0]
            if free:
                span.sub = free[0]
            elif len(ends) < MAX_SUB_ROWS:
                span.sub = len(ends)
                ends.append((0, 0))
            else:
                span.sub = min(range(len(ends)), key=lambda i: ends[i])
            ends[span.sub] = (span.t1, span.s1)
        rows += [(kind, i) for i in range(len(ends))]
    lane.rows = rows


def build(records: Sequence[Mapping[str, Any]]) -> Timeline:
    """The timeline of a run's records."""
    builder = _Builder(records)
    for index, record in enumerate(records):
        builder.feed(index, record)
    return builder.finish()
