"""The recovery and lease invariants — `recovery_once`, `recovery_error_kept` (S1) and
`fiber_leases_released` — pass a poison fiber retried with backoff until it ages out beside a
managed fiber whose hook threw, and a worker resumed across a deploy; and catch crafted traces
and rows where the hook runs again unasked, the error is lost, or a lease is not given back."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import pytest

from sim import Simulation, format_sim_time
from sim.checkers import CheckContext, check, context_from
from sim.trace import TraceRecord
from tests.checkers.agents import (
    Worker,
    fails_with_a_blind_checker,
    record,
    renumbered,
    scenario_context,
    with_record,
    with_row,
    without,
)

F = "FiberWorkload/worker"
W = "Worker/w"
POISON = """
    name: poison
    description: a managed and an unmanaged fiber whose recovery hook throws
    seed: 6
    agents:
      worker:
        workload: fibers
        start: call
        keep_alive_interval: 2s
        recovery: throw
        options: {fiber_recovery_max_age_ms: 10m}
        fibers:
          - {name: ingest, steps: 5, step: 10s}
          - {name: export, steps: 5, step: 10s, managed: true}
    steps:
      - call: {agent: worker, method: start}
      - at: 25s
        deploy: {}
      - run_until: 20m
"""


@pytest.fixture(scope="module")
def poison() -> CheckContext:
    return scenario_context(POISON, sdk="0.21.0")  # 0.21.0's recovery alarm and its backoff


@pytest.fixture(scope="module")
def resumed() -> Iterator[CheckContext]:
    """A worker of four 10 s steps, deployed after two and resumed from its stash."""
    with Simulation(3) as sim:
        ref = sim.agent(Worker, "w")
        sim.call(ref, "work", 4)
        sim.run_for(25_000)
        sim.evict(ref, "deploy")
        sim.quiesce(3_600_000)
        yield context_from(sim)


def messages(context: CheckContext, name: str) -> list[str]:
    return [v.message for v in check(context, [name])]


def fiber_id(context: CheckContext, agent: str, name: str) -> str:
    return str(context.events("fiber:run:started", agent, fiberName=name)[0].get("fiberId"))


def attempts(context: CheckContext, fiber: str) -> list[TraceRecord]:
    return context.events("fiber:recovery:attempt", fiberId=fiber)


def test_healthy_recoveries_keep_every_promise(poison: CheckContext, resumed: CheckContext) -> None:
    """The poison row is retried after each failure until it ages out; the managed fiber's hook
    runs once and its row stays interrupted with the error; leases all come back."""
    ingest = fiber_id(poison, F, "ingest")
    assert len(attempts(poison, ingest)) > 5
    assert poison.events("fiber:recovery:skipped", F)[0].get("reason") == "max_age_exceeded"
    export = fiber_id(poison, F, "export")
    assert len(attempts(poison, export)) == 1
    names = ["recovery_once", "recovery_error_kept", "fiber_leases_released"]
    assert check(poison, names) == []
    assert len(resumed.events("keep_alive:release", W)) == 1
    assert check(resumed, names) == []


# -- recovery_once -------------------------------------------------------------------------------
def test_a_second_call_with_no_failure_between_is_caught(poison: CheckContext) -> None:
    """The managed fiber's hook called twice in one incarnation, the first not having failed."""
    export = fiber_id(poison, F, "export")
    (attempt,) = attempts(poison, export)
    twice = with_record(poison, attempt.seq, attempt)
    assert messages(twice, "recovery_once") == [
        f"the recovery hook of fiber {export} (export) of {F} was called at 00:00:26.000 in "
        "incarnation 2 a second time in it (first at 00:00:26.000) with no failure between"
    ]


def test_a_call_after_recovery_settled_is_caught(poison: CheckContext) -> None:
    """A managed fiber's recovery is settled by its first outcome; an unmanaged one after it was
    dropped for its age."""
    export = fiber_id(poison, F, "export")
    (attempt,) = attempts(poison, export)
    last = poison.records[-1]
    later = with_record(poison, last.seq, attempt, t_ms=last.t_ms, inc=3)
    assert messages(later, "recovery_once") == [
        f"the recovery hook of fiber {export} (export) of {F} was called at "
        "00:20:00.000 in incarnation 3 after its recovery was settled (fiber:recovery:failed) at "
        "00:00:26.000"
    ]
    ingest = fiber_id(poison, F, "ingest")
    again = with_record(poison, last.seq, attempts(poison, ingest)[0], t_ms=last.t_ms, inc=3)
    assert messages(again, "recovery_once") == [
        f"the recovery hook of fiber {ingest} (ingest) of {F} was called at 00:20:00.000 in "
        "incarnation 3 after its recovery was settled (fiber:recovery:skipped) at 00:10:54.000"
    ]


