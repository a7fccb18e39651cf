"""The incarnation invariants — `eviction_final`, `startup_once` and `startup_gates_deliveries` —
pass a run with a client, a deploy, a plain RPC on a fresh incarnation and a request that then
runs its startup, and catch crafted traces where a dead incarnation goes on, lives overlap,
startup runs twice, or a delivery slips past the input gate."""

from __future__ import annotations

import dataclasses

import pytest

from sim.checkers import CheckContext, check
from sim.trace import TraceRecord
from tests.checkers.agents import inserted, record, scenario_context, with_record

C = "Counter/counter"
LIVES = """
    name: lives
    description: a counter with a client across a deploy
    seed: 5
    agents:
      counter: {class: "scenarios.workloads:Counter"}
    clients:
      c: {agent: counter}
    steps:
      - connect: {client: c}
      - call: {agent: counter, method: increment}
      - after: 10s
        deploy: {}
      - after: 10s
        call: {agent: counter, method: increment}
      - request: {agent: counter, method: GET, path: /}
"""


@pytest.fixture(scope="module")
def lives() -> CheckContext:
    return scenario_context(LIVES)


def messages(context: CheckContext, name: str) -> list[str]:
    return [v.message for v in check(context, [name])]


def one(context: CheckContext, event: str, inc: int, **fields: object) -> TraceRecord:
    (found,) = [r for r in context.events(event, C, **fields) if r.inc == inc]
    return found


def test_the_healthy_run_keeps_the_rules_of_life(lives: CheckContext) -> None:
    """The connection closed in the instant of death, the RPC that woke incarnation 2 ran
    without startup, and the request after it ran startup first: every rule holds."""
    close = one(lives, "connection:close", 1)
    assert close.t_ms == one(lives, "incarnation:end", 1).t_ms
    assert one(lives, "delivery:begin", 2, trigger="rpc").seq < one(lives, "startup:begin", 2).seq
    assert check(lives, ["eviction_final", "startup_once", "startup_gates_deliveries"]) == []


# -- eviction_final ------------------------------------------------------------------------------
def test_a_record_of_a_dead_incarnation_is_caught(lives: CheckContext) -> None:
    """A frame sent by incarnation 1 after its death at the deploy is named with both times;
    a connection closed a moment later is no longer the platform's own death-instant close."""
    death = one(lives, "incarnation:end", 1)
    frame = lives.events("connection:frame", C)[-1]
    late = with_record(lives, death.seq + 1, frame, t_ms=death.t_ms)
    assert messages(late, "eviction_final") == [
        "incarnation 1 of Counter/counter wrote connection:frame at 00:00:10.000, after it died "
        "(deploy) at 00:00:10.000"
    ]
    close = one(lives, "connection:close", 1)
    later = [dataclasses.replace(r, t_ms=10_001) if r is close else r for r in lives.records]
    assert len(messages(dataclasses.replace(lives, records=later), "eviction_final")) == 1


def test_overlapping_lives_and_a_slot_changed_by_nobody_are_caught(lives: CheckContext) -> None:
    """Incarnation 2 starting while 1 lives, and an alarm set with no live incarnation."""
    start = one(lives, "incarnation:start", 2)
    early = with_record(lives, one(lives, "rpc", 1).seq, start, t_ms=0)
    assert messages(early, "eviction_final")[0] == (
        "incarnation 2 of Counter/counter started at 00:00:00.000 while incarnation 1 was still "
        "alive"
    )
    death = one(lives, "incarnation:end", 1)
    orphan = inserted(lives, death.seq, record(0, 15_000, C, 0, "alarm:set", at=60_000))
    assert messages(orphan, "eviction_final") == [
        "the alarm slot of Counter/counter was changed (alarm:set) at 00:00:15.000 while no "
        "incarnation of it was alive"
    ]


def test_a_deleted_sub_agent_numbers_its_lives_afresh() -> None:
    """After `facet:deleted`, the same path is a new record whose incarnation 1 is legal."""
    p = "P/p/Child/c"
    records = [
        record(0, 0, p, 1, "incarnation:start", trigger="facet"),
        record(1, 5, p, 1, "incarnation:end", reason="deleted"),
        record(2, 5, p, 0, "facet:deleted"),
        record(3, 9, p, 1, "incarnation:start", trigger="facet"),
        record(4, 9, p, 1, "startup:begin"),
        record(5, 9, p, 1, "startup:done"),
    ]
    context = CheckContext(records=records)
    assert check(context, ["eviction_final", "startup_once"]) == []
    without_delete = CheckContext(records=[r for r in records if r.event != "facet:deleted"])
    assert len(check(without_delete, ["eviction_final"])) == 2


# -- startup_once --------------------------------------------------------------------------------
def test_a_second_startup_in_one_incarnation_is_caught(lives: CheckContext) -> None:
    """Startup begun again after it completed, in the same incarnation."""
    done = one(lives, "startup:done", 2)
    again = with_record(lives, done.seq, one(lives, "startup:begin", 2))
    assert messages(again, "startup_once") == [
        "startup of Counter/counter began again at 00:00:20.000, after it completed at "
        "00:00:20.000, in incarnation 2"
    ]


