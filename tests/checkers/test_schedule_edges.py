"""Schedule checkers at the edges: what was written before an agent destroyed itself, a 0.32.0
cancel that fails after its delete, and what a startup that dies owes.

- A destroy replaces the agent's storage; its journal keeps the turns before and a turn that
  drops the old tables, so a schedule's own retry options (stored in its row before the wipe)
  still bound its attempts, and the journal still replays to what is stored.
- On 0.32.0 `cancelSchedule` emits `schedule:cancel` after its delete and its re-arm: a storage
  fault on the re-arm leaves the row deleted and nothing said, which is a cancel, not a loss.
"""

from __future__ import annotations

import dataclasses

import pytest

from sim.checkers import alarms, check
from sim.checkers.schedule_store import stored_schedules
from sim.checkers.storage import replay_journal
from sim.trace import TraceRecord
from tests.checkers.agents import scenario_context

S = "ScheduleWorkload/sched"
RETRIED_THEN_DESTROYED = """
name: retried-then-destroyed
description: a one-shot's own retry options beat the agent's; the agent destroys itself later
seed: 0
agents:
  sched:
    workload: schedules
    setup: call
    options: {retry: {max_attempts: 1, base_delay_ms: 1, max_delay_ms: 1}}
    schedules:
      - {name: s1, after: "0s", fail: 1, attempts: 2}
steps:
  - {at: 0s, call: {agent: sched, method: setup}}
  - at: 1m
    call: {agent: sched, method: destroy_agent, args: [null, false], expect_error: AgentEvicted}
"""


def test_a_destroyed_agents_earlier_rows_still_bound_its_schedules_attempts() -> None:
    context = scenario_context(RETRIED_THEN_DESTROYED)
    assert [r.get("attempt") for r in context.events("workload:schedule_run")] == [1, 2]
    assert context.events("storage:wiped", agent=S)
    assert check(context, ["schedule_attempts_bounded", "turns_atomic"]) == []
    db, problem = replay_journal(context.journals[S])
    assert problem is None
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "cf_agents_schedules" not in tables  # dropped with the rest by the wipe


CANCEL_CUT = """
name: cancel-cut
description: a cancel whose re-arm meets a storage fault, on 0.32.0
seed: 0
sdk: "0.32.0"
agents:
  sched:
    workload: schedules
    schedules:
      - {name: s1, after: "10m"}
      - {name: s2, after: "20m"}
steps:
  - {at: 0s, call: {agent: sched, method: status}}
  - arm_storage_fault: {agent: sched, kind: error, match: "exclusive = 1"}
  - at: 1m
    call: {agent: sched, method: cancel, args: [s1], may_fail_with: StorageError}
"""


def test_a_cancel_whose_rearm_failed_on_0_32_is_a_cancel(monkeypatch: pytest.MonkeyPatch) -> None:
    context = scenario_context(CANCEL_CUT)
    assert context.events("fault:storage_error", agent=S)
    assert not context.events("schedule:cancel", agent=S)  # 0.32.0 says nothing then
    assert check(context, ["schedules_fire"]) == []
    # Without the excuse, the row would read as lost.
    monkeypatch.setattr(alarms, "_cancel_cut_by_a_fault", lambda *args: False)
    (lost,) = check(context, ["schedules_fire"])
    assert "disappeared without firing or being cancelled" in lost.message


PUSH_CUT = """
name: push-cut
description: a re-creation whose job push fails reading its row back, on 0.32.0
seed: 0
sdk: "0.32.0"
agents:
  sched:
    workload: schedules
    setup: call
    schedules:
      - {name: s1, after: "30s"}
steps:
  - {at: 0s, call: {agent: sched, method: setup}}
  - at: 10s
    arm_storage_fault:
      {agent: sched, kind: error, match: "^SELECT [*] FROM cf_agents_jobs WHERE id", skip: 1}
  - at: 10s
    call: {agent: sched, method: recreate, args: [s1], may_fail_with: StorageError}
WAKE"""


def test_a_row_left_by_a_failed_push_on_0_32_waits_for_a_re_arm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """0.32.0's push writes the row, then reads it back: a storage fault on the read raises
    before the re-arm and before `schedule:create` (the SDK's `rearmAfter` too). The agent idles
    out with the row due and no alarm: not owed until a later re-arm of the holder (a job
    mutation: then it fires). Without the excuse the row would read as lost."""
    context = scenario_context(PUSH_CUT.replace("WAKE", ""))
    assert context.events("fault:storage_error", agent=S)
    (pushed,) = [
        str(row["id"])
        for row in stored_schedules(context, S)
        if not context.events("schedule:create", id=row["id"])
    ]
    assert check(context, ["schedules_fire"]) == []
    recreate = "  - {at: 200s, call: {agent: sched, method: recreate, args: [s1]}}"
    woken = scenario_context(PUSH_CUT.replace("WAKE", recreate))
    assert not alarms._left_by_a_failed_push(woken, S, pushed)  # a later re-arm came
    (fired,) = woken.events("schedule:execute", id=pushed)
    assert 200_000 <= fired.t_ms <= 200_001  # overdue since 40 s: the re-arm made it fire
    monkeypatch.setattr(alarms, "_left_by_a_failed_push", lambda *args: False)
    (lost,) = check(context, ["schedules_fire"])
    assert pushed in lost.message and "had not fired" in lost.message


