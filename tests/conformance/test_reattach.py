"""Catalogue group I (spec agent-tools §12.I): a parent restarted while its awaited agent-tool runs
were in flight recovers them at startup and re-attaches to the children still running (§7).

A deploy kills the parent and its child facets together, so a child that must keep going after
the restart is a `ResumingChild`: its `on_start` drives the `resume` script of every run it has
not finished (a facet starts when its parent resolves it, i.e. during the parent's recovery).
The parent keeps a durable log of the frames it broadcast and of the hooks it ran, so that tests
see them without a client and across incarnations.
"""

from __future__ import annotations

import json
import math
from typing import Any

from agents_core import Agent
from agents_core.agent_tools.backbone import DetachedBackbone
from agents_core.chat import ChatAgent
from sim import Simulation
from sim.model import ScriptedModel
from sim.model import text as model_text
from sim.simulation import AgentRef
from tests.agent_tools.scripted_child import NoTailChild, ScriptedChild
from tests.releases import on_both_releases

pytestmark = on_both_releases  # divergences A3 and A4 hold on both releases

NO_PROGRESS = (
    "Agent tool run was still running but made no forward progress within the re-attach "
    "no-progress budget; the parent gave up."
)
WINDOW_EXCEEDED = (
    "Agent tool run did not reach a terminal result within the maximum re-attach window; "
    "the parent gave up."
)
NOT_TAILABLE = (
    "Agent tool run was still running, but live-tail reattachment is not supported in this runtime."
)
INSPECT_TIMEOUT = "Agent tool run inspection timed out during parent recovery."
INSPECT_FAILED = "Agent tool run could not be inspected during parent recovery."
RECOVERY_DEADLINE = "Agent tool run recovery deadline exceeded."
STILL_RUNNING = "Agent tool run was still running and did not reach a terminal result."

HANG = [["hang"]]


