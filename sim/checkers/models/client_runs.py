"""What a client's agent-tool view must hold of each run besides its parts: the metadata of its
`started` frame, its status and terminal fields, and its place in the two lists a UI renders.
An independent model written from the spec (agent-tools §3.1, §3.5, catalogue T-131, T-135,
T-137, T-139) and the project's decisions on the reducer (docs/divergences.md R1 and R2), sharing
no code with the runtime's reducer.

`ClientRunsModel.receive(frame, seq, t_ms)` takes one decoded `agent-tool-event` frame, in the
order the client received it:
- `started` creates the run (`running`), or, while the run is not terminal, overwrites its
  metadata (`agentType`, the frame's `parentToolCallId`, `order`); once the run is terminal it
  changes nothing (T-137);
- a terminal frame sets the status and the fields T-139 and T-135 name: `finished` ->
  `completed` with its `summary` and no `error`; `error` -> `error` with its `error`; `aborted` ->
  `aborted` with `error` = its `reason`; `interrupted` -> `interrupted` with its `error`,
  `reason` and `childStillRunning` (absent keys give none). A terminal after a terminal applies
  too (§3.5: an `interrupted` run is repaired by a later `finished`). `finished` clears the
  `reason` and `childStillRunning` an earlier `interrupted` left (R1); for an `error` or
  `aborted` after an `interrupted` the spec does not say, so whether they stay is left open;
- a terminal frame of a run with no `started` yet is held, and applied right after the run's
  `started` (R2; §3.5 drops it, S5 forbids dropping a genuine frame);
- a terminal frame the client already received (same `parentToolCallId`, run, `sequence` and
  event: the SDK's dedupe key of §3.5, with the event added so that S5 keeps a genuine frame
  whose number another terminal used, such as a re-attach's `no-progress` after a replayed
  `inspect-failed`) is the same frame sent twice, and changes nothing (S5: never double a
  frame);
- chunks change none of these fields (their parts are `models/ui_parts.py`'s).
A `started` repeated while the run is open overwrites its metadata with what it carries, the
same for a replay of one row.

The lists (§3.5, T-131): runs with a `parentToolCallId` are grouped per tool call, the others are
unbound; each list is sorted by `order`, then by run id as JavaScript's `localeCompare` sorts.
`display_order(a, b)` says which of two runs comes first, or None when the spec's order cannot be
told without a locale: run ids that differ only in letter case, or that hold characters other
than ASCII letters, digits, `_` and `-` (`locale_order`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "TERMINAL_KINDS",
    "ClientRunsModel",
    "ModelRun",
    "display_order",
    "locale_order",
    "out_of_order",
]

TERMINAL_KINDS: Mapping[str, str] = {
    "finished": "completed",
    "error": "error",
    "aborted": "aborted",
    "interrupted": "interrupted",
}
"""§3.1: a terminal event kind -> the status it gives the run (T-139)."""

_PRIMARY = {"_": 0, "-": 1} | {d: 2 + int(d) for d in "0123456789"}
_PRIMARY |= {c: 12 + n for n, c in enumerate("abcdefghijklmnopqrstuvwxyz")}


@dataclass
class ModelRun:
    """One run as the client must show it."""

    run_id: str
    agent_type: Any = None
    parent_tool_call_id: Any = None
    order: Any = None
    status: str = "running"
    summary: Any = None
    error: Any = None
    reason: Any = None
    child_still_running: Any = None
    interrupt_fields_open: bool = False
    """An `error` or `aborted` came after an `interrupted`: `reason` and `childStillRunning` may
    be kept or cleared."""
    last_terminal: tuple[str, int, int] | None = None
    """(kind, seq, t_ms) of the terminal frame applied last."""

    def take_started(self, frame: Mapping[str, Any]) -> None:
        event = frame["event"]
        self.agent_type = event.get("agentType")
        self.parent_tool_call_id = frame.get("parentToolCallId")
        self.order = event.get("order")

    def finish(self, event: Mapping[str, Any], seq: int, t_ms: int) -> None:
        kind = str(event.get("kind"))
        interrupted_before = self.status == "interrupted" or self.interrupt_fields_open
        self.status = TERMINAL_KINDS[kind]
        self.last_terminal = (kind, seq, t_ms)
        if kind == "finished":
            self.summary, self.error = event.get("summary"), None
            self.reason = self.child_still_running = None
            self.interrupt_fields_open = False
        elif kind == "interrupted":
            self.error = event.get("error")
            self.reason = event.get("reason")
            self.child_still_running = event.get("childStillRunning")
            self.interrupt_fields_open = False
        else:
            self.error = event.get("error" if kind == "error" else "reason")
            self.interrupt_fields_open = interrupted_before


@dataclass
class ClientRunsModel:
    """Every run one client must show, from the frames it received (see the module docstring)."""

    runs: dict[str, ModelRun] = field(default_factory=dict)
    held: dict[str, list[tuple[Mapping[str, Any], int, int]]] = field(default_factory=dict)
    seen: set[tuple[Any, ...]] = field(default_factory=set)
    """The dedupe keys of the terminal frames received so far."""

    def receive(self, frame: Mapping[str, Any], seq: int, t_ms: int) -> None:
        event = frame["event"]
        run_id, kind = event["runId"], event.get("kind")
        run = self.runs.get(run_id)
        if kind in TERMINAL_KINDS:
            number = frame.get("sequence")
            number = number if isinstance(number, int | float | str) else repr(number)
            content = json.dumps(event, sort_keys=True, default=repr)
            key = (frame.get("parentToolCallId") or "", run_id, number, content)
            if key in self.seen:
                return
            self.seen.add(key)
        if kind == "started":
            if run is None:
                run = self.runs[run_id] = ModelRun(run_id)
                run.take_started(frame)
                for held in self.held.pop(run_id, []):
                    run.finish(*held)
            elif run.status == "running":
                run.take_started(frame)
        elif kind in TERMINAL_KINDS:
            if run is None:
                self.held.setdefault(run_id, []).append((event, seq, t_ms))
            else:
                run.finish(event, seq, t_ms)

    def groups(self) -> dict[str, list[ModelRun]]:
        """Tool call id -> its runs (not yet sorted)."""
        out: dict[str, list[ModelRun]] = {}
        for run_id in sorted(self.runs):
            run = self.runs[run_id]
            if isinstance(run.parent_tool_call_id, str) and run.parent_tool_call_id:
                out.setdefault(run.parent_tool_call_id, []).append(run)
        return out

    def unbound(self) -> list[ModelRun]:
        """The runs with no parent tool call (not yet sorted)."""
        return [self.runs[r] for r in sorted(self.runs) if self.runs[r].parent_tool_call_id is None]


def locale_order(a: str, b: str) -> int | None:
    """-1 when `a` sorts before `b` by `localeCompare` (root collation: `_`, `-`, digits, then
    letters with case ignored at the first level), 1 when after; None when it cannot be told here
    (a character outside that set, or ids equal but for letter case)."""
    try:
        ka, kb = [_PRIMARY[c] for c in a.lower()], [_PRIMARY[c] for c in b.lower()]
    except KeyError:
        return None
    if ka == kb:
        return None
    return -1 if ka < kb else 1


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def display_order(a: ModelRun, b: ModelRun) -> int | None:
    """-1 when `a` must be listed before `b` (by `order`, then run id), 1 when after, None when
    the spec's order cannot be told (an `order` that is not a number, or an undecided id tie)."""
    if not (_number(a.order) and _number(b.order)):
        return None
    if a.order != b.order:
        return -1 if a.order < b.order else 1
    return locale_order(a.run_id, b.run_id)


def out_of_order(shown: Sequence[str], runs: Mapping[str, ModelRun]) -> tuple[str, str] | None:
    """The first pair of run ids the list `shown` puts in the wrong order, or None."""
    for i, first in enumerate(shown):
        for second in shown[i + 1 :]:
            if display_order(runs[first], runs[second]) == 1:
                return first, second
    return None
