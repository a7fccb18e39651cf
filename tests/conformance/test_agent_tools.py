"""Agent tools, parent side: the agent_tool() envelope, awaited runs, idempotency, the
concurrency cap, persistence and replay, retention and access control (spec agent-tools §12
groups A, B, C, D, J, M), on the simulated platform with a scripted child."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents_core import Agent, Request, Response
from agents_core.agent_tools.registry import RunAgentToolResult
from agents_core.agent_tools.tool import NOT_IN_TURN, agent_tool, failure_envelope
from agents_core.signals import AbortController
from sim import Simulation
from tests.agent_tools.scripted_child import ScriptedChild
from tests.releases import on_both_releases

QUICK = [["text", "Hello "], ["sleep", 50], ["text", "world"], ["finish", "completed", "all done"]]


def steps_input(steps: list[Any], **extra: Any) -> dict[str, Any]:
    return {"steps": steps, **extra}


class Parent(Agent):
    """A parent that runs scripted children and records its hooks in the trace."""

    async def go(
        self, steps: list[Any], run_id: str | None = None, **options: Any
    ) -> dict[str, Any]:
        result = await self.run_agent_tool(
            ScriptedChild, input=steps_input(steps), run_id=run_id, **options
        )
        return result.to_dict()

    async def go_many(self, scripts: list[list[Any]]) -> list[dict[str, Any]]:
        runs = [
            self.run_agent_tool(ScriptedChild, input=steps_input(s), run_id=f"m{i}")
            for i, s in enumerate(scripts)
        ]
        return [r.to_dict() for r in await self.host.tasks.gather(*runs)]

    async def go_cancelled(self, abort_after_ms: int | None) -> dict[str, Any]:
        controller = AbortController()
        if abort_after_ms is None:
            controller.abort("test abort")
        else:

            async def later() -> None:
                await self.host.clock.sleep(abort_after_ms)
                controller.abort("test abort")

            self.host.tasks.wait_until(later())
        steps = [["text", "a"], ["sleep", 10_000], ["finish", "completed", "late"]]
        result = await self.run_agent_tool(
            ScriptedChild, input=steps_input(steps), run_id="cancel-me", signal=controller.signal
        )
        return result.to_dict()

    async def tool(
        self, result: dict[str, Any] | None, schema: Any = None, **tool_opts: Any
    ) -> Any:
        """Execute an agent_tool whose child is scripted to end with `result`."""
        tool = agent_tool(
            ScriptedChild,
            description="scripted",
            output_schema=schema,
            input_schema={"type": "object"},
            **tool_opts,
        )
        return await tool.execute(steps_input([["finish", *result]]), tool_call_id="call-1")

    async def on_agent_tool_start(self, run) -> None:
        self.host.trace.emit("user:start", runId=run.run_id, status=run.status)

    async def on_agent_tool_finish(self, run, result) -> None:
        self.host.trace.emit("user:finish", runId=run.run_id, status=result.status)


def frames_of(client) -> list[dict[str, Any]]:
    return [f for f in client.frames if f.get("type") == "agent-tool-event"]


# -- A. the agent_tool() envelope -------------------------------------------------------------
def test_T001_interrupted_run_is_retryable_and_keeps_its_error() -> None:
    """An interrupted result maps to a retryable envelope that surfaces its error text."""
    result = RunAgentToolResult("r", "C", "interrupted", error="child reset by deploy")
    assert failure_envelope(result) == {
        "ok": False,
        "status": "interrupted",
        "error": "child reset by deploy",
        "retryable": True,
    }


def test_T002_aborted_run_is_not_retryable(sim: Simulation) -> None:
    """A cancelled child run comes back to the model as a non-retryable aborted envelope."""
    ref = sim.agent(Parent, "p")
    envelope = sim.call(ref, "tool", ["aborted", "stop"])
    assert envelope["ok"] is False and envelope["status"] == "aborted"
    assert envelope["retryable"] is False


def test_T003_error_run_is_not_retryable(sim: Simulation) -> None:
    """A failed child run comes back as a non-retryable error envelope with its message."""
    ref = sim.agent(Parent, "p")
    assert sim.call(ref, "tool", ["error", "boom"]) == {
        "ok": False,
        "status": "error",
        "error": "boom",
        "retryable": False,
    }


def test_T004_completed_run_returns_its_summary_string(sim: Simulation) -> None:
    """Without an output schema the model sees the summary, or an empty string."""
    ref = sim.agent(Parent, "p")
    assert sim.call(ref, "tool", ["completed", "all done"]) == "all done"
    # the same tool call id is the same run: its stored summary comes back
    assert sim.call(ref, "tool", ["completed", "other"]) == "all done"
    assert sim.call(sim.agent(Parent, "q"), "tool", ["completed"]) == ""


def test_T005_structured_output_is_validated_and_returned(sim: Simulation) -> None:
    """With an output schema the validated structured output is returned."""
    ref = sim.agent(Parent, "p")
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "number"}},
        "required": ["answer"],
    }
    assert sim.call(ref, "tool", ["completed", "s", {"answer": 42}], schema) == {"answer": 42}


def test_T005b_invalid_structured_output_raises(sim: Simulation) -> None:
    """Output that fails the schema is a tool execution error, not an envelope."""
    ref = sim.agent(Parent, "p")
    schema = {"type": "object", "properties": {"answer": {"type": "number"}}}
    with pytest.raises(ValueError, match="agent tool output is invalid at answer"):
        sim.call(ref, "tool", ["completed", "s", {"answer": "forty-two"}], schema)


def test_T008_completed_without_output_under_a_schema_is_an_error_envelope(sim: Simulation) -> None:
    """A completed run with no structured output, under an output schema, is a non-retryable
    error envelope."""
    ref = sim.agent(Parent, "p")
    assert sim.call(ref, "tool", ["completed", "s"], {"type": "object"}) == {
        "ok": False,
        "status": "error",
        "retryable": False,
        "error": "agent tool completed without structured output required by outputSchema",
    }


def test_T009_interrupted_without_error_text_uses_the_default_and_keeps_cause() -> None:
    """The default interrupted text is used and reason / childStillRunning are carried."""
    result = RunAgentToolResult(
        "r", "C", "interrupted", reason="no-progress", child_still_running=True
    )
    assert failure_envelope(result) == {
        "ok": False,
        "status": "interrupted",
        "retryable": True,
        "error": "agent tool run was interrupted before it finished; it can be retried",
        "reason": "no-progress",
        "childStillRunning": True,
    }


def test_T010_executing_outside_an_agent_turn_fails() -> None:
    """agent_tool().execute needs an ambient agent and says so."""
    import asyncio  # the tool is driven by hand here, outside any agent

    tool = agent_tool(ScriptedChild, description="d", input_schema={"type": "object"})
    with pytest.raises(RuntimeError, match=r"can only run inside an Agent turn"):
        asyncio.run(tool.execute({}, tool_call_id="x"))
    assert "get_tools()" in NOT_IN_TURN


def test_T011_no_tool_call_id_mints_a_run_id_and_an_unbound_run(sim: Simulation) -> None:
    """Without a tool call id the run gets a fresh 12-char id and no parent tool call id."""

    class Unbound(Parent):
        async def run_tool(self) -> None:
            tool = agent_tool(ScriptedChild, description="d", input_schema={"type": "object"})
            await tool.execute(steps_input(QUICK))

    ref = sim.agent(Unbound, "u")
    sim.call(ref, "run_tool")
    (row,) = sim.query(ref, "SELECT run_id, parent_tool_call_id FROM cf_agent_tool_runs")
    assert len(row["run_id"]) == 12 and row["parent_tool_call_id"] is None


def test_T012_display_name_wins_over_display_name_field(sim: Simulation) -> None:
    """displayName overrides display.name; other display fields are kept."""

    class Displayed(Parent):
        async def run_tool(self) -> None:
            tool = agent_tool(
                ScriptedChild,
                description="d",
                input_schema={"type": "object"},
                display_name="R",
                display={"name": "X", "color": "red"},
            )
            await tool.execute(steps_input(QUICK), tool_call_id="c")

    ref = sim.agent(Displayed, "d")
    sim.call(ref, "run_tool")
    (row,) = sim.query(ref, "SELECT display_metadata FROM cf_agent_tool_runs")
    assert json.loads(row["display_metadata"]) == {"name": "R", "color": "red"}


# -- B. awaited runs ----------------------------------------------------------------------------
def test_T025_abort_signal_mid_run_aborts_with_its_reason(sim: Simulation) -> None:
    """A parent signal aborted mid-run cancels the child and finishes aborted with the reason."""
    ref = sim.agent(Parent, "p")
    assert sim.call(ref, "go_cancelled", 500) == {
        "runId": "cancel-me",
        "agentType": "ScriptedChild",
        "status": "aborted",
        "error": "test abort",
    }
    child = sim.facet(ref, ScriptedChild, "cancel-me")
    assert sim.query(child, "SELECT status FROM child_runs") == [{"status": "aborted"}]


def test_T025b_pre_aborted_signal_still_starts_then_cancels_the_child(sim: Simulation) -> None:
    """An already-aborted signal starts the child, cancels it at once, and finishes aborted@1."""
    ref = sim.agent(Parent, "p")
    client = sim.connect(ref)
    assert sim.call(ref, "go_cancelled", None)["status"] == "aborted"
    kinds = [(f["sequence"], f["event"]["kind"]) for f in frames_of(client)]
    assert kinds == [(0, "started"), (1, "aborted")]


@on_both_releases
def test_T033_child_reset_while_the_parent_lives_is_interrupted_and_retryable(
    sim: Simulation,
) -> None:
    """S6: a child facet reset by a deploy mid-run finishes interrupted and retryable."""
    ref = sim.agent(Parent, "p")
    pending = sim.start_call(
        ref, "go", [["text", "a"], ["sleep", 5_000], ["finish", "completed", "x"]], "r"
    )
    sim.run_for(1_000)
    assert sim.evict(sim.facet(ref, ScriptedChild, "r"), "deploy")
    result = sim.wait(pending)
    assert result["status"] == "interrupted"
    assert "reset (deploy)" in result["error"]
    envelope = failure_envelope(
        RunAgentToolResult("r", "ScriptedChild", "interrupted", error=result["error"])
    )
    assert envelope["retryable"] is True
    assert sim.probes["agent_tool.child_reset_interrupted"] == 1


def test_T035_live_frames_are_started_chunks_then_terminal(sim: Simulation) -> None:
    """A live run broadcasts started@0, chunk@1..N, terminal@N+1, all with its tool call id."""
    ref = sim.agent(Parent, "p")
    client = sim.connect(ref)
    sim.call(ref, "go", QUICK, "r", parent_tool_call_id="tc")
    frames = frames_of(client)
    assert [(f["sequence"], f["event"]["kind"]) for f in frames] == [
        (0, "started"),
        (1, "chunk"),
        (2, "chunk"),
        (3, "finished"),
    ]
    assert {f["parentToolCallId"] for f in frames} == {"tc"}


def test_T036_input_previews(sim: Simulation) -> None:
    """An object input previews as its JSON text; a 600-char string as its first 500 chars."""
    from agents_core.agent_tools.registry import default_input_preview

    assert default_input_preview({"q": "x"}) == '{"q":"x"}'
    assert default_input_preview("y" * 600) == "y" * 500
    assert default_input_preview({"k": "z" * 600}).endswith("...")
    assert len(default_input_preview({"k": "z" * 600})) == 500


@on_both_releases
def test_hooks_fire_once_per_awaited_run_in_order(sim: Simulation) -> None:
    """on_agent_tool_start fires before the started frame and on_agent_tool_finish once (S8)."""
    ref = sim.agent(Parent, "p")
    sim.call(ref, "go", QUICK, "r")
    sim.call(ref, "go", QUICK, "r")  # a re-issue of a finished run fires nothing
    assert [r.get("status") for r in sim.trace.select("user:start")] == ["starting"]
    assert [r.get("status") for r in sim.trace.select("user:finish")] == ["completed"]


# -- C. idempotency -------------------------------------------------------------------------------
def test_T038_completed_run_with_output_is_returned_again_unchanged(sim: Simulation) -> None:
    """Re-issuing a completed run with structured output returns the same result, no child call."""
    ref = sim.agent(Parent, "p")
    steps = [["finish", "completed", "s", {"answer": 42}]]
    first = sim.call(ref, "go", steps, "r")
    assert sim.call(ref, "go", [["finish", "error", "different input"]], "r") == first
    assert first["output"] == {"answer": 42}


def test_T040_terminal_rows_reissued_touch_nothing(sim: Simulation) -> None:
    """An error row re-issued awaited returns its stored result with no frame and no hook."""
    ref = sim.agent(Parent, "p")
    first = sim.call(ref, "go", [["finish", "error", "boom"]], "r")
    client = sim.connect(ref)
    before = len(frames_of(client))
    assert sim.call(ref, "go", QUICK, "r") == first
    assert len(frames_of(client)) == before
    assert len(sim.trace.select("user:finish")) == 1


# -- D. the concurrency cap ----------------------------------------------------------------------
class Capped(Parent):
    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.max_concurrent_agent_tools = 2


def test_T045_over_cap_runs_fail_fast_and_slots_are_reused(sim: Simulation) -> None:
    """With cap 2, the third concurrent run is rejected at once; later, two more both run."""
    ref = sim.agent(Capped, "c")
    results = sim.call(ref, "go_many", [QUICK, QUICK, QUICK])
    assert [r["status"] for r in results] == ["completed", "completed", "error"]
    assert results[2]["error"] == "maxConcurrentAgentTools (2) exceeded"
    again = sim.call(ref, "go_many", [QUICK, QUICK])
    # m0 and m1 are re-issues of finished runs; a fresh batch needs fresh ids
    assert [r["status"] for r in again] == ["completed", "completed"]
    assert sim.probes["agent_tool.cap_rejected"] >= 1


def test_T041_cap_rejection_pins_the_run_id(sim: Simulation) -> None:
    """A cap-rejected run id keeps returning the same error even when slots are free."""
    ref = sim.agent(Capped, "c")
    sim.call(ref, "go_many", [QUICK, QUICK, QUICK])
    assert sim.call(ref, "go", QUICK, "m2") == {
        "runId": "m2",
        "agentType": "ScriptedChild",
        "status": "error",
        "error": "maxConcurrentAgentTools (2) exceeded",
    }


def test_T046_default_cap_is_unlimited(sim: Simulation) -> None:
    """Four concurrent runs all complete by default."""
    ref = sim.agent(Parent, "p")
    assert [r["status"] for r in sim.call(ref, "go_many", [QUICK] * 4)] == ["completed"] * 4


def test_cap_rejection_frames_and_no_hooks(sim: Simulation) -> None:
    """A rejected run broadcasts started@0 and error@1 and calls neither hook."""
    ref = sim.agent(Capped, "c")
    client = sim.connect(ref)
    sim.call(ref, "go_many", [QUICK, QUICK, QUICK])
    rejected = [f for f in frames_of(client) if f["event"]["runId"] == "m2"]
    assert [(f["sequence"], f["event"]["kind"]) for f in rejected] == [(0, "started"), (1, "error")]
    assert [r.get("runId") for r in sim.trace.select("user:start")] == ["m0", "m1"]


# -- J. persistence and replay --------------------------------------------------------------------
def test_T127_replay_alone_reconstructs_a_completed_run(sim: Simulation) -> None:
    """A client that joins after the run gets started, every stored chunk and the terminal."""
    ref = sim.agent(Parent, "p")
    sim.call(ref, "go", QUICK, "r", parent_tool_call_id="tc")
    late = sim.connect(ref)
    frames = frames_of(late)
    assert all(f.get("replay") for f in frames)
    assert [f["event"]["kind"] for f in frames] == ["started", "chunk", "chunk", "finished"]
    bodies = [
        json.loads(f["event"]["body"])["delta"] for f in frames if f["event"]["kind"] == "chunk"
    ]
    assert "".join(bodies) == "Hello world"
    assert frames[-1]["event"]["summary"] == "all done"
    assert sim.probes["agent_tool.replayed_stored_chunks"] >= 1


def test_T129_interrupted_cause_survives_replay(sim: Simulation) -> None:
    """An interrupted run's reason and childStillRunning come back in the replayed terminal."""
    ref = sim.agent(Parent, "p")
    pending = sim.start_call(ref, "go", [["sleep", 5_000], ["finish", "completed", "x"]], "r")
    sim.run_for(100)
    sim.evict(sim.facet(ref, ScriptedChild, "r"), "deploy")
    sim.wait(pending)
    (terminal,) = [f for f in frames_of(sim.connect(ref)) if f["event"]["kind"] == "interrupted"]
    assert terminal["replay"] is True
    assert terminal["event"]["childStillRunning"] is True


