"""What a client's agent-tool view shows besides parts: `client_runs_grouped` (T-131: sibling runs
grouped by tool call, in display order) and `client_run_terminals` (T-135, T-139: a run's status
and terminal fields mirror its terminal frames).

A client's frames are read as `client_timeline_exact` reads them (`sim.checkers.timeline`): the
`connection:frame` records of every connection it opened to one agent, in order. The runtime's
reducer fed them once each (`sim.client_views.client_view`, the subject) is compared with the
independent model `sim.checkers.models.client_runs`, written from the spec. Both see the same
frames, a frame of a turn a crash rolled back included (the client did receive it), so neither
rule has anything to forgive for the output gate, a reconnect or a missing liveness phase: they
judge what the client ends with, after every frame it received.

The timing promises of progress and milestones (S4, S3) are in `sim.checkers.signal_timing`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.models.client_runs import ClientRunsModel, ModelRun, out_of_order
from sim.checkers.registry import invariant
from sim.checkers.timeline import client_frames, decode_frame
from sim.client_views import ClientView, client_view
from sim.trace import TraceRecord, format_sim_time

__all__ = ["client_run_terminals", "client_runs_grouped", "client_runs_model"]


def client_runs_model(records: Sequence[TraceRecord]) -> ClientRunsModel:
    """The model fed one client's frames, in order."""
    model = ClientRunsModel()
    for record in records:
        frame = decode_frame(record.get("frame"))
        if frame is not None:
            model.receive(frame, record.seq, record.t_ms)
    return model


def _views(context: CheckContext) -> list[tuple[str, str, ClientRunsModel, ClientView]]:
    """(agent, client, model, what the runtime's reducer shows) of every client that received a
    run's `started` frame, in sorted order."""
    out = []
    for (agent, client), records in sorted(client_frames(context).items()):
        model = client_runs_model(records)
        if model.runs:
            out.append((agent, client, model, client_view(records)))
    return out


def _ids(runs: Sequence[ModelRun]) -> list[str]:
    return sorted(run.run_id for run in runs)


@invariant("client_runs_grouped")
def client_runs_grouped(context: CheckContext) -> list[Violation]:
    """T-131 — a client's agent-tool view groups sibling runs by the tool call that started them,
    in display order, and lists the runs no tool call started apart, as unbound runs.

    For every client (its frames as in the module docstring), the runtime's reducer fed every
    frame once shows exactly the runs whose `started` frame arrived; under each tool call id, the
    runs whose last applied `started` carried that `parentToolCallId`, and as unbound runs those
    whose `started` carried none (`models/client_runs.py`: a `started` after the run's terminal
    frame changes nothing); each list sorted by `order`, then by run id (`localeCompare`: a pair
    whose order the model cannot tell is not judged).
    """
    out: list[Violation] = []
    for agent, client, model, view in _views(context):
        problem = _grouping_problem(model, view)
        if problem is not None:
            out.append(
                Violation(
                    "client_runs_grouped",
                    agent,
                    client,
                    f"client {client} of {agent} {problem}",
                )
            )
    return out


def _grouping_problem(model: ClientRunsModel, view: ClientView) -> str | None:
    shown_runs = sorted(view["runs"])
    if shown_runs != sorted(model.runs):
        return (
            f"shows runs {shown_runs}, where the started frames it received are of runs "
            f"{sorted(model.runs)}"
        )
    expected = model.groups()
    lists: list[tuple[str, list[str], list[ModelRun]]] = [
        (f"under tool call {tool_call}", list(view["groups"].get(tool_call, [])), runs)
        for tool_call, runs in sorted(expected.items())
    ]
    lists += [
        (f"under tool call {tool_call}", list(ids), [])
        for tool_call, ids in sorted(view["groups"].items())
        if tool_call not in expected
    ]
    lists.append(("as unbound runs", list(view["unbound"]), model.unbound()))
    for where, shown, runs in lists:
        if sorted(shown) != _ids(runs):
            return (
                f"lists {shown} {where}, where the started frames it received put "
                f"{_ids(runs)} there"
            )
        pair = out_of_order(shown, model.runs)
        if pair is not None:
            first, second = (model.runs[r] for r in pair)
            return (
                f"lists run {first.run_id} before run {second.run_id} {where}, where their "
                f"started frames (order {first.order} and {second.order}) put "
                f"{second.run_id} first (by order, then run id)"
            )
    return None


@invariant("client_run_terminals")
def client_run_terminals(context: CheckContext) -> list[Violation]:
    """T-135, T-139 — a run's status and terminal fields, as a client shows them, mirror the
    terminal frames it received: `completed` with the summary, `error` or `aborted` with the
    error or reason, `interrupted` with error, reason and whether the child still runs.

    For every client (its frames as in the module docstring) and every run whose `started`
    frame arrived, the runtime's reducer fed every frame once ends with the status the model
    gives (`models/client_runs.py`: `running` until a terminal frame; each terminal frame applied
    in arrival order, one that came before its `started` right after it (R2), one received
    twice applied once (S5); a `started` after a terminal frame changes nothing, T-137), and
    with the fields that status names: for
    `completed`, that `summary`, no `error`, and no `reason` or `childStillRunning` (R1); for
    `error` and `aborted`, that `error`; for `interrupted`, that `error`, `reason` and
    `childStillRunning`; for `error` and `aborted` of a run never interrupted before, no `reason`
    or `childStillRunning` either.
    """
    out: list[Violation] = []
    for agent, client, model, view in _views(context):
        for run_id, run in sorted(model.runs.items()):
            shown_run = view["runs"].get(run_id)
            if shown_run is None:
                continue  # client_runs_grouped reports a run the view lacks
            wanted = _terminal_fields(run)
            shown = {key: shown_run.get(key) for key in wanted}
            if shown == wanted:
                continue
            shown = {k: v for k, v in shown.items() if k == "status" or v != wanted[k]}
            if run.last_terminal is None:
                because = "no terminal frame it received makes it other than"
            else:
                kind, _, t_ms = run.last_terminal
                because = (
                    f"the last terminal frame it received ({kind}, at {format_sim_time(t_ms)}) "
                    "makes it"
                )
            out.append(
                Violation(
                    "client_run_terminals",
                    agent,
                    run_id,
                    f"client {client} of {agent} shows run {run_id} as {_words(shown)}, where "
                    f"{because} {_words(wanted)}",
                    () if run.last_terminal is None else (run.last_terminal[1],),
                )
            )
    return out


def _terminal_fields(run: ModelRun) -> dict[str, Any]:
    """The fields of a run's view the model holds, for its status."""
    fields: dict[str, Any] = {"status": run.status}
    if run.status == "running":
        return fields
    if run.status == "completed":
        fields["summary"] = run.summary
    fields["error"] = run.error
    if not run.interrupt_fields_open:
        fields["reason"] = run.reason
        fields["childStillRunning"] = run.child_still_running
    return fields


def _words(fields: Mapping[str, Any]) -> str:
    """`completed (summary "done", error null, ...)`."""
    rest = ", ".join(
        f"{key} {json.dumps(value)}" for key, value in fields.items() if key != "status"
    )
    return f"{fields['status']}" + (f" ({rest})" if rest else "")