def test_a_call_for_a_fiber_still_running_is_caught(resumed: CheckContext) -> None:
    """Recovering the continuation fiber while it runs in its own incarnation."""
    started = resumed.events("fiber:run:started", W)[-1]
    attempt = record(0, started.t_ms, W, started.inc, "fiber:recovery:attempt")
    wrong = with_record(
        resumed, started.seq, attempt, fiberId=started.get("fiberId"), fiberName="work"
    )
    assert messages(wrong, "recovery_once") == [
        f"the recovery hook of fiber {started.get('fiberId')} (work) of {W} was called at "
        f"00:00:26.000 in incarnation 2 while the fiber, started at 00:00:26.000, was still "
        "running in it"
    ]


# -- recovery_error_kept ---------------------------------------------------------------------------
def test_a_managed_fiber_turned_to_error_is_caught(poison: CheckContext) -> None:
    """S1: the SDK's `error` after a throwing hook, or the hook's error lost, breaks the promise;
    a resolution after the failure settles it legitimately."""
    export = fiber_id(poison, F, "export")
    error = poison.events("fiber:recovery:failed", F, fiberId=export)[0].get("error")
    sdk = with_row(poison, F, "cf_agents_fibers", {"fiber_id": export}, status="error")
    assert messages(sdk, "recovery_error_kept") == [
        f"managed fiber {export} (export) of {F} ended 'error' with error {error!r} after its "
        f"recovery hook threw {error!r} at 00:00:26.000; it should have stayed 'interrupted' "
        "with that error"
    ]
    lost = with_row(poison, F, "cf_agents_fibers", {"fiber_id": export}, error_message=None)
    assert len(messages(lost, "recovery_error_kept")) == 1
    resolved = with_row(
        poison,
        F,
        "cf_agents_fibers",
        {"fiber_id": export},
        status="completed",
        error_message=None,
        completed_at=300_000,
    )
    assert messages(resolved, "recovery_error_kept") == []


# -- fiber_leases_released -----------------------------------------------------------------------
def test_a_fiber_that_ends_holding_its_lease_is_caught(resumed: CheckContext) -> None:
    """Without its release the completed fiber kept its lease; a crash in that instant
    excuses it."""
    (done,) = resumed.events("fiber:run:completed", W)
    kept = without(resumed, lambda r: r.event == "keep_alive:release")
    assert messages(kept, "fiber_leases_released") == [
        f"fiber {done.get('fiberId')} (work) of {W} completed at 00:00:46.000 without releasing "
        "its keepAlive lease in that instant (incarnation 2 lived on)"
    ]
    crash = record(0, done.t_ms, W, done.inc, "incarnation:end", reason="crash")
    assert messages(with_record(kept, done.seq, crash), "fiber_leases_released") == []


def test_a_lease_released_twice_or_never_acquired_is_caught(resumed: CheckContext) -> None:
    (release,) = resumed.events("keep_alive:release", W)
    twice = with_record(resumed, release.seq, release)
    assert messages(twice, "fiber_leases_released") == [
        f"keepAlive lease 1 ({release.get('holder')}) of {W} was released at 00:00:46.000 a "
        "second time (first at 00:00:46.000), in incarnation 2"
    ]
    stranger = with_record(resumed, release.seq, release, holder="keep_alive")
    assert messages(stranger, "fiber_leases_released")[0].endswith(
        "was released at 00:00:46.000 though it was never acquired, in incarnation 2"
    )


# -- fiber_runs_once -----------------------------------------------------------------------------
def test_a_fiber_started_again_is_caught(resumed: CheckContext) -> None:
    """The interrupted fiber run again under its own id (an automatic retry) is caught; a first
    start whose turn a same-instant crash rolled back does not count."""
    first = resumed.events("fiber:run:started", W)[0]
    assert check(resumed, ["fiber_runs_once"]) == []
    last = resumed.records[-1]
    again = with_record(resumed, last.seq - 1, first, t_ms=100_000, inc=3)
    assert messages(again, "fiber_runs_once") == [
        f"fiber {first.get('fiberId')} (work) of {W} started again at 00:01:40.000 in "
        "incarnation 3, after it started at 00:00:00.000 in incarnation 1"
    ]
    crash = record(0, first.t_ms, W, first.inc, "incarnation:end", reason="crash")
    rolled_back = with_record(again, first.seq, crash)
    assert messages(rolled_back, "fiber_runs_once") == []