@on_both_releases
def test_progress_chunks_are_live_only_and_carry_no_identity(sim: Simulation) -> None:
    """A progress chunk is forwarded live without chunkSequence and is absent from replay;
    a milestone is a stored chunk (S2) and is replayed with its identity (0.32.0's replay then
    sends it again from the child's inspection, without one)."""
    ref = sim.agent(Parent, "p")
    live = sim.connect(ref)
    steps = [
        ["sleep", 10],
        ["progress", {"fraction": 0.5}],
        ["milestone", "half"],
        ["finish", "completed", "x"],
    ]
    sim.call(ref, "go", steps, "r")
    live_chunks = [f["event"] for f in frames_of(live) if f["event"]["kind"] == "chunk"]
    assert [("chunkSequence" in e, json.loads(e["body"])["type"]) for e in live_chunks] == [
        (False, "data-agent-progress"),
        (True, "data-agent-milestone"),
    ]
    replayed = [f["event"] for f in frames_of(sim.connect(ref)) if f["event"]["kind"] == "chunk"]
    again = [] if sim.platform.release == "0.21.0" else [(False, "data-agent-milestone")]
    assert [("chunkSequence" in e, json.loads(e["body"])["type"]) for e in replayed] == [
        (True, "data-agent-milestone"),
        *again,
    ]