# -- children ------------------------------------------------------------------------------------
class ResumingChild(ScriptedChild):
    """A scripted child that picks an unfinished run up again when its facet restarts: it then
    drives `input["resume"]`. Extra step `["close-tails"]` closes the run's live tails without
    finishing it (a clean mid-flight close). Table `drives` counts turn starts and resumes."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql("CREATE TABLE IF NOT EXISTS resume_scripts (run_id TEXT PRIMARY KEY, steps TEXT)")
        self.sql("CREATE TABLE IF NOT EXISTS drives (run_id TEXT, kind TEXT, at INTEGER)")

    async def start_agent_tool_run(self, input: Any, run_id: str) -> dict[str, Any]:
        fresh = await self.inspect_agent_tool_run(run_id) is None
        out = await super().start_agent_tool_run(input, run_id)
        if fresh:
            resume = (input or {}).get("resume", [])
            self.sql("INSERT INTO resume_scripts VALUES (?, ?)", run_id, json.dumps(resume))
            self.sql("INSERT INTO drives VALUES (?, 'start', ?)", run_id, self.host.clock.now_ms())
        return out

    async def on_start(self) -> None:
        for row in self.sql(
            "SELECT s.run_id, s.steps FROM resume_scripts s JOIN child_runs r USING (run_id) "
            "WHERE r.completed_at IS NULL ORDER BY s.run_id"
        ):
            run_id, steps = row["run_id"], json.loads(row["steps"])
            self.sql("INSERT INTO drives VALUES (?, 'resume', ?)", run_id, self.host.clock.now_ms())
            self.host.tasks.wait_until(
                self.keep_alive_while(lambda r=run_id, s=steps: self._drive(r, s))
            )

    async def _drive(self, run_id: str, steps: list[Any]) -> None:
        for step in steps:
            if await self._is_terminal(run_id):
                return
            if step[0] == "close-tails":
                for tail_id, tail in list(self._tails.items()):
                    if tail["run_id"] == run_id:
                        await self.close_agent_tool_tail(tail_id)
            else:
                await super()._drive(run_id, [step])


class StuckStartChild(ResumingChild):
    """A child whose facet startup never completes once it has an unfinished run (a restart)."""

    async def on_start(self) -> None:
        if self.sql("SELECT 1 AS x FROM child_runs WHERE completed_at IS NULL"):
            await self.host.tasks.deferred()


class BrokenTailChild(ResumingChild):
    """A child that has the tail method but cannot tail (the call throws)."""

    async def open_agent_tool_tail(self, run_id: str, after_sequence: int = -1) -> str:
        raise RuntimeError("tail is broken")


CHILDREN = {
    cls.__name__: cls for cls in (ScriptedChild, ResumingChild, StuckStartChild, BrokenTailChild)
}
CHILDREN["NoTailChild"] = NoTailChild


# -- the parent ----------------------------------------------------------------------------------
class Parent(Agent):
    """A plain parent: runs children awaited, and logs frames and hooks durably."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql(
            "CREATE TABLE IF NOT EXISTS frames_log (n INTEGER PRIMARY KEY AUTOINCREMENT, "
            "t INTEGER, frame TEXT)"
        )
        self.sql(
            "CREATE TABLE IF NOT EXISTS events_log (n INTEGER PRIMARY KEY AUTOINCREMENT, "
            "t INTEGER, what TEXT)"
        )

    def note(self, what: str) -> None:
        self.sql("INSERT INTO events_log (t, what) VALUES (?, ?)", self.host.clock.now_ms(), what)
        self.host.trace.emit("test:note", what=what)

    def broadcast(self, frame: Any, exclude: tuple[str, ...] = ()) -> None:
        self.sql(
            "INSERT INTO frames_log (t, frame) VALUES (?, ?)",
            self.host.clock.now_ms(),
            json.dumps(frame, sort_keys=True),
        )
        super().broadcast(frame, exclude)

    async def on_agent_tool_finish(self, run: Any, result: Any) -> None:
        self.note(f"finish:{run.run_id}:{result.status}")

    def on_error(self, error: BaseException) -> None:
        self.note(f"on_error:{error}")

    def schedule_recovery_again(self) -> str:
        """Ask for recovery twice more: 'same' while one is pending, 'none' once it is over."""
        first = self._tools.sweep.schedule()
        if first is None:
            return "none"
        return "same" if first is self._tools.sweep.schedule() else "different"

    async def go(
        self, child: str, run_id: str, steps: list[Any], resume: list[Any] | None = None
    ) -> dict[str, Any]:
        """Run a child awaited (the parent's live view of it)."""
        result = await self.run_agent_tool(
            CHILDREN[child], input={"steps": steps, "resume": resume or []}, run_id=run_id
        )
        return result.to_dict()

    async def begin(
        self, child: str, run_id: str, steps: list[Any], resume: list[Any] | None = None
    ) -> None:
        """Dispatch a run and start its child, but never tail it (the parent 'dies' here)."""
        self.insert_row(run_id, child, "starting")
        stub = await self.sub_agent(CHILDREN[child], run_id)
        await stub.call("start_agent_tool_run", {"steps": steps, "resume": resume or []}, run_id)
        self.sql("UPDATE cf_agent_tool_runs SET status = 'running' WHERE run_id = ?", run_id)

    def insert_row(
        self, run_id: str, agent_type: str, status: str = "running", detached: int = 0
    ) -> None:
        """A registry row as a dispatch leaves it (its child may not exist)."""
        self.sql(
            "INSERT INTO cf_agent_tool_runs (run_id, agent_type, status, started_at, detached) "
            "VALUES (?, ?, ?, ?, ?)",
            run_id,
            agent_type,
            status,
            self.host.clock.now_ms(),
            detached,
        )


def parent_with(**options: Any) -> type[Parent]:
    """A Parent subclass with these static options (one class per test: options are cached)."""
    return type("OptionsParent", (Parent,), {"options": options})


# -- driving -------------------------------------------------------------------------------------
def dispatch(
    sim: Simulation,
    parent: AgentRef,
    run_id: str,
    steps: list[Any],
    resume: list[Any] | None = None,
    child: type = ResumingChild,
) -> None:
    """Start an awaited run (its caller will die with the parent)."""
    sim.start_call(parent, "go", child.__name__, run_id, steps, resume)


def restart(sim: Simulation, parent: AgentRef, *, after_ms: int = 100) -> int:
    """Let the runs go for `after_ms`, deploy, and wake the parent (startup runs recovery).
    Returns the wake time."""
    sim.run_for(after_ms)
    sim.deploy()
    sim.run_for(10)
    sim.agent(parent.cls, parent.name)
    return sim.now_ms


def row_of(sim: Simulation, parent: AgentRef, run_id: str) -> dict[str, Any]:
    return sim.query(parent, "SELECT * FROM cf_agent_tool_runs WHERE run_id = ?", run_id)[0]


def frames_of(
    sim: Simulation, parent: AgentRef, run_id: str, since_ms: int = 0
) -> list[dict[str, Any]]:
    rows = sim.query(parent, "SELECT t, frame FROM frames_log ORDER BY n")
    frames = [json.loads(r["frame"]) for r in rows if r["t"] >= since_ms]
    return [f for f in frames if f.get("event", {}).get("runId") == run_id]


