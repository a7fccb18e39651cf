"""Conformance: recovery of fibers orphaned by eviction — the scan, the hook contract, max age,
the follow-up alarm and its backoff, the scan deadline, the re-entrancy guard, and managed
fibers' ledger outcomes (spec fibers §6, catalogue F-60 … F-83, F-102 … F-111, F-124)."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest

from agents_core import Agent
from agents_core.fiber_ledger import FiberRecoveryResult
from sim import Simulation
from tests.conformance.fiber_agents import (
    FAST_HEARTBEAT,
    Poisoned,
    Recorder,
    Researcher,
    ResolvingRecorder,
    SlowHook,
    fail,
    hook_calls,
    journal,
    note,
    run_rows,
    sleep,
    stash,
)
from tests.releases import on_both_releases, on_release

HOUR_MS = 3_600_000
LONG = sleep(600_000)


def make_orphans(sim: Simulation, ref, *fibers: tuple[str, list], method: str = "run") -> list:
    """Start each (name, script) fiber, let them run 500 ms, then kill the incarnation mid-run:
    the run rows they leave behind are orphans. Returns those rows."""
    for name, script in fibers:
        sim.start_call(ref, method, name, script)
    sim.run_for(500)
    rows = run_rows(sim, ref)
    assert len(rows) == len(fibers)
    sim.evict(ref, "deploy")
    return rows


def recovery_events(sim: Simulation, ref, fiber_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The recovery-side events of one fiber, in order, with their payloads."""
    return [
        (r.event, dict(r.fields))
        for r in sim.trace.select(agent=ref.path, fiberId=fiber_id)
        if r.event.startswith("fiber:recovery:") or r.event == "fiber:run:interrupted"
    ]


def streak(sim: Simulation, ref) -> int:
    return sim.instance_of(ref)._recovery_no_progress_scans


def armed_delay(sim: Simulation, ref) -> int:
    return sim.alarm_of(ref) - sim.now_ms


def ledger(sim: Simulation, ref, fiber_id: str) -> dict[str, Any]:
    (row,) = sim.query(ref, "SELECT * FROM cf_agents_fibers WHERE fiber_id = ?", fiber_id)
    return row


# -- unmanaged recovery ---------------------------------------------------------------------
def test_F060_the_hook_gets_the_orphans_identity_and_creation_time(sim: Simulation) -> None:
    """An orphan that never stashed reaches the hook with its id, name, null snapshot, reason
    `interrupted` and the row's created_at."""
    ref = sim.agent(Recorder, "rec")
    sim.run_for(1_234)
    (row,) = make_orphans(sim, ref, ("ingest", [LONG]))
    sim.run_for(100)
    sim.fetch(ref)
    (call,) = hook_calls(sim, ref)
    assert (call["fiber"], call["inc"], call["t"]) == (row["id"], 2, 1_834)
    assert call["data"] == {
        "name": "ingest",
        "snapshot": None,
        "createdAt": 1_234,
        "recoveryReason": "interrupted",
        "status": None,
        "idempotencyKey": None,
        "metadata": None,
    }


def test_F061_the_hook_gets_the_last_stashed_snapshot(sim: Simulation) -> None:
    """The hook's snapshot is the parsed text of the orphan's last stash."""
    ref = sim.agent(Recorder, "rec")
    last = {"cursor": "page-3", "seen": [1, 2, 3], "partial": {"tokens": 812}}
    make_orphans(sim, ref, ("crawl", [stash({"cursor": "page-2"}), sleep(100), stash(last), LONG]))
    sim.fetch(ref)
    assert [call["data"]["snapshot"] for call in hook_calls(sim, ref)] == [last]


def test_F062_a_recovered_row_is_deleted_and_never_offered_again(sim: Simulation) -> None:
    """After a hook succeeds the row is gone; later scans (startup and alarm) do not call it."""
    ref = sim.agent(Recorder, "rec")
    make_orphans(sim, ref, ("ingest", [LONG]))
    sim.fetch(ref)
    assert run_rows(sim, ref) == []
    sim.run_for(10_000)
    sim.evict(ref, "deploy")
    sim.fetch(ref)
    sim.run_for(10_000)
    assert len(sim.trace.select("startup:done", agent=ref.path)) == 3
    assert len(hook_calls(sim, ref)) == 1
    assert sim.probes["fiber.orphan_recovered"] == 1


def test_F063_a_fiber_still_running_here_is_not_recovered(sim: Simulation) -> None:
    """Heartbeat alarms scan while a fiber runs; its row is skipped, so no hook is called."""
    ref = sim.agent(Recorder, "rec")
    pending = sim.start_call(ref, "run", "long", [stash({"n": 1}), sleep(9_000)])
    sim.run_for(7_000)
    assert len(sim.trace.select("alarm:done", agent=ref.path)) == 3
    assert len(run_rows(sim, ref)) == 1
    sim.wait(pending)
    assert hook_calls(sim, ref) == []
    assert sim.trace.select("fiber:recovery:*", agent=ref.path) == []