# -- M. retention and access control --------------------------------------------------------------
class RoutableChild(ScriptedChild):
    async def on_request(self, request: Request) -> Response:
        return Response(200, f"{self.name}{request.path}")


class Gated(Parent):
    async def go_routable(self, run_id: str) -> None:
        await self.run_agent_tool(RoutableChild, input=steps_input(QUICK), run_id=run_id)

    async def on_before_sub_agent(self, request: Request, class_name: str, name: str) -> Any:
        if not self.has_agent_tool_run(class_name, name):
            return Response(404, "no such run")
        return None


def test_T146_drill_in_is_gated_by_has_agent_tool_run(sim: Simulation) -> None:
    """A drill-in to an unknown run id is refused with 404 before any facet is created."""
    ref = sim.agent(Gated, "g")
    sim.call(ref, "go_routable", "known")
    refused = sim.fetch(ref, Request(path="/sub/RoutableChild/guessed"))
    assert (refused.status, refused.body) == (404, "no such run")
    allowed = sim.fetch(ref, Request(path="/sub/RoutableChild/known/status"))
    assert (allowed.status, allowed.body) == (200, "known/status")
    assert sim.trace.select("incarnation:start", agent="Gated/g/RoutableChild/guessed") == []
    assert sim.probes["agent.sub_agent_request_gated"] >= 1