def notes(sim: Simulation, parent: AgentRef) -> list[str]:
    return [r["what"] for r in sim.query(parent, "SELECT what FROM events_log ORDER BY n")]


def child_ref(sim: Simulation, parent: AgentRef, cls: type, run_id: str) -> AgentRef:
    return sim.facet(parent, cls, run_id)


def tail_opens(sim: Simulation, child: AgentRef, since_ms: int) -> int:
    records = sim.trace.select("rpc", agent=child.path, method="open_agent_tool_tail")
    return len([r for r in records if r.t_ms >= since_ms])


def event_of(sim: Simulation, event: str, **fields: Any) -> Any:
    records = sim.trace.select(event, **fields)
    assert len(records) == 1, f"expected one {event} {fields}, got {records}"
    return records[0]


def texts(frames: list[dict[str, Any]]) -> list[str]:
    return [
        json.loads(f["event"]["body"]).get("delta") for f in frames if f["event"]["kind"] == "chunk"
    ]


# -- the catalogue -------------------------------------------------------------------------------
def test_T103_still_running_child_completes_within_budget(sim: Simulation) -> None:
    """A child still running at restart that completes within the budget finalizes `completed`
    and the run's last frame is `finished`."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=1_000)
    p = sim.agent(cls, "p")
    dispatch(
        sim,
        p,
        "r",
        [["text", "a"], ["text", "b"], *HANG],
        [["sleep", 300], ["text", "c"], ["finish", "completed", "done"]],
    )
    woke = restart(sim, p)
    sim.run_for(2_000)

    row = row_of(sim, p, "r")
    assert (row["status"], row["summary"], row["interrupted_reason"]) == ("completed", "done", None)
    frames = frames_of(sim, p, "r", since_ms=woke)
    # Only the chunk newer than the child's stored ones is forwarded; replay covers a and b.
    assert texts(frames) == ["c"]
    assert frames[-1]["event"] == {"kind": "finished", "runId": "r", "summary": "done"}
    # 0.21.0 numbers a re-attach's frames from 1; 0.32.0 on from the two stored chunks.
    first = 1 if sim.platform.release == "0.21.0" else 3
    assert [f["sequence"] for f in frames] == [first, first + 1]
    assert notes(sim, p) == ["finish:r:completed"]
    event_of(
        sim, "agent_tool:recovery:reattach", runId="r", agentType="ResumingChild", budgetMs=1_000
    )
    assert sim.probes["agent_tool.recovery_reattached"] == 1


def test_T104_silent_tailable_child_sealed_no_progress(sim: Simulation) -> None:
    """A tailable child that never terminates is sealed `interrupted`/`no-progress` one budget
    after the re-attach, still running, with the exact prose."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=200)
    p = sim.agent(cls, "p")
    dispatch(sim, p, "r", [["text", "a"], *HANG], HANG)
    woke = restart(sim, p)
    sim.run_for(5_000)

    row = row_of(sim, p, "r")
    assert row["status"] == "interrupted"
    assert (row["interrupted_reason"], row["child_still_running"]) == ("no-progress", 1)
    assert row["error_message"] == NO_PROGRESS
    assert row["completed_at"] - woke <= 5_000
    reattached = event_of(sim, "agent_tool:recovery:reattach", runId="r")
    assert row["completed_at"] == reattached.t_ms + 200
    terminal = frames_of(sim, p, "r", since_ms=woke)[-1]["event"]
    assert terminal == {
        "kind": "interrupted",
        "runId": "r",
        "error": NO_PROGRESS,
        "reason": "no-progress",
        "childStillRunning": True,
    }
    child = child_ref(sim, p, ResumingChild, "r")
    assert sim.query(child, "SELECT status FROM child_runs")[0]["status"] == "running"
    row_event = event_of(sim, "agent_tool:recovery:row", runId="r")
    assert row_event.get("reason") == NO_PROGRESS and row_event.get("status") == "interrupted"


def test_T105_ceiling_tears_the_child_down(sim: Simulation) -> None:
    """With a 5 s budget and a 200 ms ceiling the run is sealed `window-exceeded`, the child
    is cancelled and `child_still_running` is false."""
    cls = parent_with(
        agent_tool_reattach_no_progress_timeout_ms=5_000, agent_tool_reattach_max_window_ms=200
    )
    p = sim.agent(cls, "p")
    dispatch(sim, p, "r", [["text", "a"], *HANG], HANG)
    restart(sim, p)
    sim.run_for(1_000)

    row = row_of(sim, p, "r")
    assert (row["status"], row["interrupted_reason"]) == ("interrupted", "window-exceeded")
    assert row["child_still_running"] == 0
    assert row["error_message"] == WINDOW_EXCEEDED
    reattached = event_of(sim, "agent_tool:recovery:reattach", runId="r")
    assert row["completed_at"] == reattached.t_ms + 200
    child = sim.query(child_ref(sim, p, ResumingChild, "r"), "SELECT status, error FROM child_runs")
    assert child == [
        {
            "status": "aborted",
            "error": "agent tool run given up by parent recovery: window-exceeded",
        }
    ]
    assert sim.probes["agent_tool.reattach_window_exceeded"] == 1


