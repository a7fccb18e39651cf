"""`waited_status_settled`: a waiting `start_fiber` answers once its fiber settled, with the
ledger's status; a wait that returns early, an answer the ledger never held, and the cases the
rule forgives (a rolled-back record, a deleted row)."""

from __future__ import annotations

import dataclasses

import pytest

from agents_core.fibers import FiberInspection, FiberRunner
from sim.checkers import CheckContext, check
from tests.checkers.agents import fails_with_a_blind_checker, scenario_context, with_record

F = "FiberWorkload/f"
STORY = """
name: waits
description: waiting starts of a keyed managed fiber, joined and new, and of a keyless one
seed: 3
agents:
  f:
    workload: fibers
    fibers:
      - {name: job, steps: 3, step: 10s, managed: true, idempotency_key: k1, stash: true}
      - {name: free, steps: 2, step: 5s, managed: true, fail_at: 2}
steps:
  - {at: 1s, call: {agent: f, method: start_waiting, args: [job], wait: false}}
  - {at: 2s, call: {agent: f, method: start_waiting, args: [free], wait: false}}
  - {at: 50s, call: {agent: f, method: start_waiting, args: [job], wait: false}}
"""


def waited() -> CheckContext:
    return scenario_context(STORY)


def answers(context: CheckContext) -> list[tuple[str, object, object, int]]:
    return [
        (r.get("name"), r.get("accepted"), r.get("status"), r.t_ms)
        for r in context.events("workload:waited")
    ]


def test_waiting_starts_answer_the_settled_status() -> None:
    context = waited()
    # job joins the execution on_start began at 1 s and returns when it completes (31 s); free
    # is new and fails at its second step; a later wait on job finds it settled at once.
    assert answers(context) == [
        ("free", True, "error", 12_000),
        ("job", False, "completed", 31_000),
        ("job", False, "completed", 50_000),
    ]
    assert check(context, ["waited_status_settled"]) == []


def test_a_wait_that_returns_before_the_fiber_settled_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The runtime's wait answers the row as it is, without waiting."""

    async def at_once(self: FiberRunner, fiber_id: str) -> FiberInspection | None:
        row = self._ledger.row(fiber_id)
        return FiberInspection.from_row(row) if row else None

    monkeypatch.setattr(FiberRunner, "_wait_for_managed_fiber", at_once)
    context = waited()
    found = [v.message for v in check(context, ["waited_status_settled"])]
    assert found and found[0].startswith(
        f"a waiting start_fiber of job on {F} returned status 'running' at 00:00:01.000: a wait "
        "for completion returns only once the fiber has settled"
    )


def test_an_answer_the_ledger_never_held_is_caught() -> None:
    context = waited()
    last = context.events("workload:waited")[-1]
    wrong = with_record(context, last.seq, last, status="aborted")
    (violation,) = check(wrong, ["waited_status_settled"])
    assert violation.message == (
        f"a waiting start_fiber of job on {F} returned 'aborted' at 00:00:50.000, but the ledger "
        f"row of fiber {last.get('fiberId')} held 'completed' then"
    )


def test_a_record_that_may_have_rolled_back_is_not_judged() -> None:
    context = waited()
    last = context.events("workload:waited")[-1]
    wrong = with_record(context, last.seq, last, status="running")
    crash = dataclasses.replace(
        last, event="incarnation:end", fields={"reason": "crash"}, seq=len(wrong.records)
    )
    records = (*wrong.records, crash)
    assert check(dataclasses.replace(wrong, records=records), ["waited_status_settled"]) == []


def test_the_rule_is_this_checkers_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    context = waited()
    last = context.events("workload:waited")[-1]

    def caught(context: CheckContext) -> None:
        assert check(context, ["waited_status_settled"]), "nothing found"

    fails_with_a_blind_checker(
        monkeypatch,
        "waited_status_settled",
        caught,
        with_record(context, last.seq, last, status="aborted"),
    )
