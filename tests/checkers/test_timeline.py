"""`client_timeline_exact` (S5): a client that disconnects and reconnects while a detached run
streams sees every stored chunk once; a reducer that dedupes by wire sequence (the SDK's E17)
drops a genuine frame, one that never dedupes doubles one, and a frame that does not carry the
chunk the child stored under its number is caught."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from agents_core.agent_tools import AgentToolEvents, parts_text
from sim.checkers import CheckContext, check
from tests.checkers.agents import record, renumbered, scenario_context

P = "ToolsWorkload/parent"
TIMELINE = """
    name: timeline
    description: a client that reconnects while a detached run streams text and a milestone
    seed: 11
    agents:
      parent:
        workload: tools
        runs:
          - run_id: sync
            detached: true
            steps:
              - text: "Ingesting. "
              - sleep: 20s
              - text: "Halfway. "
              - milestone: {name: halfway, data: {rows: 40}}
              - sleep: 40s
              - text: "Done."
              - finish: {status: completed, summary: synced}
    clients:
      panel: {agent: parent}
    steps:
      - connect: {client: panel}
      - call: {agent: parent, method: dispatch}
      - at: 10s
        disconnect: {client: panel}
      - at: 30s
        reconnect: {client: panel}
      - run_until: 5m
"""


@pytest.fixture(scope="module")
def reconnected() -> CheckContext:
    return scenario_context(TIMELINE, sdk="0.21.0")  # 0.21.0's frame numbering


def messages(context: CheckContext) -> list[str]:
    return [v.message for v in check(context, ["client_timeline_exact"])]


def sdk_is_new(self: AgentToolEvents, frame: dict[str, Any]) -> bool:
    """The SDK's dedupe: every non-`started` frame by (parentToolCallId, runId, sequence)."""
    event = frame["event"]
    if event["kind"] == "started":
        return True
    key = (frame.get("parentToolCallId") or "", event["runId"], frame["sequence"])
    if key in self._seen_keys:
        return False
    self._seen_keys.add(key)
    return True


def chunk(sequence: int, number: int | None, body: dict[str, Any], replay: bool = False) -> dict:
    event: dict[str, Any] = {"kind": "chunk", "runId": "r", "body": json.dumps(body)}
    if number is not None:
        event["chunkSequence"] = number
    frame: dict[str, Any] = {"type": "agent-tool-event", "sequence": sequence, "event": event}
    if replay:
        frame["replay"] = True
    return frame


def text(delta: str) -> dict[str, Any]:
    return {"type": "text-delta", "id": "t", "delta": delta}


STARTED = {
    "type": "agent-tool-event",
    "sequence": 0,
    "event": {"kind": "started", "runId": "r", "agentType": "Child", "order": 0},
}


def hand_built() -> CheckContext:
    """Live: chunk 0, a progress frame, chunk 1; after a reconnect, a replay of chunks 0-2 whose
    wire sequences (1, 2, 3) collide with the live ones."""
    frames = [
        (0, STARTED),
        (1, chunk(1, 0, text("a"))),
        (2, chunk(2, None, {"type": "data-agent-progress", "data": {"fraction": 0.5}})),
        (3, chunk(3, 1, text("b"))),
        (9, {**STARTED, "replay": True}),
        (9, chunk(1, 0, text("a"), replay=True)),
        (9, chunk(2, 1, text("b"), replay=True)),
        (9, chunk(3, 2, text("c"), replay=True)),
    ]
    records = [record(0, 0, P, 1, "connection:open", connection="k1", client="panel")]
    records += [record(0, t, P, 1, "connection:frame", connection="k1", frame=f) for t, f in frames]
    return CheckContext(records=renumbered(records))


def test_a_reconnecting_client_sees_every_stored_chunk_once(reconnected: CheckContext) -> None:
    """Live chunk 0, the replay of 0-2 on reconnect, then live chunk 3: each once."""
    events = AgentToolEvents(lambda: 0)
    for frame in reconnected.events("connection:frame", P):
        events.receive(frame.get("frame"))
    run = events.runs_by_id["sync"]
    assert parts_text(run.parts) == "Ingesting. Halfway. Done."
    assert [m["name"] for m in run.milestones] == ["halfway"]
    assert messages(reconnected) == []
    assert messages(hand_built()) == []