def test_T106_rearms_after_a_clean_close_with_progress(sim: Simulation) -> None:
    """A tail that forwards two chunks then closes while the child still runs is opened again,
    and the second tail follows the child to `completed`: two tail attempts."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=1_000)
    p = sim.agent(cls, "p")
    resume = [
        ["sleep", 100],
        ["text", "c"],
        ["text", "d"],
        ["sleep", 10],
        ["close-tails"],
        ["sleep", 100],
        ["text", "e"],
        ["finish", "completed", "done"],
    ]
    dispatch(sim, p, "r", [["text", "a"], ["text", "b"], *HANG], resume)
    woke = restart(sim, p)
    sim.run_for(2_000)

    assert row_of(sim, p, "r")["status"] == "completed"
    assert tail_opens(sim, child_ref(sim, p, ResumingChild, "r"), since_ms=woke) == 2
    assert texts(frames_of(sim, p, "r", since_ms=woke)) == ["c", "d", "e"]
    assert sim.probes["agent_tool.reattach_rearmed"] >= 1


def test_T107_no_rearm_after_a_full_silent_window(sim: Simulation) -> None:
    """A tail that forwards two chunks and then stays silent past the budget ends the
    re-attach with `no-progress` after one tail attempt."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=50)
    p = sim.agent(cls, "p")
    dispatch(
        sim, p, "r", [["text", "a"], *HANG], [["sleep", 10], ["text", "c"], ["text", "d"], *HANG]
    )
    woke = restart(sim, p)
    sim.run_for(1_000)

    row = row_of(sim, p, "r")
    assert (row["interrupted_reason"], row["child_still_running"]) == ("no-progress", 1)
    assert tail_opens(sim, child_ref(sim, p, ResumingChild, "r"), since_ms=woke) == 1
    assert texts(frames_of(sim, p, "r", since_ms=woke)) == ["c", "d"]


def test_T109_adapter_without_tail_is_not_tailable(sim: Simulation) -> None:
    """An adapter without a live tail is never re-attached: recovery seals the run
    `not-tailable` (child still running) after sending its stored chunks, with no reattach
    event; a re-issue of such a run reports `not-tailable` too."""
    p = sim.agent(Parent, "p")
    sim.call(p, "begin", "NoTailChild", "r", [["text", "a"], *HANG])
    woke = restart(sim, p)
    sim.run_for(1_000)

    row = row_of(sim, p, "r")
    assert (row["status"], row["interrupted_reason"]) == ("interrupted", "not-tailable")
    assert (row["child_still_running"], row["error_message"]) == (1, NOT_TAILABLE)
    assert sim.trace.select("agent_tool:recovery:reattach") == []
    frames = frames_of(sim, p, "r", since_ms=woke)
    assert [(f["sequence"], f["event"]["kind"]) for f in frames] == [
        (1, "chunk"),
        (2, "interrupted"),
    ]

    result = sim.call(p, "go", "NoTailChild", "r", [])
    assert result == {
        "runId": "r",
        "agentType": "NoTailChild",
        "status": "interrupted",
        "error": NOT_TAILABLE,
        "reason": "not-tailable",
        "childStillRunning": True,
    }
    assert sim.trace.select("agent_tool:recovery:reattach") == []


def test_T110_static_options_set_the_reattach_budgets(sim: Simulation) -> None:
    """Static options 4242 / 54321 are the no-progress budget and the ceiling of recovery;
    without options they are 120000 and no ceiling."""
    cls = parent_with(
        agent_tool_reattach_no_progress_timeout_ms=4242, agent_tool_reattach_max_window_ms=54321
    )
    p = sim.agent(cls, "p")
    chatty = [step for _ in range(70) for step in (["sleep", 1_000], ["text", "."])]
    dispatch(sim, p, "silent", [["text", "a"], *HANG], HANG)
    dispatch(sim, p, "chatty", [["text", "a"], *HANG], chatty)
    restart(sim, p)
    sim.run_for(60_000)

    silent = row_of(sim, p, "silent")
    started = event_of(sim, "agent_tool:recovery:reattach", runId="silent")
    assert started.get("budgetMs") == 4242
    assert silent["interrupted_reason"] == "no-progress"
    assert silent["completed_at"] == started.t_ms + 4242
    capped = row_of(sim, p, "chatty")
    started = event_of(sim, "agent_tool:recovery:reattach", runId="chatty")
    assert capped["interrupted_reason"] == "window-exceeded"
    assert capped["completed_at"] == started.t_ms + 54321

    plain = sim.agent(Parent, "defaults")
    sim.run_for(1)
    no_progress_ms, max_window_ms = sim.instance_of(plain)._tools.reattach.budgets()
    assert no_progress_ms == 120_000 and not math.isfinite(max_window_ms)


