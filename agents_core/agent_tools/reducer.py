"""The client side of agent tools: the run-state reducer and the `useAgentToolEvents` analogue.

`apply_agent_tool_event` is the SDK's pure `applyAgentToolEvent` (spec agent-tools §3.5): it folds
one `agent-tool-event` frame into an `AgentToolEventsState` and returns a new state. The clock it
needs for the client's own `at` stamps is passed in (`now_ms`), never read.

`AgentToolEvents` is `useAgentToolEvents` without React: it takes raw WebSocket messages, keeps
only `agent-tool-event` frames, dedupes them and applies them. It lives across reconnects, and so
does what it has seen. The dedupe rule is not the SDK's. The SDK drops any frame whose
`(parentToolCallId, runId, sequence)` it has seen, and wire sequences are not an identity (live
sequences count ephemeral progress frames that replays do not have; re-attach numbers from 1
again), so it drops genuine frames (E17). Seed decision S5 wins: never drop a genuine frame and
never double one. So frames are deduped by what they carry:

* a chunk with `chunkSequence` (the child's stored chunk index, carried by every stored chunk,
  milestones included) is applied at most once per `(runId, chunkSequence)`, whatever its wire
  `sequence` or `replay` flag;
* a milestone chunk is, in addition, applied at most once per `(runId, data.sequence)`: a
  milestone already in `run.milestones` changes nothing, not even `parts` (the reducer itself
  enforces this, where the SDK appends a duplicate part, E18);
* a chunk with `unstoredId` (0.32.0: too large for its child to store, so no `chunkSequence`,
  and at a wire `sequence` the next chunk shares) is applied at most once per
  `(parentToolCallId, runId, unstoredId)`, as the SDK's `agentToolEventDedupeKey` keys it;
* a `data-agent-progress` chunk (ephemeral, never stored, so no `chunkSequence`) is applied every
  time: it only replaces the `progress` projection and adds no part;
* a milestone chunk without `chunkSequence` (0.32.0 replays a child's milestones from its
  inspection, every one at the same wire `sequence`) is admitted and kept once by its own
  sequence, as above;
* any other chunk without `chunkSequence` (a frame from an older server) falls back to the SDK's
  key `(parentToolCallId, runId, sequence)`;
* `started` frames are always applied (the reducer makes them idempotent and ignores them once
  the run is terminal); a terminal frame is a no-op when it equals the last terminal applied to
  its run, or repeats a terminal frame already received (same key, same event); any other
  terminal is applied, so a later `finished` still repairs an `interrupted` run.

A chunk or terminal for a run whose `started` has not arrived yet is not lost (the SDK loses it,
E18/T-141): it is held per run, in arrival order, and applied right after that run's `started`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agents_core.agent_tools.ui_chunks import Part, apply_chunk

__all__ = [
    "AgentToolEvents",
    "AgentToolEventsState",
    "AgentToolRunState",
    "apply_agent_tool_event",
]

NowMs = Callable[[], int]
"""The client's clock in epoch milliseconds, for the `at` of progress it receives."""

FRAME_TYPE = "agent-tool-event"
TERMINAL_STATUSES = frozenset({"completed", "error", "aborted", "interrupted"})
TERMINAL_KINDS = frozenset({"finished", "error", "aborted", "interrupted"})
PROGRESS_PART = "data-agent-progress"
MILESTONE_PART = "data-agent-milestone"
_PROGRESS_FIELDS = ("fraction", "message", "phase")


@dataclass(frozen=True)
class AgentToolRunState:
    """What a client knows about one run; `status` is `running` until a terminal event."""

    run_id: str
    agent_type: str
    order: int | float
    parent_tool_call_id: str | None = None
    input_preview: Any = None
    display: Any = None
    status: str = "running"
    parts: list[Part] = field(default_factory=list)
    summary: str | None = None
    error: str | None = None
    reason: str | None = None
    child_still_running: bool | None = None
    progress: dict[str, Any] | None = None
    milestones: list[dict[str, Any]] = field(default_factory=list)
    sub_agent: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentToolEventsState:
    """All runs by id, plus the two views a UI renders: per parent tool call, and unbound."""

    runs_by_id: dict[str, AgentToolRunState] = field(default_factory=dict)
    runs_by_tool_call_id: dict[str, list[AgentToolRunState]] = field(default_factory=dict)
    unbound_runs: list[AgentToolRunState] = field(default_factory=list)


