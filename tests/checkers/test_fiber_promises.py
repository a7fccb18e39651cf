"""`stash_replaces_whole`, `cancel_aborts_signal`, `recovery_scan_deadline` and
`schedule_dedupe_keys`: each holds on real runs of the workloads and the library's stories,
catches a crafted breach with its sentence, and forgives what the spec allows (a stash a crash
may have rolled back, a storage fault between a stash's two writes, a run that ended at the
cancel, a row taken exactly at the deadline, a key freed by a delete or held by another owner)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agents_core.fibers import FiberRunner
from agents_core.jsontext import to_json_text
from agents_core.schedules import Scheduler
from agents_core.signals import AbortController
from scenarios.language.loader import parse_scenario
from scenarios.run.steps import StepRunner
from sim import Simulation
from sim.checkers import CheckContext, check, context_from
from sim.sqlite import Write
from sim.trace import TraceRecord
from tests.checkers.agents import (
    fails_with_a_blind_checker,
    inserted,
    record,
    scenario_context,
    with_record,
    without,
)

ROOT = Path(__file__).resolve().parents[2]
P = "FiberWorkload/w"

STASHES = """
name: stash-and-cancel
description: a managed and a plain fiber stash, die in a deploy, resume, and one is cancelled
seed: 3
faults: none
agents:
  w:
    workload: fibers
    start: call
    fibers:
      - {name: m, steps: 6, step: 10s, managed: true, idempotency_key: "job:m"}
      - {name: u, steps: 4, step: 10s}
steps:
  - call: {agent: w, method: start}
  - at: 25s
    deploy: {}
  - at: 55s
    call: {agent: w, method: cancel, args: [m]}
  - at: 4m
    call: {agent: w, method: cancel, args: [m]}
  - run_until: 5m
"""
"""m and u stash steps 1 and 2, a deploy kills both at 25 s, the heartbeat alarm recovers them
at 30 s from step 2 into continuations, u finishes at 50 s, and m, cancelled at 55 s while it
waits on its step 5, stops there; a second cancel at 4 m answers false."""

LEDGER_FAULT = """
name: ledger-stash-fault
description: a managed fiber's stash fails at the ledger after its run row took it
seed: 3
faults: none
agents:
  w:
    workload: fibers
    start: call
    fibers:
      - {name: m, steps: 3, step: 10s, managed: true}
steps:
  - call: {agent: w, method: start}
  - at: 15s
    arm_storage_fault: {agent: w, kind: error, match: "UPDATE cf_agents_fibers SET snapshot"}
  - run_until: 2m
"""
"""The stash of step 2 writes the run row, then its ledger write fails: the stash raises (no
`workload:stashed`), the fiber fails, and the turn commits the run row's new snapshot."""

CANCEL_AT_START = """
name: cancel-at-start
description: a managed fiber cancelled in the instant it starts
seed: 3
faults: none
agents:
  w:
    workload: fibers
    start: call
    fibers:
      - {name: m, steps: 3, step: 10s, managed: true}
steps:
  - call: {agent: w, method: start}
  - call: {agent: w, method: cancel, args: [m]}
  - run_until: 1m
"""


def messages(context: CheckContext, name: str) -> list[str]:
    return [v.message for v in check(context, [name])]


def first(context: CheckContext, event: str, **fields: Any) -> TraceRecord:
    return next(r for r in context.events(event, **fields))


def fiber_of(context: CheckContext, name: str, inc: int) -> str:
    """The id of the execution of fiber `name` started in incarnation `inc`."""
    (start,) = [r for r in context.events("fiber:run:started", fiberName=name) if r.inc == inc]
    return str(start.get("fiberId"))


def rewritten(context: CheckContext, hit: Callable[[Write], bool], params: Any) -> CheckContext:
    """The context with the one committed write of `P` that `hit` selects given `params`, or
    dropped (None); every turn stays, so each keeps its commit instant."""
    turns, hits = [], 0
    for turn in context.journals[P]:
        kept = []
        for write in turn:
            if not hit(write):
                kept.append(write)
                continue
            hits += 1
            if params is not None:
                kept.append((write[0], tuple(params)))
        turns.append(tuple(kept))
    assert hits == 1
    return dataclasses.replace(context, journals={**context.journals, P: tuple(turns)})


def stash_write(table: str, text: str) -> Callable[[Write], bool]:
    column = "id" if table == "cf_agents_runs" else "fiber_id"
    return lambda w: (
        w[0].startswith(f"UPDATE {table} SET snapshot = ? WHERE {column}") and (w[1][0] == text)
    )


@pytest.fixture(scope="module")
def stashes() -> CheckContext:
    return scenario_context(STASHES)