def test_T111_hung_child_does_not_starve_a_sibling(sim: Simulation) -> None:
    """Children are re-attached in parallel: a fast child started after a hung one completes
    while the hung one is still being waited for, and the hung one is then interrupted."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=1_000)
    p = sim.agent(cls, "p")
    dispatch(sim, p, "hung", [["text", "a"], *HANG], HANG)
    sim.run_for(5)
    dispatch(
        sim,
        p,
        "fast",
        [["text", "a"], *HANG],
        [["sleep", 100], ["text", "b"], ["finish", "completed", "fast done"]],
    )
    woke = restart(sim, p)
    sim.run_for(500)
    assert row_of(sim, p, "fast")["status"] == "completed"
    assert row_of(sim, p, "hung")["status"] == "running"

    sim.run_for(2_000)
    hung, fast = row_of(sim, p, "hung"), row_of(sim, p, "fast")
    assert (hung["status"], hung["interrupted_reason"]) == ("interrupted", "no-progress")
    assert fast["completed_at"] < woke + 500 < hung["completed_at"]
    # The hooks are deferred until the whole sweep is over, then run in finalize order.
    complete = event_of(sim, "agent_tool:recovery:complete")
    assert complete.t_ms == hung["completed_at"]
    hooks = sim.trace.select("test:note")
    assert [h.get("what") for h in hooks] == ["finish:fast:completed", "finish:hung:interrupted"]
    assert all(h.seq > complete.seq for h in hooks)


class QuickInspectParent(Parent):
    _agent_tool_recovery_timeout_ms = 10


def test_T112_hung_facet_start_times_the_inspection_out(sim: Simulation) -> None:
    """A child whose facet startup never completes is sealed `inspect-timeout` within the 10 ms
    inspection timeout, with the exact prose and a matching terminal frame."""
    p = sim.agent(QuickInspectParent, "p")
    dispatch(sim, p, "r", [["text", "a"], *HANG], child=StuckStartChild)
    woke = restart(sim, p)
    sim.run_for(1_000)

    row = row_of(sim, p, "r")
    assert (row["status"], row["interrupted_reason"]) == ("interrupted", "inspect-timeout")
    assert row["error_message"] == INSPECT_TIMEOUT and row["child_still_running"] is None
    assert row["completed_at"] - woke <= 1_000
    frames = frames_of(sim, p, "r", since_ms=woke)
    assert frames == [
        {
            "type": "agent-tool-event",
            "sequence": 1,
            "event": {
                "kind": "interrupted",
                "runId": "r",
                "error": INSPECT_TIMEOUT,
                "reason": "inspect-timeout",
            },
        }
    ]
    assert sim.probes["agent_tool.recovery_inspect_failed"] == 1


def test_T113_uninspectable_child_is_interrupted_and_hooked(sim: Simulation) -> None:
    """A row whose child class cannot be resolved is sealed `inspect-failed`, with the recovery
    lifecycle events, and its finish hook runs once after the sweep."""
    p = sim.agent(Parent, "p")
    sim.call(p, "insert_row", "ghost", "GhostChild")
    restart(sim, p, after_ms=0)
    sim.run_for(100)

    row = row_of(sim, p, "ghost")
    assert (row["status"], row["interrupted_reason"]) == ("interrupted", "inspect-failed")
    assert row["error_message"] == INSPECT_FAILED
    begin = event_of(sim, "agent_tool:recovery:begin")
    assert (begin.get("runCount"), begin.get("totalTimeoutMs")) == (1, 5_000)
    row_event = event_of(sim, "agent_tool:recovery:row", runId="ghost")
    assert row_event.get("agentType") == "GhostChild"
    assert (row_event.get("status"), row_event.get("reason")) == ("interrupted", INSPECT_FAILED)
    assert row_event.get("elapsedMs") == 0
    complete = event_of(sim, "agent_tool:recovery:complete")
    assert complete.get("runCount") == 1
    assert notes(sim, p) == ["finish:ghost:interrupted"]
    assert event_of(sim, "test:note").seq > complete.seq > row_event.seq > begin.seq


class StartupWorkParent(Parent):
    """Creates a live row of its own in on_start (once a stale row exists)."""

    options = {"agent_tool_reattach_no_progress_timeout_ms": 200}

    async def on_start(self) -> None:
        self.note("on-start")
        if self._tools.store.read("stale") and not self._tools.store.read("fresh"):
            self.insert_row("fresh", "ResumingChild")
        self.note("after-on-start")


def test_T116_rows_created_during_on_start_are_left_alone(sim: Simulation) -> None:
    """Only rows live before startup began are recovered; a row created by on_start is not."""
    p = sim.agent(StartupWorkParent, "p")
    dispatch(sim, p, "stale", [["text", "a"], *HANG])
    restart(sim, p)
    sim.run_for(1_000)

    assert row_of(sim, p, "stale")["status"] == "interrupted"
    assert row_of(sim, p, "fresh")["status"] == "running"
    assert frames_of(sim, p, "fresh") == []
    assert event_of(sim, "agent_tool:recovery:begin").get("runCount") == 1


class FlakyStartParent(Parent):
    """on_start fails while the KV flag `fail_start` is set."""

    async def on_start(self) -> None:
        if self.host.kv.get("fail_start"):
            self.note("on-start-failed")
            raise RuntimeError("startup work failed")
        self.note("after-on-start")

    def set_fail_start(self, value: bool) -> None:
        self.host.kv.put("fail_start", value)


def test_T117_finish_hooks_wait_for_startup(sim: Simulation) -> None:
    """Recovered finish hooks run only after on_start has returned; when on_start fails, no
    recovery is scheduled (no frame, no hook) until a later startup succeeds."""
    p = sim.agent(FlakyStartParent, "p")
    sim.call(p, "insert_row", "ghost", "GhostChild")
    sim.call(p, "set_fail_start", True)
    restart(sim, p, after_ms=0)
    sim.run_for(1_000)
    assert notes(sim, p)[-1] == "on-start-failed"
    assert row_of(sim, p, "ghost")["status"] == "running"
    assert frames_of(sim, p, "ghost") == []
    assert sim.trace.select("agent_tool:recovery:*") == []

    sim.call(p, "set_fail_start", False)  # a plain RPC: no startup
    sim.evict(p)
    sim.agent(FlakyStartParent, "p")
    sim.run_for(1_000)
    log = notes(sim, p)
    assert log[-2:] == ["after-on-start", "finish:ghost:interrupted"]
    assert log.count("finish:ghost:interrupted") == 1


def test_T119_rows_past_the_deadline_are_sealed_recovery_deadline(sim: Simulation) -> None:
    """Rows reached after the 5 s pass-1 deadline are sealed `recovery-deadline` without an
    inspection and without `child_still_running`, each with a deadline event."""
    p = sim.agent(Parent, "p")
    for index in range(4):
        dispatch(sim, p, f"r{index}", [["text", "a"], *HANG], child=StuckStartChild)
        sim.run_for(1)
    woke = restart(sim, p)
    sim.run_for(10_000)

    reasons = [row_of(sim, p, f"r{i}")["interrupted_reason"] for i in range(4)]
    assert reasons == ["inspect-timeout"] * 3 + ["recovery-deadline"]
    last = row_of(sim, p, "r3")
    assert (last["error_message"], last["child_still_running"]) == (RECOVERY_DEADLINE, None)
    assert [row_of(sim, p, f"r{i}")["completed_at"] - woke for i in range(4)] == [
        2_000,
        4_000,
        5_000,
        5_000,
    ]
    deadline = event_of(sim, "agent_tool:recovery:deadline")
    assert (deadline.get("runId"), deadline.get("agentType")) == ("r3", "StuckStartChild")
    assert deadline.get("elapsedMs") == 5_000
    assert frames_of(sim, p, "r3", since_ms=woke) == [
        {
            "type": "agent-tool-event",
            "sequence": 1,
            "event": {
                "kind": "interrupted",
                "runId": "r3",
                "error": RECOVERY_DEADLINE,
                "reason": "recovery-deadline",
            },
        }
    ]
    assert sim.probes["agent_tool.recovery_deadline"] >= 1


class SpiedBackbone(DetachedBackbone):
    """The backbone, noting on its parent each time it is armed."""

    __slots__ = ()

    async def arm(self, *, reset_cadence: bool) -> None:
        parent: Any = self._agent
        parent.note(f"arm-backbone:reset={reset_cadence}")
        await super().arm(reset_cadence=reset_cadence)


class BackboneSpyParent(Parent):
    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self._tools.backbone.__class__ = SpiedBackbone


def test_T120_detached_rows_are_left_to_the_backbone(sim: Simulation) -> None:
    """A detached row live at wake is not sealed by recovery, and the backbone is re-armed
    without a cadence reset."""
    p = sim.agent(BackboneSpyParent, "p")
    sim.call(p, "insert_row", "bg", "ResumingChild", "running", 1)
    restart(sim, p, after_ms=0)
    sim.run_for(100)

    assert row_of(sim, p, "bg")["status"] == "running"
    assert frames_of(sim, p, "bg") == []
    assert event_of(sim, "agent_tool:recovery:begin").get("runCount") == 0
    assert notes(sim, p) == ["arm-backbone:reset=False"]


def test_T121_zero_budget_collects_once_without_a_tail(sim: Simulation) -> None:
    """With a 0 no-progress budget the re-attach never tails: a child still running is sealed
    `no-progress` at once."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=0)
    p = sim.agent(cls, "p")
    dispatch(sim, p, "r", [["text", "a"], *HANG], [["sleep", 100], ["finish", "completed", "x"]])
    woke = restart(sim, p)
    sim.run_for(1_000)

    row = row_of(sim, p, "r")
    assert (row["interrupted_reason"], row["child_still_running"]) == ("no-progress", 1)
    assert row["completed_at"] == woke
    assert tail_opens(sim, child_ref(sim, p, ResumingChild, "r"), since_ms=woke) == 0
    assert event_of(sim, "agent_tool:recovery:reattach", runId="r").get("budgetMs") == 0


