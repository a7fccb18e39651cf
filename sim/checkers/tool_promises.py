"""Promises of the agent-tools seed that runs can show, beyond the finish ledger (`delivery`,
`ledgers`) and the other agent-tool checkers (`tools`, `tool_rows`): `retryable_only_interrupted`
(a failure envelope is retryable exactly when its run was interrupted) and `silent_runs_given_up`
(a detached run silent past its no-progress window is given up within a tick of the backbone).
The promises about finish notices are in `tool_notices`, those about a run's child in
`tool_children`, and those about the parent's registry in `tool_registry`.

Where they look:

- Failure envelopes (`agentTool()`'s `{ok: false, status, error, retryable}`, agent-tools §2.1):
  the tool outputs in a chat transcript, and the library's `StoryParent`, which notes every
  awaited attempt with the `retryable` of the envelope it would hand a model
  (`story:attempt {run, attempt, status, retryable}`; `retryable` is None when it made no
  envelope: a completed run, or a batch run in parallel).
- The signals of a detached run (§4.6): every committed value of the child's `last_signal_at`
  (the child's journal of its own run row, in any table of the child facet with `run_id` and
  `last_signal_at` columns), the `at` of its milestone rows, and every committed value of the
  parent row's `last_progress_at` since the row was inserted. The run is given up at the first
  claim of its `give_up` slot (the parent's journal, or the final row) or the first
  `hook:on_agent_tool_finish {slot: give_up}`, whichever comes first.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

# These register the checkers of the two sibling modules, until `sim/checkers/__init__.py`
# imports them itself.
from sim.checkers.alarm_slot import AlarmRun, alarm_runs
from sim.checkers.alarms import SCHEDULE_LATENESS_MS
from sim.checkers.core import HARD_TERMINAL, CheckContext, Violation
from sim.checkers.core import json_cell as _json
from sim.checkers.core import time_words as _at
from sim.checkers.models.spec_constants import (
    DETACHED_BACKBONE_CADENCE_S,
    DETACHED_RECONCILE_CALLBACK,
)
from sim.checkers.registry import invariant
from sim.checkers.storage import RowChange, row_changes

__all__ = ["TICK_LATENESS_MS", "retryable_only_interrupted", "silent_runs_given_up"]

RUNS = "cf_agent_tool_runs"
MESSAGES = "cf_ai_chat_agent_messages"
TICK_LATENESS_MS = DETACHED_BACKBONE_CADENCE_S[-1] * 1000 + SCHEDULE_LATENESS_MS
"""How long after a budget ran out a detached run may wait for its give-up: the backbone's
slowest cadence (120 s between ticks, agent-tools §4.5), plus the lateness a due schedule row is
allowed (`SCHEDULE_LATENESS_MS`)."""
BACKBONE_STOPS = ("alarm:given_up", "alarm:memory_limit_reset")
"""Records of the top-level agent after which its alarm, and with it the backbone, may not run
when due."""


def _instants(values: Iterable[Any]) -> list[int]:
    return sorted(
        {int(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)}
    )


# -- retryable_only_interrupted -----------------------------------------------------------------
@invariant("retryable_only_interrupted")
def retryable_only_interrupted(context: CheckContext) -> list[Violation]:
    """agent-tools §2.1 and the seed — a failure envelope is `retryable` exactly when its run
    was `interrupted` (the child was reset or replaced and never reached a logical result); a
    real `error` or a deliberate `aborted` is final.

    Every `story:attempt` whose `retryable` is a boolean has `retryable` true exactly when its
    `status` is `interrupted`; so does every tool output in a chat transcript shaped as a
    failure envelope (a mapping with `ok: false`, a string `status` and a boolean `retryable`).
    An attempt with no envelope (`retryable` None) is not judged.
    """
    out = []
    for note in context.events("story:attempt"):
        retryable, status = note.get("retryable"), note.get("status")
        if not isinstance(retryable, bool) or retryable == (status == "interrupted"):
            continue
        run = str(note.get("run"))
        out.append(
            Violation(
                "retryable_only_interrupted",
                note.agent,
                run,
                f"attempt {note.get('attempt')} of run {run} of {note.agent} ended {status} at "
                f"{_at(note.t_ms)} with a failure envelope saying retryable "
                f"{str(retryable).lower()}; only an interrupted run is retryable",
                (note.seq,),
            )
        )
    for agent in context.paths():
        for row in context.table(agent, MESSAGES):
            for envelope in _envelopes(_json(row.get("message"))):
                retryable, status = envelope["retryable"], envelope["status"]
                if retryable == (status == "interrupted"):
                    continue
                out.append(
                    Violation(
                        "retryable_only_interrupted",
                        agent,
                        "",
                        f"message {row.get('id')} of the chat of {agent} holds a tool output "
                        f"that is a failure envelope with status {status} and retryable "
                        f"{str(retryable).lower()}; only an interrupted run is retryable",
                    )
                )
    return out


def _envelopes(message: Any) -> Iterator[Mapping[str, Any]]:
    parts = message.get("parts") if isinstance(message, Mapping) else None
    for part in parts if isinstance(parts, list) else []:
        output = part.get("output") if isinstance(part, Mapping) else None
        if (
            isinstance(output, Mapping)
            and output.get("ok") is False
            and isinstance(output.get("status"), str)
            and isinstance(output.get("retryable"), bool)
        ):
            yield output


# -- silent_runs_given_up -----------------------------------------------------------------------
@invariant("silent_runs_given_up")
def silent_runs_given_up(context: CheckContext) -> list[Violation]:
    """agent-tools §4.5, §4.6 and the seed — after a first signal, a detached run silent for a
    whole `detachedNoProgressBudgetMs` is given up: the backbone looks at every open detached
    run at least every 120 s, and the first tick after the window ran out gives it up.

    For every detached row whose `detached_no_progress_budget_ms` N is finite and positive, and
    every signal s of its run (see the module docstring; at or after the row's `started_at`)
    with no later signal by the deadline D = s + N + `TICK_LATENESS_MS` (if an alarm run of its
    top-level agent is still going at D, a tick may be busy there: D moves to that run's end +
    `TICK_LATENESS_MS`, again while one is going): the run was given up, for either budget, by
    D. Not owed when, by D, the child's own run row was hard terminal (a tick delivers the
    finish instead), the finish slot was claimed (the row leaves the backbone), or the
    top-level agent's alarm was given up or reset for its memory limit, or a backbone tick ended
    in `schedule:error` (a dropped tick schedules no next one), since the row's start. Checked
    after a liveness phase, for a D before the end; a run whose child kept no row is not
    judged.
    """
    if not context.liveness_ran:
        return []
    out = []
    for parent in context.paths():
        rows = [r for r in context.table(parent, RUNS) if r.get("detached")]
        if not rows:
            continue
        history = _since_insert(row_changes(context.journals.get(parent, ()), RUNS, "run_id"))
        runs = alarm_runs(context, context.root_of(parent))
        for row in rows:
            window = row.get("detached_no_progress_budget_ms")
            if not isinstance(window, int | float) or not 0 < window < math.inf:
                continue
            found = _silence(context, parent, row, history.get(row.get("run_id"), []), runs)
            if found is not None:
                out.append(found)
    return out


def _since_insert(changes: Iterator[RowChange]) -> dict[Any, list[RowChange]]:
    """Each key's committed changes since its row was last inserted."""
    out: dict[Any, list[RowChange]] = defaultdict(list)
    for change in changes:
        if change.before is None:
            out[change.key] = []
        out[change.key].append(change)
    return out


