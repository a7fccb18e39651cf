"""Catalogue group C, re-issue items (spec agent-tools §12.C, §2.4, §7.6): calling
`run_agent_tool` again with the run id of a row that is not hard terminal re-attaches to the
child instead of starting a second turn.

A plain RPC on a stale stub wakes the parent without startup (so without startup recovery):
that is how these tests reach the re-issue path alone. Fixtures come from `test_reattach`.
"""

from __future__ import annotations

import json
from typing import Any

from agents_core import Agent
from agents_core.agent_tools.tool import agent_tool
from sim import Simulation
from tests.agent_tools.scripted_child import ScriptedChild
from tests.conformance.test_reattach import (
    HANG,
    NO_PROGRESS,
    Parent,
    ResumingChild,
    child_ref,
    dispatch,
    event_of,
    frames_of,
    notes,
    parent_with,
    restart,
    row_of,
    texts,
)
from tests.releases import on_both_releases, on_release

RESEARCH = agent_tool(
    ResumingChild,
    description="Research a topic",
    input_schema={"type": "object", "properties": {"steps": {"type": "array"}}},
)


class ToolParent(Parent):
    """A parent whose model calls the child through `agent_tool()`."""

    options = {"agent_tool_reattach_no_progress_timeout_ms": 1_000}

    async def call_tool(self, tool_call_id: str, tool_input: dict[str, Any]) -> Any:
        return await RESEARCH.execute(tool_input, tool_call_id=tool_call_id)


class NoAdapterChild(Agent):
    """A child class that does not implement the agent-tool adapter."""


class BareParent(Parent):
    async def reissue_with_bare_child(self, run_id: str) -> dict[str, Any]:
        result = await self.run_agent_tool(NoAdapterChild, input={}, run_id=run_id)
        return result.to_dict()


def child_turns(sim: Simulation, child: Any) -> list[str]:
    return [r["kind"] for r in sim.query(child, "SELECT kind FROM drives ORDER BY rowid")]


def stored_texts(sim: Simulation, child: Any) -> list[str]:
    rows = sim.query(child, "SELECT body FROM child_chunks ORDER BY seq")
    return [json.loads(r["body"])["delta"] for r in rows]


@on_both_releases
def test_T039_reissue_repairs_an_interrupted_run(sim: Simulation) -> None:
    """A row sealed `interrupted` whose child completed afterwards is repaired to `completed`
    by a re-issue of its run id, and the stale cause is cleared."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=200)
    p = sim.agent(cls, "p")
    dispatch(
        sim,
        p,
        "r",
        [["text", "a"], *HANG],
        [["sleep", 1_000], ["text", "late"], ["finish", "completed", "late result"]],
    )
    restart(sim, p)
    sim.run_for(500)
    sealed = row_of(sim, p, "r")
    assert (sealed["status"], sealed["interrupted_reason"]) == ("interrupted", "no-progress")
    sim.run_for(1_000)  # the child finishes on its own meanwhile

    result = sim.call(p, "go", "ResumingChild", "r", [["finish", "error", "new input ignored"]])
    assert result == {
        "runId": "r",
        "agentType": "ResumingChild",
        "status": "completed",
        "summary": "late result",
    }
    row = row_of(sim, p, "r")
    assert (row["status"], row["summary"], row["error_message"]) == (
        "completed",
        "late result",
        None,
    )
    assert (row["interrupted_reason"], row["child_still_running"]) == (None, None)
    assert notes(sim, p) == ["finish:r:interrupted", "finish:r:completed"]
    assert sim.probes["agent_tool.reissue_reattached"] == 1
    assert sim.probes["ledger.finish_after_give_up"] == 1


@on_both_releases
def test_T043_evicted_parent_collects_without_restarting_the_child(sim: Simulation) -> None:
    """A parent evicted mid-run and re-issued with the same run id (a hand-picked id, or the
    `agent-tool:<toolCallId>` of a re-run tool call) collects the child's result, and the
    child's turn is resumed, never started again."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=1_000)
    p = sim.agent(cls, "p")
    steps = [["text", "a"], ["sleep", 50], ["text", "b"], *HANG]
    resume = [["sleep", 200], ["text", "c"], ["finish", "completed", "collected"]]
    dispatch(sim, p, "stable", steps, resume)
    sim.run_for(100)
    sim.deploy()
    sim.run_for(10)

    result = sim.call(p, "go", "ResumingChild", "stable", steps, resume)  # no startup
    assert result == {
        "runId": "stable",
        "agentType": "ResumingChild",
        "status": "completed",
        "summary": "collected",
    }
    child = child_ref(sim, p, ResumingChild, "stable")
    assert child_turns(sim, child) == ["start", "resume"]
    assert stored_texts(sim, child) == ["a", "b", "c"]
    assert len(sim.trace.select("rpc", agent=child.path, method="start_agent_tool_run")) == 1
    assert notes(sim, p) == ["finish:stable:completed"]

    tool = sim.agent(ToolParent, "t")
    sim.start_call(tool, "call_tool", "call-1", {"steps": steps, "resume": resume})
    sim.run_for(100)
    sim.deploy()
    sim.run_for(10)
    assert sim.call(tool, "call_tool", "call-1", {"steps": steps, "resume": resume}) == "collected"
    child = child_ref(sim, tool, ResumingChild, "agent-tool:call-1")
    assert child_turns(sim, child) == ["start", "resume"]
    assert stored_texts(sim, child) == ["a", "b", "c"]


