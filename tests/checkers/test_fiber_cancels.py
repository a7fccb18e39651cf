"""`cancel_settles_fiber`: a managed fiber whose execution could not begin (its row left
`pending` by a storage fault) is cancelled by its workload, which knows its id from
`start_fiber`'s answer: the row ends `aborted` and no recovery pass takes it. A ledger that
left it pending (recovered 30 s later) or a final row of another status is caught."""

from __future__ import annotations

import dataclasses

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


FORGOTTEN = """
    name: cancel-then-forget
    description: an interrupted managed fiber cancelled, its aborted row deleted, then recovered
    seed: 1
    agents:
      worker:
        workload: fibers
        keep_alive_interval: 30s
        fibers: [{name: f1, steps: 1, step: 30s1ms, stash: false, managed: true}]
    steps:
      - call: {agent: worker, method: status}
      - at: 6s
        deploy: {}
      - at: 10s
        call: {agent: worker, method: status}
      - at: 19s
        call: {agent: worker, method: cancel, args: [f1]}
      - at: 20s
        call: {agent: worker, method: forget, args: [aborted]}
      - run_for: 5m
"""


def test_a_cancelled_fiber_whose_row_was_deleted_is_recovered_as_one_without_a_row() -> None:
    """`deleteFibers` takes the aborted row and leaves the run row the deploy left (fibers §5.8:
    it never touches `cf_agents_runs`): recovery then finds a run with no ledger row, as an
    unmanaged fiber's, and hands it to the hook. Without the delete, the same hand-off is
    caught."""
    context = scenario_context(FORGOTTEN, sdk="0.21.0")  # 0.21.0's recovery scan
    (cancel,) = context.events("workload:cancel", W)
    assert cancel.get("cancelled") is True
    (attempt,) = [
        r
        for r in context.events("fiber:recovery:attempt", W)
        if r.seq > cancel.seq and r.get("fiberId") == cancel.get("fiberId")
    ]
    assert context.table(W, "cf_agents_fibers") == []
    assert messages(context) == []
    kept = dataclasses.replace(context, journals={})
    assert messages(kept) and "recovery handed it to the hook" in messages(kept)[0]