def _silence(
    context: CheckContext,
    parent: str,
    row: Mapping[str, Any],
    changes: list[RowChange],
    runs: list[AlarmRun],
) -> Violation | None:
    run_id, window = str(row.get("run_id")), int(row["detached_no_progress_budget_ms"])
    started = int(row.get("started_at") or 0)
    own = context.child_run(parent, row)
    if own is None:
        return None
    child, child_row = own
    done_at = None
    if child_row.get("status") in HARD_TERMINAL:
        done_at = child_row.get("completed_at")
        if not isinstance(done_at, int | float):
            return None
    signals = [s for s in _signals(context, child, run_id, changes, row) if s >= started]
    given_up = _first_use(context, parent, run_id, "give_up", changes, row, started)
    finished = _first_use(context, parent, run_id, "finish", changes, row, started)
    for index, signal in enumerate(signals):
        deadline = _deadline(runs, signal + window)
        if deadline is None or deadline > context.end:
            return None
        later = signals[index + 1] if index + 1 < len(signals) else None
        if later is not None and later <= deadline:
            continue
        if any(t is not None and t <= deadline for t in (done_at, finished, given_up)):
            return None
        if _backbone_stopped(context, parent, started, deadline):
            return None
        still = (
            f"its child was still {child_row.get('status')}"
            if done_at is None
            else f"its child finished only at {_at(done_at)}"
        )
        return Violation(
            "silent_runs_given_up",
            parent,
            run_id,
            f"detached run {run_id} of {parent} signalled at {_at(signal)} and then stayed "
            f"silent: its {window} ms no-progress window ran out at {_at(signal + window)}, but "
            f"it was not given up by {_at(deadline)} ({still}, and the backbone looks at an "
            f"open run at least every {DETACHED_BACKBONE_CADENCE_S[-1]} s)",
        )
    return None