def test_F064_every_orphan_gets_its_own_hook_call(sim: Simulation) -> None:
    """Two orphaned fibers are each handed to the hook once, and both rows are deleted."""
    ref = sim.agent(Recorder, "rec")
    rows = make_orphans(
        sim,
        ref,
        ("fetch-data", [stash({"a": 1}), LONG]),
        ("process-queue", [stash({"b": 2}), LONG]),
    )
    sim.fetch(ref)
    calls = [(c["fiber"], c["data"]["name"], c["data"]["snapshot"]) for c in hook_calls(sim, ref)]
    assert calls == [
        (rows[0]["id"], "fetch-data", {"a": 1}),
        (rows[1]["id"], "process-queue", {"b": 2}),
    ]
    assert run_rows(sim, ref) == []


def test_F066_a_fresh_orphan_whose_hook_throws_is_kept(sim: Simulation) -> None:
    """A throwing hook leaves a young unmanaged row in place for a later scan."""
    ref = sim.agent(Poisoned, "p")
    (row,) = make_orphans(sim, ref, ("ingest", [stash({"n": 1}), LONG]))
    sim.fetch(ref)
    assert len(hook_calls(sim, ref)) == 1
    assert run_rows(sim, ref) == [row]
    assert [e for e, _ in recovery_events(sim, ref, row["id"])][-1] == "fiber:recovery:failed"


def test_F067_an_aged_orphan_whose_hook_throws_is_dropped(sim: Simulation) -> None:
    """Retried for 24 h, the poison row is deleted at its first failed attempt past the max
    age, with a max_age_exceeded skip; then nothing wakes the agent for it again."""
    ref = sim.agent(Poisoned, "p")
    (row,) = make_orphans(sim, ref, ("ingest", [LONG]))
    sim.run_for(25 * HOUR_MS)
    assert run_rows(sim, ref) == []
    (skip,) = sim.trace.select("fiber:recovery:skipped", agent=ref.path)
    age = skip.t_ms - row["created_at"]
    assert age > 86_400_000
    assert dict(skip.fields) == {
        "fiberId": row["id"],
        "fiberName": "ingest",
        "reason": "max_age_exceeded",
        "elapsedMs": age,
    }
    failures = [r.t_ms for r in sim.trace.select("fiber:recovery:failed", agent=ref.path)]
    assert len(failures) > 100
    assert failures[-1] == skip.t_ms
    assert failures[-2] - row["created_at"] <= 86_400_000
    assert sim.alarm_of(ref) is None
    # Every failure but the last kept the row; the last, past the max age, dropped it.
    assert sim.probes["fiber.recovery_failed_row_kept"] == len(failures) - 1
    assert sim.probes["fiber.max_age_dropped"] == 1


def test_F068_an_aged_orphan_whose_hook_succeeds_is_recovered_normally(sim: Simulation) -> None:
    """Age only matters after a failed attempt: an old row with a working hook is recovered."""

    class ShortMaxAge(Recorder):
        options = {"keep_alive_interval_ms": 60_000, "fiber_recovery_max_age_ms": 10_000}

    ref = sim.agent(ShortMaxAge, "old")
    (row,) = make_orphans(sim, ref, ("ingest", [stash({"n": 4}), LONG]))
    sim.run_for(30_000)
    sim.fetch(ref)
    (call,) = hook_calls(sim, ref)
    assert call["t"] - row["created_at"] > 10_000
    assert run_rows(sim, ref) == []
    events = [e for e, _ in recovery_events(sim, ref, row["id"])]
    assert events[-1] == "fiber:recovery:handled"
    assert "fiber:recovery:skipped" not in events


def test_F069_with_max_age_zero_a_poison_row_is_kept_forever(sim: Simulation) -> None:
    """fiber_recovery_max_age_ms=0 keeps a failing row through many scans past a day."""

    class KeepForever(Poisoned):
        options = {**FAST_HEARTBEAT, "fiber_recovery_max_age_ms": 0}

    ref = sim.agent(KeepForever, "p")
    (row,) = make_orphans(sim, ref, ("ingest", [LONG]))
    sim.run_for(30 * HOUR_MS)
    assert len(hook_calls(sim, ref)) > 100
    assert run_rows(sim, ref) == [row]
    assert sim.trace.select("fiber:recovery:skipped", agent=ref.path) == []
    assert sim.alarm_of(ref) > sim.now_ms