@pytest.fixture(scope="module")
def deadline_story() -> CheckContext:
    story = ROOT / "scenarios/library/recovery-scan-yields-at-its-deadline.yaml"
    # 0.21.0 yields at the deadline where 0.32.0 recovers the row in the same pass.
    return scenario_context(story.read_text(encoding="utf-8"), sdk="0.21.0")


# -- stash_replaces_whole -------------------------------------------------------------------------
def test_stashes_land_whole_and_recovery_hands_the_last_one(stashes: CheckContext) -> None:
    resumed = [(r.get("step"), r.t_ms) for r in stashes.events("workload:resumed")]
    assert resumed == [(2, 30_000), (2, 30_000)]
    assert len(stashes.events("workload:stashed")) == 8
    assert messages(stashes, "stash_replaces_whole") == []


@pytest.mark.parametrize(
    "story", ["hunt-fiber-jobs-cancel-deadline-max-age", "deploy-mid-fiber-resumes-from-stash"]
)
def test_the_library_s_fiber_stories_keep_their_stashes(story: str) -> None:
    text = (ROOT / f"scenarios/library/{story}.yaml").read_text(encoding="utf-8")
    assert messages(scenario_context(text), "stash_replaces_whole") == []


def test_a_stash_whose_run_row_write_never_landed_is_caught(stashes: CheckContext) -> None:
    u = fiber_of(stashes, "u", 1)
    lost = rewritten(stashes, stash_write("cf_agents_runs", '{"fiber":"u","step":1}'), None)
    assert messages(lost, "stash_replaces_whole") == [
        f"fiber {u} of {P} stashed step 1 at 00:00:10.000, but its run row committed no "
        "snapshot in that instant: a stash that returned did not replace the snapshot before it"
    ]


def test_a_snapshot_no_stash_wrote_is_caught(stashes: CheckContext) -> None:
    u = fiber_of(stashes, "u", 1)
    wrong = rewritten(
        stashes,
        stash_write("cf_agents_runs", '{"fiber":"u","step":1}'),
        ('{"fiber":"u","step":5}', u),
    )
    assert messages(wrong, "stash_replaces_whole") == [
        f"fiber {u} of {P} stashed step 1 at 00:00:10.000, but the snapshots its run row "
        "committed in that instant hold step(s) [5]: a stash that returned did not replace the "
        "snapshot before it",
        f"the run row of fiber {u} of {P} was committed at 00:00:10.000 (turn 3) with a "
        "snapshot of step 5, which no stash of the fiber returned in that instant",
    ]


def test_a_hook_handed_a_snapshot_that_never_committed_is_caught(stashes: CheckContext) -> None:
    u = fiber_of(stashes, "u", 1)
    resume = first(stashes, "workload:resumed", fiberId=u)
    later = without(stashes, lambda r: r.seq == resume.seq)
    later = with_record(later, resume.seq - 1, resume, step=3)
    assert check(later, ["no_lost_stash"]) == []
    assert messages(later, "stash_replaces_whole") == [
        f"the recovery hook of fiber {u} of {P} reported step 3 at 00:00:30.000 "
        "(workload:resumed), but the last snapshot the fiber committed by then holds step 2: "
        "recovery did not hand the hook the last committed snapshot"
    ]


def test_an_older_snapshot_than_committed_is_caught_where_no_lost_stash_forgives(
    stashes: CheckContext,
) -> None:
    """The stash of step 2 shares its instant with a crash, so `no_lost_stash` may not count on
    it; the journal shows it committed, so the hook must have been handed it."""
    u = fiber_of(stashes, "u", 1)
    stash = first(stashes, "workload:stashed", fiberId=u, step=2)
    crash = record(0, stash.t_ms, P, stash.inc, "incarnation:end", reason="crash")
    context = inserted(stashes, stash.seq, crash)
    resume = first(context, "workload:resumed", fiberId=u)
    older = without(context, lambda r: r.seq == resume.seq)
    older = with_record(older, resume.seq - 1, resume, step=1)
    assert check(older, ["no_lost_stash"]) == []
    assert messages(older, "stash_replaces_whole") == [
        f"the recovery hook of fiber {u} of {P} reported step 1 at 00:00:30.000 "
        "(workload:resumed), but the last snapshot the fiber committed by then holds step 2: "
        "recovery did not hand the hook the last committed snapshot"
    ]


def test_a_stash_that_left_the_ledger_behind_is_caught(stashes: CheckContext) -> None:
    m = fiber_of(stashes, "m", 1)
    behind = rewritten(stashes, stash_write("cf_agents_fibers", '{"fiber":"m","step":1}'), None)
    assert messages(behind, "stash_replaces_whole") == [
        f'managed fiber {m} of {P} stashed \'{{"fiber":"m","step":1}}\' at 00:00:10.000 '
        "(turn 4), but at the end of that turn its ledger row holds NULL: a stash replaces the "
        "ledger's snapshot too"
    ]


