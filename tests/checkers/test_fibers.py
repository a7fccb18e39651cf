"""The fiber invariants — `no_lost_stash` and `fibers_settled` — pass healthy runs on the
simulated platform and catch real and crafted failures."""

from __future__ import annotations

import dataclasses

from sim import Simulation
from sim.checkers import LIVENESS_GRACE_MS, CheckContext, check, context_from
from tests.checkers.agents import (
    Forgetful,
    Worker,
    found_context,
    inserted,
    record,
    scenario_context,
    with_record,
    with_row,
    with_rows,
)
from tests.conformance.fiber_agents import Poisoned, Recorder, sleep

W = "Worker/w"


def killed_mid_work(cls: type, seed: int = 3) -> CheckContext:
    """A worker of 4 steps killed by a deploy after stashing step 2, woken by its alarm alone,
    then a liveness phase."""
    with Simulation(seed) as sim:
        ref = sim.agent(cls, "w")
        sim.call(ref, "work", 4)
        sim.run_for(25_000)
        sim.evict(ref, "deploy")
        assert sim.quiesce(3_600_000) is True
        return context_from(sim)


def messages(context: CheckContext, name: str) -> list[str]:
    return [v.message for v in check(context, [name])]


# -- no_lost_stash -------------------------------------------------------------------------------
def test_a_resume_from_the_last_stash_keeps_it() -> None:
    """The worker's hook resumes from step 2, the last stash before the deploy."""
    context = killed_mid_work(Worker)
    (resumed,) = context.events("workload:resumed")
    assert resumed.get("step") == 2
    assert check(context, ["no_lost_stash", "fibers_settled"]) == []


def test_a_resume_from_before_the_last_stash_is_a_lost_stash() -> None:
    """A hook that starts over from step 0 after step 2 was stashed is caught, with the stash,
    the death and the resume as its records."""
    context = killed_mid_work(Forgetful)
    (violation,) = check(context, ["no_lost_stash"])
    (stash,) = [
        r
        for r in context.events("workload:stashed", "Forgetful/w")
        if r.get("step") == 2 and r.inc == 1
    ]
    fiber = stash.get("fiberId")
    assert violation.message == (
        f"fiber {fiber} of Forgetful/w stashed step 2 at 00:00:20.000, its incarnation 1 ended "
        "(deploy) at 00:00:25.000, and its recovery resumed it from step 0 at 00:00:26.000: the "
        "stash was lost"
    )
    assert [context.records[s].event for s in violation.seqs] == [
        "workload:stashed",
        "incarnation:end",
        "workload:resumed",
    ]


def stashes_then(death_reason: str, death_ms: int, resumed_step: object) -> CheckContext:
    return CheckContext(
        records=(
            record(0, 10_000, W, 1, "workload:stashed", fiberId="f", step=1),
            record(1, 20_000, W, 1, "workload:stashed", fiberId="f", step=2),
            record(2, death_ms, W, 1, "incarnation:end", reason=death_reason),
            record(3, 30_000, W, 2, "workload:resumed", fiberId="f", step=resumed_step),
        )
    )


def test_a_stash_in_the_instant_of_a_crash_may_roll_back() -> None:
    """A crash in the same instant as the last stash may have rolled its turn back: resuming
    from the stash before it is fine, from earlier still is not."""
    assert check(stashes_then("crash", 20_000, 1), ["no_lost_stash"]) == []
    assert messages(stashes_then("crash", 20_000, 0), "no_lost_stash") == [
        "fiber f of Worker/w stashed step 1 at 00:00:10.000, its incarnation 1 ended (crash) at "
        "00:00:20.000, and its recovery resumed it from step 0 at 00:00:30.000: the stash was lost"
    ]
    assert len(check(stashes_then("crash", 20_001, 1), ["no_lost_stash"])) == 1
    assert len(check(stashes_then("deploy", 20_000, 1), ["no_lost_stash"])) == 1


def test_a_resume_with_no_snapshot_after_a_stash_is_caught() -> None:
    """Starting over (step None) after a stash loses it; a fiber that never stashed may start
    anywhere."""
    assert messages(stashes_then("idle", 25_000, None), "no_lost_stash") == [
        "fiber f of Worker/w stashed step 2 at 00:00:20.000, its incarnation 1 ended (idle) at "
        "00:00:25.000, and its recovery resumed it from step None at 00:00:30.000: the stash was "
        "lost"
    ]
    fresh = CheckContext(records=(record(0, 1, W, 2, "workload:resumed", fiberId="g", step=None),))
    assert check(fresh, ["no_lost_stash"]) == []