def test_F070_a_failing_hook_emits_detected_interrupted_attempt_failed(sim: Simulation) -> None:
    """For unmanaged and managed orphans alike: detected, run:interrupted, attempt, then
    failed with reason handler_error and the hook's message."""
    ref = sim.agent(Poisoned, "p")
    sim.run_for(1_000)
    sim.start_call(ref, "run", "plain", [LONG])
    sim.start_call(ref, "start", "managed", [LONG], fiber_id="m-1")
    sim.run_for(500)
    (plain,) = [r["id"] for r in run_rows(sim, ref) if r["name"] == "plain"]
    sim.evict(ref, "deploy")
    sim.run_for(250)
    sim.fetch(ref)
    for fiber_id, name, managed in ((plain, "plain", False), ("m-1", "managed", True)):
        common = {"fiberId": fiber_id, "fiberName": name, "managed": managed}
        common["recoveryReason"] = "interrupted"
        assert recovery_events(sim, ref, fiber_id) == [
            ("fiber:recovery:detected", {**common, "elapsedMs": 750}),
            ("fiber:run:interrupted", {**common, "elapsedMs": 750}),
            ("fiber:recovery:attempt", common),
            (
                "fiber:recovery:failed",
                {
                    **common,
                    "elapsedMs": 0,
                    "error": f"cannot recover {name}",
                    "reason": "handler_error",
                },
            ),
        ]


def test_F071_a_successful_user_hook_is_reported_as_handled_by_user(sim: Simulation) -> None:
    """fiber:recovery:handled carries status `user` and the hook's duration."""

    class Slow(SlowHook):
        hook_ms = 250

    ref = sim.agent(Slow, "s")
    (row,) = make_orphans(sim, ref, ("ingest", [LONG]))
    sim.fetch(ref)
    handled = recovery_events(sim, ref, row["id"])[-1]
    assert handled == (
        "fiber:recovery:handled",
        {
            "fiberId": row["id"],
            "fiberName": "ingest",
            "managed": False,
            "recoveryReason": "interrupted",
            "elapsedMs": 250,
            "status": "user",
        },
    )


def test_F072_a_corrupted_snapshot_reaches_the_hook_as_null(sim: Simulation) -> None:
    """Snapshot text that is not JSON (given a damaged row) is passed as null, with a warning,
    and the row is recovered as usual."""
    ref = sim.agent(Recorder, "rec")
    (row,) = make_orphans(sim, ref, ("ingest", [stash({"page": 2}), LONG]))
    sim.query(ref, "UPDATE cf_agents_runs SET snapshot = ? WHERE id = ?", '{"page": 2', row["id"])
    sim.fetch(ref)
    assert [(c["fiber"], c["data"]["snapshot"]) for c in hook_calls(sim, ref)] == [
        (row["id"], None)
    ]
    warnings = [r.get("message") for r in sim.trace.select("console:warn", agent=ref.path)]
    assert any(row["id"] in message and "snapshot" in message for message in warnings)
    assert run_rows(sim, ref) == []


def test_F073_a_cold_alarm_wake_runs_a_failing_hook_twice(sim: Simulation) -> None:
    """An alarm that starts a new incarnation scans at startup and again in housekeeping:
    the failing hook runs twice, and the follow-up alarm is base x 4 (streak 2)."""
    ref = sim.agent(Poisoned, "p")
    make_orphans(sim, ref, ("ingest", [LONG]))
    woke_at = sim.run_to_next_alarm()
    assert sim.trace.select("incarnation:start", agent=ref.path)[-1].get("trigger") == "alarm"
    assert [(c["inc"], c["t"]) for c in hook_calls(sim, ref)] == [(2, woke_at), (2, woke_at)]
    assert armed_delay(sim, ref) == 2_000 * 4


def test_F074_a_killed_fiber_resumes_from_its_checkpoint_by_alarm_alone(sim: Simulation) -> None:
    """With no client, the persisted alarm wakes the agent; the hook gets the last checkpoint
    and its continuation finishes the work."""
    ref = sim.agent(Researcher, "r")
    sim.call(ref, "begin_research")
    sim.run_for(15_000)
    sim.evict(ref, "deploy")
    sim.run_for(60_000)
    (call,) = hook_calls(sim, ref)
    assert call["data"]["snapshot"] == {
        "completed": ["search"],
        "results": {"search": "search of r"},
        "pendingSteps": ["analyze", "synthesize"],
    }
    (wake,) = [r for r in sim.trace.select("incarnation:start", agent=ref.path) if r.inc == 2]
    assert wake.get("trigger") == "alarm"
    assert [(row["data"], row["inc"]) for row in journal(sim, ref, "step")] == [
        ("search", 1),
        ("analyze", 2),
        ("synthesize", 2),
    ]
    assert sim.call(ref, "ping") == "pong"
    assert sim.instance_of(ref).state == {
        "result": {s: f"{s} of r" for s in ("search", "analyze", "synthesize")}
    }
    assert run_rows(sim, ref) == []


