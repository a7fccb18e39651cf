"""A detached dispatch cut short by a crash before its child ever started is still given up
when its budget passes: the backbone tick is armed in the run row's own turn (divergence A7);
once given up, a run whose child never got it stops the backbone (E11), unless this incarnation
is still waiting for the child's start."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core import Agent
from agents_core.agent_tools.backbone import DETACHED_RECONCILE_CALLBACK
from agents_core.agent_tools.detached_option import parse_detached_option
from scenarios.workloads import DetachedPlan, RunPlan, tools_workload
from sim import AgentEvicted, Simulation
from sim.checkers import assert_invariants
from tests.agent_tools.scripted_child import ScriptedChild
from tests.releases import on_both_releases, schedule_insert, schedule_read, stored_schedules

pytestmark = on_both_releases  # divergences A7, A10, A12 and B3 hold on both releases

Parent = tools_workload(
    [
        RunPlan(
            "import",
            detached=DetachedPlan(max_budget_ms=600_000, on_finish=True),
            steps=(("sleep", 60_000), ("finish", "completed", "done")),
        )
    ]
)


def test_a_crash_while_the_child_is_created_still_gives_the_run_up(sim: Simulation) -> None:
    """The child's first statement kills the isolate during dispatch; the row stays `starting`,
    but the tick armed with it wakes the parent, which gives the run up at its budget."""
    ref = sim.agent(Parent, "p")
    sim.run_for(1)
    sim.arm_storage_fault_on_creation(ref, ("import",), None, "crash", match=r"^CREATE TABLE")
    with pytest.raises(AgentEvicted, match="crash"):
        sim.call(ref, "dispatch", "import")
    (row,) = sim.query(ref, "SELECT status FROM cf_agent_tool_runs")
    assert row["status"] == "starting"
    assert sim.alarm_of(ref) is not None
    sim.run_for(3_600_000)
    (row,) = sim.query(ref, "SELECT status FROM cf_agent_tool_runs")
    assert row["status"] == "interrupted"
    finishes = sim.trace.select("workload:on_finish")
    assert [(r.get("runId"), r.get("status")) for r in finishes] == [("import", "interrupted")]
    assert_invariants(sim, ["budget_interrupts", "exactly_once_finish"])


def test_a_given_up_run_whose_child_never_started_stops_the_backbone(sim: Simulation) -> None:
    """After the give-up, the child still has no record of the run and no dispatch of it is in
    flight: nothing can ever finish it, so its finish slot is closed silently (E11) and the
    backbone stops instead of ticking every 120 s for as long as the parent exists."""
    ref = sim.agent(Parent, "p")
    sim.run_for(1)
    sim.arm_storage_fault_on_creation(ref, ("import",), None, "crash", match=r"^CREATE TABLE")
    with pytest.raises(AgentEvicted, match="crash"):
        sim.call(ref, "dispatch", "import")
    sim.run_for(3_600_000)
    (row,) = sim.query(ref, "SELECT * FROM cf_agent_tool_runs")
    assert (row["status"], row["interrupted_reason"]) == ("interrupted", "budget-exceeded")
    assert row["give_up_delivered_at"] is not None
    assert row["finish_delivered_at"] is not None
    assert stored_schedules(sim, ref) == []
    ticks = sim.trace.select("schedule:execute", callback=DETACHED_RECONCILE_CALLBACK)
    assert ticks and ticks[-1].t_ms <= 600_000 + 120_000
    finishes = sim.trace.select("workload:on_finish")
    assert [(r.get("runId"), r.get("status")) for r in finishes] == [("import", "interrupted")]
    assert sim.probes["agent_tool.unstarted_run_finish_closed"] == 1
    assert_invariants(sim, ["budget_interrupts", "exactly_once_finish"])


class SlowStartChild(ScriptedChild):
    """Takes 10 s to accept a run: its row does not exist until then."""

    async def start_agent_tool_run(self, input: Any, run_id: str) -> dict[str, Any]:
        await self.host.clock.sleep(10_000)
        return await super().start_agent_tool_run(input, run_id)


class SlowStartParent(Agent):
    async def dispatch(self, run_id: str, budget_ms: int) -> str:
        handle = await self.run_agent_tool(
            SlowStartChild,
            input={"steps": [["sleep", 1_000], ["finish", "completed", "late but real"]]},
            run_id=run_id,
            detached={"max_budget_ms": budget_ms},
        )
        return handle.status

    async def on_agent_tool_finish(self, run: Any, result: Any) -> None:
        self.host.trace.emit("test:finish", runId=run.run_id, status=result["status"])


def test_a_run_whose_start_is_still_in_flight_is_given_up_but_not_closed(
    sim: Simulation,
) -> None:
    """A give-up that sees no child record while this incarnation still waits for the child's
    start leaves the finish slot open: the completion that follows is delivered (S7)."""
    ref = sim.agent(SlowStartParent, "p")
    assert sim.call(ref, "dispatch", "slow", 0) == "running"
    sim.run_for(60_000)
    finishes = [(r.t_ms, r.get("status")) for r in sim.trace.select("test:finish")]
    assert finishes == [(5_000, "interrupted"), (11_000, "completed")]
    (row,) = sim.query(ref, "SELECT status, summary FROM cf_agent_tool_runs")
    assert (row["status"], row["summary"]) == ("completed", "late but real")
    assert sim.probes.get("agent_tool.unstarted_run_finish_closed", 0) == 0
    assert_invariants(sim, ["budget_interrupts", "exactly_once_finish"])


class TwoRunParent(Agent):
    async def leave_row_without_child(self, run_id: str) -> None:
        """What a dispatch leaves when its isolate dies after the run row's turn committed and
        before the child facet was created: the row and its tick, no facet."""
        config = parse_detached_option(self, {"max_budget_ms": 600_000})
        now = self.host.clock.now_ms()
        self._tools.admission.insert(run_id, "ScriptedChild", None, 0, None, None, now, config)
        await self._tools.backbone.arm(reset_cadence=True)

    async def dispatch(self, run_id: str) -> str:
        handle = await self.run_agent_tool(
            ScriptedChild,
            input={"steps": [["hang"]]},
            run_id=run_id,
            detached={"max_budget_ms": 600_000},
        )
        return handle.status


def test_a_dispatch_whose_backbone_cannot_be_armed_fails_whole(sim: Simulation) -> None:
    """A storage error while the new run's backbone tick is armed fails the dispatch before
    anything is announced, and its row goes with it: no run is left that nothing would ever
    give up (the SDK's order, and the bare A7 arming, left a `starting` row with no tick)."""
    ref = sim.agent(TwoRunParent, "p")
    client = sim.connect(ref)
    sim.arm_storage_fault(ref, "error", match=schedule_read(sim))
    with pytest.raises(Exception, match="injected storage fault"):
        sim.call(ref, "dispatch", "r1")
    assert sim.query(ref, "SELECT * FROM cf_agent_tool_runs") == []
    assert [f for f in client.frames if f.get("type") == "agent-tool-event"] == []
    assert sim.probes["agent_tool.unarmed_dispatch_dropped"] == 1
    assert sim.call(ref, "dispatch", "r1") == "running"  # the run id is free again


def test_a_failed_backbone_reset_keeps_the_tick_other_runs_rely_on(sim: Simulation) -> None:
    """When a second dispatch cannot write its fresh tick, the pending tick of the first run
    is still there: it is replaced only once the new one exists (B3), so the first run is
    still given up at its budget."""
    ref = sim.agent(TwoRunParent, "p")
    assert sim.call(ref, "dispatch", "r1") == "running"
    sim.run_for(60_000)
    sim.arm_storage_fault(ref, "error", match=schedule_insert(sim))
    with pytest.raises(Exception, match="injected storage fault"):
        sim.call(ref, "dispatch", "r2")
    ticks = stored_schedules(sim, ref)
    assert [t["callback"] for t in ticks] == [DETACHED_RECONCILE_CALLBACK]
    sim.run_for(3_600_000)
    (row,) = sim.query(ref, "SELECT status, interrupted_reason FROM cf_agent_tool_runs")
    assert (row["status"], row["interrupted_reason"]) == ("interrupted", "budget-exceeded")


def test_a_given_up_run_whose_child_facet_was_never_created_stops_the_backbone(
    sim: Simulation,
) -> None:
    """When the child facet was never created the tick cannot even resolve it (LookupError):
    that child has no record of the run either, and once the give-up is delivered the finish
    slot is closed (A10)."""
    ref = sim.agent(TwoRunParent, "p")
    sim.call(ref, "leave_row_without_child", "r1")
    sim.run_for(3_600_000)
    (row,) = sim.query(ref, "SELECT * FROM cf_agent_tool_runs")
    assert (row["status"], row["interrupted_reason"]) == ("interrupted", "budget-exceeded")
    assert row["finish_delivered_at"] is not None
    assert stored_schedules(sim, ref) == []
    assert sim.probes["agent_tool.unstarted_run_finish_closed"] == 1
