"""The alarm-slot invariants — `no_leaked_keep_alive` and `schedules_fire` — pass healthy runs on
the simulated platform and catch a real leaked lease and crafted missed schedules."""

from __future__ import annotations

from sim import Simulation, format_sim_time
from sim.checkers import CheckContext, check, context_from
from sim.trace import TraceRecord
from tests.checkers.agents import Ticker, found_context, record, renumbered, with_rows, without
from tests.conformance.fiber_agents import Recorder

T = "Ticker/t"


def messages(context: CheckContext, name: str) -> list[str]:
    return [v.message for v in check(context, [name])]


# -- no_leaked_keep_alive -----------------------------------------------------------------------
def test_a_released_lease_leaves_no_alarm() -> None:
    """keepAlive taken and released: the heartbeat stops and the run goes quiet."""
    with Simulation(31) as sim:
        ref = sim.agent(Recorder, "r")
        lease = sim.call(ref, "acquire")
        sim.run_for(10_000)
        sim.call(ref, "release", lease)
        assert sim.quiesce(3_600_000) is True
        assert check(context_from(sim), ["no_leaked_keep_alive"]) == []


def test_a_lease_never_released_is_a_leaked_keep_alive() -> None:
    """A keepAlive nobody releases keeps the heartbeat armed through the liveness phase with no
    durable work behind it."""
    with Simulation(32) as sim:
        ref = sim.agent(Recorder, "r")
        sim.call(ref, "acquire")
        assert sim.quiesce(600_000) is False
        context = context_from(sim)
    (violation,) = check(context, ["no_leaked_keep_alive"])
    armed = format_sim_time(context.alarms["Recorder/r"])
    assert violation.message == (
        f"Recorder/r still had its alarm armed for {armed} at the "
        "end (00:10:00.000, not quiet) with no durable work to explain it (no schedule, no fiber "
        "row, no facet lease, no unfinished agent-tool run): a keepAlive leaked"
    )
    assert context.records[violation.seqs[0]].event == "alarm:set"
    before_liveness = CheckContext(
        records=[r for r in context.records if not r.event.startswith("quiesce:")],
        storage=context.storage,
        alarms=context.alarms,
    )
    assert check(before_liveness, ["no_leaked_keep_alive"]) == []


def test_an_alarm_kept_for_a_schedule_or_a_fiber_row_is_explained() -> None:
    """The same heartbeat is explained while a schedule row (or a fiber row) needs the alarm."""
    with Simulation(33, sdk="0.21.0") as sim:  # 0.21.0's schedules table
        ref = sim.agent(Ticker, "t")
        sim.call(ref, "acquire")
        sim.call(ref, "later", 86_400)
        sim.quiesce(600_000)
        context = context_from(sim)
    assert check(context, ["no_leaked_keep_alive"]) == []
    no_schedule = with_rows(context, T, "cf_agents_schedules", [])
    assert len(check(no_schedule, ["no_leaked_keep_alive"])) == 1
    fiber_row = with_rows(
        no_schedule, T, "cf_agents_runs", [{"id": "f", "name": "n", "created_at": 0}]
    )
    assert check(fiber_row, ["no_leaked_keep_alive"]) == []


# -- schedules_fire ------------------------------------------------------------------------------
def ticking() -> tuple[CheckContext, str, str, str]:
    """A ticker with a 30 s one-shot, a 60 s interval and a cancelled one-shot, run for five
    minutes and a one-minute liveness phase (not quiet: the interval goes on)."""
    with Simulation(34) as sim:
        ref = sim.agent(Ticker, "t")
        once = sim.call(ref, "later", 30)
        every = sim.call(ref, "every", 60)
        dropped = sim.call(ref, "later", 600)
        sim.run_for(20_000)
        sim.call(ref, "drop", dropped)
        sim.run_for(280_000)
        sim.quiesce(60_000)
        return context_from(sim), once, every, dropped


def test_due_schedules_that_fired_and_a_cancelled_one_pass() -> None:
    """The one-shot fired at 30 s, the interval every minute; the cancelled row is excused."""
    context, once, every, _ = ticking()
    assert [r.t_ms for r in context.events("schedule:execute", id=once)] == [30_000]
    assert len(context.events("schedule:execute", id=every)) == 6
    assert check(context, ["schedules_fire"]) == []