@on_release("0.21.0")
def test_T044_reissue_give_up_rebroadcasts_stored_chunks(sim: Simulation) -> None:
    """A re-issue whose re-attach gives up with `no-progress` sends the child's stored chunks
    again from sequence 1 and returns `interrupted`/`no-progress` with the child still
    running."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=200)
    p = sim.agent(cls, "p")
    dispatch(sim, p, "r", [["text", "a"], ["text", "b"], *HANG], child=ScriptedChild)
    sim.run_for(50)
    sim.deploy()
    sim.run_for(10)
    since = sim.now_ms

    result = sim.call(p, "go", "ScriptedChild", "r", [])
    assert result == {
        "runId": "r",
        "agentType": "ScriptedChild",
        "status": "interrupted",
        "error": NO_PROGRESS,
        "reason": "no-progress",
        "childStillRunning": True,
    }
    frames = frames_of(sim, p, "r", since_ms=since)
    assert [(f["sequence"], f["event"]["kind"]) for f in frames] == [
        (1, "chunk"),
        (2, "chunk"),
        (3, "interrupted"),
    ]
    assert texts(frames) == ["a", "b"]
    assert [f["event"].get("chunkSequence") for f in frames[:2]] == [0, 1]
    assert "replay" not in frames[0]
    assert frames[-1]["event"] == {
        "kind": "interrupted",
        "runId": "r",
        "error": NO_PROGRESS,
        "reason": "no-progress",
        "childStillRunning": True,
    }
    assert row_of(sim, p, "r")["child_still_running"] == 1


@on_both_releases
def test_recovery_and_reissue_racing_finish_the_run_once(sim: Simulation) -> None:
    """When startup recovery and a re-issue both re-attach to one run (E8), the child runs
    once and the finish hook fires once (seed decision S8)."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=1_000)
    p = sim.agent(cls, "p")
    steps = [["text", "a"], *HANG]
    resume = [["sleep", 300], ["text", "b"], ["finish", "completed", "once"]]
    dispatch(sim, p, "r", steps, resume)
    restart(sim, p)
    result = sim.call(p, "go", "ResumingChild", "r", steps, resume)

    assert result["status"] == "completed"
    assert len(sim.trace.select("agent_tool:recovery:reattach", runId="r")) == 2
    sim.run_for(1_000)
    assert row_of(sim, p, "r")["status"] == "completed"
    assert notes(sim, p) == ["finish:r:completed"]
    assert child_turns(sim, child_ref(sim, p, ResumingChild, "r")) == ["start", "resume"]