# -- the follow-up alarm, its backoff, the deadline ----------------------------------------
def test_F076_a_retained_poison_row_keeps_a_follow_up_alarm_armed(sim: Simulation) -> None:
    """After an alarm cycle that fails to recover, the row remains and a later alarm is armed."""
    ref = sim.agent(Poisoned, "p")
    (row,) = make_orphans(sim, ref, ("ingest", [LONG]))
    sim.run_to_next_alarm()
    assert run_rows(sim, ref) == [row]
    assert sim.alarm_of(ref) > sim.now_ms


def test_F077_consecutive_failed_scans_double_the_follow_up_delay(sim: Simulation) -> None:
    """Each warm alarm cycle that makes no progress adds 1 to the streak and the next delay is
    base x 2^streak: after the cold wake's two scans (8 s), 16, 32, 64 and 128 s."""
    ref = sim.agent(Poisoned, "p")
    make_orphans(sim, ref, ("ingest", [LONG]))
    sim.run_to_next_alarm()
    observed = [(streak(sim, ref), armed_delay(sim, ref))]
    for _ in range(4):
        sim.run_to_next_alarm()
        observed.append((streak(sim, ref), armed_delay(sim, ref)))
    assert observed == [(2, 8_000), (3, 16_000), (4, 32_000), (5, 64_000), (6, 128_000)]
    assert sim.incarnation_of(ref) == 2
    assert len(hook_calls(sim, ref)) == 2 + 4


def test_F078_progress_resets_the_backoff(sim: Simulation) -> None:
    """When a backed-off scan recovers a row (its hook now works), the streak returns to 0 and
    the next delay drops back to the base while another row stays pending."""

    class Flaky(Recorder):
        async def heal(self, name: str) -> None:
            self.sql("CREATE TABLE IF NOT EXISTS healed (name TEXT)")
            self.sql("INSERT INTO healed VALUES (?)", name)

        async def recover(self, ctx: Any) -> Any:
            self.sql("CREATE TABLE IF NOT EXISTS healed (name TEXT)")
            if not self.sql("SELECT 1 FROM healed WHERE name = ?", ctx.name):
                raise RuntimeError(f"{ctx.name} still broken")

    ref = sim.agent(Flaky, "f")
    make_orphans(sim, ref, ("a", [LONG]), ("b", [LONG]))
    sim.run_to_next_alarm()
    sim.run_to_next_alarm()
    sim.run_to_next_alarm()
    assert (streak(sim, ref), armed_delay(sim, ref)) == (4, 32_000)
    sim.call(ref, "heal", "a")
    sim.run_to_next_alarm()
    assert [r["name"] for r in run_rows(sim, ref)] == ["b"]
    assert (streak(sim, ref), armed_delay(sim, ref)) == (0, 2_000)


def test_F079_once_recovery_drains_no_alarm_remains(sim: Simulation) -> None:
    """A recoverable orphan woken by its alarm is recovered; nothing is left armed, streak 0."""
    ref = sim.agent(Recorder, "rec")
    make_orphans(sim, ref, ("ingest", [LONG]))
    sim.run_to_next_alarm()
    assert len(hook_calls(sim, ref)) == 1
    assert run_rows(sim, ref) == []
    assert sim.alarm_of(ref) is None
    assert streak(sim, ref) == 0


def test_F080_the_backoff_delay_is_capped_at_five_minutes(sim: Simulation) -> None:
    """With the default 30 s base, a warm agent's follow-up delay after streak n is
    min(300 000, 30 000 x 2^min(n, 20)) ms, for n well past the exponent cap."""

    class DefaultBase(Poisoned):
        options = {}

    ref = sim.agent(DefaultBase, "p")
    make_orphans(sim, ref, ("ingest", [LONG]))
    sim.connect(ref)
    observed = []
    for _ in range(25):
        sim.run_to_next_alarm()
        observed.append((streak(sim, ref), armed_delay(sim, ref)))
    assert [n for n, _ in observed] == list(range(2, 27))
    for n, delay in observed:
        assert delay == min(300_000, 30_000 * 2 ** min(n, 20))
    assert [d for _, d in observed[:4]] == [120_000, 240_000, 300_000, 300_000]
    assert sim.incarnation_of(ref) == 2
    # Each alarm's re-arm reads the candidates once: the cap bound from the third on.
    assert sim.probes["fiber.recovery_backoff_at_cap"] >= len(observed) - 2