class ChatChild(ChatAgent):
    """An AIChatAgent-like child: the scripted model answers slowly, in many chunks."""


class ChatParent(Agent):
    async def delegate(self) -> None:
        async def go() -> None:
            await self.run_agent_tool(ChatChild, input="summarise the findings", run_id="chat-r")

        self.host.tasks.wait_until(go())


def test_T122_chat_child_recovers_after_a_kill_and_the_parent_collects_completed(
    sim: Simulation,
) -> None:
    """A parent and an AIChatAgent-like child killed mid-stream (the whole isolate) recover on
    restart: the child's chat recovery finishes the turn and the parent records `completed`."""
    sim.register_model(
        ScriptedModel(default=model_text("All findings summarised.", 20, delay_ms=500))
    )
    p = sim.agent(ChatParent, "p")
    sim.call(p, "delegate")
    sim.run_for(3_000)
    assert row_of(sim, p, "chat-r")["status"] == "running"
    sim.deploy()
    sim.agent(ChatParent, "p")  # the parent wakes with startup: recovery re-attaches
    sim.run_for(120_000)
    row = row_of(sim, p, "chat-r")
    assert (row["status"], row["error_message"]) == ("completed", None)
    assert "All findings summarised." in (row["summary"] or "")


def test_T123_progressing_child_outlives_the_budget(sim: Simulation) -> None:
    """A healthy child that keeps streaming for longer than the no-progress budget after a
    deploy is collected `completed`, not interrupted."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=1_000)
    p = sim.agent(cls, "p")
    resume = [step for i in range(10) for step in (["sleep", 500], ["text", str(i)])]
    dispatch(sim, p, "r", [["text", "a"], *HANG], [*resume, ["finish", "completed", "long"]])
    woke = restart(sim, p)
    sim.run_for(10_000)

    row = row_of(sim, p, "r")
    assert (row["status"], row["summary"]) == ("completed", "long")
    assert row["completed_at"] - woke >= 5_000
    assert texts(frames_of(sim, p, "r", since_ms=woke)) == [str(i) for i in range(10)]


# -- beyond the catalogue: the startup contract of §7.1 ------------------------------------------
def test_recovery_starts_after_startup_and_is_single_flight(sim: Simulation) -> None:
    """Recovery starts in the background once startup has returned, and asking for it again
    while it runs returns the same task; once it is over nothing is left to schedule."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=1_000)
    p = sim.agent(cls, "p")
    dispatch(sim, p, "r", [["text", "a"], *HANG], HANG)
    woke = restart(sim, p)
    sim.run_for(100)

    done = [r for r in sim.trace.select("startup:done", agent=p.path) if r.t_ms >= woke]
    begin = event_of(sim, "agent_tool:recovery:begin")
    assert begin.t_ms == done[0].t_ms and begin.seq > done[0].seq
    assert sim.call(p, "schedule_recovery_again") == "same"
    sim.run_for(2_000)
    assert sim.call(p, "schedule_recovery_again") == "none"
    assert len(sim.trace.select("agent_tool:recovery:begin")) == 1