def apply_agent_tool_event(
    state: AgentToolEventsState, frame_or_event: Mapping[str, Any], now_ms: NowMs
) -> AgentToolEventsState:
    """The state after one frame (or a bare event, unbound); `state` itself is never changed.

    Returns `state` itself when the frame changes nothing: not an `agent-tool-event`, malformed,
    for an unknown run (other than `started`), a `started` for a terminal run, or a chunk whose
    body does not parse or apply.
    """
    parsed = _frame_parts(frame_or_event)
    if parsed is None:
        return state
    parent_tool_call_id, event = parsed
    run_id = event["runId"]
    run = state.runs_by_id.get(run_id)
    kind = event["kind"]
    if kind == "started":
        new_run = _started(run, parent_tool_call_id, event)
    elif run is None:
        return state
    elif kind == "chunk":
        new_run = _chunk(run, event, now_ms)
    else:
        new_run = _terminal(run, event)
    if new_run is None or new_run is run:
        return state
    runs_by_id = {**state.runs_by_id, run_id: new_run}
    return _with_indexes(runs_by_id)


class AgentToolEvents:
    """`useAgentToolEvents` for one client: feed it every WebSocket message with `receive`."""

    def __init__(self, now_ms: NowMs) -> None:
        self._now_ms = now_ms
        self.reset_local_state()

    def reset_local_state(self) -> None:
        """Forget every run and everything seen, so that a replay rebuilds from nothing."""
        self._state = AgentToolEventsState()
        self._seen_chunks: set[tuple[str, int]] = set()
        self._seen_keys: set[tuple[str, str, int | float]] = set()
        self._seen_unstored: set[tuple[str, str, str]] = set()
        self._seen_terminals: set[tuple[str, str, int | float, str]] = set()
        self._last_terminal: dict[str, dict[str, Any]] = {}
        self._waiting: dict[str, list[dict[str, Any]]] = {}

    def receive(self, message: Any) -> bool:
        """Take one raw message; True if it changed the state or is held for its run's `started`."""
        frame = _decode(message)
        if frame is None or _frame_parts(frame) is None or not self._is_new(frame):
            return False
        event = frame["event"]
        run_id = event["runId"]
        if event["kind"] != "started" and run_id not in self._state.runs_by_id:
            self._waiting.setdefault(run_id, []).append(frame)
            return True
        before = self._state
        self._apply(frame)
        if event["kind"] == "started":
            for waiting in self._waiting.pop(run_id, []):
                self._apply(waiting)
        return self._state is not before

    @property
    def state(self) -> AgentToolEventsState:
        return self._state

    @property
    def runs_by_id(self) -> dict[str, AgentToolRunState]:
        return self._state.runs_by_id

    @property
    def unbound_runs(self) -> list[AgentToolRunState]:
        return self._state.unbound_runs

    def get_runs_for_tool_call(self, tool_call_id: str) -> list[AgentToolRunState]:
        """The runs started by one parent tool call, in display order ([] if none)."""
        return list(self._state.runs_by_tool_call_id.get(tool_call_id, []))

    def _is_new(self, frame: dict[str, Any]) -> bool:
        """Admit a frame by its identity (see the module docstring), and remember it."""
        event = frame["event"]
        kind = event["kind"]
        if kind == "started":
            return True
        key = (frame.get("parentToolCallId") or "", event["runId"], frame["sequence"])
        if kind in TERMINAL_KINDS:
            repeat = (*key, json.dumps(event, sort_keys=True, default=repr))
            return _first_time(self._seen_terminals, repeat)
        chunk_sequence = _chunk_sequence(event)
        if chunk_sequence is not None:
            return _first_time(self._seen_chunks, (event["runId"], chunk_sequence))
        unstored = event.get("unstoredId")
        if isinstance(unstored, str):
            return _first_time(self._seen_unstored, (key[0], event["runId"], unstored))
        if _chunk_type(event) in (PROGRESS_PART, MILESTONE_PART):
            return True
        return _first_time(self._seen_keys, key)

    def _apply(self, frame: dict[str, Any]) -> None:
        event = frame["event"]
        run_id = event["runId"]
        if event["kind"] in TERMINAL_KINDS:
            if self._last_terminal.get(run_id) == event:
                return
            self._last_terminal[run_id] = copy.deepcopy(event)
        self._state = apply_agent_tool_event(self._state, frame, self._now_ms)


