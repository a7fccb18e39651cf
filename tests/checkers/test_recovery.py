"""The recovery and lease invariants — `recovery_once`, `recovery_error_kept` (S1) and
`fiber_leases_released` — pass a poison fiber retried with backoff until it ages out beside a
managed fiber whose hook threw, and a worker resumed across a deploy; and catch crafted traces
and rows where the hook runs again unasked, the error is lost, or a lease is not given back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sim import Simulation, format_sim_time
from sim.checkers import CheckContext, check, context_from
from sim.trace import TraceRecord
from tests.checkers.agents import (
    Worker,
    record,
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
    return scenario_context(POISON)


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
