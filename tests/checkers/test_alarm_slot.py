"""The alarm-slot invariants — `alarms_never_overlap`, `alarm_retries`, `alarm_limit` and
`alarm_fires_on_time` — pass a handler that fails twice and a handler that is killed at 15
minutes on every attempt until the platform gives up, and catch crafted traces that break each
timing rule."""

from __future__ import annotations

import dataclasses

import pytest

from sim import Simulation
from sim.checkers import CheckContext, check, context_from
from sim.trace import TraceRecord
from tests.checkers.agents import (
    Worker,
    record,
    renumbered,
    scenario_context,
    with_record,
    without,
)

C = "Counter/counter"
FAILING = """
    name: failing-alarm
    description: the alarm's count fails twice, then succeeds
    seed: 7
    agents:
      counter: {class: "scenarios.workloads:Counter"}
    steps:
      - call: {agent: counter, method: arm, args: [60000]}
      - arm_storage_fault: {agent: counter, kind: error, match: "INSERT INTO counts", count: 2}
      - run_until: 5m
"""
KILLED = """
    name: killed-alarm
    description: an alarm handler that works 20 minutes, killed and retried until given up
    seed: 7
    agents:
      counter: {class: "scenarios.workloads:Counter", options: {alarm_work_ms: 20m}}
    steps:
      - call: {agent: counter, method: arm, args: [60000]}
      - run_until: 2h
"""
ALL = ["alarms_never_overlap", "alarm_retries", "alarm_limit", "alarm_fires_on_time"]


@pytest.fixture(scope="module")
def failing() -> CheckContext:
    return scenario_context(FAILING)


@pytest.fixture(scope="module")
def killed() -> CheckContext:
    return scenario_context(KILLED)


def messages(context: CheckContext, name: str) -> list[str]:
    return [v.message for v in check(context, [name])]


def fired(context: CheckContext, attempt: int) -> TraceRecord:
    return context.events("alarm:fired", C, attempt=attempt)[0]


def moved(context: CheckContext, target: TraceRecord, **changes: object) -> CheckContext:
    """The context with one record changed (time, or fields)."""
    t_ms = changes.pop("t_ms", target.t_ms)
    new = dataclasses.replace(target, t_ms=t_ms, fields={**target.fields, **changes})
    return dataclasses.replace(
        context, records=tuple(new if r is target else r for r in context.records)
    )


def built(*records: TraceRecord, end_ms: int | None = None) -> CheckContext:
    return CheckContext(records=renumbered(list(records)), end_ms=end_ms)


def test_a_failing_handler_is_retried_at_2_then_4_seconds(failing: CheckContext) -> None:
    """Attempt 0 fails at 1 min, attempt 1 runs at +2 s and fails, attempt 2 at +4 s succeeds."""
    assert [(r.t_ms, r.get("attempt")) for r in failing.events("alarm:fired")] == [
        (60_000, 0),
        (62_000, 1),
        (66_000, 2),
    ]
    assert check(failing, ALL) == []


def test_a_handler_killed_on_every_attempt_is_given_up_after_seven(killed: CheckContext) -> None:
    """Killed exactly 15 minutes into each attempt, retried 2, 4, ... 64 s later, given up."""
    kills = killed.events("alarm:killed")
    assert [k.t_ms - fired(killed, k.get("attempt")).t_ms for k in kills] == [900_000] * 7
    assert killed.events("alarm:given_up")[0].get("attempts") == 7
    assert check(killed, ALL) == []


# -- alarms_never_overlap ------------------------------------------------------------------------
def test_a_second_handler_while_one_runs_is_caught(killed: CheckContext) -> None:
    first = fired(killed, 0)
    overlap = with_record(killed, first.seq, first, t_ms=300_000)
    assert messages(overlap, "alarms_never_overlap") == [
        "an alarm handler of Counter/counter (attempt 0) started at 00:05:00.000 while the one "
        "started at 00:01:00.000 (attempt 0) was still running"
    ]