# --- the reducer's rules --------------------------------------------------------------------


def _started(
    run: AgentToolRunState | None, parent_tool_call_id: str | None, event: dict[str, Any]
) -> AgentToolRunState | None:
    if run is not None and run.status in TERMINAL_STATUSES:
        return None  # a replayed `started` must not reopen a finished run
    agent_type = event["agentType"]
    metadata = {
        "run_id": event["runId"],
        "agent_type": agent_type,
        "parent_tool_call_id": parent_tool_call_id,
        "input_preview": copy.deepcopy(event.get("inputPreview")),
        "order": event["order"],
        "display": copy.deepcopy(event.get("display")),
        "status": "running",
        "sub_agent": {"agent": agent_type, "name": event["runId"]},
    }
    return AgentToolRunState(**metadata) if run is None else replace(run, **metadata)


def _chunk(run: AgentToolRunState, event: dict[str, Any], now_ms: NowMs) -> AgentToolRunState:
    body = event.get("body")
    if not isinstance(body, str):
        return run
    try:
        chunk = json.loads(body)
    except ValueError:
        return run
    milestone = _milestone(chunk, now_ms) if _type_of(chunk) == MILESTONE_PART else None
    if milestone is not None and any(
        m["sequence"] == milestone["sequence"] for m in run.milestones
    ):
        return run  # S5: a milestone is shown once, however often it is delivered
    if _type_of(chunk) == PROGRESS_PART:
        # a signal, not content: it never adds a part, even without its `transient` flag
        return replace(run, progress=_progress(chunk, now_ms()))
    try:
        parts = apply_chunk(run.parts, chunk)
    except ValueError:
        return run
    changes: dict[str, Any] = {"parts": parts}
    if milestone is not None:
        milestones = sorted([*run.milestones, milestone], key=lambda m: m["sequence"])
        changes["milestones"] = milestones
        if run.progress is None or milestone["at"] >= run.progress["at"]:
            changes["progress"] = _milestone_progress(chunk["data"], milestone)
    return replace(run, **changes)


def _terminal(run: AgentToolRunState, event: dict[str, Any]) -> AgentToolRunState:
    kind = event["kind"]
    if kind == "finished":
        # A repaired run drops the interrupt's cause, as its row does (T-126); the SDK's
        # reducer keeps it (E18), which shows a completed run as "no-progress".
        return replace(
            run,
            status="completed",
            summary=event.get("summary"),
            error=None,
            reason=None,
            child_still_running=None,
        )
    if kind == "error":
        return replace(run, status="error", error=event.get("error"))
    if kind == "aborted":
        return replace(run, status="aborted", error=event.get("reason"))
    return replace(
        run,
        status="interrupted",
        error=event.get("error"),
        reason=event.get("reason"),
        child_still_running=event.get("childStillRunning"),
    )


def _progress(chunk: dict[str, Any], at_ms: int) -> dict[str, Any]:
    data = chunk.get("data")
    data = data if isinstance(data, dict) else {}
    progress = {k: data[k] for k in (*_PROGRESS_FIELDS, "data") if data.get(k) is not None}
    progress["at"] = at_ms
    return progress


def _milestone(chunk: dict[str, Any], now_ms: NowMs) -> dict[str, Any] | None:
    """The `{name, sequence, at, data?}` entry of a milestone chunk; None if it has no name."""
    data = chunk.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    sequence = data.get("sequence")
    at = data.get("at")
    milestone: dict[str, Any] = {
        "name": data["name"],
        "sequence": sequence if _is_number(sequence) else 0,
        "at": at if _is_number(at) else now_ms(),
    }
    if data.get("data") is not None:
        milestone["data"] = data["data"]
    return milestone