def test_an_interrupted_mark_that_keeps_an_old_snapshot_is_caught(stashes: CheckContext) -> None:
    m = fiber_of(stashes, "m", 1)
    mark = rewritten(
        stashes,
        lambda w: w[0].startswith("UPDATE cf_agents_fibers SET status = 'interrupted'"),
        ('{"fiber":"m","step":1}', 30_000, m),
    )
    assert messages(mark, "stash_replaces_whole") == [
        f"managed fiber {m} of {P} was marked interrupted at 00:00:30.000 (turn 7) with the "
        f'snapshot \'{{"fiber":"m","step":1}}\' in its ledger row, while its run row held '
        f'\'{{"fiber":"m","step":2}}\': recovery must copy the run row\'s snapshot'
    ]


def test_a_stash_a_crash_may_have_rolled_back_is_forgiven(stashes: CheckContext) -> None:
    u = fiber_of(stashes, "u", 1)
    stash = first(stashes, "workload:stashed", fiberId=u, step=1)
    lost = rewritten(stashes, stash_write("cf_agents_runs", '{"fiber":"u","step":1}'), None)
    crash = record(0, stash.t_ms, P, stash.inc, "incarnation:end", reason="crash")
    assert messages(inserted(lost, stash.seq, crash), "stash_replaces_whole") == []


def test_a_storage_fault_between_a_stash_s_two_writes_is_forgiven() -> None:
    """The run row took step 2 and the ledger's write failed: no stash returned, so no record
    names the run row's snapshot, and the ledger kept step 1 — both in the fault's instant."""
    context = scenario_context(LEDGER_FAULT)
    assert [r.get("step") for r in context.events("workload:stashed")] == [1]
    assert messages(context, "stash_replaces_whole") == []
    m = fiber_of(context, "m", 1)
    blind = without(context, lambda r: r.event == "fault:storage_error")
    assert messages(blind, "stash_replaces_whole") == [
        f"the run row of fiber {m} of {P} was committed at 00:00:20.000 (turn 4) with a "
        "snapshot of step 2, which no stash of the fiber returned in that instant",
        f'managed fiber {m} of {P} stashed \'{{"fiber":"m","step":2}}\' at 00:00:20.000 '
        f"(turn 4), but at the end of that turn its ledger row holds "
        f'\'{{"fiber":"m","step":1}}\': a stash replaces the ledger\'s snapshot too',
    ]


def test_a_hook_handed_no_snapshot_may_report_any_start(stashes: CheckContext) -> None:
    """Before its first stash a fiber's snapshot is NULL: the hook starts over however the
    workload writes that (the checkers' `Worker` says step 0)."""
    u = fiber_of(stashes, "u", 1)
    unstashed = rewritten(stashes, stash_write("cf_agents_runs", '{"fiber":"u","step":1}'), None)
    unstashed = rewritten(unstashed, stash_write("cf_agents_runs", '{"fiber":"u","step":2}'), None)
    context = without(unstashed, lambda r: r.event == "workload:stashed" and r.get("fiberId") == u)
    resume = first(context, "workload:resumed", fiberId=u)
    context = with_record(
        without(context, lambda r: r.seq == resume.seq), resume.seq - 1, resume, step=0
    )
    assert messages(context, "stash_replaces_whole") == []
    assert messages(CheckContext(records=stashes.records), "stash_replaces_whole") == []


