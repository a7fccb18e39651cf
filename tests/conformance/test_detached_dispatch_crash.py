"""A detached dispatch cut short by a crash before its child ever started is still given up
when its budget passes: the backbone tick is armed in the run row's own turn (divergence A7)."""

from __future__ import annotations

import pytest

from scenarios.workloads import DetachedPlan, RunPlan, tools_workload
from sim import AgentEvicted, Simulation
from sim.checkers import assert_invariants

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