def test_clear_cancels_running_children_and_is_silent(sim: Simulation) -> None:
    """clear_agent_tool_runs cancels a running child, deletes its facet and row, no frame."""

    class Clearing(Parent):
        async def start_hanging(self) -> None:
            self.host.tasks.wait_until(
                self.run_agent_tool(ScriptedChild, input=steps_input([["hang"]]), run_id="h")
            )

        async def clear(self) -> int:
            return await self.clear_agent_tool_runs()

    ref = sim.agent(Clearing, "c")
    sim.call(ref, "go", QUICK, "done")
    sim.call(ref, "start_hanging")
    sim.run_for(100)
    client = sim.connect(ref)
    before = len(frames_of(client))
    assert sim.call(ref, "clear") == 2
    assert sim.query(ref, "SELECT run_id FROM cf_agent_tool_runs") == []
    assert sim.trace.select("facet:deleted", agent="Clearing/c/ScriptedChild/h")
    sim.run_for(1_000)
    # The settled run "done" is cleared silently; the in-flight awaited "h" still ends (E22).
    late = [(f["event"]["runId"], f["event"]["kind"]) for f in frames_of(client)[before:]]
    assert late == [("h", "aborted")]
    assert not sim.call(ref, "has_agent_tool_run", "ScriptedChild", "done")
    assert sim.probes["agent_tool.clear_cancelled_live_run"] >= 1