def test_F083_the_scan_stops_at_the_row_where_the_deadline_has_passed(sim: Simulation) -> None:
    """The first row is always processed even if slow; at the next row past the 75 ms
    deadline one skip is emitted and the pass stops; later passes drain each row once."""

    class Deadline(SlowHook):
        options = {**FAST_HEARTBEAT, "fiber_recovery_scan_deadline_ms": 75}
        hook_ms = 100

    ref = sim.agent(Deadline, "d")
    rows = make_orphans(sim, ref, *((f"job-{i}", [LONG]) for i in range(3)))
    start = sim.now_ms
    sim.fetch(ref)
    assert sim.now_ms == start + 100
    assert [c["fiber"] for c in hook_calls(sim, ref)] == [rows[0]["id"]]
    (skip,) = sim.trace.select("fiber:recovery:skipped", agent=ref.path)
    assert dict(skip.fields) == {
        "fiberId": rows[1]["id"],
        "fiberName": "job-1",
        "reason": "scan_deadline_exceeded",
        "elapsedMs": 100,
    }
    assert run_rows(sim, ref) == rows[1:]
    assert sim.probes["fiber.recovery_scan_deadline"] == 1
    sim.run_for(60_000)
    assert sorted(c["fiber"] for c in hook_calls(sim, ref)) == sorted(r["id"] for r in rows)
    assert run_rows(sim, ref) == []


def test_F083_a_deadline_hit_also_stops_the_ledger_only_pass(sim: Simulation) -> None:
    """When the run-row pass stops at the deadline, the pass over managed rows that lost their
    run row checks the deadline too: a second skip (managed) for its first row, no hook."""

    class Deadline(SlowHook):
        options = {**FAST_HEARTBEAT, "fiber_recovery_scan_deadline_ms": 75}
        hook_ms = 100

    ref = sim.agent(Deadline, "d")
    # Both settle writes of a finishing managed fiber fail: its ledger row stays `running`
    # with no run row left (a ledger-only orphan).
    sim.arm_storage_fault(ref, "error", match=r"SET status = ('completed'|\?)", count=2)
    sim.call(ref, "start", "lost-settle", [stash({"n": 1}), sleep(100)], fiber_id="lo")
    rows = make_orphans(sim, ref, *((f"job-{i}", [LONG]) for i in range(2)))
    assert ledger(sim, ref, "lo")["status"] == "running"
    sim.fetch(ref)
    skips = [dict(r.fields) for r in sim.trace.select("fiber:recovery:skipped", agent=ref.path)]
    assert skips == [
        {
            "fiberId": rows[1]["id"],
            "fiberName": "job-1",
            "reason": "scan_deadline_exceeded",
            "elapsedMs": 100,
        },
        {
            "fiberId": "lo",
            "fiberName": "lost-settle",
            "reason": "scan_deadline_exceeded",
            "elapsedMs": 100,
            "managed": True,
        },
    ]
    assert [c["fiber"] for c in hook_calls(sim, ref)] == [rows[0]["id"]]
    assert ledger(sim, ref, "lo")["status"] == "running"
    sim.run_for(60_000)
    assert sorted(c["fiber"] for c in hook_calls(sim, ref)) == sorted(
        [rows[0]["id"], rows[1]["id"], "lo"]
    )
    assert (ledger(sim, ref, "lo")["status"], ledger(sim, ref, "lo")["snapshot"]) == (
        "interrupted",
        '{"n":1}',
    )
    assert sim.probes["fiber.ledger_only_row_recovered"] == 1


def test_an_internal_handler_past_its_timeout_fails_the_attempt_and_keeps_the_row(
    sim: Simulation,
) -> None:
    """A framework host's internal recovery handler is raced against
    fiber_recovery_hook_timeout_ms: past it the scan stops waiting, the attempt fails with the
    timeout (the user hook is not called), and the row stays for a later scan."""

    class SlowInternal(Recorder):
        options = {**FAST_HEARTBEAT, "fiber_recovery_hook_timeout_ms": 1_000}

        async def _handle_internal_fiber_recovery(self, ctx: Any) -> bool:
            await self.host.clock.sleep(5_000)
            return True

    ref = sim.agent(SlowInternal, "slow")
    (row,) = make_orphans(sim, ref, ("turn", [LONG]))
    start = sim.now_ms
    sim.fetch(ref)
    assert sim.now_ms == start + 1_000
    (failed,) = sim.trace.select("fiber:recovery:failed", agent=ref.path)
    assert failed.get("error") == "internal fiber recovery timed out after 1000 ms"
    assert hook_calls(sim, ref) == []
    assert [r["id"] for r in run_rows(sim, ref)] == [row["id"]]
    assert sim.probes["fiber.internal_recovery_timed_out"] == 1
    assert sim.probes["fiber.recovery_failed_row_kept"] == 1