def test_a_runtime_whose_stash_keeps_the_first_snapshot_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stash that writes the run row only while it is empty: every later stash of a fiber
    returns and leaves the first snapshot in place."""

    def first_only(self: FiberRunner, fiber_id: str, data: Any, managed: bool) -> None:
        text = to_json_text(data)
        self.sql(
            "UPDATE cf_agents_runs SET snapshot = ? WHERE id = ? AND snapshot IS NULL",
            text,
            fiber_id,
        )
        if managed:
            self.sql("UPDATE cf_agents_fibers SET snapshot = ? WHERE fiber_id = ?", text, fiber_id)

    monkeypatch.setattr(FiberRunner, "_write_stash", first_only)
    context = scenario_context(STASHES)
    u = fiber_of(context, "u", 1)
    found = messages(context, "stash_replaces_whole")
    assert (
        f"fiber {u} of {P} stashed step 2 at 00:00:20.000, but its run row committed no "
        "snapshot in that instant: a stash that returned did not replace the snapshot before it"
    ) in found
    # Step 2 of m and of u; recovered from step 1, u's continuation loses its steps 3 and 4 and
    # m's its step 3 (a continuation's first stash finds its row empty and lands).
    assert len(found) == 5
    assert check(context, ["no_lost_stash"]) != []  # the resumes from step 1 are its to report


def test_a_runtime_whose_stash_forgets_the_ledger_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def runs_only(self: FiberRunner, fiber_id: str, data: Any, managed: bool) -> None:
        self.sql(
            "UPDATE cf_agents_runs SET snapshot = ? WHERE id = ?", to_json_text(data), fiber_id
        )

    monkeypatch.setattr(FiberRunner, "_write_stash", runs_only)
    context = scenario_context(STASHES)
    m = fiber_of(context, "m", 1)
    found = messages(context, "stash_replaces_whole")
    assert found[0] == (
        f'managed fiber {m} of {P} stashed \'{{"fiber":"m","step":1}}\' at 00:00:10.000 '
        "(turn 4), but at the end of that turn its ledger row holds NULL: a stash replaces the "
        "ledger's snapshot too"
    )
    assert len(found) == 4  # m's steps 1 and 2, and its continuation's 3 and 4


def test_the_stash_tests_fail_with_a_blind_checker(
    monkeypatch: pytest.MonkeyPatch, stashes: CheckContext
) -> None:
    fails_with_a_blind_checker(
        monkeypatch,
        "stash_replaces_whole",
        test_a_stash_that_left_the_ledger_behind_is_caught,
        stashes,
    )


# -- cancel_aborts_signal -------------------------------------------------------------------------
def cancelled(context: CheckContext) -> tuple[TraceRecord, TraceRecord]:
    """The cancel that found m running, and the record of its body's stop."""
    cancel = first(context, "workload:cancel", cancelled=True)
    return cancel, first(context, "workload:fiber_cancelled", name="m")


def test_a_cancelled_fiber_stops_at_once_on_its_signal(stashes: CheckContext) -> None:
    cancel, stop = cancelled(stashes)
    assert (cancel.t_ms, stop.t_ms, stop.get("step")) == (55_000, 55_000, 5)
    assert [r.get("cancelled") for r in stashes.events("workload:cancel")] == [True, False]
    assert messages(stashes, "cancel_aborts_signal") == []


def test_the_hunt_s_cancels_by_call_and_by_deadline_stop_at_once() -> None:
    story = ROOT / "scenarios/library/hunt-fiber-jobs-cancel-deadline-max-age.yaml"
    context = scenario_context(story.read_text(encoding="utf-8"))
    reasons = [r.get("reason") for r in context.events("workload:cancel", cancelled=True)]
    assert reasons == ["no longer needed", "deadline"]
    assert messages(context, "cancel_aborts_signal") == []


def test_a_fiber_that_goes_on_after_its_cancel_is_caught(stashes: CheckContext) -> None:
    cancel, stop = cancelled(stashes)
    m = str(cancel.get("fiberId"))
    went_on = with_record(
        without(stashes, lambda r: r.seq == stop.seq),
        cancel.seq,
        stop,
        event="workload:stashed",
        fiberId=m,
        step=5,
    )
    assert messages(went_on, "cancel_aborts_signal") == [
        f"managed fiber {m} (m) of {P} was cancelled at 00:00:55.000 while it ran, yet it went "
        "on and stashed step 5 at 00:00:55.000: its ctx.signal was not aborted"
    ]


def test_a_fiber_that_never_stops_is_caught(stashes: CheckContext) -> None:
    cancel, stop = cancelled(stashes)
    fiber = cancel.get("fiberId")
    never = without(
        stashes,
        lambda r: (
            r.seq == stop.seq or (r.event == "fiber:run:completed" and r.get("fiberId") == fiber)
        ),
    )
    assert messages(never, "cancel_aborts_signal") == [
        f"managed fiber {fiber} (m) of {P} was cancelled at 00:00:55.000 while it ran, and its "
        "body never stopped on its signal by its incarnation's end (00:02:33.571)"
    ]


def test_a_body_that_raised_as_it_stopped_stopped_in_time(stashes: CheckContext) -> None:
    """A storage fault may fail the write the body makes as it stops: no record then, but the
    run ends in the cancel's instant, and that is the stop; one that ends later is caught."""
    cancel, stop = cancelled(stashes)
    raised = without(stashes, lambda r: r.seq == stop.seq)
    assert messages(raised, "cancel_aborts_signal") == []
    end = first(raised, "fiber:run:completed", fiberId=cancel.get("fiberId"))
    later = with_record(
        without(raised, lambda r: r.seq == end.seq),
        max(r.seq for r in raised.records if r.t_ms <= 65_000) - 1,
        end,
        t_ms=65_000,
    )
    assert messages(later, "cancel_aborts_signal") == [
        f"managed fiber {cancel.get('fiberId')} (m) of {P} was cancelled at 00:00:55.000 while "
        "it ran, yet its body, waiting on its signal, ran on until its run ended at 00:01:05.000"
    ]