# -- alarm_retries -------------------------------------------------------------------------------
def test_a_retry_at_the_wrong_time_is_caught(failing: CheckContext) -> None:
    """A first retry asked for 3 s later instead of 2 s: the retry and the run it asked for are
    both named."""
    retry = failing.events("alarm:retry", C, attempt=1)[0]
    late = moved(moved(failing, retry, at=63_000), fired(failing, 1), t_ms=63_000)
    assert messages(late, "alarm_retries") == [
        "the alarm handler of Counter/counter (attempt 0, started at 00:01:00.000) ended "
        "(failed) at 00:01:00.000 and should have been retried as attempt 1 at 00:01:02.000, "
        "but the next record is alarm:retry (at 63000, attempt 1) at 00:01:00.000"
    ]


def test_a_retry_that_never_runs_or_runs_unasked_is_caught(failing: CheckContext) -> None:
    """Dropping attempt 1's run leaves its retry unanswered and attempt 2 unasked for."""
    first_retry = fired(failing, 1)
    dropped = without(failing, lambda r: r.seq >= first_retry.seq and r.event != "alarm:done")
    done = failing.events("alarm:done")[0]
    shown = dataclasses.replace(
        dropped, records=(*dropped.records, dataclasses.replace(done, seq=len(dropped.records)))
    )
    assert messages(shown, "alarm_retries") == [
        "the alarm handler of Counter/counter (attempt 0, started at 00:01:00.000) ended "
        "(failed) at 00:01:00.000; its retry (attempt 1) was due at 00:01:02.000 but never ran"
    ]
    unasked = without(failing, lambda r: r.event == "alarm:retry" and r.get("attempt") == 2)
    assert messages(unasked, "alarm_retries")[-1] == (
        "the alarm handler of Counter/counter ran as attempt 2 at 00:01:06.000, but no retry had "
        "asked for attempt 2 then"
    )


REARMED = """
    name: rearmed-under-a-killed-alarm
    description: the slot is armed again while a handler that is always killed runs
    seed: 7
    agents:
      counter: {class: "scenarios.workloads:Counter", options: {alarm_work_ms: 20m}}
    steps:
      - call: {agent: counter, method: arm, args: [60000]}
      - at: 90s
        call: {agent: counter, method: arm, args: [30000]}
      - run_until: 6h
"""


def test_held_retries_keep_their_attempts_and_both_chains_give_up() -> None:
    """Two chains of retries interleave: each retry comes due while the other chain's handler
    runs, waits for it, and runs as its own attempt; both chains give up after seven runs."""
    rearmed = scenario_context(REARMED)
    assert sorted(r.get("attempt") for r in rearmed.events("alarm:fired")) == sorted(
        [*range(7)] * 2
    )
    fired_at = {r.t_ms for r in rearmed.events("alarm:fired")}
    held = [r for r in rearmed.events("alarm:retry") if r.get("at") not in fired_at]
    assert held, "the story must hold at least one retry behind another handler"
    assert check(rearmed, ALL) == []
    # A retry that runs late with no handler running at its time is not a held one.
    retry = rearmed.events("alarm:retry", C, attempt=1)[0]
    late = moved(rearmed, retry, at=30_000)
    assert any("ran as attempt 1" in m for m in messages(late, "alarm_retries"))


def test_giving_up_early_late_or_never_is_caught(killed: CheckContext) -> None:
    """After the seventh attempt the platform gives up; a missing give-up, or an eighth
    attempt, is named."""
    no_give_up = without(killed, lambda r: r.event == "alarm:given_up")
    assert messages(no_give_up, "alarm_retries") == [
        "the alarm handler of Counter/counter (attempt 6, started at 01:33:06.000) ended "
        "(interrupted) at 01:48:06.000 and should have been given up after 7 attempts then, but "
        "the next record is missing"
    ]
    given_up = killed.events("alarm:given_up")[0]
    early = moved(killed, killed.events("alarm:retry", C, attempt=6)[0], attempt=7)
    assert "ran as attempt 6 at 01:33:06.000, but no retry had asked" in " ".join(
        messages(early, "alarm_retries")
    )
    assert given_up.get("attempts") == 7