def test_a_call_for_a_fiber_that_completed_is_caught(resumed: CheckContext) -> None:
    """A fiber that completed deleted its run row: recovering it later is a phantom orphan."""
    (done,) = resumed.events("fiber:run:completed", W)
    last = resumed.records[-1]
    attempt = record(0, last.t_ms, W, 3, "fiber:recovery:attempt")
    phantom = with_record(
        resumed,
        last.seq - 1,
        attempt,
        t_ms=last.t_ms,
        fiberId=done.get("fiberId"),
        fiberName="work",
    )
    assert messages(phantom, "recovery_once") == [
        f"the recovery hook of fiber {done.get('fiberId')} (work) of {W} was called at "
        f"{format_sim_time(last.t_ms)} in incarnation 3 after its recovery was settled "
        "(fiber:run:completed) at 00:00:46.000"
    ]


# -- recovery_max_age ----------------------------------------------------------------------------
def test_a_poison_row_is_dropped_for_its_age_only_past_the_max_age(poison: CheckContext) -> None:
    """The ingest row's hook fails from 26 s on; it is kept while younger than ten minutes and
    dropped at its first failure past them (10:54, 654 s old)."""
    ingest = fiber_id(poison, F, "ingest")
    (skip,) = poison.events("fiber:recovery:skipped", F, fiberId=ingest)
    assert (skip.t_ms, skip.get("elapsedMs")) == (654_000, 654_000)
    failed = poison.events("fiber:recovery:failed", F, fiberId=ingest)
    assert [f.t_ms for f in failed][-2:] == [590_000, 654_000]
    assert check(poison, ["recovery_max_age"]) == []


def test_a_row_dropped_young_or_kept_old_is_caught(poison: CheckContext) -> None:
    """Dropped for its age at 30 s, when 30 s old; and the last failure, past ten minutes, with
    no drop after it (retried for ever)."""
    ingest = fiber_id(poison, F, "ingest")
    (skip,) = poison.events("fiber:recovery:skipped", F, fiberId=ingest)
    early = poison.events("fiber:recovery:failed", F, fiberId=ingest)[2]
    young = with_record(poison, early.seq, skip, t_ms=early.t_ms, inc=early.inc, elapsedMs=30_000)
    assert messages(young, "recovery_max_age") == [
        f"fiber {ingest} (ingest) of {F} was dropped for its age at 00:00:30.000 when it was "
        "30000 ms old, but its fiber_recovery_max_age_ms is 600000 ms"
    ]
    kept = without(poison, lambda r: r.event == "fiber:recovery:skipped")
    assert messages(kept, "recovery_max_age") == [
        f"the recovery hook of fiber {ingest} (ingest) of {F} failed at 00:10:54.000 when the "
        "fiber was 654000 ms old, past its fiber_recovery_max_age_ms of 600000 ms, and the row "
        "was kept to be retried instead of dropped"
    ]


# -- recovery_backoff ----------------------------------------------------------------------------
def test_the_recovery_alarm_backs_off_while_passes_make_no_progress(poison: CheckContext) -> None:
    """Incarnation 2's startup pass recovered the managed fiber (progress: count 0) and left the
    poison row; each later pass failed it, so the follow-up alarm doubles from 2 s x 2."""
    passes = [(r.get("progress"), r.get("scans")) for r in poison.events("fiber:recovery:pass", F)]
    assert passes[:3] == [(True, 0), (False, 1), (False, 2)]
    delays = [r.get("delayMs") for r in poison.events("fiber:recovery:backoff", F) if r.inc == 2]
    assert delays == [4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000]
    assert check(poison, ["recovery_backoff"]) == []