# -- fibers_settled ------------------------------------------------------------------------------
def test_a_poison_row_within_its_max_age_is_recorded_not_unsettled() -> None:
    """An orphan whose hook keeps throwing stays as a row: fine while within the max age, a
    violation once the run ends past max age plus the grace."""
    with Simulation(21) as sim:
        ref = sim.agent(Poisoned, "p")
        sim.start_call(ref, "run", "ingest", [sleep(600_000)])
        sim.run_for(500)
        sim.evict(ref, "deploy")
        assert sim.quiesce(600_000) is False
        context = context_from(sim)
    (row,) = context.table("Poisoned/p", "cf_agents_runs")
    assert check(context, ["fibers_settled"]) == []
    max_age = context.option("Poisoned/p", "fiber_recovery_max_age_ms")
    aged = dataclasses.replace(context, end_ms=row["created_at"] + max_age + LIVENESS_GRACE_MS + 1)
    (violation,) = check(aged, ["fibers_settled"])
    assert violation.message.startswith(
        f"fiber {row['id']} (ingest) of Poisoned/p kept failing its recovery hook and outlived "
        "its max age (86400000 ms)"
    )


def test_a_fiber_still_running_when_the_liveness_phase_ends_is_unsettled() -> None:
    """A two-hour fiber still running after a one-minute liveness phase has not settled."""
    with Simulation(22) as sim:
        ref = sim.agent(Recorder, "r")
        sim.start_call(ref, "run", "long", [sleep(7_200_000)])
        sim.run_for(1_000)
        sim.quiesce(60_000)
        context = context_from(sim)
    (violation,) = check(context, ["fibers_settled"])
    assert violation.message.endswith(
        "of Recorder/r was still running at the end (00:01:01.000, not quiet) (started at "
        "00:00:00.000 in incarnation 1)"
    )
    assert violation.message.startswith(f"fiber {violation.subject} (long) of Recorder/r")


def test_an_orphan_never_recovered_and_a_running_ledger_row_are_caught() -> None:
    """A run row recovery never touched, and a managed ledger row left `running`, after a quiet
    liveness phase."""
    context = killed_mid_work(Worker)
    orphan = {"id": "f-orphan", "name": "ingest", "snapshot": None, "created_at": 1_000}
    broken = with_rows(context, W, "cf_agents_runs", [orphan])
    broken = with_rows(
        broken, W, "cf_agents_fibers", [{"fiber_id": "m1", "name": "job", "status": "running"}]
    )
    assert messages(broken, "fibers_settled") == [
        "fiber f-orphan (ingest) of Worker/w left an orphaned run row (created at 00:00:01.000) "
        "that recovery never removed by the end (00:02:59.717, quiet)",
        "managed fiber m1 (job) of Worker/w was left 'running' in the ledger at the end "
        "(00:02:59.717, quiet)",
    ]
    settled = with_row(broken, W, "cf_agents_fibers", {"fiber_id": "m1"}, status="interrupted")
    assert len(check(settled, ["fibers_settled"])) == 1
    no_liveness = CheckContext(records=(), storage=broken.storage)
    assert check(no_liveness, ["fibers_settled"]) == []


ASLEEP = """
    name: asleep
    description: every wake-up after a deploy crashes in startup, until the alarm is given up
    seed: 1
    agents:
      worker:
        workload: fibers
        keep_alive_interval: 2s
        fibers:
          - {name: f, step: 10s, steps: 40}
    steps:
      - request: {agent: worker}
      - at: 20s
        arm_storage_fault: {agent: worker, kind: crash, match: 'FROM cf_agents_state', count: 8}
      - at: 30s
        deploy: {}
      - at: 2h
        request: {agent: worker, expect_error: AgentEvicted}
"""


def test_an_agent_the_platform_left_asleep_owes_its_recovery_to_the_next_wake_up() -> None:
    """Every alarm attempt after the deploy crashes in startup, the platform gives the alarm up,
    and a later request crashes too: the orphaned run row waits for the next event from
    outside, as on the platform. A startup that completed after the give-up (and recovered
    nothing) would owe the recovery."""
    context = scenario_context(ASLEEP, sdk="0.21.0")  # 0.21.0 gives the alarm up (no fallback)
    (given_up,) = context.events("alarm:given_up")
    assert context.left_asleep("FiberWorkload/worker") == given_up
    assert context.table("FiberWorkload/worker", "cf_agents_runs") != []
    assert check(context, ["fibers_settled"]) == []
    woke = record(0, 7_300_000, "FiberWorkload/worker", 10, "startup:done")
    later = inserted(context, context.records[-1].seq, woke)
    assert later.left_asleep("FiberWorkload/worker") is None
    assert [v.invariant for v in check(later, ["fibers_settled"])] == ["fibers_settled"]