@on_release("0.21.0")
def test_F124_a_second_scan_during_a_scan_returns_at_once(sim: Simulation) -> None:
    """While a scan started by a duplicate waiting start_fiber is in slow hooks, the scans of
    three alarms (the first also starting the incarnation) return at once: each orphan's hook
    runs exactly once, one after the other."""

    class SlowResolver(ResolvingRecorder):
        async def recover(self, ctx: Any) -> Any:
            await self.host.clock.sleep(3_000)
            self._note("hook:end", ctx.id)
            return await super().recover(ctx)

    ref = sim.agent(SlowResolver, "s")
    sim.start_call(ref, "start", "job", [stash({"n": 1}), LONG], fiber_id="m")
    sim.start_call(ref, "run", "plain", [LONG])
    sim.run_for(500)
    (plain,) = [r["id"] for r in run_rows(sim, ref) if r["name"] == "plain"]
    sim.evict(ref, "deploy")
    duplicate = sim.start_call(
        ref, "start", "job", [note("duplicate ran")], fiber_id="m", wait_for_completion=True
    )
    result = sim.wait(duplicate)
    assert (result.accepted, result.status) == (False, "completed")
    assert result.snapshot == {"last": {"n": 1}, "recovered": True}
    alarms = [(r.t_ms, r.inc) for r in sim.trace.select("alarm:done", agent=ref.path)]
    assert alarms == [(2_000, 2), (4_000, 2), (6_000, 2)]
    assert [r.t_ms for r in sim.trace.select("startup:done", agent=ref.path)] == [0, 2_000]
    assert [(c["fiber"], c["t"]) for c in hook_calls(sim, ref)] == [("m", 500), (plain, 3_500)]
    assert [(e["fiber"], e["t"]) for e in journal(sim, ref, "hook:end")] == [
        ("m", 3_500),
        (plain, 6_500),
    ]
    assert journal(sim, ref, "duplicate ran") == []
    assert run_rows(sim, ref) == []
    assert sim.probes["fiber.duplicate_wait_triggered_recovery"] == 1
    # Startup's scan and three alarms' housekeeping scans met the running one.
    assert sim.probes["fiber.recovery_scan_already_running"] == 4


@on_both_releases
def test_a_fiber_that_finishes_while_a_scan_runs_is_not_recovered(sim: Simulation) -> None:
    """A scan reads its candidate rows once and awaits each hook: a fiber live when the scan
    began, which finished while an earlier orphan's hook ran, is gone when its turn comes and
    is not offered to the hook (the SDK recovers its stale copy: F6)."""

    class Scanner(SlowHook):
        hook_ms = 5_000

        async def plant_orphan(self) -> None:
            self.sql(
                "INSERT INTO cf_agents_runs (id, name, snapshot, created_at) "
                "VALUES ('orphan', 'old', NULL, ?)",
                self.host.clock.now_ms(),
            )

        async def scan(self) -> None:
            await self._check_run_fibers()

    ref = sim.agent(Scanner, "s")
    sim.run_for(1)
    sim.call(ref, "plant_orphan")
    sim.start_call(ref, "run", "quick", [sleep(1_000), note("quick done")])
    sim.run_for(100)
    sim.call(ref, "scan")
    assert [c["fiber"] for c in hook_calls(sim, ref)] == ["orphan"]
    assert len(journal(sim, ref, "quick done")) == 1
    assert run_rows(sim, ref) == []
    assert sim.probes["fiber.finished_during_scan_skipped"] == 1


# -- managed recovery -----------------------------------------------------------------------
def test_F102_an_orphaned_managed_fiber_is_marked_interrupted(sim: Simulation) -> None:
    """The hook gets status, idempotency key and metadata; the ledger ends `interrupted` with
    the run row's last snapshot, and the run row is gone."""
    ref = sim.agent(Recorder, "rec")
    script = [stash({"step": 1}), sleep(200), stash({"step": 2}), LONG]
    sim.start_call(
        ref, "start", "reply", script, idempotency_key="order:17", metadata={"threadId": "t-9"}
    )
    sim.run_for(500)
    (run,) = run_rows(sim, ref)
    sim.evict(ref, "deploy")
    sim.run_for(100)
    sim.fetch(ref)
    (call,) = hook_calls(sim, ref)
    assert call["data"] == {
        "name": "reply",
        "snapshot": {"step": 2},
        "createdAt": run["created_at"],
        "recoveryReason": "interrupted",
        "status": "interrupted",
        "idempotencyKey": "order:17",
        "metadata": {"threadId": "t-9"},
    }
    row = ledger(sim, ref, run["id"])
    assert (row["status"], row["snapshot"], row["error_message"]) == (
        "interrupted",
        '{"step":2}',
        None,
    )
    assert row["completed_at"] == 600
    assert run_rows(sim, ref) == []
    handled = sim.trace.select("fiber:recovery:handled", agent=ref.path)
    assert [r.get("status") for r in handled] == ["managed"]


def test_F104_a_completed_recovery_result_is_applied(sim: Simulation) -> None:
    """A hook returning {status: completed, snapshot, metadata} settles the ledger with both."""
    ref = sim.agent(ResolvingRecorder, "rr")
    make_orphans(sim, ref, ("reply", [stash({"draft": "hello"}), LONG]), method="start")
    sim.fetch(ref)
    (call,) = hook_calls(sim, ref)
    inspection = sim.call(ref, "inspect_fiber", call["fiber"])
    assert inspection.status == "completed"
    assert inspection.snapshot == {"last": {"draft": "hello"}, "recovered": True}
    assert inspection.metadata == {"recoveredBy": "hook"}
    assert inspection.error is None
    assert inspection.settled_at == sim.now_ms


