"""`chunk_numbers_stable` (S5): a browser that holds four chunks of a chat child's run when a
deploy kills it, and gets them again in the replay after the child's recovery, sees each number
name one chunk; a crafted replay that sends another chunk under a number it holds is caught,
unless that frame's record may have rolled back."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import pytest

from sim.checkers import CheckContext, check
from sim.trace import TraceRecord
from tests.checkers.agents import fails_with_a_blind_checker, record, scenario_context, with_record

PARENT = "ToolsWorkload/parent"
RECOVERED = """
    name: recovered
    description: an AIChatAgent-like child, detached, recovered mid-answer while a browser watches
    seed: 1
    agents:
      parent:
        workload: tools
        runs: [{run_id: summary, child: chat, input: "summarize", detached: true}]
    clients: {browser: {agent: parent}}
    model: {default: {text: "one two three four five six seven eight", chunks: 8, delay: 1s}}
    steps:
      - connect: {client: browser}
      - call: {agent: parent, method: dispatch}
      - at: 3500ms
        deploy_all: {}
      - at: 10s
        reconnect: {client: browser}
      - run_until: 5m
"""


@pytest.fixture(scope="module")
def recovered() -> CheckContext:
    return scenario_context(RECOVERED)


def messages(context: CheckContext) -> list[str]:
    return [v.message for v in check(context, ["chunk_numbers_stable"])]


def chunk_frames(context: CheckContext, number: int) -> list[TraceRecord]:
    return [
        r
        for r in context.events("connection:frame", PARENT)
        if r.get("frame", {}).get("event", {}).get("chunkSequence") == number
    ]


def test_the_replay_after_the_childs_recovery_names_each_chunk_once(recovered) -> None:
    """Chunk 1 arrives live, then again in the replay, the same chunk both times."""
    live, replayed = chunk_frames(recovered, 1)
    assert replayed.get("frame").get("replay") is True
    assert live.get("frame")["event"]["body"] == replayed.get("frame")["event"]["body"]
    assert check(recovered, ["chunk_numbers_stable", "client_timeline_exact"]) == []


def test_another_chunk_under_a_number_the_client_holds_is_caught(recovered) -> None:
    """A replay sending a different chunk as number 1 (as a recovered turn numbering from 0
    again would) is named; a frame whose record may have rolled back is not."""
    _, replayed = chunk_frames(recovered, 1)
    other = json.dumps({"type": "text-start", "id": "text_other"}, separators=(",", ":"))
    frame = replayed.get("frame")
    swapped = {**frame, "event": {**frame["event"], "body": other}}
    records = [
        dataclasses.replace(r, fields={**r.fields, "frame": swapped}) if r == replayed else r
        for r in recovered.records
    ]
    wrong = dataclasses.replace(recovered, records=records)
    assert messages(wrong) == [
        f"client browser of {PARENT} received chunk 1 of run summary as "
        '{"id": "text_e3505caef041_0", "type": "text-start"} at 00:00:01.000 and as '
        '{"id": "text_other", "type": "text-start"} at 00:00:10.000; one number names one '
        "chunk, or the client drops the second as a duplicate"
    ]
    (moved,) = [r for r in wrong.records if r.fields.get("frame") == swapped]
    crash = record(0, moved.t_ms, PARENT, moved.inc, "incarnation:end", reason="crash")
    assert messages(with_record(wrong, moved.seq, crash)) == []


@pytest.mark.parametrize("test", [test_another_chunk_under_a_number_the_client_holds_is_caught])
def test_the_catching_test_fails_with_a_blind_checker(
    test: Callable[[CheckContext], None],
    recovered: CheckContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The test above goes red when the checker is replaced by one that finds nothing."""
    fails_with_a_blind_checker(monkeypatch, "chunk_numbers_stable", test, recovered)