# -- alarm_limit ---------------------------------------------------------------------------------
def test_a_kill_before_or_after_fifteen_minutes_is_caught(killed: CheckContext) -> None:
    kill = killed.events("alarm:killed", C, attempt=2)[0]
    early = moved(killed, kill, t_ms=kill.t_ms - 60_000)
    assert messages(early, "alarm_limit") == [
        "the alarm handler of Counter/counter (attempt 2, started at 00:31:06.000) was killed at "
        "00:45:06.000, before its 15-minute limit at 00:46:06.000"
    ]
    death = [e for e in killed.incarnation_ends(C) if e.t_ms == kill.t_ms][0]
    lived = moved(killed, death, reason="deploy")
    assert messages(lived, "alarm_limit") == [
        "the alarm handler of Counter/counter (attempt 2, started at 00:31:06.000) was killed at "
        "its limit, but its incarnation died deploy"
    ]


def test_a_handler_running_past_its_limit_is_caught() -> None:
    """A handler that ran 20 minutes and completed was never killed; one still running at the
    end of a trace that went past its limit neither."""
    overlong = built(
        record(0, 0, C, 1, "alarm:fired", attempt=0),
        record(0, 1_200_000, C, 1, "alarm:done", attempt=0),
    )
    assert messages(overlong, "alarm_limit") == [
        "the alarm handler of Counter/counter (attempt 0, started at 00:00:00.000) was not "
        "killed at its 15-minute limit at 00:15:00.000: it ran until done at 00:20:00.000"
    ]
    running = built(record(0, 0, C, 1, "alarm:fired", attempt=0), end_ms=900_001)
    assert len(messages(running, "alarm_limit")) == 1
    assert (
        messages(built(record(0, 0, C, 1, "alarm:fired", attempt=0), end_ms=900_000), "alarm_limit")
        == []
    )


# -- alarm_fires_on_time -------------------------------------------------------------------------
def test_an_alarm_that_fires_early_is_caught(failing: CheckContext) -> None:
    """Moved a second earlier, the fire is early, and the slot's own time passes unfired."""
    early = moved(failing, fired(failing, 0), t_ms=59_000)
    assert messages(early, "alarm_fires_on_time") == [
        "the alarm of Counter/counter fired at 00:00:59.000, but its slot was armed for "
        "00:01:00.000 (at 00:00:00.000)",
        "the alarm of Counter/counter armed at 00:00:00.000 for 00:01:00.000 did not fire at "
        "00:01:00.000",
    ]


def test_an_armed_alarm_that_never_fires_or_a_deleted_one_that_does_is_caught() -> None:
    armed = record(0, 0, C, 1, "alarm:set", at=60_000)
    assert messages(built(armed, end_ms=90_000), "alarm_fires_on_time") == [
        "the alarm of Counter/counter armed at 00:00:00.000 for 00:01:00.000 did not fire at "
        "00:01:00.000"
    ]
    assert messages(built(armed, end_ms=60_000), "alarm_fires_on_time") == []
    deleted = record(0, 10_000, C, 1, "alarm:deleted", was=60_000)
    ghost = record(0, 60_000, C, 1, "alarm:fired", attempt=0)
    assert messages(built(armed, deleted, ghost), "alarm_fires_on_time") == [
        "the alarm of Counter/counter fired at 00:01:00.000, but its slot was not armed"
    ]


def test_a_slot_due_while_a_handler_runs_fires_when_it_ends() -> None:
    """Due during a run, the alarm waits and fires as the run ends; a set in the past fires at
    once."""
    records = built(
        record(0, 0, C, 1, "alarm:set", at=1_000),
        record(0, 1_000, C, 1, "alarm:fired", attempt=0),
        record(0, 2_000, C, 1, "alarm:set", at=3_000),
        record(0, 5_000, C, 1, "alarm:done", attempt=0),
        record(0, 5_000, C, 1, "alarm:fired", attempt=0),
        record(0, 5_000, C, 1, "alarm:done", attempt=0),
        record(0, 8_000, C, 1, "alarm:set", at=7_000),
        record(0, 8_000, C, 1, "alarm:fired", attempt=0),
        record(0, 8_000, C, 1, "alarm:done", attempt=0),
        end_ms=20_000,
    )
    assert check(records, ALL) == []