def test_a_schedule_that_vanished_without_firing_is_caught() -> None:
    """A one-shot whose row is gone with no execute or cancel record disappeared."""
    context, once, _, _ = ticking()
    broken = without(context, lambda r: r.event == "schedule:execute" and r.get("id") == once)
    assert messages(broken, "schedules_fire") == [
        f"schedule {once} (callback tick) created by Ticker/t at 00:00:00.000 disappeared "
        "without firing or being cancelled"
    ]


def test_an_interval_that_stopped_firing_for_a_while_is_caught() -> None:
    """Dropping three consecutive runs of the 60 s interval leaves a 240 s gap, more than the
    interval + hung timeout + lateness (150 s) allowed."""
    context, _, every, _ = ticking()
    runs = context.events("schedule:execute", id=every)
    dropped = {r.seq for r in runs[1:4]}
    broken = without(context, lambda r: r.seq in dropped)
    assert messages(broken, "schedules_fire") == [
        f"interval schedule {every} (every 60 s, callback tick) of Ticker/t went 240 s without "
        "firing (ran at 00:01:00.000, then not until 00:05:00.000; at most 150 s allowed)"
    ]


def at(t_ms: int, event: str, **fields: object) -> TraceRecord:
    """A record of Ticker/t's first incarnation (seq assigned by `hand_built`)."""
    return record(0, t_ms, T, 1, event, **fields)


def hand_built(rows: list[dict], *records: TraceRecord, end_ms: int = 200_000) -> CheckContext:
    """Ticker/t's final schedule rows and these records, ending at `end_ms`."""
    return CheckContext(
        records=renumbered(list(records)),
        storage={T: {"cf_agents_schedules": rows}},
        end_ms=end_ms,
    )


def row(schedule_id: str, kind: str, time_s: int, **extra: object) -> dict:
    return {
        "id": schedule_id,
        "callback": "tick",
        "type": kind,
        "time": time_s,
        "running": 0,
        **extra,
    }


CREATE_S1 = at(0, "schedule:create", callback="tick", id="s1")


def test_a_due_row_that_never_fired_is_caught() -> None:
    """A delayed row due at 30 s, still there at 200 s with no execute, missed its time."""
    context = hand_built([row("s1", "delayed", 30)], CREATE_S1)
    assert messages(context, "schedules_fire") == [
        "schedule s1 (delayed, callback tick) of Ticker/t was due at 00:00:30.000 and had not "
        "fired by the end (00:03:20.000, no liveness phase)"
    ]
    late_but_in_time = hand_built([row("s1", "delayed", 30)], CREATE_S1, end_ms=90_000)
    assert check(late_but_in_time, ["schedules_fire"]) == []
    retried = hand_built(
        [row("s1", "delayed", 30)],
        CREATE_S1,
        at(31_000, "schedule:execute", callback="tick", id="s1"),
    )
    assert check(retried, ["schedules_fire"]) == []


def test_an_interval_first_fired_early_is_caught() -> None:
    """An interval of 60 s created at 0 s that first runs at 10 s ran before it was due."""
    context = hand_built(
        [row("s1", "interval", 70, intervalSeconds=60)],
        CREATE_S1,
        at(10_000, "schedule:execute", callback="tick", id="s1"),
        end_ms=20_000,
    )
    assert messages(context, "schedules_fire") == [
        "interval schedule s1 (every 60 s, callback tick) of Ticker/t first fired at "
        "00:00:10.000, before it was due at 00:01:00.000"
    ]


def test_a_running_interval_is_due_again_only_once_hung() -> None:
    """An interval row still `running` since 100 s is skipped until the 30 s hung timeout; it
    must have run again by 130 s (+ lateness)."""
    running = [row("s1", "interval", 100, intervalSeconds=60, running=1, execution_started_at=100)]
    fired = at(100_000, "schedule:execute", callback="tick", id="s1")
    assert check(hand_built(running, fired, end_ms=180_000), ["schedules_fire"]) == []
    assert messages(hand_built(running, fired, end_ms=200_000), "schedules_fire") == [
        "schedule s1 (interval, callback tick) of Ticker/t was due at 00:02:10.000 and had not "
        "fired by the end (00:03:20.000, no liveness phase) (last ran at 00:01:40.000)"
    ]