STARTUP_SCHEDULES = """
name: startup-schedules
description: schedules set up in onStart, on 0.32.0, whose re-arms wait for the startup's end
seed: 0
sdk: "0.32.0"
agents:
  sched:
    workload: schedules
    schedules:
      - {name: s1, after: "5s"}
steps:
  - {at: 0s, call: {agent: sched, method: status}}
"""


def test_a_startup_its_incarnation_died_in_owes_no_re_arm() -> None:
    """0.32.0 holds a startup's re-arms until it ends: the schedule is judged by the slot at the
    startup's end. When the incarnation dies in the startup instead, nothing is owed (the
    fallback alarm, or the platform's retry, wakes the agent); when the startup ends but leaves
    the slot unarmed, the schedule's wake-up is lost."""
    context = scenario_context(STARTUP_SCHEDULES)
    (create,) = context.events("schedule:create", S)
    (done,) = context.events("startup:done", S)
    assert check(context, ["schedules_armed"]) == []

    def between(r: TraceRecord) -> bool:
        return r.agent == S and create.seq < r.seq < done.seq + 5 and r.event == "alarm:set"

    records = [r for r in context.records if not between(r)]
    unarmed = dataclasses.replace(context, records=tuple(records))
    assert [v.subject for v in check(unarmed, ["schedules_armed"])] == [create.get("id")]
    died = tuple(
        dataclasses.replace(r, event="incarnation:end", fields={"reason": "crash"})
        if r.seq == done.seq
        else r
        for r in records
    )
    assert check(dataclasses.replace(context, records=died), ["schedules_armed"]) == []


DESTROYED_MID_ALARM = """
name: destroyed-mid-alarm
description: an alarm comes due while a handler runs, and the agent destroys itself then
seed: 0
agents:
  sched:
    workload: schedules
    schedules:
      - {name: s2, every: "1s", runs: 1, backoff: "1ms", max_backoff: "1ms"}
      - {name: s3, after: "6m51s", fail: 1, fail_as: network, keep_alive: true}
steps:
  - {at: 0s, call: {agent: sched, method: status}}
  - at: 6m51s1ms
    call: {agent: sched, method: destroy_agent, args: [null, false], may_fail_with: AgentEvicted}
  - {at: 9m15s, call: {agent: sched, method: status}}
"""


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_a_destroy_clears_an_alarm_that_came_due_while_its_handler_ran(sdk: str) -> None:
    """The agent's alarm and everything owed by it go with a destroy: no firing is left over
    for the handler runs of the agent started afresh (nor does the slot's checker expect the
    deleted alarm to fire)."""
    text = DESTROYED_MID_ALARM.replace("seed: 0\n", f'seed: 0\nsdk: "{sdk}"\n')
    context = scenario_context(text)
    assert context.events("storage:wiped", agent=S)
    fired = [r.t_ms for r in context.events("alarm:fired", S) if r.t_ms >= 555_000]
    assert len(fired) == len(set(fired))  # one firing per instant
    assert check(context, ["alarm_fires_on_time"]) == []


SEALED_WITH_A_RECOVERY_LOOP = """
name: sealed-with-a-recovery-loop
description: a one-shot hits the memory limit, one strike allowed; another is a recovery-loop job
seed: 0
sdk: "0.32.0"
agents:
  sched:
    workload: schedules
    options: {max_alarm_memory_limit_strikes: 1}
    schedules:
      - {name: s1, after: 1m, fail: 3, fail_as: memory, attempts: 1}
      - {name: s2, after: 2m, recovery_loop: RECOVERY_LOOP}
steps:
  - call: {agent: sched, method: status}
  - run_until: 10m
"""


@pytest.mark.parametrize("recovery_loop", [True, False])
def test_a_recovery_loop_job_purged_by_a_sealed_breaker_is_not_a_lost_schedule(
    recovery_loop: bool,
) -> None:
    """Sdk-0.32 §2.5: the reset that seals the breaker deletes the executing job and purges
    every `recovery_loop` job, due or not: such a schedule goes without firing or being
    cancelled, as the SDK means it to, and `schedules_fire` does not count it lost (generate
    --seed 0 drew a burst of one-shots whose sub-agent's recovery-loop copy went so). Without
    `recovery_loop` the second one-shot is kept and fires."""
    text = SEALED_WITH_A_RECOVERY_LOOP.replace("RECOVERY_LOOP", str(recovery_loop).lower())
    context = scenario_context(text)
    assert [r.get("sealed") for r in context.events("alarm:memory_limit_reset", S)] == [True]
    ran = {r.get("name") for r in context.events("workload:schedule_run", S)}
    assert ("s2" in ran) is not recovery_loop
    assert check(context, ["schedules_fire"]) == []