def test_a_reducer_deduping_by_wire_sequence_drops_a_genuine_frame(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Replayed chunk 2 arrives as wire sequence 3, which live chunk 1 had: the SDK's key
    drops it."""
    monkeypatch.setattr(AgentToolEvents, "_is_new", sdk_is_new)
    (message,) = messages(hand_built())
    assert message.startswith(
        f"client panel of {P} shows run r with parts "
        '[{"state": "streaming", "text": "ab", "type": "text"}] and milestones [], '
        "where its frames, each applied once, give parts "
        '[{"state": "streaming", "text": "abc", "type": "text"}]'
    )


def test_a_reducer_that_never_dedupes_doubles_the_replay(
    reconnected: CheckContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(AgentToolEvents, "_is_new", lambda self, frame: True)
    (message,) = messages(reconnected)
    assert message.startswith(f"client panel of {P} shows run sync with parts ")
    assert '"text": "Ingesting. Ingesting. Halfway. Done."' in message


def test_a_frame_that_is_not_the_stored_chunk_of_its_number_is_caught(
    reconnected: CheckContext,
) -> None:
    """Replayed chunk 1 carrying other words than the child stored as chunk 1."""

    def altered(frame: Any) -> Any:
        event = frame.get("event") or {}
        if event.get("chunkSequence") != 1:
            return frame
        body = event["body"].replace("Halfway. ", "Halfway! ")
        return {**frame, "event": {**event, "body": body}}

    records = [
        dataclasses.replace(r, fields={**r.fields, "frame": altered(r.get("frame"))})
        if r.event == "connection:frame"
        else r
        for r in reconnected.records
    ]
    assert messages(dataclasses.replace(reconnected, records=records)) == [
        f"client panel of {P} received chunk 1 of run sync at 00:00:30.000 as "
        '{"type":"text-delta","id":"t","delta":"Halfway! "}, but the child stored '
        '{"delta": "Halfway. ", "id": "t", "type": "text-delta"} as chunk 1'
    ]


def test_a_chunk_builder_that_doubles_deltas_is_caught(
    reconnected: CheckContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reference is the checker's own model: a runtime chunk builder that applies every
    text delta twice is caught (a reference built with the runtime's builder would agree)."""
    import agents_core.agent_tools.reducer as reducer

    builder = reducer.apply_chunk

    def doubled(parts: Any, chunk: Any) -> Any:
        parts = builder(parts, chunk)
        return builder(parts, chunk) if chunk.get("type") == "text-delta" else parts

    monkeypatch.setattr(reducer, "apply_chunk", doubled)
    (message,) = messages(reconnected)
    assert message.startswith(f"client panel of {P} shows run sync with parts ")
    assert '[{"state": "streaming", "text": "Ingesting. Ingesting. Halfway. Halfway.' in message


REUSED = """
name: reused
description: a run cleared and dispatched again under its id while a browser stays connected
seed: 0
agents:
  parent:
    workload: tools
    runs:
      - {run_id: r2, child: think, detached: false, input: "research fibers"}
clients:
  browser: {agent: parent}
steps:
  - {at: 0s, connect: {client: browser}}
  - {at: 0s, call: {agent: parent, method: dispatch, wait: false}}
  - {at: 1m50s, call: {agent: parent, method: clear, wait: false}}
  - {at: 8m, call: {agent: parent, method: dispatch, args: [r2], wait: false}}
"""


def test_a_run_id_reused_after_a_clear_is_not_judged_past_the_clear(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Clearing sends no frame and a client keeps a cleared run (agent-tools §8.1, E22), so
    the second run under the id reaches the browser as chunks it has seen: those are not judged
    (generate found the checkers calling them doubled or different)."""
    from tests.checkers.agents import scenario_context

    context = scenario_context(REUSED)
    starts = [
        r.t_ms
        for r in context.events("connection:frame")
        if isinstance(r.get("frame"), dict)
        and (r.get("frame") or {}).get("event", {}).get("kind") == "started"
    ]
    assert len(starts) == 2 and starts[1] >= 480_000, starts
    names = ["client_timeline_exact", "chunk_numbers_stable", "client_runs_grouped"]
    assert check(context, names) == []
    # Judged past the clear, the second run's chunks read as the first's, changed or doubled.
    import sim.checkers.timeline as timeline

    monkeypatch.setattr(timeline, "_cleared_runs", lambda context: {})
    assert check(context, names) != []