UNINDEXED = """
    name: unindexed-facet-run
    description: the root dies while indexing a sub-agent's fiber run
    seed: 1
    agents:
      worker:
        workload: fibers
        start: call
        fibers: [{name: f1, steps: 2, step: 1m, managed: true}]
        sub_agents: [a]
    steps:
      - call: {agent: worker, method: status}
      - arm_storage_fault:
          {agent: worker, kind: crash, match: '^INSERT OR REPLACE INTO cf_agents_facet_runs\\b'}
      - call: {agent: worker, method: open, args: [a], expect_error: AgentEvicted}
      - run_for: 10m
"""


def test_a_sub_agent_fiber_its_root_does_not_index_waits_for_the_sub_agent_s_wake_up() -> None:
    """The root dies in the turn that indexes the sub-agent's run (fibers §6.9 step 5, after
    the sub-agent wrote its run row): no root alarm drives the run's recovery, so the row and
    the ledger's `running` wait for the sub-agent's next wake-up, and nothing is owed. Once the
    sub-agent has started again (its startup, which scans, finished), the row is judged as any
    other; a startup that failed before its scan still owes nothing."""
    context = scenario_context(UNINDEXED)
    sub = "FiberWorkload/worker/FiberWorkload/a"
    assert [r["status"] for r in context.table(sub, "cf_agents_fibers")] == ["running"]
    assert context.table("FiberWorkload/worker", "cf_agents_facet_runs") == []
    assert check(context, ["fibers_settled"]) == []
    failed = started_again(context, sub, "startup:failed")
    assert check(failed, ["fibers_settled"]) == []
    woke = started_again(context, sub, "startup:done")
    assert {v.message.split(" of ")[0] for v in check(woke, ["fibers_settled"])} == {
        f"fiber {r['fiber_id']} (f1)" for r in context.table(sub, "cf_agents_fibers")
    } | {f"managed fiber {r['fiber_id']} (f1)" for r in context.table(sub, "cf_agents_fibers")}


REOPENED_UNINDEXED = """
    name: reopened-unindexed-facet-run
    description: a sub-agent deleted after two incarnations, opened again, its run not indexed
    seed: 1
    agents:
      worker:
        workload: fibers
        start: call
        fibers: [{name: f1, steps: 2, step: 1m, managed: true}]
        sub_agents: [a]
    steps:
      - call: {agent: worker, method: status}
      - call: {agent: worker, method: open, args: [a]}
      - evict: {agent: worker/a}
      - run_for: 1m
      - call: {agent: worker, method: close, args: [a]}
      - arm_storage_fault:
          {agent: worker, kind: crash, match: '^INSERT OR REPLACE INTO cf_agents_facet_runs\\b'}
      - call: {agent: worker, method: open, args: [a], expect_error: AgentEvicted}
      - run_for: 10m
"""


def test_a_sub_agent_opened_again_counts_its_incarnations_afresh() -> None:
    """A sub-agent deleted and created again under its name numbers its incarnations from 1
    again: its last incarnation is the last one started, not the highest number, so the run
    the root did not index after the re-creation waits for its wake-up as above."""
    context = scenario_context(REOPENED_UNINDEXED)
    sub = "FiberWorkload/worker/FiberWorkload/a"
    starts = context.events("incarnation:start", sub)
    assert [r.inc for r in starts][-1] < max(r.inc for r in starts)
    assert context.table("FiberWorkload/worker", "cf_agents_facet_runs") == []
    assert context.table(sub, "cf_agents_runs") != []
    assert check(context, ["fibers_settled"]) == []
    assert check(started_again(context, sub, "startup:done"), ["fibers_settled"]) != []


def started_again(context: CheckContext, agent: str, outcome: str) -> CheckContext:
    """The context with a later incarnation of `agent`, its startup ended with `outcome`, that
    then crashed."""
    last = context.records[-1]
    began = with_record(context, last.seq, record(0, last.t_ms, agent, 2, "incarnation:start"))
    ended = with_record(began, last.seq + 1, record(0, last.t_ms, agent, 2, outcome))
    end = record(0, last.t_ms, agent, 2, "incarnation:end", reason="crash")
    return with_record(ended, last.seq + 2, end)


def test_a_sub_agent_s_orphan_waits_when_its_later_startup_failed_before_the_scan() -> None:
    """Found by generate on 0.32.0: a chat child wrote its turn's run row, its root crashed
    indexing it, and the child's only later incarnation (woken for a cancel) failed its
    startup at the Tasks' first write, before the recovery scan; nothing reached the child
    after. The row waits for the child's next start, as on the platform."""
    context = found_context("chat-child-startup-failed-before-the-scan")
    child = "ThinkToolsWorkload/parent/ChatToolChild/Beta"
    assert [r.event for r in context.events("startup:failed", child)] == ["startup:failed"]
    assert not context.events("startup:done", child)[1:]
    assert context.table(child, "cf_agents_runs") != []
    assert "fibers_settled" not in {v.invariant for v in check(context, ["fibers_settled"])}