@on_both_releases
def test_reissue_racing_a_sweep_that_outlives_the_claim_lease_finishes_once(
    sim: Simulation,
) -> None:
    """Startup recovery gives one run up early but defers its hook until the whole sweep is
    over, which a streaming sibling keeps going for 90 s. A re-issue of the given-up run 65 s
    later gives up again: the sweep's claim is past its 60 s lease, but its delivery is alive
    and pending, so the re-issue does not take it over, and the give-up hook runs once, after
    the sweep (seed decision S8: exactly once normally)."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=1_000)
    p = sim.agent(cls, "p")
    dispatch(sim, p, "scout", [["text", "a"], *HANG], HANG)
    stream = [step for i in range(180) for step in (["sleep", 500], ["text", f"s{i}"])]
    dispatch(sim, p, "survey", [["text", "a"], *HANG], [*stream, ["finish", "completed", "ok"]])
    woke = restart(sim, p)
    sim.run_for(2_000)
    sealed = row_of(sim, p, "scout")
    assert (sealed["status"], sealed["interrupted_reason"]) == ("interrupted", "no-progress")
    assert sealed["give_up_claimed_at"] < woke + 2_000
    assert notes(sim, p) == []  # deferred until the sweep is over

    sim.run_until(sealed["give_up_claimed_at"] + 65_000)
    result = sim.call(p, "go", "ResumingChild", "scout", HANG)
    assert (result["status"], result["reason"]) == ("interrupted", "no-progress")
    assert notes(sim, p) == []
    assert sim.probes["ledger.live_claim_outlived_lease"] == 1

    sim.run_for(60_000)
    complete = event_of(sim, "agent_tool:recovery:complete")
    assert complete.t_ms > sealed["give_up_claimed_at"] + 65_000
    assert notes(sim, p) == ["finish:scout:interrupted", "finish:survey:completed"]
    delivered = sim.trace.select("hook:delivered", runId="scout")
    assert [(r.get("slot"), r.t_ms) for r in delivered] == [("give_up", complete.t_ms)]


class SlowGiveUpHook(Parent):
    """Its hook takes 10 s for a give-up (a crash can land inside it)."""

    options = {"agent_tool_reattach_no_progress_timeout_ms": 200}

    async def on_agent_tool_finish(self, run: Any, result: Any) -> None:
        self.note(f"begin:{run.run_id}:{result.status}")
        if result.status == "interrupted":
            await self.host.clock.sleep(10_000)
        self.note(f"finish:{run.run_id}:{result.status}")


@on_both_releases
def test_a_give_up_left_claimed_by_a_dead_incarnation_is_closed_once_the_run_completed(
    sim: Simulation,
) -> None:
    """An awaited run's give-up hook is cut short by a deploy; before its lease expires a
    re-issue collects the child's real result through the finish slot. The redelivery armed at
    startup then finds the run completed: it closes the give-up slot without calling the hooks
    again, since the real terminal was delivered (S7, S8)."""
    p = sim.agent(SlowGiveUpHook, "p")
    dispatch(sim, p, "r", [["text", "a"], *HANG], [["sleep", 3_000], ["finish", "completed", "ok"]])
    restart(sim, p)
    sim.run_for(1_000)
    assert notes(sim, p) == ["begin:r:interrupted"]
    sim.deploy()
    sim.run_for(10)
    sim.agent(SlowGiveUpHook, "p")  # startup arms the redelivery of the claimed give-up
    # The first re-issue starts the child again and gives up (the slot is claimed: no hook).
    assert sim.call(p, "go", "ResumingChild", "r", HANG)["status"] == "interrupted"
    sim.run_for(4_000)
    assert sim.call(p, "go", "ResumingChild", "r", HANG)["status"] == "completed"
    sim.run_for(120_000)
    assert notes(sim, p) == [
        "begin:r:interrupted",
        "begin:r:completed",
        "finish:r:completed",
    ]
    row = row_of(sim, p, "r")
    assert row["status"] == "completed"
    assert row["give_up_delivered_at"] is not None and row["finish_delivered_at"] is not None
    assert sim.probes["ledger.awaited_redelivery_armed"] == 1
    assert sim.probes["ledger.superseded_give_up_closed"] == 1


@on_both_releases
def test_reissue_whose_child_cannot_be_resolved_reports_no_reason(sim: Simulation) -> None:
    """A re-issue that cannot resolve its child seals the run `interrupted` with no typed
    reason, the still-running prose and `child_still_running` true."""
    p = sim.agent(BareParent, "p")
    sim.call(p, "insert_row", "r", "ScriptedChild")
    result = sim.call(p, "reissue_with_bare_child", "r")
    assert result == {
        "runId": "r",
        "agentType": "ScriptedChild",
        "status": "interrupted",
        "error": "Agent tool run was still running and did not reach a terminal result.",
        "childStillRunning": True,
    }