def test_a_slot_due_as_the_run_ends_is_run_by_the_held_firing() -> None:
    """Something came due during a run, and the slot was set again for the instant the run
    ends: the one firing at that instant runs both (the platform holds what comes due under a
    running handler and runs it once), so nothing is left owed; a slot set for later still is."""

    def run(at_ms: int) -> CheckContext:
        return built(
            record(0, 0, C, 1, "alarm:set", at=1_000),
            record(0, 1_000, C, 1, "alarm:fired", attempt=0),
            record(0, 2_000, C, 1, "alarm:set", at=3_000),
            record(0, 4_000, C, 1, "alarm:set", at=at_ms),
            record(0, 30_000, C, 1, "alarm:done", attempt=0),
            record(0, 30_000, C, 1, "alarm:fired", attempt=0),
            record(0, 30_000, C, 1, "alarm:done", attempt=0),
            end_ms=60_000,
        )

    assert messages(run(30_000), "alarm_fires_on_time") == []
    assert messages(run(40_000), "alarm_fires_on_time") == [
        "the alarm of Counter/counter armed at 00:00:04.000 for 00:00:40.000 did not fire at "
        "00:00:40.000"
    ]


def test_a_slot_due_as_the_run_ends_is_run_by_a_held_retry() -> None:
    """A handler fails while the slot it re-armed (a deadman) is due: its retry waits behind
    the handler that slot fires, which sets the slot again for the instant it ends. The held
    retry and that slot merge into one firing as the run ends, counted as the retry (`attempt`
    1, the higher count): the slot is not left owed (generate --seed 0 drew a cron whose 30 s
    of work ended in a lost network connection at its deadman's instant)."""

    def run(at_ms: int) -> CheckContext:
        return built(
            record(0, 0, C, 1, "alarm:set", at=60_000),
            record(0, 60_000, C, 1, "alarm:fired", attempt=0),
            record(0, 60_000, C, 1, "alarm:set", at=90_000),
            record(0, 90_000, C, 1, "alarm:failed", attempt=0, error="Network connection lost."),
            record(0, 90_000, C, 1, "alarm:retry", attempt=1, at=92_000),
            record(0, 90_000, C, 1, "alarm:fired", attempt=0),
            record(0, 90_000, C, 1, "alarm:set", at=at_ms),
            record(0, 120_000, C, 1, "alarm:done", attempt=0),
            record(0, 120_000, C, 1, "alarm:fired", attempt=1),
            record(0, 120_000, C, 1, "alarm:done", attempt=1),
            end_ms=200_000,
        )

    assert check(run(120_000), ALL) == []
    assert messages(run(150_000), "alarm_fires_on_time") == [
        "the alarm of Counter/counter armed at 00:01:30.000 for 00:02:30.000 did not fire at "
        "00:02:30.000"
    ]