def test_a_fiber_that_sees_its_abort_late_is_caught(stashes: CheckContext) -> None:
    cancel, stop = cancelled(stashes)
    late_at = max(r.seq for r in stashes.records if r.t_ms <= 65_000)
    late = with_record(stashes, late_at, stop, t_ms=65_000)
    late = without(late, lambda r: r.event == "workload:fiber_cancelled" and r.t_ms == 55_000)
    assert messages(late, "cancel_aborts_signal") == [
        f"managed fiber {cancel.get('fiberId')} (m) of {P} was cancelled at 00:00:55.000 while "
        "it ran, yet its body, waiting on its signal, saw the abort only at 00:01:05.000 (step 5)"
    ]


def test_a_cancel_that_found_nothing_or_died_with_its_instant_is_forgiven(
    stashes: CheckContext,
) -> None:
    cancel, stop = cancelled(stashes)
    never = without(
        stashes,
        lambda r: (
            r.seq == stop.seq
            or (r.event == "fiber:run:completed" and r.get("fiberId") == cancel.get("fiberId"))
        ),
    )
    assert messages(never, "cancel_aborts_signal") != []
    refused = dataclasses.replace(
        never,
        records=tuple(
            dataclasses.replace(r, fields={**r.fields, "cancelled": False})
            if r.seq == cancel.seq
            else r
            for r in never.records
        ),
    )
    assert messages(refused, "cancel_aborts_signal") == []
    crash = record(0, cancel.t_ms, P, cancel.inc, "incarnation:end", reason="crash")
    assert messages(inserted(never, cancel.seq, crash), "cancel_aborts_signal") == []
    cut = [r for r in never.records if r.seq <= cancel.seq]
    assert messages(CheckContext(records=cut), "cancel_aborts_signal") == []


def test_a_body_not_yet_waiting_may_stop_later() -> None:
    """Cancelled in the instant it starts, the body may not have reached its signal yet: it
    stops where it next looks (the workload's mark), at any time, as long as it does nothing
    first."""
    context = scenario_context(CANCEL_AT_START)
    cancel, stop = first(context, "workload:cancel"), first(context, "workload:fiber_cancelled")
    assert cancel.get("cancelled") is True and (cancel.t_ms, stop.t_ms) == (0, 0)
    assert messages(context, "cancel_aborts_signal") == []
    late = with_record(
        without(context, lambda r: r.seq == stop.seq),
        max(r.seq for r in context.records if r.t_ms <= 5_000),
        stop,
        t_ms=5_000,
    )
    assert messages(late, "cancel_aborts_signal") == []


def test_a_runtime_that_never_aborts_the_signal_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(AbortController, "abort", lambda self, reason=None: None)
    context = scenario_context(STASHES)
    cancel = first(context, "workload:cancel", cancelled=True)
    assert messages(context, "cancel_aborts_signal") == [
        f"managed fiber {cancel.get('fiberId')} (m) of {P} was cancelled at 00:00:55.000 while "
        "it ran, yet it went on and stashed step 5 at 00:01:00.000: its ctx.signal was not "
        "aborted"
    ]


def test_the_cancel_tests_fail_with_a_blind_checker(
    monkeypatch: pytest.MonkeyPatch, stashes: CheckContext
) -> None:
    fails_with_a_blind_checker(
        monkeypatch,
        "cancel_aborts_signal",
        test_a_fiber_that_goes_on_after_its_cancel_is_caught,
        stashes,
    )


# -- recovery_scan_deadline -----------------------------------------------------------------------
def with_deadline(context: CheckContext, deadline_ms: int) -> CheckContext:
    options = {
        path: {**given, "fiber_recovery_scan_deadline_ms": deadline_ms}
        for path, given in context.options.items()
    }
    return dataclasses.replace(context, options=options)


LAB = "SlowRecoveryResearcher/lab"


def skip_of(context: CheckContext) -> TraceRecord:
    return first(context, "fiber:recovery:skipped", reason="scan_deadline_exceeded")


def test_a_pass_stops_at_its_deadline_and_the_next_drains_the_rest(
    deadline_story: CheckContext,
) -> None:
    skip = skip_of(deadline_story)
    assert (skip.t_ms, skip.get("elapsedMs")) == (32_000, 12_000)
    assert len(deadline_story.events("fiber:recovery:pass")) == 2
    assert messages(deadline_story, "recovery_scan_deadline") == []