_COLLATED = "_-0123456789abcdefghijklmnopqrstuvwxyz"
"""The characters of a generated run id (a nanoid: ASCII letters, digits, `_`, `-`) in the
order the default collation puts them, letter case aside."""
_PRIMARY = {c: i for i, c in enumerate(_COLLATED)}


def collation_key(text: str) -> tuple[Any, ...]:
    """A sort key that orders strings as JavaScript's `localeCompare` does with the default
    locale (`a.localeCompare(b)`, which the SDK's reducer sorts run ids by, §3.5): `_` before
    `-` before digits before letters, letters compared without case first, and where only case
    differs, lower case first, position by position. A character outside the nanoid alphabet
    sorts after those, by code point (a run id a caller chose with such characters may then be
    placed otherwise than by the full collation)."""
    primary = tuple((0, _PRIMARY[c]) if c in _PRIMARY else (1, ord(c)) for c in text.lower())
    return (primary, tuple(c.isupper() for c in text))


def _milestone_progress(data: dict[str, Any], milestone: dict[str, Any]) -> dict[str, Any]:
    progress = {k: data[k] for k in _PROGRESS_FIELDS if data.get(k) is not None}
    progress["milestone"] = milestone["name"]
    progress["at"] = milestone["at"]
    return progress


def _with_indexes(runs_by_id: dict[str, AgentToolRunState]) -> AgentToolEventsState:
    grouped: dict[str, list[AgentToolRunState]] = {}
    unbound: list[AgentToolRunState] = []
    for run in runs_by_id.values():
        if run.parent_tool_call_id:
            grouped.setdefault(run.parent_tool_call_id, []).append(run)
        else:
            unbound.append(run)

    def display_order(run: AgentToolRunState) -> tuple[int | float, tuple[Any, ...]]:
        return (run.order, collation_key(run.run_id))

    return AgentToolEventsState(
        runs_by_id=runs_by_id,
        runs_by_tool_call_id={k: sorted(v, key=display_order) for k, v in grouped.items()},
        unbound_runs=sorted(unbound, key=display_order),
    )


# --- reading frames -------------------------------------------------------------------------


def _decode(message: Any) -> dict[str, Any] | None:
    """The frame in a raw message: JSON text or a decoded object; None for anything else."""
    if isinstance(message, str):
        try:
            message = json.loads(message)
        except ValueError:
            return None
    if not isinstance(message, dict) or message.get("type") != FRAME_TYPE:
        return None
    return message


def _frame_parts(frame: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]] | None:
    """(parentToolCallId, event) of a well-formed frame or bare event; None if malformed."""
    if not isinstance(frame, Mapping):
        return None
    if "event" in frame or "type" in frame:
        if frame.get("type") != FRAME_TYPE or not _is_number(frame.get("sequence")):
            return None
        event = frame.get("event")
        parent = frame.get("parentToolCallId")
    else:
        event, parent = frame, None
    if not isinstance(event, dict) or not isinstance(event.get("runId"), str):
        return None
    if parent is not None and not isinstance(parent, str):
        return None
    kind = event.get("kind")
    if kind == "started":
        if not isinstance(event.get("agentType"), str) or not _is_number(event.get("order")):
            return None
    elif kind != "chunk" and kind not in TERMINAL_KINDS:
        return None
    return parent, event


def _chunk_sequence(event: dict[str, Any]) -> int | None:
    value = event.get("chunkSequence")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _chunk_type(event: dict[str, Any]) -> str | None:
    body = event.get("body")
    if not isinstance(body, str):
        return None
    try:
        return _type_of(json.loads(body))
    except ValueError:
        return None


def _type_of(chunk: Any) -> str | None:
    return chunk.get("type") if isinstance(chunk, dict) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _first_time(seen: set[Any], identity: Any) -> bool:
    if identity in seen:
        return False
    seen.add(identity)
    return True