@on_both_releases
def test_F105_throwing_hook_leaves_managed_fiber_interrupted_with_error_s1(
    sim: Simulation,
) -> None:
    """Seed decision S1 (not the SDK's `error`): a throwing hook leaves the managed ledger
    `interrupted` with the hook's error recorded and the snapshot kept; the run row goes, the
    hook is not retried, and resolve_fiber can still settle it."""
    ref = sim.agent(Poisoned, "p")
    make_orphans(sim, ref, ("charge", [stash({"amount": 40}), LONG]), method="start")
    sim.fetch(ref)
    (call,) = hook_calls(sim, ref)
    fiber_id = call["fiber"]
    row = ledger(sim, ref, fiber_id)
    assert (row["status"], row["error_message"], row["snapshot"]) == (
        "interrupted",
        "cannot recover charge",
        '{"amount":40}',
    )
    assert run_rows(sim, ref) == []
    sim.run_for(20_000)
    assert len(hook_calls(sim, ref)) == 1
    assert sim.probes["fiber.managed_orphan_recovered"] == 1
    assert sim.probes["fiber.managed_recovery_hook_threw"] == 1
    settled = {"status": "completed", "snapshot": {"amount": 40, "refunded": False}}
    assert sim.call(ref, "resolve_fiber", fiber_id, settled) is True
    row = ledger(sim, ref, fiber_id)
    assert (row["status"], row["error_message"]) == ("completed", None)


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_F106_a_stale_run_row_beside_a_terminal_ledger_is_dropped_silently(sdk: str) -> None:
    """An aborted fiber's leftover run row is deleted by the scan without calling the hook,
    and the ledger row is left exactly as it was. 0.21.0 reports the row as detected and
    interrupted first; 0.32.0 reads the ledger first and emits nothing (spec sdk-0.32 §5.3)."""
    with Simulation(seed=zlib.crc32(f"F106-{sdk}".encode()), sdk=sdk) as sim:
        _stale_run_row_beside_a_terminal_ledger(sim, sdk)


def _stale_run_row_beside_a_terminal_ledger(sim: Simulation, sdk: str) -> None:
    ref = sim.agent(Recorder, "rec")
    sim.start_call(ref, "start", "job", [stash({"n": 1}), LONG], fiber_id="j")
    sim.run_for(200)
    assert sim.call(ref, "cancel_fiber", "j", "operator stop") is True
    sim.run_for(300)
    before = ledger(sim, ref, "j")
    assert before["status"] == "aborted"
    assert [r["id"] for r in run_rows(sim, ref)] == ["j"]
    sim.evict(ref, "deploy")
    sim.fetch(ref)
    assert hook_calls(sim, ref) == []
    assert ledger(sim, ref, "j") == before
    assert run_rows(sim, ref) == []
    events = [(e, f["managed"]) for e, f in recovery_events(sim, ref, "j")]
    reported = [("fiber:recovery:detected", True), ("fiber:run:interrupted", True)]
    assert events == (reported if sdk == "0.21.0" else [])
    assert sim.probes["fiber.stale_terminal_run_row_dropped"] == 1


def test_F107_resolve_fiber_settles_only_interrupted_rows(sim: Simulation) -> None:
    """resolve_fiber settles an `interrupted` row with the given snapshot and returns True;
    for running, completed, error, aborted or missing rows it returns False and changes nothing."""
    ref = sim.agent(Recorder, "rec")
    make_orphans(sim, ref, ("reply", [stash({"n": 1}), LONG]), method="start")
    sim.fetch(ref)
    (call,) = hook_calls(sim, ref)
    interrupted = call["fiber"]
    sim.call(ref, "start", "running", [LONG], fiber_id="running")
    sim.call(ref, "start", "failed", [fail("card declined")], fiber_id="failed")
    sim.call(ref, "start", "aborted", [LONG], fiber_id="aborted")
    sim.call(ref, "cancel_fiber", "aborted")
    result = {"status": "completed", "snapshot": {"n": 1, "resolvedBy": "webhook"}}
    others = ("running", "failed", "aborted")
    before = {fiber_id: ledger(sim, ref, fiber_id) for fiber_id in others}
    for fiber_id in (*others, "missing"):
        assert sim.call(ref, "resolve_fiber", fiber_id, result) is False, fiber_id
    assert {fiber_id: ledger(sim, ref, fiber_id) for fiber_id in others} == before
    assert sim.call(ref, "resolve_fiber", interrupted, result) is True
    row = ledger(sim, ref, interrupted)
    assert (row["status"], json.loads(row["snapshot"])) == ("completed", result["snapshot"])
    assert sim.call(ref, "resolve_fiber", interrupted, {"status": "error"}) is False
    assert ledger(sim, ref, interrupted)["status"] == "completed"