def test_a_pass_that_goes_on_past_its_deadline_is_caught(deadline_story: CheckContext) -> None:
    third = deadline_story.events("fiber:recovery:detected")[2]
    assert messages(with_deadline(deadline_story, 5_000), "recovery_scan_deadline") == [
        f"the recovery pass of {LAB} that began at 00:00:20.000 (incarnation 2) took fiber "
        f"{third.get('fiberId')} (research) at 00:00:28.000, 8000 ms in, past its 5000 ms "
        "deadline: it should have stopped there"
    ]


def test_a_pass_that_stops_too_soon_or_says_so_wrongly_is_caught(
    deadline_story: CheckContext,
) -> None:
    skip = skip_of(deadline_story)
    fiber = f"fiber {skip.get('fiberId')} (research)"
    began = f"the recovery pass of {LAB} that began at 00:00:20.000 (incarnation 2)"
    assert messages(with_deadline(deadline_story, 12_000), "recovery_scan_deadline") == [
        f"{began} stopped at {fiber} at 00:00:32.000, 12000 ms in, before its 12000 ms "
        "deadline had passed"
    ]
    assert messages(with_deadline(deadline_story, 0), "recovery_scan_deadline") == [
        f"{began} stopped at {fiber} at 00:00:32.000 for its deadline, which is disabled (0)"
    ]
    wrong = with_record(
        without(deadline_story, lambda r: r.seq == skip.seq), skip.seq - 1, skip, elapsedMs=11_000
    )
    assert messages(wrong, "recovery_scan_deadline") == [
        f"{began} stopped at {fiber} at 00:00:32.000 reporting elapsedMs 11000, where 12000 ms "
        "had passed"
    ]
    twice = with_record(deadline_story, skip.seq, skip)
    assert messages(twice, "recovery_scan_deadline") == [
        f"{began} stopped at {fiber} at 00:00:32.000 for its deadline a second time"
    ]


def test_a_pass_that_takes_a_row_after_it_stopped_is_caught(deadline_story: CheckContext) -> None:
    skip = skip_of(deadline_story)
    merged = without(
        deadline_story,
        lambda r: r.event == "fiber:recovery:pass" and r.seq > skip.seq and r.t_ms == skip.t_ms,
    )
    resumed = [r for r in merged.events("fiber:recovery:detected") if r.t_ms > skip.t_ms][0]
    assert messages(merged, "recovery_scan_deadline") == [
        f"the recovery pass of {LAB} that began at 00:00:20.000 (incarnation 2) took fiber "
        f"{resumed.get('fiberId')} (research) at 00:01:22.000, after it stopped at its deadline"
    ]


def test_a_row_taken_exactly_at_the_deadline_and_the_ledger_loop_s_skip_are_allowed(
    deadline_story: CheckContext,
) -> None:
    """The check is a strict `>`: at 8 s in, with an 8 s deadline, the third row is taken; the
    ledger-only loop may stop once more, `managed: true`, in the same instant."""
    assert messages(with_deadline(deadline_story, 8_000), "recovery_scan_deadline") == []
    skip = skip_of(deadline_story)
    both = with_record(deadline_story, skip.seq, skip, managed=True)
    assert messages(both, "recovery_scan_deadline") == []


def test_passes_end_with_their_incarnation() -> None:
    """A deploy ends a pass: the next incarnation's pass starts its own clock."""
    start = record(0, 0, LAB, 1, "fiber:recovery:detected", fiberId="a", fiberName="r")
    records = [
        start,
        record(1, 4_000, LAB, 1, "incarnation:end", reason="deploy"),
        record(2, 60_000, LAB, 2, "fiber:recovery:detected", fiberId="a", fiberName="r"),
        record(3, 64_000, LAB, 2, "fiber:recovery:detected", fiberId="b", fiberName="r"),
        record(4, 64_000, LAB, 2, "fiber:recovery:pass", progress=True, scans=0),
    ]
    assert messages(CheckContext(records=records), "recovery_scan_deadline") == []
    merged = [r for r in records if r.event != "incarnation:end"]
    merged = [dataclasses.replace(r, inc=1) for r in merged]
    assert len(messages(CheckContext(records=merged), "recovery_scan_deadline")) == 1


def test_the_deadline_tests_fail_with_a_blind_checker(
    monkeypatch: pytest.MonkeyPatch, deadline_story: CheckContext
) -> None:
    fails_with_a_blind_checker(
        monkeypatch,
        "recovery_scan_deadline",
        test_a_pass_that_goes_on_past_its_deadline_is_caught,
        deadline_story,
    )


