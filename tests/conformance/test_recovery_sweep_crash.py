"""S8 across a crash inside a startup recovery sweep (spec agent-tools §7.1, docs/divergences.md
A17): the sweep finalizes a run (its slot claimed, its row terminal) and defers the hook; when
the parent dies in that hook, nothing is left for a later startup to sweep, and no caller is
waiting to re-issue the run. The sweep holds a keepAlive lease, so the heartbeat alarm it armed
wakes the parent, whose startup redelivers the claimed slot once its lease has expired.

Without that wake-up the run would be terminal with its hook never called for as long as nobody
else happened to contact the parent.
"""

from __future__ import annotations

from sim import Simulation
from tests.conformance.test_reattach import (
    HANG,
    ResumingChild,
    dispatch,
    notes,
    parent_with,
    restart,
    row_of,
)
from tests.releases import on_both_releases

pytestmark = on_both_releases  # divergence A17 holds on both releases

HOOK_WRITE = r"^INSERT INTO events_log\b"


def test_a_sweep_finish_hook_cut_by_a_crash_is_delivered_without_outside_help(
    sim: Simulation,
) -> None:
    """The child completes during the re-attach; the parent dies writing in its finish hook.
    With no request, client or call afterwards, the hook still runs again, once."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=2_000)
    p = sim.agent(cls, "p")
    dispatch(sim, p, "r", [["text", "a"], *HANG], [["sleep", 300], ["finish", "completed", "done"]])
    restart(sim, p)
    sim.arm_storage_fault(p, "crash", match=HOOK_WRITE)
    sim.run_for(1_000)
    assert sim.trace.select("fault:crash"), "the hook's write never ran"
    assert row_of(sim, p, "r")["finish_delivered_at"] is None

    sim.run_for(300_000)
    row = row_of(sim, p, "r")
    assert row["status"] == "completed"
    assert row["finish_delivered_at"] is not None
    assert notes(sim, p) == ["finish:r:completed"]
    assert len(sim.trace.select("hook:delivered", runId="r", slot="finish")) == 1
    assert sim.probes["ledger.dead_claim_reclaimed"] == 1


def test_a_window_exceeded_give_up_cut_by_a_crash_is_delivered_without_outside_help(
    sim: Simulation,
) -> None:
    """The ceiling tears the child down and the sweep gives up `window-exceeded`; the parent
    dies writing in its give-up hook. The `give_up` slot is still delivered, once."""
    cls = parent_with(
        agent_tool_reattach_no_progress_timeout_ms=5_000, agent_tool_reattach_max_window_ms=200
    )
    p = sim.agent(cls, "p")
    dispatch(sim, p, "r", [["text", "a"], *HANG], HANG, child=ResumingChild)
    restart(sim, p)
    sim.arm_storage_fault(p, "crash", match=HOOK_WRITE)
    sim.run_for(1_000)
    assert sim.trace.select("fault:crash"), "the hook's write never ran"
    assert row_of(sim, p, "r")["give_up_delivered_at"] is None

    sim.run_for(300_000)
    row = row_of(sim, p, "r")
    assert (row["status"], row["interrupted_reason"]) == ("interrupted", "window-exceeded")
    assert row["give_up_delivered_at"] is not None
    assert notes(sim, p) == ["finish:r:interrupted"]
    assert len(sim.trace.select("hook:delivered", runId="r", slot="give_up")) == 1