# -- keep_alive_heartbeat ------------------------------------------------------------------------
def test_a_held_lease_heartbeats_every_interval() -> None:
    """A fiber of four 10 s steps on a 2 s heartbeat: the alarm fires every 2 s until the
    fiber ends; dropping one run leaves a 4 s gap, excused only if the lease was gone first."""
    with Simulation(3) as sim:
        ref = sim.agent(Worker, "w")
        sim.call(ref, "work", 4)
        sim.quiesce(3_600_000)
        context = context_from(sim)
    fires = [r.t_ms for r in context.events("alarm:fired", "Worker/w")]
    assert fires[:3] == [2_000, 4_000, 6_000]
    assert messages(context, "keep_alive_heartbeat") == []
    dropped = without(context, lambda r: r.event.startswith("alarm:") and r.t_ms == 6_000)
    (release,) = dropped.events("keep_alive:release", "Worker/w")
    assert messages(dropped, "keep_alive_heartbeat") == [
        f"Worker/w held keepAlive lease 1 ({release.get('holder')}) but Worker/w's alarm did not "
        "fire between 00:00:04.000 and 00:00:06.000 (every 2000 ms while a lease is held)"
    ]
    # Released at 5 s, before the heartbeat was due, the lease asked for nothing more.
    done = [r for r in dropped.events("alarm:done", "Worker/w") if r.t_ms == 4_000][0]
    moved_release = with_record(dropped, done.seq, release, t_ms=5_000)
    early = without(
        moved_release, lambda r: r.event == "keep_alive:release" and r.t_ms == release.t_ms
    )
    assert messages(early, "keep_alive_heartbeat") == []


def test_on_0_32_a_failed_startup_hands_the_heartbeat_to_its_fallback() -> None:
    """0.32.0 holds a startup's re-arms and, when the startup fails, arms its fallback instead
    (J-04): a lease taken in that startup is not owed a heartbeat before the next fire. On
    0.21.0, whose keepAlive arms the alarm at once, the same gap is a missed heartbeat."""
    with Simulation(3) as sim:
        ref = sim.agent(Worker, "w")
        sim.call(ref, "work", 4)
        sim.quiesce(3_600_000)
        context = context_from(sim)
    dropped = without(context, lambda r: r.event.startswith("alarm:") and r.t_ms == 6_000)
    done = [r for r in dropped.events("alarm:done", "Worker/w") if r.t_ms == 4_000][0]
    failed = record(0, 4_000, "Worker/w", done.inc, "startup:failed", error="StorageError")
    failing = with_record(dropped, done.seq, failed)
    assert messages(dataclasses.replace(failing, release="0.32.0"), "keep_alive_heartbeat") == []
    assert (
        len(messages(dataclasses.replace(failing, release="0.21.0"), "keep_alive_heartbeat")) == 1
    )


def test_a_reschedule_while_a_lease_is_held_slides_the_heartbeat() -> None:
    """Fibers §3.2: any `_scheduleNextAlarm` while a lease is held sets the heartbeat to now +
    interval again, so an `alarm:set` between two fires starts the wait anew; an alarm set
    later than that still leaves the heartbeat late."""

    def heartbeat(slid_to: int) -> CheckContext:
        records = built(
            record(0, 0, C, 1, "keep_alive:acquire", lease=1, holder="keep_alive"),
            record(0, 0, C, 1, "alarm:set", at=30_000),
            record(0, 30_000, C, 1, "alarm:fired", attempt=0),
            record(0, 30_000, C, 1, "alarm:set", at=60_000),
            record(0, 30_000, C, 1, "alarm:done", attempt=0),
            record(0, 50_000, C, 1, "alarm:set", at=slid_to),
            record(0, slid_to, C, 1, "alarm:fired", attempt=0),
            record(0, slid_to, C, 1, "keep_alive:release", lease=1, holder="keep_alive"),
            record(0, slid_to, C, 1, "alarm:done", attempt=0),
            end_ms=120_000,
        )
        return dataclasses.replace(records, alarms={C: None})

    assert messages(heartbeat(80_000), "keep_alive_heartbeat") == []
    assert messages(heartbeat(90_000), "keep_alive_heartbeat") == [
        "Counter/counter held keepAlive lease 1 (keep_alive) but Counter/counter's alarm did not "
        "fire between 00:00:50.000 and 00:01:20.000 (every 30000 ms while a lease is held)"
    ]


SIBLINGS = """
    name: lease-siblings-tools
    description: a finished run is cleared while its sibling, whose id it prefixes, still sleeps
    seed: 1
    agents:
      parent:
        workload: tools
        runs:
          - {run_id: task-1, detached: true}
          - {run_id: task-10, detached: true, steps: [{sleep: 10m}, {finish: completed}]}
    steps:
      - call: {agent: parent, method: dispatch}
      - at: 1m
        call: {agent: parent, method: clear, args: [completed]}
"""