# -- schedule_dedupe_keys -------------------------------------------------------------------------
SCHEDULER = "ScheduleWorkload/scheduler"


def story_on(name: str, sdk: str) -> CheckContext:
    """A library story's context on an SDK release (its steps, then its liveness phase)."""
    text = (ROOT / f"scenarios/library/{name}.yaml").read_text(encoding="utf-8")
    scenario = parse_scenario(text, f"{name}.yaml")
    with Simulation(scenario.seed, faults=scenario.faults, sdk=sdk) as sim:
        steps = StepRunner(sim, scenario)
        for step in scenario.steps:
            steps.run(step)
        sim.quiesce(scenario.liveness_limit_ms)
        return context_from(sim)


@pytest.fixture(scope="module", params=["0.21.0", "0.32.0"])
def scheduler(request: pytest.FixtureRequest) -> CheckContext:
    return story_on("hunt-scheduler-interval-cron-one-shot", request.param)


def insert_of(context: CheckContext, name: str) -> tuple[int, Write]:
    """The committed turn (its index) and write that stored the schedule `name`."""
    return next(
        (index, write)
        for index, turn in enumerate(context.journals[SCHEDULER])
        for write in turn
        if write[0].lstrip().startswith("INSERT") and f'"name":"{name}"' in str(write[1])
    )


def turn_after(context: CheckContext, index: int, *writes: Write) -> CheckContext:
    """The context with one more committed turn of `writes` right after turn `index` of the
    scheduler's journal, in the same instant."""
    turns, instants = list(context.journals[SCHEDULER]), list(context.journal_ms[SCHEDULER])
    turns.insert(index + 1, tuple(writes))
    instants.insert(index + 1, instants[index])
    return dataclasses.replace(
        context,
        journals={**context.journals, SCHEDULER: tuple(turns)},
        journal_ms={**context.journal_ms, SCHEDULER: tuple(instants)},
    )


def stored_again(
    write: Write, schedule_id: str, name: str | None = None, owner: str | None = None
) -> Write:
    """The INSERT `write` storing its schedule again under `schedule_id`, with another payload
    name or owner key if given (in the row's columns, or in a 0.32.0 job's envelope)."""
    statement, params = write
    columns = [
        c.strip() for c in statement[statement.index("(") + 1 : statement.index(")")].split(",")
    ]
    values = statement[statement.index("VALUES") :]
    values = values[values.index("(") + 1 : values.index(")")].split(",")
    where = [column for column, value in zip(columns, values, strict=True) if value.strip() == "?"]
    row = dict(zip(where, params, strict=True))
    row["id"] = schedule_id
    if row.get("capability") == "scheduler":
        envelope = json.loads(row["payload"])
        envelope["payload"]["name"] = name or envelope["payload"]["name"]
        envelope["owner_path_key"] = owner or envelope["owner_path_key"]
        row["payload"] = json.dumps(envelope, separators=(",", ":"))
    else:
        if name is not None:
            row["payload"] = json.dumps({"name": name}, separators=(",", ":"))
        row["owner_path_key"] = owner or row["owner_path_key"]
    return (statement, tuple(row[column] for column in where))


def test_every_schedule_is_answered_with_its_own_row(scheduler: CheckContext) -> None:
    kinds = [r.get("kind") for r in scheduler.events("workload:scheduled")]
    assert kinds == ["interval", "interval", "cron", "delayed", "delayed", "scheduled"]
    assert messages(scheduler, "schedule_dedupe_keys") == []


def test_an_answer_with_another_schedule_s_row_is_caught(scheduler: CheckContext) -> None:
    poll, sync = scheduler.events("workload:scheduled")[:2]
    crossed = with_record(
        without(scheduler, lambda r: r.seq == sync.seq),
        sync.seq - 1,
        sync,
        scheduleId=poll.get("scheduleId"),
    )
    assert messages(crossed, "schedule_dedupe_keys") == [
        f"{SCHEDULER} asked at 00:00:02.000 for its interval schedule 'sync' (callback "
        f"workload_tick, payload {{'name': 'sync'}}) and was answered schedule "
        f"{poll.get('scheduleId')}, a row of type interval, callback workload_tick and payload "
        "{'name': 'poll'}: a dedupe answered with a row of another key"
    ]


def test_an_interval_stored_twice_for_one_owner_is_caught(scheduler: CheckContext) -> None:
    index, poll = insert_of(scheduler, "poll")
    again = turn_after(scheduler, index, stored_again(poll, "x1"))
    first_id = scheduler.events("workload:scheduled")[0].get("scheduleId")
    # A job's envelope holds the payload as JSON; the rule reads it back as text.
    payload = '{"name": "poll"}' if scheduler.release == "0.32.0" else '{"name":"poll"}'
    assert messages(again, "schedule_dedupe_keys") == [
        f"interval schedule x1 of its holder (stored by {SCHEDULER}) was written every 5 s with "
        f"payload {payload} while schedule {first_id} of the same owner held that key "
        f"(committed turn {index + 2}): an idempotent scheduleEvery stored its key twice"
    ]


