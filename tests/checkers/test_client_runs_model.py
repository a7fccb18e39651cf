"""The checkers' model of a client's runs besides their parts (`sim.checkers.models.client_runs`):
on drawn sequences of `started` and terminal frames, the runtime's reducer (read through
`sim.client_views`) agrees with it, so that a difference between the spec as the model reads it
and the code is a failing test. Run ids are drawn from lowercase letters, digits and `-`, where
`localeCompare` and code point order agree (the runtime orders mixed-case ids otherwise:
`test_reducer_promises.py`)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.checkers import CheckContext, check
from sim.checkers.models.client_runs import ClientRunsModel
from sim.client_views import client_view
from sim.trace import TraceRecord

RUNS = ["a", "b", "b-2", "c1"]
CALLS = [None, "call-1", "call-2"]


@st.composite
def frame(draw: st.DrawFn) -> dict[str, Any]:
    """A `started` or terminal frame; a terminal frame's fields follow from its run, kind and
    number, as a frame sent again carries what it carried the first time."""
    run = draw(st.sampled_from(RUNS))
    call = draw(st.sampled_from(CALLS))
    kind = draw(st.sampled_from(["started", "finished", "error", "aborted", "interrupted"]))
    sequence = draw(st.integers(0, 4))
    event: dict[str, Any] = {"kind": kind, "runId": run}
    if kind == "started":
        event |= {"agentType": "Child", "order": draw(st.integers(0, 2))}
    elif kind == "finished":
        event["summary"] = f"{run} done {sequence}"
    elif kind == "error":
        event["error"] = f"{run} failed {sequence}"
    elif kind == "aborted" and sequence % 2:
        event["reason"] = f"{run} cancelled {sequence}"
    elif kind == "interrupted":
        event["error"] = f"{run} interrupted {sequence}"
        if sequence % 2:
            event |= {"reason": "no-progress", "childStillRunning": sequence > 2}
    body: dict[str, Any] = {"type": "agent-tool-event", "sequence": sequence, "event": event}
    if call is not None:
        body["parentToolCallId"] = call
    if draw(st.booleans()):
        body["replay"] = True
    return body


def context_of(frames: list[dict[str, Any]]) -> CheckContext:
    records = [TraceRecord(0, 0, "P/p", 1, "connection:open", {"connection": "k", "client": "c"})]
    records += [
        TraceRecord(n + 1, n + 1, "P/p", 1, "connection:frame", {"connection": "k", "frame": f})
        for n, f in enumerate(frames)
    ]
    return CheckContext(records=tuple(records))


@settings(max_examples=300, deadline=None)
@given(frames=st.lists(frame(), max_size=14))
def test_the_model_agrees_with_the_runtimes_reducer(frames: list[dict[str, Any]]) -> None:
    context = context_of(frames)
    assert check(context, ["client_runs_grouped", "client_run_terminals"]) == []


def test_the_model_follows_the_spec_s_example() -> None:
    """T-131: started with order 1 then 0 under one tool call, plus one parentless run."""
    model = ClientRunsModel()
    for n, (run, call, order) in enumerate([("x", "tc", 1), ("y", "tc", 0), ("z", None, 0)]):
        event = {"kind": "started", "runId": run, "agentType": "C", "order": order}
        body: dict[str, Any] = {"type": "agent-tool-event", "sequence": 0, "event": event}
        if call:
            body["parentToolCallId"] = call
        model.receive(body, n, n)
    assert {k: sorted(r.run_id for r in v) for k, v in model.groups().items()} == {"tc": ["x", "y"]}
    assert [r.run_id for r in model.unbound()] == ["z"]
    view = client_view(context_of([]).records)
    assert view == {"runs": {}, "groups": {}, "unbound": []}