def test_empty_snapshot_runs_no_recovery(sim: Simulation) -> None:
    """With no starting/running row at wake no recovery sweep runs (E24); but a given-up
    detached row still owes its finish, so startup re-arms the backbone (divergence A5: the SDK
    leaves it to an already-persisted schedule row)."""
    p = sim.agent(BackboneSpyParent, "p")
    sim.call(p, "insert_row", "bg", "ResumingChild", "interrupted", 1)
    restart(sim, p, after_ms=0)
    sim.run_for(1_000)

    assert sim.trace.select("agent_tool:recovery:*") == []
    assert notes(sim, p) == ["arm-backbone:reset=False"]


def test_pass_one_finalizes_a_child_that_finished_while_the_parent_was_down(
    sim: Simulation,
) -> None:
    """A child that reached its terminal before the restarted parent looked is finalized in
    pass 1: its stored chunks are sent again from sequence 1, then the terminal frame, with the
    child's completion time."""
    p = sim.agent(Parent, "p")
    sim.call(p, "begin", "ResumingChild", "r", [["text", "a"], ["finish", "completed", "early"]])
    child_done = sim.query(
        child_ref(sim, p, ResumingChild, "r"), "SELECT completed_at FROM child_runs"
    )
    woke = restart(sim, p)
    sim.run_for(100)

    row = row_of(sim, p, "r")
    assert (row["status"], row["summary"]) == ("completed", "early")
    assert row["completed_at"] == child_done[0]["completed_at"] < woke
    frames = frames_of(sim, p, "r", since_ms=woke)
    assert [(f["sequence"], f["event"]["kind"]) for f in frames] == [(1, "chunk"), (2, "finished")]
    assert sim.trace.select("agent_tool:recovery:reattach") == []
    assert notes(sim, p) == ["finish:r:completed"]