def test_other_keys_owners_and_kinds_are_never_judged_duplicates(scheduler: CheckContext) -> None:
    """A deleted row frees its key; another payload or another owner is another key; and two
    rows of one cron key are allowed once the plan said `idempotent: false`
    (`workload:duplicates_allowed`)."""
    index, poll = insert_of(scheduler, "poll")
    table = "cf_agents_jobs" if scheduler.release == "0.32.0" else "cf_agents_schedules"
    first_id = scheduler.events("workload:scheduled")[0].get("scheduleId")
    freed = turn_after(
        scheduler,
        index,
        (f"DELETE FROM {table} WHERE id = ?", (first_id,)),
        stored_again(poll, "x1"),
    )
    assert messages(freed, "schedule_dedupe_keys") == []
    other = turn_after(scheduler, index, stored_again(poll, "x2", name="other"))
    assert messages(other, "schedule_dedupe_keys") == []
    elsewhere = turn_after(scheduler, index, stored_again(poll, "x3", owner="Sub:s"))
    assert messages(elsewhere, "schedule_dedupe_keys") == []
    at, digest = insert_of(scheduler, "digest")
    cron = turn_after(scheduler, at, stored_again(digest, "x4"))
    first = cron.events("workload:scheduled")[0]
    allowed = with_record(
        cron, first.seq, first, event="workload:duplicates_allowed", name="digest", kind="cron"
    )
    assert messages(allowed, "schedule_dedupe_keys") == []


def test_a_cron_key_stored_twice_by_idempotent_calls_is_caught(scheduler: CheckContext) -> None:
    """F-19: a cron schedule called again with the same expression, callback and payload
    answers the row it has; a second row of that key (no plan allowed duplicates) is a dedupe
    missed."""
    at, digest = insert_of(scheduler, "digest")
    (message,) = messages(
        turn_after(scheduler, at, stored_again(digest, "x4")), "schedule_dedupe_keys"
    )
    assert message.startswith("cron schedule x4 of its holder (stored by ")
    assert message.endswith(
        f"while schedule {digest_id(scheduler)} of the same owner held that key (committed turn "
        f"{at + 2}): an idempotent schedule stored its key twice"
    )


def digest_id(context: CheckContext) -> str:
    return next(
        str(r.get("scheduleId"))
        for r in context.events("workload:scheduled")
        if r.get("name") == "digest"
    )


def test_a_runtime_whose_dedupe_ignores_the_payload_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two idempotent one-shots of one callback, export and reminder: a dedupe blind to the
    payload answers reminder with export's row."""

    def blind(
        self: Scheduler, timing: Any, callback: str, payload: Any, owner: Any
    ) -> dict[str, Any] | None:
        rows = self.sql(
            "SELECT * FROM cf_agents_schedules WHERE type = ? AND callback = ? "
            "AND owner_path_key IS ? AND (cron IS ? OR cron = ?) "
            "AND (intervalSeconds IS ? OR intervalSeconds = ?) LIMIT 1",
            timing.type,
            callback,
            owner,
            timing.cron,
            timing.cron,
            timing.interval_seconds,
            timing.interval_seconds,
        )
        return rows[0] if rows else None

    monkeypatch.setattr(Scheduler, "_find_matching_schedule", blind)
    text = (ROOT / "scenarios/library/hunt-scheduler-interval-cron-one-shot.yaml").read_text()
    context = scenario_context(text, sdk="0.21.0")  # the broken Scheduler is 0.21.0's
    export = first(context, "workload:scheduled", name="export").get("scheduleId")
    assert messages(context, "schedule_dedupe_keys") == [
        f"{SCHEDULER} asked at 00:00:02.000 for its delayed schedule 'reminder' (callback "
        f"workload_tick, payload {{'name': 'reminder'}}) and was answered schedule {export}, a "
        "row of type delayed, callback workload_tick and payload {'name': 'export'}: a dedupe "
        "answered with a row of another key"
    ]


def test_the_dedupe_tests_fail_with_a_blind_checker(
    monkeypatch: pytest.MonkeyPatch, scheduler: CheckContext
) -> None:
    fails_with_a_blind_checker(
        monkeypatch,
        "schedule_dedupe_keys",
        test_an_interval_stored_twice_for_one_owner_is_caught,
        scheduler,
    )