def test_a_backoff_not_reset_by_progress_or_off_its_formula_is_caught(poison: CheckContext) -> None:
    """The progress pass of 26 s keeping its count (the counter not reset), and an alarm armed
    16 s ahead after two passes without progress."""
    first = poison.events("fiber:recovery:pass", F, progress=True)[0]
    kept = with_record(poison, first.seq, first, scans=1)
    kept = dataclasses.replace(
        kept, records=renumbered([r for r in kept.records if r.seq != first.seq])
    )
    assert messages(kept, "recovery_backoff") == [
        f"a recovery pass of {F} at 00:00:26.000 (incarnation 2) made progress, but its count of "
        "passes without progress went to 1 instead of back to 0"
    ]
    second = poison.events("fiber:recovery:backoff", F)[1]
    slow = with_record(poison, second.seq, second, delayMs=16_000)
    slow = dataclasses.replace(
        slow, records=renumbered([r for r in slow.records if r.seq != second.seq])
    )
    assert messages(slow, "recovery_backoff") == [
        f"{F} at 00:00:30.000 (incarnation 2) armed its recovery alarm 16000 ms ahead, where 2 "
        "passes without progress make it 8000 ms (interval 2000 ms x 2^2, capped at 300 s)"
    ]


def test_the_backoff_is_capped_at_five_minutes() -> None:
    """Nine passes without progress: 2 s x 2^9 is past the cap, so 300 s; more is caught."""
    agent = "FiberWorkload/worker"
    records = [record(0, 0, agent, 1, "incarnation:start")]
    records += [
        record(n, n, agent, 1, "fiber:recovery:pass", progress=False, scans=n) for n in range(1, 10)
    ]
    capped = record(10, 10, agent, 1, "fiber:recovery:backoff", at=300_010, delayMs=300_000)
    options = {agent: {"keep_alive_interval_ms": 2_000}}
    context = CheckContext(records=[*records, capped], options=options)
    assert check(context, ["recovery_backoff"]) == []
    late = dataclasses.replace(capped, fields={"at": 512_010, "delayMs": 512_000})
    assert messages(
        CheckContext(records=[*records, late], options=options), "recovery_backoff"
    ) == [
        f"{agent} at 00:00:00.010 (incarnation 1) armed its recovery alarm 512000 ms ahead, "
        "where 9 passes without progress make it 300000 ms (interval 2000 ms x 2^9, capped at "
        "300 s)"
    ]


@pytest.mark.parametrize(
    ("name", "test"),
    [
        ("recovery_max_age", test_a_row_dropped_young_or_kept_old_is_caught),
        ("recovery_backoff", test_a_backoff_not_reset_by_progress_or_off_its_formula_is_caught),
    ],
)
def test_the_catching_tests_fail_with_a_blind_checker(
    name: str,
    test: Callable[[CheckContext], None],
    poison: CheckContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each test above goes red when its checker is replaced by one that finds nothing."""
    fails_with_a_blind_checker(monkeypatch, name, test, poison)


SETUP_FAILS = """
    name: setup-fails
    description: a recovered fiber's hook starts a new fiber whose keepAlive lease fails
    seed: 12
    agents:
      syncer:
        class: "scenarios.library_agents:Researcher"
        options:
          steps: [page-1, page-2, page-3, page-4, page-5, page-6]
    steps:
      - call: {agent: syncer, method: research_later, args: [10, inbox]}
      - at: 45s
        deploy: {}
      - arm_storage_fault: {agent: syncer, kind: error, match: '^SELECT\\b.* FROM _cf_KV\\b'}
      - arm_storage_fault: {agent: syncer, kind: error, match: '^DELETE FROM cf_agents_runs\\b'}
      - run_until: 10m
"""


def test_a_fiber_whose_setup_failed_is_not_running_when_its_orphan_is_recovered() -> None:
    """The hook's new fiber cannot take its keepAlive lease (a storage error) and its row's
    delete fails too: it stopped before its function ran (`fiber:setup_failed`), so recovering
    its orphaned row in the same incarnation is not recovering a running fiber. Without that
    record the fiber would look as if it were still running."""
    context = scenario_context(SETUP_FAILS, sdk="0.21.0")
    (stopped,) = context.events("fiber:setup_failed")
    fiber = stopped.get("fiberId")
    (attempt,) = [
        r for r in context.events("fiber:recovery:attempt", fiberId=fiber) if r.inc == stopped.inc
    ]
    assert attempt.seq > stopped.seq
    assert context.events("fiber:run:failed", fiberId=fiber) == []  # as the SDK: none for set-up
    assert check(context, ["recovery_once"]) == []
    hidden = without(context, lambda r: r.event == "fiber:setup_failed")
    assert [v.message.split(" was ")[0] for v in check(hidden, ["recovery_once"])] == [
        f"the recovery hook of fiber {fiber} (research) of Researcher/syncer"
    ]