def test_unexpected_sweep_failure_is_reported(sim: Simulation) -> None:
    """An unexpected error in the sweep emits `agent_tool:recovery:failed` and reaches
    on_error; the background task itself does not fail."""
    p = sim.agent(Parent, "p")
    sim.call(p, "insert_row", "ghost", "GhostChild")
    sim.run_for(10)
    sim.deploy()
    sim.arm_storage_fault(p, "error", match=r"SELECT \* FROM cf_agent_tool_runs WHERE run_id")
    sim.agent(Parent, "p")
    sim.run_for(100)

    failed = event_of(sim, "agent_tool:recovery:failed")
    assert failed.get("error")
    assert notes(sim, p) == [f"on_error:{failed.get('error')}"]
    assert row_of(sim, p, "ghost")["status"] == "running"
    assert sim.trace.select("task:error") == []


def test_tail_that_throws_seals_no_progress_at_once(sim: Simulation) -> None:
    """A child whose tail call throws is sealed `no-progress` at once, without waiting for the
    budget, and is left running (E20)."""
    p = sim.agent(Parent, "p")  # the default 120 s budget
    sim.call(p, "begin", "BrokenTailChild", "r", [["text", "a"], *HANG])
    restart(sim, p)
    sim.run_for(1_000)

    row = row_of(sim, p, "r")
    assert (row["interrupted_reason"], row["child_still_running"]) == ("no-progress", 1)
    assert row["completed_at"] == event_of(sim, "agent_tool:recovery:reattach", runId="r").t_ms


class HangingOpenChild(ResumingChild):
    """A child whose tail never opens once it has been restarted."""

    async def open_agent_tool_tail(self, run_id: str, after_sequence: int = -1) -> str:
        if self.sql("SELECT 1 AS x FROM drives WHERE kind = 'resume'"):
            await self.host.tasks.deferred()
        return await super().open_agent_tool_tail(run_id, after_sequence)


CHILDREN[HangingOpenChild.__name__] = HangingOpenChild


def test_a_tail_that_never_opens_is_bounded_by_the_idle_budget(sim: Simulation) -> None:
    """With no ceiling, a re-attach whose tail open hangs still ends after the no-progress
    budget (sealed no-progress) instead of waiting forever."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=300)
    p = sim.agent(cls, "p")
    dispatch(sim, p, "r", [["text", "a"], *HANG], HANG, child=HangingOpenChild)
    woke = restart(sim, p)
    sim.run_for(2_000)
    row = row_of(sim, p, "r")
    assert (row["status"], row["interrupted_reason"]) == ("interrupted", "no-progress")
    assert row["completed_at"] - woke <= 1_000