def test_F109_a_killed_managed_fiber_is_left_interrupted(sim: Simulation) -> None:
    """Killed mid-run and woken by its alarm only, with a hook that returns nothing, the
    fiber's ledger is `interrupted` with its key and last snapshot, and no run row remains."""
    ref = sim.agent(Recorder, "rec")
    script = [stash({"step": "draft"}), sleep(100), stash({"step": "send"}), LONG]
    sim.start_call(ref, "start", "reply", script, idempotency_key="webhook:9")
    sim.run_for(500)
    sim.evict(ref, "deploy")
    sim.run_to_next_alarm()
    inspection = sim.call(ref, "inspect_fiber_by_key", "webhook:9")
    assert (inspection.status, inspection.idempotency_key, inspection.snapshot) == (
        "interrupted",
        "webhook:9",
        {"step": "send"},
    )
    assert run_rows(sim, ref) == []
    assert sim.alarm_of(ref) is None


def test_F110_a_killed_managed_fiber_takes_the_hooks_result(sim: Simulation) -> None:
    """After a kill, each result a hook can return is what the ledger shows: status, the
    error text (error/reason) and the snapshot."""
    results = [
        {"status": "completed", "snapshot": {"sent": True}},
        {"status": "error", "error": "provider said 500", "snapshot": {"sent": False}},
        FiberRecoveryResult(status="aborted", reason="customer cancelled"),
        {"status": "interrupted", "reason": "needs review"},
    ]
    expected = [
        ("completed", None, '{"sent":true}'),
        ("error", "provider said 500", '{"sent":false}'),
        ("aborted", "customer cancelled", '{"step":1}'),
        ("interrupted", "needs review", '{"step":1}'),
    ]

    class Deciding(Recorder):
        async def recover(self, ctx: Any) -> Any:
            return results[int(ctx.id)]

    ref = sim.agent(Deciding, "d")
    for index in range(len(results)):
        sim.start_call(ref, "start", "job", [stash({"step": 1}), LONG], fiber_id=str(index))
    sim.run_for(500)
    sim.evict(ref, "deploy")
    sim.fetch(ref)
    observed = [
        (row["status"], row["error_message"], row["snapshot"])
        for row in sim.query(ref, "SELECT * FROM cf_agents_fibers ORDER BY fiber_id")
    ]
    assert observed == expected
    assert run_rows(sim, ref) == []


@on_release("0.21.0")
def test_F111_a_duplicate_waiting_start_after_restart_gets_the_recovered_result(
    sim: Simulation,
) -> None:
    """After a kill, a duplicate start_fiber that waits (on a stale stub, no startup) triggers
    recovery itself and returns accepted False, `completed`, with the recovered snapshot; its
    own callback never runs."""
    ref = sim.agent(ResolvingRecorder, "rr")
    sim.start_call(ref, "start", "reply", [stash({"draft": 1}), LONG], idempotency_key="webhook:42")
    sim.run_for(500)
    sim.evict(ref, "deploy")
    result = sim.call(
        ref,
        "start",
        "reply",
        [note("duplicate ran")],
        idempotency_key="webhook:42",
        wait_for_completion=True,
    )
    assert (result.accepted, result.status) == (False, "completed")
    assert result.snapshot == {"last": {"draft": 1}, "recovered": True}
    assert [r.inc for r in sim.trace.select("startup:begin", agent=ref.path)] == [1]
    assert journal(sim, ref, "duplicate ran") == []
    assert len(hook_calls(sim, ref)) == 1


class McpUser(Agent):
    """Connects an MCP server, then runs a fiber that an eviction orphans."""

    async def connect_and_work(self) -> None:
        self.add_mcp_server("search", "https://mcp.example/search")

        async def body(ctx) -> None:
            await self.host.clock.sleep(60_000)

        self.host.tasks.wait_until(self.run_fiber("uses-search", body))

    async def on_fiber_recovered(self, ctx) -> None:
        servers = sorted(c["name"] for c in self.mcp_connections.values())
        self.host.trace.emit("user:hook_saw_mcp", servers=servers)


def test_F065_mcp_connections_are_restored_before_fiber_recovery_runs(sim: Simulation) -> None:
    """On a cold start the stored MCP server is reconnected before the recovery hook runs."""
    ref = sim.agent(McpUser, "m")
    sim.call(ref, "connect_and_work")
    sim.run_for(1_000)
    sim.evict(ref, "deploy")
    sim.fetch(ref)
    (saw,) = sim.trace.select("user:hook_saw_mcp")
    assert saw.get("servers") == ["search"]
    restored = sim.trace.select("mcp:connected", agent=ref.path, restored=True)
    assert restored and restored[0].seq < saw.seq
