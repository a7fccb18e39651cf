"""`cancel_settles_fiber`: a managed fiber whose execution could not begin (its row left
`pending` by a storage fault) is cancelled by its workload, which knows its id from
`start_fiber`'s answer: the row ends `aborted` and no recovery pass takes it. A ledger that
left it pending (recovered 30 s later) or a final row of another status is caught."""

from __future__ import annotations

import pytest

from sim.checkers import CheckContext, check
from tests.checkers.agents import (
    fails_with_a_blind_checker,
    record,
    scenario_context,
    with_record,
    with_row,
)

W = "FiberWorkload/worker"
PENDING = """
    name: pending-cancel
    description: a managed start whose execution cannot begin, then a cancel
    seed: 1
    agents:
      worker:
        workload: fibers
        start: call
        fibers: [{name: f1, steps: 2, step: 5s, managed: true}]
    steps:
      - call: {agent: worker, method: status}
      - arm_storage_fault: {agent: worker, kind: error, match: '^UPDATE cf_agents_fibers\\b'}
      - call: {agent: worker, method: start}
      - at: 1s
        call: {agent: worker, method: cancel, args: [f1]}
      - run_for: 5m
"""


def messages(context: CheckContext) -> list[str]:
    return [v.message for v in check(context, ["cancel_settles_fiber"])]


def test_a_pending_fiber_cancelled_with_true_ends_aborted_and_is_never_recovered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    context = scenario_context(PENDING)
    (cancel,) = context.events("workload:cancel", W)
    fiber_id = cancel.get("fiberId")
    assert cancel.get("cancelled") is True and fiber_id
    (row,) = context.table(W, "cf_agents_fibers")
    assert row["status"] == "aborted" and row["started_at"] is None
    assert messages(context) == []

    taken = record(0, 30_000, W, 1, "fiber:recovery:attempt", fiberId=fiber_id, fiberName="f1")
    recovered = with_record(context, cancel.seq, taken, t_ms=30_000)

    def caught(ctx: CheckContext) -> None:
        found = messages(ctx)
        assert len(found) == 1
        assert found[0].startswith(f"cancelFiber answered true for managed fiber f1 ({fiber_id})")

    caught(recovered)
    assert "recovery handed it to the hook at 00:00:30.000" in messages(recovered)[0]
    left = with_row(context, W, "cf_agents_fibers", {"fiber_id": fiber_id}, status="pending")
    assert messages(left) == [
        f"cancelFiber answered true for managed fiber f1 ({fiber_id}) of {W} at 00:00:01.000, "
        "so it is aborted, but its row ends 'pending'"
    ]
    fails_with_a_blind_checker(monkeypatch, "cancel_settles_fiber", caught, recovered)
