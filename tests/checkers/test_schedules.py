"""The schedule-run invariants — `schedules_fire_once` and `one_shot_completes` — pass a ticker
with a one-shot, an interval and a cron schedule across a deploy, and catch crafted second runs
of one occurrence and a one-shot left behind after it ran."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from sim import Simulation
from sim.checkers import CheckContext, check, context_from
from sim.trace import TraceRecord
from tests.checkers.agents import Ticker, record, with_record, with_rows, without

T = "Ticker/t"


@pytest.fixture(scope="module")
def ticking() -> Iterator[tuple[CheckContext, str, str, str]]:
    """A 30 s one-shot, a 60 s interval and a two-minute cron, for ten minutes with a deploy at
    3m20s (the heartbeat-free ticker is woken by its alarm), then a one-minute liveness phase."""
    with Simulation(34, sdk="0.21.0") as sim:  # 0.21.0's schedules table
        ref = sim.agent(Ticker, "t")
        once = sim.call(ref, "later", 30)
        every = sim.call(ref, "every", 60)
        cron = sim.call(ref, "on_cron", "*/2 * * * *")
        sim.run_for(200_000)
        sim.deploy()
        sim.run_for(400_000)
        sim.quiesce(60_000)
        yield context_from(sim), once, every, cron


def runs(context: CheckContext, schedule_id: str) -> list[TraceRecord]:
    return context.events("schedule:execute", T, id=schedule_id)


def messages(context: CheckContext, name: str) -> list[str]:
    return [v.message for v in check(context, [name])]


def test_each_occurrence_fires_once_across_a_deploy(ticking) -> None:
    """The one-shot ran once, the interval every minute, the cron every two minutes."""
    context, once, every, cron = ticking
    assert [r.t_ms for r in runs(context, once)] == [30_000]
    assert [r.t_ms for r in runs(context, cron)] == [120_000 * n for n in range(1, 6)]
    assert len(runs(context, every)) == 11
    assert check(context, ["schedules_fire_once", "one_shot_completes"]) == []


# -- schedules_fire_once -------------------------------------------------------------------------
def test_a_one_shot_run_twice_without_a_crash_is_caught(ticking) -> None:
    """A second run of a one-shot a minute after a completed one; after a death between, it is
    at-least-once instead."""
    context, once, _, _ = ticking
    first = runs(context, once)[0]
    twice = with_record(context, first.seq, first, t_ms=90_000)
    assert messages(twice, "schedules_fire_once") == [
        f"delayed schedule {once} (callback tick) of Ticker/t fired at 00:00:30.000 and again at "
        "00:01:30.000 with no crash or failure between (a one-shot runs once)"
    ]
    death = record(0, 30_000, T, 1, "incarnation:end", reason="explicit")
    crashed = with_record(twice, first.seq, death)
    assert messages(crashed, "schedules_fire_once") == []


def test_a_recurring_schedule_run_twice_for_one_occurrence_is_caught(ticking) -> None:
    """A cron run repeated 30 s later, and an interval run repeated 10 s later, are both early
    for their next occurrence; a failed alarm run between excuses the repeat."""
    context, _, every, cron = ticking
    first = runs(context, cron)[0]
    done = next(r for r in context.events("alarm:done", T) if r.seq > first.seq)
    again = with_record(context, done.seq, first, t_ms=150_000)
    assert messages(again, "schedules_fire_once") == [
        f"cron schedule {cron} (callback tick) of Ticker/t fired at 00:02:00.000 and again at "
        "00:02:30.000 with no crash or failure between (its next occurrence was not due before "
        "00:04:00.000)"
    ]
    tick = runs(context, every)[0]
    early = with_record(context, tick.seq, tick, t_ms=70_000)
    assert messages(early, "schedules_fire_once") == [
        f"interval schedule {every} (callback tick) of Ticker/t fired at 00:01:00.000 and again "
        "at 00:01:10.000 with no crash or failure between (its next occurrence was not due "
        "before 00:01:30.000)"
    ]
    done = next(r for r in again.events("alarm:done", T) if r.seq > first.seq)
    assert done.t_ms == 120_000
    failed = [
        dataclasses.replace(r, event="alarm:failed") if r is done else r for r in again.records
    ]
    assert messages(dataclasses.replace(again, records=failed), "schedules_fire_once") == []


# -- one_shot_completes --------------------------------------------------------------------------
def test_a_one_shot_still_there_after_it_ran_is_caught(ticking) -> None:
    """The one-shot's row kept after its run (its delete lost) is named; moved later, or with
    the platform's alarm given up, it is excused; without a liveness phase it is not judged."""
    context, once, _, _ = ticking
    row = {"id": once, "callback": "tick", "type": "delayed", "time": 30, "running": 0}
    rows = [*context.table(T, "cf_agents_schedules"), row]
    kept = with_rows(context, T, "cf_agents_schedules", rows)
    assert messages(kept, "one_shot_completes") == [
        f"delayed schedule {once} (callback tick) of Ticker/t ran at 00:00:30.000 and neither "
        "completed (its row was still there at the end (00:11:00.000, not quiet)) nor ran again"
    ]
    later = with_rows(context, T, "cf_agents_schedules", [*rows[:-1], {**row, "time": 900}])
    assert messages(later, "one_shot_completes") == []
    ran = runs(kept, once)[0]
    given_up = with_record(kept, ran.seq, record(0, 0, T, 0, "alarm:given_up", attempts=7))
    assert messages(given_up, "one_shot_completes") == []
    no_liveness = without(kept, lambda r: r.event.startswith("quiesce:"))
    assert messages(dataclasses.replace(no_liveness, quiet=None), "one_shot_completes") == []


