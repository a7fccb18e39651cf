"""Conformance: managed fibers — `start_fiber` acceptance and idempotency, the ledger's status
machine, waiting, cancellation and the management calls (spec fibers §5.5–5.8, catalogue
F-86 … F-101, F-125), and the misuse errors of `start_fiber`."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core.errors import InvalidArgument
from sim import Simulation, StorageError
from tests.conformance.fiber_agents import (
    Recorder,
    fail,
    journal,
    note,
    run_rows,
    sleep,
    stash,
)
from tests.releases import on_both_releases

LONG = sleep(600_000)


class Batch(Recorder):
    """Starts many short managed fibers, `gap_ms` apart, each settling at once."""

    async def start_many(self, count: int, gap_ms: int, prefix: str = "f") -> list[str]:
        ids = []
        for index in range(count):
            fiber_id = f"{prefix}{index:04d}"
            await self.start_fiber("batch", self._instant, fiber_id=fiber_id)
            ids.append(fiber_id)
            await self.host.clock.sleep(gap_ms)
        return ids

    async def _instant(self, ctx: Any) -> None:
        return None

    async def start_twice_in_one_turn(self, key: str) -> list[Any]:
        """Two start_fiber calls for one key, both begun before either awaits anything."""
        first = self.start_fiber(
            "job", lambda ctx: self._play(ctx, [note("ran")]), idempotency_key=key
        )
        second = self.start_fiber(
            "job", lambda ctx: self._play(ctx, [note("ran")]), idempotency_key=key
        )
        return await self.host.tasks.gather(first, second)


def ledger_rows(sim: Simulation, ref) -> list[dict[str, Any]]:
    return sim.query(ref, "SELECT * FROM cf_agents_fibers ORDER BY created_at, fiber_id")


def test_F086_start_fiber_accepts_pending_then_completes(sim: Simulation) -> None:
    """Without waiting, start_fiber answers accepted/pending at once; the ledger later shows
    `completed` with the key, the metadata and the last snapshot kept."""
    ref = sim.agent(Recorder, "m")
    sim.run_for(1_000)
    receipt = sim.call(
        ref,
        "start",
        "reply-to-webhook",
        [stash({"webhookId": "w1"}), sleep(2_000), stash({"webhookId": "w1", "posted": True})],
        idempotency_key="webhook:w1",
        metadata={"threadId": "t-1"},
    )
    assert (receipt.accepted, receipt.status, receipt.created_at) == (True, "pending", 1_000)
    assert len(receipt.fiber_id) == 21
    assert (receipt.idempotency_key, receipt.metadata) == ("webhook:w1", {"threadId": "t-1"})
    assert sim.now_ms == 1_000
    sim.run_for(3_000)
    done = sim.call(ref, "inspect_fiber", receipt.fiber_id)
    assert done.to_dict() == {
        "fiberId": receipt.fiber_id,
        "name": "reply-to-webhook",
        "status": "completed",
        "createdAt": 1_000,
        "idempotencyKey": "webhook:w1",
        "snapshot": {"webhookId": "w1", "posted": True},
        "metadata": {"threadId": "t-1"},
        "startedAt": 1_000,
        "settledAt": 3_000,
    }
    assert run_rows(sim, ref) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fiber_id": "   "}, r"fiberId must not be blank \(got '   '\)"),
        ({"fiber_id": ""}, r"fiberId must not be blank \(got ''\)"),
        ({"idempotency_key": "\t"}, r"idempotencyKey must not be blank \(got '\\t'\)"),
    ],
)
def test_F088_blank_fiber_id_or_key_is_rejected(
    sim: Simulation, options: dict[str, str], message: str
) -> None:
    """A blank (empty or whitespace) fiber id or idempotency key is refused, showing the value,
    and nothing is stored or run."""
    ref = sim.agent(Recorder, "m")
    with pytest.raises(InvalidArgument, match=message):
        sim.call(ref, "start", "job", [note("ran")], **options)
    assert ledger_rows(sim, ref) == []
    assert journal(sim, ref) == []


def test_F089_fiber_id_and_key_of_different_fibers_is_rejected(sim: Simulation) -> None:
    """An id and a key that name two different fibers (or a key held by another id) are
    refused with both values shown; nothing new is stored."""
    ref = sim.agent(Recorder, "m")
    sim.call(ref, "start", "job", [], fiber_id="a", idempotency_key="key-a")
    sim.call(ref, "start", "job", [], fiber_id="b", idempotency_key="key-b")
    with pytest.raises(
        InvalidArgument,
        match=r"fiberId and idempotencyKey refer to different fibers \(fiberId 'a' -> 'a', "
        r"idempotencyKey 'key-b' -> 'b'\)",
    ):
        sim.call(ref, "start", "job", [note("ran")], fiber_id="a", idempotency_key="key-b")
    with pytest.raises(
        InvalidArgument,
        match=r"refer to different fibers \(fiberId 'c' -> None, idempotencyKey 'key-a' -> 'a'\)",
    ):
        sim.call(ref, "start", "job", [note("ran")], fiber_id="c", idempotency_key="key-a")
    assert [row["fiber_id"] for row in ledger_rows(sim, ref)] == ["a", "b"]
    assert journal(sim, ref, "ran") == []


def test_F090_a_failing_callback_settles_as_error(sim: Simulation) -> None:
    """A callback that throws settles the ledger as `error` with the thrown message."""
    ref = sim.agent(Recorder, "m")
    sim.call(ref, "start", "job", [sleep(300), fail("Managed failure")], fiber_id="j")
    sim.run_for(1_000)
    inspection = sim.call(ref, "inspect_fiber", "j")
    assert (inspection.status, inspection.error, inspection.settled_at) == (
        "error",
        "Managed failure",
        300,
    )
    (failed,) = sim.trace.select("fiber:run:failed", agent=ref.path)
    assert (failed.get("fiberId"), failed.get("managed"), failed.get("error")) == (
        "j",
        True,
        "Managed failure",
    )
    assert run_rows(sim, ref) == []


def test_F091_a_run_row_id_collision_settles_as_error_without_running(sim: Simulation) -> None:
    """start_fiber with the id of a fiber already running settles as `error` (UNIQUE
    constraint), its callback never runs, and the running fiber keeps its row."""
    ref = sim.agent(Recorder, "m")
    sim.start_call(ref, "run", "plain", [stash({"mine": True}), sleep(5_000)])
    sim.run_for(100)
    (row,) = run_rows(sim, ref)
    receipt = sim.call(ref, "start", "managed", [note("ran")], fiber_id=row["id"])
    assert (receipt.accepted, receipt.status) == (True, "pending")
    inspection = sim.call(ref, "inspect_fiber", row["id"])
    assert inspection.status == "error"
    assert "UNIQUE constraint failed" in inspection.error
    assert journal(sim, ref, "ran") == []
    assert run_rows(sim, ref) == [row]
    assert sim.trace.select("fiber:run:failed", agent=ref.path) == []


def test_F092_wait_for_completion_returns_the_terminal_status(sim: Simulation) -> None:
    """With wait_for_completion the caller gets accepted True and `completed`, or `error` with
    the message, once the callback settles."""
    ref = sim.agent(Recorder, "m")
    done = sim.call(ref, "start", "ok", [sleep(1_500), stash({"n": 3})], wait_for_completion=True)
    assert (done.accepted, done.status, done.snapshot, done.settled_at) == (
        True,
        "completed",
        {"n": 3},
        1_500,
    )
    assert sim.now_ms == 1_500
    failed = sim.call(
        ref, "start", "bad", [sleep(500), fail("rate limited")], wait_for_completion=True
    )
    assert (failed.accepted, failed.status, failed.error) == (True, "error", "rate limited")
    assert sim.now_ms == 2_000


def test_F094_cancel_resolves_waiters_at_once_and_the_abort_sticks(sim: Simulation) -> None:
    """Cancelling a callback that ignores its signal returns True and wakes a waiting caller
    with `aborted` at once; when the callback finishes later the ledger is still `aborted`
    with the cancel reason."""
    ref = sim.agent(Recorder, "m")
    waiting = sim.start_call(
        ref,
        "start",
        "job",
        [sleep(10_000), note("callback finished")],
        fiber_id="j",
        wait_for_completion=True,
    )
    sim.run_for(1_000)
    assert not waiting.done()
    assert sim.call(ref, "cancel_fiber", "j", "stop") is True
    sim.run_for(0)
    assert waiting.done()
    result = sim.wait(waiting)
    assert (result.accepted, result.status, result.error, result.settled_at) == (
        True,
        "aborted",
        "stop",
        1_000,
    )
    assert [r["id"] for r in run_rows(sim, ref)] == ["j"]
    sim.run_for(10_000)
    assert [row["t"] for row in journal(sim, ref, "callback finished")] == [10_000]
    inspection = sim.call(ref, "inspect_fiber", "j")
    assert (inspection.status, inspection.error, inspection.settled_at) == (
        "aborted",
        "stop",
        1_000,
    )
    assert run_rows(sim, ref) == []
    assert sim.call(ref, "cancel_fiber", "j", "again") is False


def test_F094_a_callback_failing_after_cancel_keeps_the_cancel_reason(sim: Simulation) -> None:
    """A cancelled callback that later throws does not overwrite the `aborted` row or its
    reason with its own error."""
    ref = sim.agent(Recorder, "m")
    sim.call(ref, "start", "job", [sleep(5_000), fail("cleanup failed")], fiber_id="j")
    sim.run_for(1_000)
    assert sim.call(ref, "cancel_fiber", "j", "stop") is True
    sim.run_for(5_000)
    inspection = sim.call(ref, "inspect_fiber", "j")
    assert (inspection.status, inspection.error, inspection.settled_at) == (
        "aborted",
        "stop",
        1_000,
    )
    (failed,) = sim.trace.select("fiber:run:failed", agent=ref.path)
    assert (failed.t_ms, failed.get("error")) == (5_000, "cleanup failed")


def test_F097_a_completed_fiber_is_inspected_listed_and_deleted(sim: Simulation) -> None:
    """A completed fiber is found by key and by status+name listing; delete_fibers() removes it
    (but not `interrupted` or running rows) and inspect_fiber then returns None."""
    ref = sim.agent(Recorder, "m")
    sim.start_call(ref, "start", "sync", [LONG], fiber_id="cut-short")
    sim.run_for(100)
    sim.evict(ref, "deploy")
    sim.fetch(ref)
    receipt = sim.call(ref, "start", "sync", [], idempotency_key="sync:1", wait_for_completion=True)
    sim.call(ref, "start", "other", [], wait_for_completion=True)
    sim.call(ref, "start", "sync", [LONG], fiber_id="still-running")
    by_key = sim.call(ref, "inspect_fiber_by_key", "sync:1")
    assert (by_key.fiber_id, by_key.status) == (receipt.fiber_id, "completed")
    listed = sim.call(ref, "list_fibers", status="completed", name="sync")
    assert [f.fiber_id for f in listed] == [receipt.fiber_id]
    assert sim.call(ref, "delete_fibers") == 2
    assert sim.call(ref, "inspect_fiber", receipt.fiber_id) is None
    assert sim.call(ref, "inspect_fiber_by_key", "sync:1") is None
    remaining = {row["fiber_id"]: row["status"] for row in ledger_rows(sim, ref)}
    assert remaining == {"cut-short": "interrupted", "still-running": "running"}
    assert sim.call(ref, "delete_fibers", status=["running", "pending"]) == 0
    assert sim.call(ref, "delete_fibers", status="interrupted") == 1
    assert [row["fiber_id"] for row in ledger_rows(sim, ref)] == ["still-running"]


def test_F099_delete_fibers_takes_rows_settled_before_oldest_first(sim: Simulation) -> None:
    """settled_before deletes only rows settled strictly earlier, oldest settled first, at most
    `limit` (default 100, clamped to 500)."""
    ref = sim.agent(Batch, "m")
    ids = sim.call(ref, "start_many", 5, 1_000)
    settled = {r["fiber_id"]: r["completed_at"] for r in ledger_rows(sim, ref)}
    assert [settled[i] for i in ids] == [0, 1_000, 2_000, 3_000, 4_000]
    assert sim.call(ref, "delete_fibers", settled_before=2_000, limit=1) == 1
    assert sim.call(ref, "delete_fibers", settled_before=2_000) == 1
    assert [r["fiber_id"] for r in ledger_rows(sim, ref)] == ids[2:]
    assert sim.call(ref, "delete_fibers", settled_before=2_000) == 0
    sim.call(ref, "start_many", 620, 0, "g")
    assert sim.call(ref, "delete_fibers") == 100
    assert sim.call(ref, "delete_fibers", limit=10_000) == 500
    assert len(ledger_rows(sim, ref)) == 623 - 600


def test_F100_list_fibers_is_newest_first_and_clamps_its_limit(sim: Simulation) -> None:
    """With 120 rows, list_fibers() gives the 50 newest, newest first; limit is clamped to
    [1, 100]."""
    ref = sim.agent(Batch, "m")
    ids = sim.call(ref, "start_many", 120, 10)
    newest_first = list(reversed(ids))
    assert [f.fiber_id for f in sim.call(ref, "list_fibers")] == newest_first[:50]
    assert [f.fiber_id for f in sim.call(ref, "list_fibers", limit=0)] == newest_first[:1]
    assert [f.fiber_id for f in sim.call(ref, "list_fibers", limit=1_000)] == newest_first[:100]
    assert sim.call(ref, "list_fibers", status=[]) == []


def test_F101_unmanaged_fibers_are_invisible_to_the_ledger_api(sim: Simulation) -> None:
    """A running run_fiber fiber has a run row but no ledger row: inspect and list miss it."""
    ref = sim.agent(Recorder, "m")
    pending = sim.start_call(ref, "run", "plain", [sleep(1_000)])
    sim.run_for(100)
    (row,) = run_rows(sim, ref)
    assert sim.call(ref, "inspect_fiber", row["id"]) is None
    assert sim.call(ref, "list_fibers") == []
    assert sim.call(ref, "list_fibers", status=["pending", "running"]) == []
    sim.wait(pending)


def test_F125_two_starts_with_one_key_in_one_turn_accept_once(sim: Simulation) -> None:
    """Two start_fiber calls with the same key in one turn, or from two simultaneous calls,
    accept exactly one and run its callback once."""
    ref = sim.agent(Batch, "m")
    first, second = sim.call(ref, "start_twice_in_one_turn", "k1")
    assert [first.accepted, second.accepted] == [True, False]
    assert first.fiber_id == second.fiber_id
    calls = [sim.start_call(ref, "start", "job", [note("ran")], idempotency_key="k2") for _ in "ab"]
    accepted = [sim.wait(call).accepted for call in calls]
    assert sorted(accepted) == [False, True]
    sim.run_for(100)
    assert len(journal(sim, ref, "ran")) == 2
    assert len(ledger_rows(sim, ref)) == 2


def test_a_duplicate_waiting_start_joins_the_execution_still_running(sim: Simulation) -> None:
    """A duplicate start_fiber with the same key that waits, while the first execution still
    runs in this incarnation, joins it: accepted False, the first callback's result, and its
    own callback never runs."""
    ref = sim.agent(Recorder, "m")
    sim.start_call(ref, "start", "reply", [sleep(5_000), stash({"sent": 1})], idempotency_key="w:1")
    sim.run_for(1_000)
    duplicate = sim.call(
        ref,
        "start",
        "reply",
        [note("duplicate ran")],
        idempotency_key="w:1",
        wait_for_completion=True,
    )
    assert (duplicate.accepted, duplicate.status, duplicate.snapshot) == (
        False,
        "completed",
        {"sent": 1},
    )
    assert sim.now_ms == 5_000
    assert journal(sim, ref, "duplicate ran") == []
    assert sim.probes["fiber.duplicate_joined_running_execution"] == 1
    assert sim.probes.get("fiber.duplicate_wait_triggered_recovery", 0) == 0


@on_both_releases
def test_a_managed_fiber_that_cannot_begin_is_handed_to_recovery(sim: Simulation) -> None:
    """The pending-to-running update fails on a storage fault: the accepted fiber is not left
    `pending` forever; the alarm is armed and a recovery pass hands it to on_fiber_recovered
    (divergence F7)."""
    from tests.conformance.fiber_agents import hook_calls

    ref = sim.agent(Recorder, "m")
    sim.run_for(1_000)
    sim.arm_storage_fault(ref, "error", match=r"^UPDATE cf_agents_fibers SET status = 'running'")
    receipt = sim.call(ref, "start", "reply-to-webhook", [sleep(2_000)])
    assert (receipt.accepted, receipt.status) == (True, "pending")
    assert sim.probes.get("fiber.managed_start_failed") == 1
    assert sim.alarm_of(ref) is not None
    sim.run_for(600_000)
    (call,) = hook_calls(sim, ref)
    assert call["fiber"] == receipt.fiber_id
    status = sim.query(ref, "SELECT status FROM cf_agents_fibers")[0]["status"]
    assert status != "pending"


@on_both_releases
def test_a_managed_fiber_whose_acceptance_cannot_be_read_back_still_runs(
    sim: Simulation,
) -> None:
    """The pending row is written, then reading it back for the answer fails on a storage
    fault: the call raises, but the accepted work runs to completion instead of staying
    `pending` with no execution and no alarm (divergence F8)."""
    ref = sim.agent(Recorder, "m")
    sim.run_for(1_000)
    # The second ledger read of the call: the first looks for an existing fiber.
    sim.arm_storage_fault(
        ref, "error", match=r"^SELECT \* FROM cf_agents_fibers WHERE fiber_id", skip=1
    )
    with pytest.raises(StorageError):
        sim.call(ref, "start", "reply-to-webhook", [note("worked"), sleep(2_000)])
    sim.run_for(5_000)
    (row,) = sim.query(ref, "SELECT status FROM cf_agents_fibers")
    assert row["status"] == "completed"
    assert len(journal(sim, ref, "worked")) == 1
    assert run_rows(sim, ref) == []
    assert sim.probes.get("fiber.managed_accept_read_failed") == 1