class UncancellableChild(ScriptedChild):
    async def cancel_agent_tool_run(self, run_id: str, reason: Any = None) -> None:
        raise RuntimeError("this child cannot be cancelled")


@on_both_releases
def test_clear_deletes_the_facet_of_a_child_whose_cancel_failed(sim: Simulation) -> None:
    """docs/divergences.md A18: clearing a live run whose cancel throws still deletes the child
    facet (the SDK's one try block skips the delete and leaves an orphan facet nothing can clear
    again, still running and holding its keepAlive); the row goes, no frame, no hook."""

    class Clearing(Parent):
        async def start_hanging(self) -> None:
            await self.run_agent_tool(
                UncancellableChild, input=steps_input([["hang"]]), run_id="h", detached=True
            )

        async def clear(self) -> int:
            return await self.clear_agent_tool_runs()

    ref = sim.agent(Clearing, "c")
    sim.call(ref, "start_hanging")
    sim.run_for(100)
    client = sim.connect(ref)
    before = len(frames_of(client))
    assert sim.call(ref, "clear") == 1
    child = "Clearing/c/UncancellableChild/h"
    assert sim.trace.select("facet:deleted", agent=child)
    assert [r.get("reason") for r in sim.trace.select("incarnation:end", agent=child)] == [
        "deleted"
    ]
    assert sim.query(ref, "SELECT run_id FROM cf_agent_tool_runs") == []
    assert sim.quiesce(3_600_000), "the cleared child still keeps the parent busy"
    assert frames_of(client)[before:] == []
    assert sim.trace.select("hook:on_agent_tool_finish", runId="h") == []