def _signals(
    context: CheckContext,
    child: str,
    run_id: str,
    changes: list[RowChange],
    row: Mapping[str, Any],
) -> list[int]:
    """Every instant the run is known to have signalled (see the module docstring)."""
    times: list[Any] = [row.get("last_progress_at")]
    times += [change.value("last_progress_at") for change in changes]
    for name, rows in sorted((context.storage.get(child) or {}).items()):
        mine = [r for r in rows if r.get("run_id") == run_id]
        if name == RUNS or not mine:
            continue
        if "last_signal_at" in mine[0]:
            times += [r.get("last_signal_at") for r in mine]
            for change in row_changes(context.journals.get(child, ()), name, "run_id"):
                if change.key == run_id:
                    times.append(change.value("last_signal_at"))
        if {"sequence", "name", "at"} <= set(mine[0]):
            times += [r.get("at") for r in mine]
    return _instants(times)


def _first_use(
    context: CheckContext,
    parent: str,
    run_id: str,
    slot: str,
    changes: list[RowChange],
    row: Mapping[str, Any],
    started: int,
) -> int | None:
    """When the run's `slot` was first claimed or handed to a hook, or None."""
    columns = (f"{slot}_claimed_at", f"{slot}_delivered_at")
    times = [row.get(c) for c in columns]
    times += [change.value(c) for change in changes for c in columns]
    hooks = context.events("hook:on_agent_tool_finish", parent, runId=run_id, slot=slot)
    times += [call.t_ms for call in hooks if call.t_ms >= started]
    return min(_instants(times), default=None)


def _deadline(runs: list[AlarmRun], due: int) -> int | None:
    """`due` + TICK_LATENESS_MS, moved past every alarm run still going then (None when one is
    still going at the end of the trace)."""
    deadline = due + TICK_LATENESS_MS
    moved = True
    while moved:
        moved = False
        for run in runs:
            if run.fired.t_ms <= deadline and (run.end is None or run.end.t_ms > deadline):
                if run.end is None:
                    return None
                deadline, moved = run.end.t_ms + TICK_LATENESS_MS, True
    return deadline


def _backbone_stopped(context: CheckContext, parent: str, since: int, until: int) -> bool:
    root = context.root_of(parent)
    stops = [r for event in BACKBONE_STOPS for r in context.events(event, root)]
    stops += context.events("schedule:error", parent, callback=DETACHED_RECONCILE_CALLBACK)
    return any(since <= r.t_ms <= until for r in stops)