# -- schedules_armed -----------------------------------------------------------------------------
def test_a_schedule_written_without_re_arming_the_slot_is_caught(ticking) -> None:
    """Each create is covered by the slot set in its instant; a slot left for later, or not
    set at all, would lose the wake-up."""
    context, once, _, _ = ticking
    assert check(context, ["schedules_armed"]) == []
    (create,) = context.events("schedule:create", T, id=once)
    arm = [r for r in context.events("alarm:set", T) if r.seq < create.seq][-1]
    late = [
        dataclasses.replace(r, fields={**r.fields, "at": 60_000}) if r is arm else r
        for r in context.records
    ]
    assert messages(dataclasses.replace(context, records=late), "schedules_armed") == [
        f"delayed schedule {once} (callback tick) of Ticker/t was created at 00:00:00.000, due "
        "at 00:00:30.000, but the slot was armed for 00:01:00.000"
    ]
    unarmed = without(context, lambda r: r.event == "alarm:set" and r.t_ms == 0)
    assert messages(unarmed, "schedules_armed")[0] == (
        f"delayed schedule {once} (callback tick) of Ticker/t was created at 00:00:00.000, due "
        "at 00:00:30.000, but the slot was not re-armed when it was written"
    )


def test_a_runtime_cron_that_answers_too_soon_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker computes due times with its own model: a runtime whose cron says the next
    minute for every expression runs `*/2 * * * *` every minute, and `schedules_fire_once` sees
    it (a checker calling the runtime's cron would have agreed with the bug)."""
    import agents_core.schedule_dispatch
    import agents_core.schedules

    def next_minute(expression: str, after_ms: int) -> int:
        return (after_ms // 60_000 + 1) * 60_000

    for module in (agents_core.schedules, agents_core.schedule_dispatch):
        monkeypatch.setattr(module, "next_cron_time_ms", next_minute)
    with Simulation(34, sdk="0.21.0") as sim:  # 0.21.0's schedules table
        ref = sim.agent(Ticker, "t")
        cron = sim.call(ref, "on_cron", "*/2 * * * *")
        sim.run_for(400_000)
        context = context_from(sim)
    assert [r.t_ms for r in runs(context, cron)][:3] == [60_000, 120_000, 180_000]
    assert messages(context, "schedules_fire_once") == [
        f"cron schedule {cron} (callback tick) of {T} fired at 00:02:00.000 and again at "
        "00:03:00.000 with no crash or failure between (its next occurrence was not due before "
        "00:04:00.000)"
    ]