@on_both_releases
def test_E22_an_awaited_run_cleared_in_flight_still_ends_with_its_frame_and_hook(
    sim: Simulation,
) -> None:
    """E22 (docs/divergences.md A16): clearing cancels the child of an awaited run whose call
    is still in flight; the call then ends `aborted` with the clear's reason, broadcasts one
    terminal frame and calls on_agent_tool_finish once, although the run has no row any more.
    Nothing fires for it again, and a settled run cleared beside it stays silent."""

    class Clearing(Parent):
        async def start_hanging(self) -> None:
            async def run() -> None:
                result = await self.run_agent_tool(
                    ScriptedChild, input=steps_input([["hang"]]), run_id="h"
                )
                self.host.trace.emit(
                    "user:returned", runId="h", status=result.status, error=result.error
                )

            self.host.tasks.wait_until(run())

        async def clear(self) -> int:
            return await self.clear_agent_tool_runs()

    ref = sim.agent(Clearing, "c")
    sim.call(ref, "go", QUICK, "done")
    sim.call(ref, "start_hanging")
    sim.run_for(100)
    client = sim.connect(ref)
    sim.run_for(100)
    before = len(frames_of(client))
    finishes_before = len(sim.trace.select("user:finish"))
    assert sim.call(ref, "clear") == 2
    sim.run_for(600_000)
    (returned,) = sim.trace.select("user:returned")
    terminal = [f for f in frames_of(client)[before:] if f["event"]["kind"] in ("aborted", "error")]
    assert [f["event"]["runId"] for f in terminal] == ["h"]
    assert (returned.get("status"), returned.get("error")) == ("aborted", "clearing agent tool run")
    assert terminal[0]["event"]["kind"] == "aborted"
    finishes = sim.trace.select("user:finish")[finishes_before:]
    assert [(r.get("runId"), r.get("status")) for r in finishes] == [("h", returned.get("status"))]
    assert len(sim.trace.select("hook:on_agent_tool_finish", runId="h")) == 1
    assert sim.query(ref, "SELECT run_id FROM cf_agent_tool_runs") == []
    assert sim.probes["agent_tool.cleared_awaited_run_finished"] == 1