def test_rows_of_wiped_storage_did_not_vanish() -> None:
    """Schedules whose agent's storage was wiped (destroy) are gone without firing, rightly."""
    wiped = hand_built([], CREATE_S1, at(5_000, "storage:wiped"))
    assert check(wiped, ["schedules_fire"]) == []
    assert len(check(hand_built([], CREATE_S1), ["schedules_fire"])) == 1


def test_a_schedule_left_due_by_an_alarm_the_platform_gave_up_is_not_lost() -> None:
    """Every retry of the host's alarm crashes and the platform gives the alarm up after its
    sixth: the reconcile tick due since waits for the next wake, which never comes before the
    end (found by agentsim generate on 0.32.0). Without the give-up the row would be a lost
    schedule."""
    context = found_context("alarm-given-up-leaves-a-schedule-due")
    host = "ThinkToolsWorkload/parent"
    assert context.events("alarm:given_up", host)
    assert [v for v in check(context) if v.invariant == "schedules_fire"] == []
    kept = without(context, lambda r: r.event == "alarm:given_up")
    lost = [v.message for v in check(kept) if v.invariant == "schedules_fire"]
    assert lost and "_cfDetachedReconcileTick" in lost[0]


def test_an_alarm_due_while_its_isolate_resets_fires_in_the_next_one() -> None:
    """Found by generate on 0.32.0: a memory-limit strike backs its job off and asks for a reset
    on a 0 ms timer; a deferred destroy arrives in between and arms the slot for now, which
    comes due while the handler still runs. That alarm fires after the reset, in a fresh
    incarnation (which destroys the agent), not in the isolate being reset, whose death without
    alarm retry would lose it and leave the backed-off schedule with nothing armed."""
    context = found_context("alarm-due-while-its-isolate-resets")
    sched2 = "ScheduleWorkload/sched2"
    (reset,) = [r for r in context.events("incarnation:end", sched2) if r.get("reason") == "reset"]
    fired = [r for r in context.events("alarm:fired", sched2) if r.t_ms == reset.t_ms]
    assert [r.inc for r in fired] == [reset.inc + 1]
    assert context.events("storage:wiped", sched2) != []
    assert [v for v in check(context) if v.invariant == "schedules_fire"] == []


def test_a_due_held_behind_a_crashed_handler_and_the_slot_due_then_make_one_run() -> None:
    """Found by generate on 0.32.0: dues held behind a long alarm run, a crash at the instant
    the slot comes due again, and a run that arms the slot for an hour. The held dues and the
    slot's due are one alarm: one run at the crash's instant (not a second one after it, with
    the slot armed for the hour), and the crashed run's retry 2 s later."""
    context = found_context("held-alarm-due-replaced-by-a-later-set")
    sched2 = "ScheduleWorkload/sched2"
    ends = context.events("incarnation:end", sched2)
    crash = next(r for r in ends if r.get("reason") == "crash")
    fired = [r for r in context.events("alarm:fired", sched2) if r.t_ms >= crash.t_ms]
    assert [(r.t_ms - crash.t_ms, r.get("attempt")) for r in fired[:2]] == [(0, 0), (2_000, 1)]
    assert [v for v in check(context) if v.invariant == "alarm_fires_on_time"] == []


def test_a_due_held_behind_the_handler_and_deleted_by_it_is_written_down() -> None:
    """Found by generate on 0.32.0: the slot came due at 4:30 behind a 30 s callback, which
    then cancelled its schedule and so deleted the slot. The held due is gone, and the trace
    says so (`alarm:deleted` of the 4:30 time), so no fire is owed."""
    context = found_context("held-due-deleted-by-a-cancel")
    sched2 = "ScheduleWorkload/sched2"
    deleted = [r for r in context.events("alarm:deleted", sched2) if r.get("was") == 270_000]
    assert [r.t_ms for r in deleted] == [270_000]
    assert not [r for r in context.events("alarm:fired", sched2) if r.t_ms >= 270_000]
    assert [v for v in check(context) if v.invariant == "alarm_fires_on_time"] == []