def test_a_sub_agent_s_lease_keeps_its_root_s_heartbeat_going() -> None:
    """A child's keepAlive is a lease on its root: the root's alarm fires every interval while
    the child holds it (here a 10-minute sleep), and a root whose heartbeat stops after a
    sibling's clear (leases matched by a bare prefix of the owner key) is named with the child
    that held the lease. Once the child's incarnation ends, its lease asks nothing more."""
    context = scenario_context(SIBLINGS)
    root, child = "ToolsWorkload/parent", "ToolsWorkload/parent/ScriptedToolChild/task-10"
    assert context.events("keep_alive:acquire", child)
    assert messages(context, "keep_alive_heartbeat") == []
    quiet = without(
        context, lambda r: r.agent == root and r.event.startswith("alarm:") and r.t_ms > 60_000
    )
    found = messages(quiet, "keep_alive_heartbeat")
    assert found and found[0].startswith(f"{root}'s sub-agent {child} held keepAlive lease 1")
    clear = next(r for r in quiet.events("rpc", root) if r.get("method") == "clear")
    end = record(0, 60_000, child, 1, "incarnation:end", reason="crash")
    ended = with_record(quiet, clear.seq, end)
    assert messages(ended, "keep_alive_heartbeat") == []


# -- a reset: the agent's own abort with no alarm retry (0.32.0's memory-limit breaker) -----------
STRUCK = """
    name: memory-limit-strike-resets
    description: a one-shot's first attempt hits the memory limit; the isolate is reset
    seed: 7
    sdk: "0.32.0"
    agents:
      w: {workload: schedules, schedules: [{name: s, after: 5s, fail: 1, fail_as: memory}]}
    steps:
      - call: {agent: w, method: status}
      - run_until: 2m
"""


def test_a_memory_limit_reset_passes_every_invariant() -> None:
    """The breaker's reset ends the incarnation (`reset`) with no alarm retry; the backed-off
    alarm runs the schedule in a fresh incarnation; no invariant objects."""
    struck = scenario_context(STRUCK)
    ends = [r.get("reason") for r in struck.events("incarnation:end")]
    assert "reset" in ends
    assert struck.events("alarm:retry") == []
    assert [v.message for v in check(struck)] == []


def _reset_run(*after: TraceRecord) -> CheckContext:
    return built(
        record(0, 0, C, 1, "alarm:set", at=1_000),
        record(0, 1_000, C, 1, "alarm:fired", attempt=0),
        record(0, 1_000, C, 1, "alarm:set", at=31_000),
        record(0, 1_000, C, 1, "incarnation:end", reason="reset", message="asked"),
        record(0, 1_000, C, 1, "alarm:interrupted", attempt=0, reason="reset"),
        *after,
        record(0, 31_000, C, 2, "incarnation:start", trigger="alarm"),
        record(0, 31_000, C, 2, "alarm:fired", attempt=0),
        record(0, 31_000, C, 2, "alarm:done", attempt=0),
        end_ms=60_000,
    )


def test_a_run_cut_short_by_a_reset_is_not_retried() -> None:
    """`retryAlarm: false`: nothing answers the run; a retry of it is named, and so is a run
    cut short by any other end and left without its retry."""
    assert messages(_reset_run(), "alarm_retries") == []
    retried = _reset_run(record(0, 1_000, C, 0, "alarm:retry", attempt=1, at=3_000))
    assert any(
        "by a reset that asked for no retry, but the next record is alarm:retry" in m
        for m in messages(retried, "alarm_retries")
    )
    evicted = built(
        *(
            dataclasses.replace(r, fields={**r.fields, "reason": "explicit"})
            if r.event in ("incarnation:end", "alarm:interrupted")
            else r
            for r in _reset_run().records
        ),
        end_ms=60_000,
    )
    assert any("should have been retried" in m for m in messages(evicted, "alarm_retries"))