def test_a_failed_startup_may_run_again_but_never_twice_at_once() -> None:
    """After `startup:failed` the next trigger runs startup again; two overlapping are wrong."""
    begin = record(1, 0, C, 1, "startup:begin")
    failed = record(2, 0, C, 1, "startup:failed", error="boom")
    retried = [
        begin,
        failed,
        record(3, 4, C, 1, "startup:begin"),
        record(4, 4, C, 1, "startup:done"),
    ]
    assert check(CheckContext(records=retried), ["startup_once"]) == []
    overlapping = [begin, record(2, 3, C, 1, "startup:begin")]
    assert messages(CheckContext(records=overlapping), "startup_once") == [
        "startup of Counter/counter began again at 00:00:00.003 while the one begun at "
        "00:00:00.000 ran, in incarnation 1"
    ]


# -- startup_gates_deliveries --------------------------------------------------------------------
def test_a_delivery_while_startup_runs_is_caught(lives: CheckContext) -> None:
    """An RPC handled between `startup:begin` and `startup:done` slipped past the input gate."""
    rpc = one(lives, "delivery:begin", 2, trigger="rpc")
    inside = with_record(lives, one(lives, "startup:begin", 2).seq, rpc)
    assert messages(inside, "startup_gates_deliveries") == [
        "Counter/counter began handling a rpc delivery at 00:00:20.000 while its startup (begun "
        "at 00:00:20.000) was still running, in incarnation 2"
    ]


def test_a_startup_trigger_handled_before_startup_is_caught(lives: CheckContext) -> None:
    """The request's handler beginning before incarnation 2 ever ran startup."""
    request = one(lives, "delivery:begin", 2, trigger="request")
    early = with_record(lives, one(lives, "request", 2).seq, request)
    skipped = dataclasses.replace(
        early, records=[r for r in early.records if not r.event.startswith("startup:")]
    )
    assert messages(skipped, "startup_gates_deliveries") == [
        "Counter/counter began handling a connect delivery at 00:00:00.000 before its startup "
        "had completed, in incarnation 1",
        "Counter/counter began handling a request delivery at 00:00:20.000 before its startup "
        "had completed, in incarnation 2",
        "Counter/counter began handling a request delivery at 00:00:20.000 before its startup "
        "had completed, in incarnation 2",
    ]


# -- deaths_are_whole ----------------------------------------------------------------------------
FAMILY = """
    name: family
    description: a parent with a detached child facet and a client, across a deploy
    seed: 12
    agents:
      parent:
        workload: tools
        runs:
          - run_id: job
            detached: true
            steps: [{text: "working"}, {sleep: 1m}, {finish: completed}]
    clients:
      c: {agent: parent}
    steps:
      - connect: {client: c}
      - call: {agent: parent, method: dispatch}
      - at: 20s
        deploy: {}
      - run_until: 5m
"""
PARENT = "ToolsWorkload/parent"
CHILD = f"{PARENT}/ScriptedToolChild/job"


@pytest.fixture(scope="module")
def family() -> CheckContext:
    return scenario_context(FAMILY)


def test_a_deploy_takes_the_parent_its_child_and_its_connection(family: CheckContext) -> None:
    deaths = [(e.agent, e.t_ms) for e in family.events("incarnation:end") if e.t_ms == 20_000]
    assert deaths == [(CHILD, 20_000), (PARENT, 20_000)]
    assert messages(family, "deaths_are_whole") == []
    assert messages(lives_context(), "deaths_are_whole") == []


def lives_context() -> CheckContext:
    return scenario_context(LIVES)


def test_a_connection_left_open_by_a_death_is_caught(family: CheckContext) -> None:
    close = family.events("connection:close", PARENT)[0]
    opened = family.events("connection:open", PARENT)[0]
    kept = dataclasses.replace(family, records=tuple(r for r in family.records if r is not close))
    assert messages(kept, "deaths_are_whole") == [
        f"connection {opened.get('connection')} of {PARENT} (client c) was not closed when its "
        "incarnation 1 died at 00:00:20.000"
    ]


def test_a_child_that_outlives_its_parent_or_a_deploy_is_caught(family: CheckContext) -> None:
    child_death = [e for e in family.incarnation_ends(CHILD) if e.t_ms == 20_000][0]
    survived = dataclasses.replace(
        family, records=tuple(r for r in family.records if r is not child_death)
    )
    assert messages(survived, "deaths_are_whole") == [
        f"{CHILD} was still alive when {PARENT} (incarnation 1), which it lives in, died "
        "(deploy) at 00:00:20.000",
        f"incarnation 1 of {CHILD} lived on through the deploy at 00:00:20.000",
    ]


def test_a_sub_agent_crash_that_spares_its_isolate_is_caught() -> None:
    child = "P/p/C/c"
    records = [
        record(0, 0, "P/p", 1, "incarnation:start", trigger="get"),
        record(1, 0, child, 1, "incarnation:start", trigger="facet"),
        record(2, 5, child, 1, "incarnation:end", reason="crash"),
    ]
    spared = CheckContext(records=records, alarms={"P/p": None})
    assert messages(spared, "deaths_are_whole") == [
        f"{child} crashed at 00:00:00.005, but P/p, whose isolate it lives in, did not die with it"
    ]
    whole = CheckContext(
        records=[*records, record(3, 5, "P/p", 1, "incarnation:end", reason="crash")],
        alarms={"P/p": None},
    )
    assert messages(whole, "deaths_are_whole") == []
