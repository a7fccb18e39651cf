"""S8 under storage faults: a finish delivery whose delivered mark cannot be written after its
handlers ran (divergence A14), and a recovery sweep that cannot finalize a run it recovered
(divergence A13). The exactly-once promise holds while the incarnation lives, and no awaited
run is left `running` by a parent that restarted.
"""

from __future__ import annotations

from typing import Any

from sim import Simulation
from tests.conformance.test_agent_tools import QUICK
from tests.conformance.test_agent_tools import Parent as AwaitingParent
from tests.conformance.test_detached import Parent as DetachedParent
from tests.conformance.test_detached import hooks, run_row
from tests.conformance.test_reattach import (
    HANG,
    WINDOW_EXCEEDED,
    ResumingChild,
    dispatch,
    frames_of,
    notes,
    parent_with,
    row_of,
)
from tests.releases import on_both_releases

pytestmark = on_both_releases  # divergences A13 and A14 hold on both releases

FINISH_MARK = r"^UPDATE cf_agent_tool_runs SET finish_delivered_at"


# -- the delivered mark (A14) --------------------------------------------------------------------
def test_an_awaited_finish_whose_mark_fails_is_marked_later_without_a_second_hook(
    sim: Simulation,
) -> None:
    """The hook ran, then writing the finish slot's delivered mark fails: the call still
    returns the run's result, the mark is written about a second later by the redelivery call,
    and the hook is not called again."""
    ref = sim.agent(AwaitingParent, "p")
    sim.arm_storage_fault(ref, "error", match=FINISH_MARK)
    result = sim.call(ref, "go", QUICK, "r")
    assert (result["status"], result["summary"]) == ("completed", "all done")
    assert sim.query(ref, "SELECT finish_delivered_at FROM cf_agent_tool_runs") == [
        {"finish_delivered_at": None}
    ]
    failed_at = sim.now_ms
    sim.run_for(5_000)
    (row,) = sim.query(ref, "SELECT status, finish_delivered_at FROM cf_agent_tool_runs")
    assert row["status"] == "completed"
    assert failed_at < row["finish_delivered_at"] <= failed_at + 2_000
    sim.run_for(120_000)
    assert [r.get("status") for r in sim.trace.select("user:finish", runId="r")] == ["completed"]
    assert [r.get("status") for r in sim.trace.select("hook:delivered", runId="r")] == ["completed"]
    assert sim.probes["ledger.delivered_mark_failed"] == 1
    assert sim.probes["ledger.handled_slot_marked"] == 1


def test_a_detached_finish_whose_mark_fails_is_marked_by_the_next_tick_without_on_finish(
    sim: Simulation,
) -> None:
    """A detached run's on_finish ran, then its delivered mark fails: the next backbone tick
    writes the mark (no waiting for the 60 s lease), and neither hook runs a second time."""
    ref = sim.agent(DetachedParent, "p")
    sim.arm_storage_fault(ref, "error", match=FINISH_MARK)
    steps = [["sleep", 1_000], ["finish", "completed", "done"]]
    sim.call(ref, "dispatch", "r", steps, {"on_finish": "on_detached_done"})
    sim.run_for(2_000)
    assert run_row(sim, ref, "r")["finish_delivered_at"] is None
    sim.run_for(30_000)
    row = run_row(sim, ref, "r")
    assert row["status"] == "completed"
    assert row["finish_delivered_at"] is not None and row["finish_delivered_at"] < 30_000
    sim.run_for(600_000)
    assert [h[0] for h in hooks(sim, ref, "r")] == ["on_agent_tool_finish", "on_detached_done"]
    assert sim.call(ref, "backbone") == []
    assert sim.probes["ledger.handled_slot_marked"] == 1


# -- the recovery sweep (A13) --------------------------------------------------------------------
def restart_with_fault(sim: Simulation, parent: Any, match: str, *, after_ms: int = 100) -> int:
    """As `test_reattach.restart`, with a storage fault armed on the restarted parent."""
    sim.run_for(after_ms)
    sim.deploy()
    sim.run_for(10)
    sim.arm_storage_fault(parent, "error", match=match)
    sim.agent(parent.cls, parent.name)
    return sim.now_ms


def completing_run(sim: Simulation) -> Any:
    """A parent whose awaited run `r` hangs until a restart; the re-attached child completes
    300 ms later with 'done'."""
    p = sim.agent(parent_with(agent_tool_reattach_no_progress_timeout_ms=1_000), "p")
    dispatch(
        sim,
        p,
        "r",
        [["text", "a"], *HANG],
        [["sleep", 300], ["text", "b"], ["finish", "completed", "done"]],
    )
    return p


def test_a_recovered_completion_whose_claim_fails_is_finalized_by_the_retry(
    sim: Simulation,
) -> None:
    """The sweep re-attaches, the child completes, and claiming the finish slot fails: the run
    is not left `running`; the retry finalizes it `completed`, with one finished frame and one
    hook."""
    p = completing_run(sim)
    woke = restart_with_fault(sim, p, r"^UPDATE cf_agent_tool_runs SET finish_claimed_at")
    sim.run_for(1_000)
    assert row_of(sim, p, "r")["status"] == "running"
    sim.run_for(10_000)
    row = row_of(sim, p, "r")
    assert (row["status"], row["summary"]) == ("completed", "done")
    assert row["finish_delivered_at"] is not None
    kinds = [f["event"]["kind"] for f in frames_of(sim, p, "r", since_ms=woke)]
    assert kinds.count("finished") == 1
    assert notes(sim, p) == ["finish:r:completed"]
    assert sim.probes["agent_tool.recovery_finalize_failed"] == 1
    assert sim.probes["agent_tool.recovery_finalize_retried"] == 1