def test_clearing_a_run_forgets_its_milestone_notes(sim: Simulation) -> None:
    """A cleared run id reused later is not muted by the old run's milestone dedupe notes."""

    class Noting(Parent):
        async def note(self) -> None:
            self.host.kv.put("cf_agents:agent_tool_milestone:r:half", {"state": "delivered"})
            self.host.kv.put("cf_agents:agent_tool_teardown:r", 1)
            self.host.kv.put("cf_agents:agent_tool_milestone:r2:half", {"state": "delivered"})

        async def clear(self) -> int:
            return await self.clear_agent_tool_runs()

        async def keys(self) -> list[str]:
            return sorted(self.host.kv.list("cf_agents:agent_tool_"))

    ref = sim.agent(Noting, "n")
    sim.call(ref, "go", QUICK, "r")
    sim.call(ref, "note")
    assert sim.call(ref, "clear") == 1
    assert sim.call(ref, "keys") == ["cf_agents:agent_tool_milestone:r2:half"]


class SlowHook(Parent):
    async def on_agent_tool_finish(self, run, result) -> None:
        self.host.trace.emit("user:finish_begin", runId=run.run_id, status=result.status)
        await self.host.clock.sleep(10_000)
        self.host.trace.emit("user:finish_end", runId=run.run_id, status=result.status)


@on_both_releases
def test_S8_awaited_hook_killed_mid_delivery_is_delivered_again_after_the_lease(
    sim: Simulation,
) -> None:
    """S8: a parent that dies inside on_agent_tool_finish gets the hook again after restart,
    once the 60 s claim lease has passed, and then never again."""
    ref = sim.agent(SlowHook, "p")
    sim.start_call(ref, "go", QUICK, "r")
    sim.run_until(5_000)
    assert [r.get("status") for r in sim.trace.select("user:finish_begin")] == ["completed"]
    sim.deploy()
    sim.agent(SlowHook, "p")  # wakes with startup: the redelivery is armed
    sim.run_for(120_000)
    begins = sim.trace.select("user:finish_begin")
    assert len(begins) == 2 and begins[1].t_ms >= begins[0].t_ms + 60_000
    assert len(sim.trace.select("user:finish_end")) == 1
    assert len(sim.trace.select("hook:delivered", runId="r")) == 1
    sim.run_for(600_000)
    assert len(sim.trace.select("user:finish_begin")) == 2
    assert sim.probes["ledger.awaited_redelivery_armed"] == 1
    assert sim.probes["ledger.dead_claim_reclaimed"] == 1


class SlowFirstHook(Parent):
    """Its finish hook takes 100 s in the first incarnation (long enough to be killed in it)
    and returns at once in later ones."""

    async def on_agent_tool_finish(self, run, result) -> None:
        self.host.trace.emit("user:finish_begin", runId=run.run_id, status=result.status)
        if self.host.incarnation_number == 1:
            await self.host.clock.sleep(100_000)
        self.host.trace.emit("user:finish_end", runId=run.run_id, status=result.status)


