"""The incarnation invariants — `eviction_final`, `startup_once` and `startup_gates_deliveries` —
pass a run with a client, a deploy, a plain RPC on a fresh incarnation and a request that then
runs its startup, and catch crafted traces where a dead incarnation goes on, lives overlap,
startup runs twice, or a delivery slips past the input gate."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from sim.checkers import CheckContext, check
from sim.checkers.lives import SPEC_STARTUP_TRIGGERS
from sim.platform import STARTUP_TRIGGERS
from sim.trace import TraceRecord
from tests.checkers.agents import (
    fails_with_a_blind_checker,
    inserted,
    record,
    scenario_context,
    with_record,
)

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
    # On 0.21.0 a plain RPC on a stale stub runs without startup (sdk-0.32 §1.3).
    return scenario_context(LIVES, sdk="0.21.0")


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


def test_a_startup_finished_by_a_dead_incarnation_is_caught(lives: CheckContext) -> None:
    """A startup that ends, and a delivery that begins, after the incarnation that ran them
    died (the records carry incarnation 0): code of a dead incarnation ran on."""
    death = one(lives, "incarnation:end", 1)
    done = record(0, 10_000, C, 0, "startup:done")
    begun = record(0, 10_000, C, 0, "delivery:begin", trigger="request")
    ran_on = inserted(inserted(lives, death.seq, done), death.seq + 1, begun)
    assert messages(ran_on, "eviction_final") == [
        "Counter/counter recorded startup:done at 00:00:10.000 while no incarnation of it was "
        "alive: code of a dead incarnation ran on",
        "Counter/counter recorded delivery:begin at 00:00:10.000 while no incarnation of it was "
        "alive: code of a dead incarnation ran on",
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


WARMUP = """
    name: warmup
    description: a plain RPC and a request arrive while an awaiting on_start holds the gate
    seed: 5
    agents:
      scheduler:
        workload: schedules
        warmup: 2s
        schedules:
          - {name: once, after: 10s, work: 1s}
    steps:
      - call: {agent: scheduler, method: status, wait: false}
      - at: 1s
        call: {agent: scheduler, method: status, wait: false}
      - at: 1500ms
        request: {agent: scheduler, method: GET, path: /status}
      - run_until: 1m
"""
S = "ScheduleWorkload/scheduler"


@pytest.fixture(scope="module")
def warmup() -> CheckContext:
    return scenario_context(WARMUP)


def test_an_rpc_during_an_awaiting_on_start_waits_for_it(warmup: CheckContext) -> None:
    """The RPC at 1 s and the request at 1.5 s arrive while on_start sleeps; both are handled
    only after `startup:done` at 2 s, which the checkers accept."""
    (begin,) = warmup.events("startup:begin", S)
    (done,) = warmup.events("startup:done", S)
    assert (begin.t_ms, done.t_ms) == (0, 2_000)
    arrived = [r.t_ms for r in warmup.events("rpc", S)] + [
        r.t_ms for r in warmup.events("request", S)
    ]
    assert sorted(arrived) == [0, 1_000, 1_500]
    deliveries = warmup.events("delivery:begin", S)
    assert deliveries and all(d.seq > done.seq for d in deliveries if d.t_ms <= 2_000)
    assert check(warmup, ["startup_once", "startup_gates_deliveries", "startup_triggered"]) == []


def test_an_rpc_handled_while_on_start_awaits_is_caught(warmup: CheckContext) -> None:
    """The RPC of 1 s handled at once, inside the startup, as a gate that let it pass would."""
    (begin,) = warmup.events("startup:begin", S)
    rpc = next(d for d in warmup.events("delivery:begin", S, trigger="rpc"))
    slipped = with_record(warmup, begin.seq, rpc, t_ms=1_000)
    assert messages(slipped, "startup_gates_deliveries") == [
        f"{S} began handling a rpc delivery at 00:00:01.000 while its startup (begun at "
        "00:00:00.000) was still running, in incarnation 1"
    ]


# -- startup_triggered ---------------------------------------------------------------------------
def test_startup_runs_only_for_a_startup_trigger(lives: CheckContext) -> None:
    """Incarnation 1's startup ran for the client's connection; incarnation 2 was woken by a
    plain RPC, which ran without startup, and the request after it ran startup. Had the RPC run
    it, the rule breaks."""
    assert [r.get("trigger") for r in lives.events("startup:begin", C)] == ["connect", "request"]
    assert check(lives, ["startup_triggered"]) == []
    begin = one(lives, "startup:begin", 2)
    by_rpc = with_record(lives, begin.seq, begin, trigger="rpc")
    by_rpc = dataclasses.replace(by_rpc, records=[r for r in by_rpc.records if r.seq != begin.seq])
    assert messages(by_rpc, "startup_triggered") == [
        "startup of Counter/counter began at 00:00:20.000 for a rpc delivery, in incarnation 2; "
        "only alarm, close, connect, facet, get, message, request deliveries run startup"
    ]


def test_the_spec_list_of_startup_triggers_is_the_platforms() -> None:
    """The checker keeps its own copy of the spec's list; on a sound platform they agree."""
    assert SPEC_STARTUP_TRIGGERS == STARTUP_TRIGGERS


@pytest.mark.parametrize(
    ("name", "test", "fixture"),
    [
        ("startup_gates_deliveries", test_an_rpc_handled_while_on_start_awaits_is_caught, "warmup"),
        ("startup_triggered", test_startup_runs_only_for_a_startup_trigger, "lives"),
    ],
)
def test_the_catching_tests_fail_with_a_blind_checker(
    name: str,
    test: Callable[[CheckContext], None],
    fixture: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each test above goes red when its checker is replaced by one that finds nothing."""
    fails_with_a_blind_checker(monkeypatch, name, test, request.getfixturevalue(fixture))


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