def test_a_recovered_claim_that_cannot_be_given_back_is_delivered_when_its_lease_expires(
    sim: Simulation,
) -> None:
    """The sweep re-attaches and the child completes; the finish slot is claimed, then writing
    the terminal row fails and so does giving the claim back. The retry finds the slot held
    (it writes the row, no hook); the redelivery call armed for the claim's lease delivers the
    hook once, about 60 s later, instead of leaving the awaited run's finish owed for ever."""
    p = completing_run(sim)
    restart_with_fault(sim, p, r"^UPDATE cf_agent_tool_runs SET status")
    sim.arm_storage_fault(
        p, "error", match=r"^UPDATE cf_agent_tool_runs SET finish_claimed_at = NULL"
    )
    sim.run_for(10_000)
    row = row_of(sim, p, "r")
    assert (row["status"], row["summary"]) == ("completed", "done")
    assert row["finish_claimed_at"] is not None and row["finish_delivered_at"] is None
    assert notes(sim, p) == []
    sim.run_for(60_000)
    row = row_of(sim, p, "r")
    assert row["finish_delivered_at"] is not None
    assert row["finish_delivered_at"] - row["finish_claimed_at"] <= 62_000
    assert notes(sim, p) == ["finish:r:completed"]
    assert sim.probes["ledger.failed_handler_reclaimed"] == 1
    sim.run_for(120_000)
    assert notes(sim, p) == ["finish:r:completed"]


def test_a_window_exceeded_give_up_whose_claim_fails_keeps_its_outcome(sim: Simulation) -> None:
    """The ceiling tears the child down (it is `aborted` now), then claiming the give-up slot
    fails: the retry finalizes the run with the outcome the sweep decided, interrupted /
    window-exceeded, not with what the torn-down child says now."""
    cls = parent_with(
        agent_tool_reattach_no_progress_timeout_ms=5_000, agent_tool_reattach_max_window_ms=200
    )
    p = sim.agent(cls, "p")
    dispatch(sim, p, "r", [["text", "a"], *HANG], HANG)
    restart_with_fault(sim, p, r"^UPDATE cf_agent_tool_runs SET give_up_claimed_at")
    sim.run_for(10_000)
    row = row_of(sim, p, "r")
    assert (row["status"], row["interrupted_reason"]) == ("interrupted", "window-exceeded")
    assert (row["error_message"], row["child_still_running"]) == (WINDOW_EXCEEDED, 0)
    assert row["give_up_delivered_at"] is not None
    assert notes(sim, p) == ["finish:r:interrupted"]


def test_a_sweep_that_fails_before_reaching_a_run_sweeps_it_again(sim: Simulation) -> None:
    """Reading the snapshot's row fails, so the sweep finalizes nothing: the retry sweeps the
    run again (inspects its child, re-attaches) and finalizes it."""
    p = sim.agent(parent_with(agent_tool_reattach_no_progress_timeout_ms=1_000), "p")
    dispatch(
        sim,
        p,
        "r",
        [["text", "a"], *HANG],
        [["sleep", 300], ["finish", "completed", "done"]],
    )
    restart_with_fault(sim, p, r"^SELECT \* FROM cf_agent_tool_runs WHERE run_id")
    sim.run_for(10_000)
    row = row_of(sim, p, "r")
    assert (row["status"], row["summary"]) == ("completed", "done")
    failed, finished = notes(sim, p)
    assert failed.startswith("on_error:injected storage fault")
    assert finished == "finish:r:completed"
    assert len(sim.trace.select("agent_tool:recovery:failed")) == 1
    # The first sweep failed before it began; the retry's is the one sweep that began.
    begins = sim.trace.select("agent_tool:recovery:begin")
    assert [b.get("runCount") for b in begins] == [1]
    assert sim.probes.get("agent_tool.recovery_finalize_retried", 0) == 0
    assert sim.query(sim.facet(p, ResumingChild, "r"), "SELECT status FROM child_runs") == [
        {"status": "completed"}
    ]


# -- what a re-issue of a completed run delivers (§2.4, §8.1) -------------------------------------
class Clearing(AwaitingParent):
    async def clear(self) -> int:
        return await self.clear_agent_tool_runs()


def test_a_reissued_completed_run_delivers_nothing_and_a_cleared_run_id_is_a_new_run(
    sim: Simulation,
) -> None:
    """A re-issue of a completed run returns its stored result with no hook (exactly once).
    Once the run is cleared, the parent no longer knows it: the same run id starts a new run,
    in a new child facet, whose own finish is delivered once."""
    ref = sim.agent(Clearing, "c")
    assert sim.call(ref, "go", QUICK, "r")["status"] == "completed"
    assert sim.call(ref, "go", QUICK, "r")["summary"] == "all done"
    assert len(sim.trace.select("user:finish", runId="r")) == 1
    assert sim.call(ref, "clear") == 1
    assert sim.call(ref, "go", QUICK, "r")["status"] == "completed"
    assert [r.get("status") for r in sim.trace.select("user:start", runId="r")] == [
        "starting",
        "starting",
    ]
    assert len(sim.trace.select("user:finish", runId="r")) == 2
    assert len(sim.trace.select("rpc", method="start_agent_tool_run")) == 2