@on_both_releases
def test_S8_claims_of_a_dead_incarnation_that_expire_apart_are_each_delivered_again(
    sim: Simulation,
) -> None:
    """S8: two awaited hooks were claimed 30 s apart by an incarnation that died in both. The
    redelivery that startup arms for the first claim's lease finds the second still leased and
    schedules itself again, so the second is delivered too once its own lease expires."""
    ref = sim.agent(SlowFirstHook, "p")
    sim.start_call(ref, "go", QUICK, "a")
    sim.start_call(ref, "go", [["sleep", 30_000], ["finish", "completed", "b done"]], "b")
    sim.run_until(40_000)
    assert [r.get("runId") for r in sim.trace.select("user:finish_begin")] == ["a", "b"]
    sim.deploy()
    sim.run_until(45_000)
    sim.agent(SlowFirstHook, "p")  # wakes with startup: the redelivery is armed
    sim.run_for(120_000)
    ends = [(r.get("runId"), r.t_ms // 1000) for r in sim.trace.select("user:finish_end")]
    assert [run for run, _ in ends] == ["a", "b"]
    assert ends[1][1] >= 90  # b's claim, at 30 s, left its lease at 90 s
    for run_id in ("a", "b"):
        assert len(sim.trace.select("hook:delivered", runId=run_id)) == 1
    assert sim.probes["ledger.awaited_redelivery_rearmed"] == 1


@on_both_releases
def test_S8_a_failed_terminal_write_gives_the_claim_back_and_the_error_finish_is_delivered(
    sim: Simulation,
) -> None:
    """S8: when writing the terminal row fails right after the finish slot was claimed, no
    handler has run; the claim is given back, so the run's `error` finish (the SDK's rule for
    any failure while finishing) delivers the hook once, at once, in the same incarnation."""
    ref = sim.agent(Parent, "p")
    sim.arm_storage_fault(ref, "error", match=r"^UPDATE cf_agent_tool_runs SET status = \?")
    result = sim.call(ref, "go", QUICK, "r")
    assert result["status"] == "error"
    assert "injected storage fault" in result["error"]
    assert [r.get("status") for r in sim.trace.select("user:finish")] == ["error"]
    assert [r.get("status") for r in sim.trace.select("hook:delivered", runId="r")] == ["error"]
    (row,) = sim.query(ref, "SELECT status, finish_delivered_at FROM cf_agent_tool_runs")
    assert row["status"] == "error" and row["finish_delivered_at"] is not None
    assert sim.probes["ledger.unused_claim_released"] == 1


class HangingStart(ScriptedChild):
    async def on_start(self) -> None:
        await self.host.tasks.deferred()  # a facet whose startup never finishes


def test_replay_does_not_hang_on_a_child_that_never_starts(sim: Simulation) -> None:
    """A client connecting while a child facet's startup hangs still connects within the
    recovery timeout, with the run's started and terminal frames (no chunks)."""

    class P(Parent):
        async def seed_row(self) -> None:
            now = self.host.clock.now_ms()
            self._tools.admission.insert(
                "h", "HangingStart", None, 0, "x", None, now, None, status="error", error="boom"
            )
            # The child facet exists, but its startup never finishes.
            self.host.tasks.wait_until(self.sub_agent(HangingStart, "h"))

    ref = sim.agent(P, "p")
    sim.call(ref, "seed_row")
    sim.run_for(10)
    started = sim.now_ms
    client = sim.connect(ref)
    assert sim.now_ms - started <= 2_000
    kinds = [f["event"]["kind"] for f in frames_of(client)]
    assert kinds == ["started", "error"]


class Detacher(Parent):
    async def detach(self) -> None:
        from tests.conformance.test_reattach import ResumingChild

        steps = [["sleep", 30_000], ["finish", "completed", "late"]]
        resume = [["sleep", 1_000], ["finish", "completed", "resumed"]]
        await self.run_agent_tool(
            ResumingChild, input={"steps": steps, "resume": resume}, run_id="d", detached=True
        )


@on_both_releases
def test_S8_startup_rearms_a_lost_backbone_while_a_detached_finish_is_owed(
    sim: Simulation,
) -> None:
    """S8: with the alarm gone (the platform gave it up) and a detached finish owed, the next
    startup re-arms the backbone, and the finish is delivered once."""
    ref = sim.agent(Detacher, "p")
    sim.call(ref, "detach")
    sim.run_for(1_000)
    sim.deploy()
    record = sim.platform.records[ref.path]
    sim.platform.alarms.delete(record)  # as after alarm:given_up: the slot is empty
    sim.run_for(300_000)
    assert sim.trace.select("hook:delivered", runId="d") == []
    sim.agent(Detacher, "p")  # any startup
    sim.run_for(300_000)
    assert len(sim.trace.select("hook:delivered", runId="d")) == 1
    assert sim.probes["agent_tool.startup_found_owed_detached_finish"] >= 1


def test_T087_base_agent_report_progress_is_a_no_op_with_a_warning(sim: Simulation) -> None:
    """On a plain Agent, report_progress broadcasts and stores nothing; it only warns."""

    class Plain(Parent):
        async def progress(self) -> None:
            self.report_progress(fraction=0.5, message="half")

    ref = sim.agent(Plain, "p")
    client = sim.connect(ref)
    before = (len(client.frames), sim.snapshot(ref))
    sim.call(ref, "progress")
    assert (len(client.frames), sim.snapshot(ref)) == before
    (warning,) = sim.trace.select("console:warn", agent=ref.path)
    assert "only supported on chat agents" in warning.get("message")
