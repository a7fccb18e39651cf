"""Conformance: detached agent-tool runs — the delivery ledger, dispatch, the warm fast path, the
reconcile backbone, budgets and cancel (spec agent-tools §4, catalogue group E: T-51 … T-75).

The parents and children defined here are shared with `test_notify.py` and
`tests/agent_tools/test_detached_stories.py`. T-73 needs a chat host's turn queue and is covered
with the chat hosts.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents_core import AbortController, Agent, InvalidArgument
from agents_core.agent_tools.backbone import DETACHED_RECONCILE_CALLBACK
from agents_core.agent_tools.notify import (
    detached_finish_key,
    detached_milestone_key,
    detached_notify_metadata,
)
from agents_core.agent_tools.registry import RunAgentToolResult
from sim import Simulation
from tests.agent_tools.scripted_child import NoTailChild, ScriptedChild
from tests.releases import on_both_releases

pytestmark = on_both_releases  # divergences B1, B2 and A9 hold on both releases

HOUR_MS = 3_600_000
DAY_MS = 86_400_000


# -- children ---------------------------------------------------------------------------------
class RowlessChild(ScriptedChild):
    """Accepts the run but never writes a row for it: inspection stays None."""

    async def start_agent_tool_run(self, input: Any, run_id: str) -> dict[str, Any]:
        return {"runId": run_id, "status": "running", "startedAt": self.host.clock.now_ms()}


class BrokenInspectChild(ScriptedChild):
    """Runs its script, but every inspection throws."""

    async def inspect_agent_tool_run(self, run_id: str) -> dict[str, Any] | None:
        if self.host.clock.now_ms() > 0:
            raise RuntimeError("inspection is broken")
        return await super().inspect_agent_tool_run(run_id)


class StubbornChild(ScriptedChild):
    """Refuses to be cancelled: its script runs to its own end."""

    async def cancel_agent_tool_run(self, run_id: str, reason: Any = None) -> None:
        raise RuntimeError("this child cannot be cancelled")


CHILDREN = {
    cls.__name__: cls
    for cls in (ScriptedChild, NoTailChild, RowlessChild, BrokenInspectChild, StubbornChild)
}

HOOK_LOG_DDL = (
    "CREATE TABLE IF NOT EXISTS hook_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER, "
    "hook TEXT, run_id TEXT, status TEXT, reason TEXT, error TEXT, summary TEXT, "
    "still_running INTEGER, notify_source TEXT)"
)


# -- parents ----------------------------------------------------------------------------------
class Parent(Agent):
    """A plain Agent parent that records every finish hook durably, in `hook_log`."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql(HOOK_LOG_DDL)

    def _record(self, hook: str, run: Any, result: Any) -> None:
        lifecycle = result.lifecycle() if isinstance(result, RunAgentToolResult) else result
        still = lifecycle.get("childStillRunning")
        self.sql(
            "INSERT INTO hook_log (at, hook, run_id, status, reason, error, summary, "
            "still_running, notify_source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            self.host.clock.now_ms(),
            hook,
            run.run_id,
            lifecycle["status"],
            lifecycle.get("reason"),
            lifecycle.get("error"),
            lifecycle.get("summary"),
            None if still is None else int(still),
            run.notify_source,
        )

    async def on_agent_tool_finish(self, run: Any, result: Any) -> None:
        self._record("on_agent_tool_finish", run, result)

    async def on_detached_done(self, run: Any, result: Any) -> None:
        self._record("on_detached_done", run, result)

    async def on_detached_fails_once(self, run: Any, result: Any) -> None:
        self._record("on_detached_fails_once", run, result)
        if not self.host.kv.get("failed-once"):
            self.host.kv.put("failed-once", True)
            raise RuntimeError("handler broke")

    def set_cap(self, cap: int) -> None:
        self.max_concurrent_agent_tools = cap

    # -- driving calls ----------------------------------------------------------------------
    async def dispatch(
        self,
        run_id: str,
        steps: list[Any],
        detached: Any = True,
        child: str = "ScriptedChild",
        with_signal: bool = False,
        parent_tool_call_id: str | None = "tc",
    ) -> dict[str, Any]:
        signal = None
        if with_signal:
            self.controller = AbortController()
            signal = self.controller.signal
        result = await self.run_agent_tool(
            CHILDREN[child],
            input={"steps": steps},
            run_id=run_id,
            parent_tool_call_id=parent_tool_call_id,
            detached=detached,
            signal=signal,
        )
        return result.to_dict()

    def abort_signal(self) -> None:
        self.controller.abort("the turn ended")

    async def cancel(self, run_id: str, reason: Any = None) -> None:
        await self.cancel_agent_tool(run_id, reason)

    async def deliver(self, run_id: str, slot: str, status: str, reason: str | None = None) -> bool:
        """The delivery funnel, driven directly (as the SDK's own tests do)."""
        row = self._tools.store.read(run_id)
        if status == "interrupted":
            result = RunAgentToolResult(
                run_id,
                row["agent_type"],
                status,
                error="gave up",
                reason=reason,
                child_still_running=False,
            )
        elif status == "completed":
            result = RunAgentToolResult(run_id, row["agent_type"], status, summary="done")
        else:
            result = RunAgentToolResult(run_id, row["agent_type"], status, error=status)
        return await self._tools.backbone.deliver_terminal(run_id, slot, result)

    async def tick(self, cadence_index: int = 0) -> None:
        await self._cf_detached_reconcile_tick({"cadenceIndex": cadence_index})

    async def arm_many(self, count: int) -> None:
        await self.host.tasks.gather(
            *(self._tools.backbone.arm(reset_cadence=True) for _ in range(count))
        )

    async def backbone(self) -> list[dict[str, Any]]:
        """The pending backbone ticks: their payload and due time (seconds)."""
        return [
            {"payload": s.payload, "time": s.time}
            for s in await self.list_schedules()
            if s.callback == DETACHED_RECONCILE_CALLBACK
        ]

    def set_last_progress_at(self, run_id: str, at: int) -> None:
        self.sql("UPDATE cf_agent_tool_runs SET last_progress_at = ? WHERE run_id = ?", at, run_id)

    def insert_awaited_row(self, run_id: str) -> None:
        """An awaited `running` row with nobody awaiting it (as after an eviction)."""
        self._tools.admission.insert(
            run_id,
            "ScriptedChild",
            None,
            0,
            None,
            None,
            self.host.clock.now_ms(),
            None,
            status="running",
        )

    async def start_child_directly(self, run_id: str, steps: list[Any]) -> None:
        child = await self.sub_agent(ScriptedChild, run_id)
        await child.call("start_agent_tool_run", {"steps": steps}, run_id)


INJECTED_DDL = (
    "CREATE TABLE IF NOT EXISTS injected (key TEXT PRIMARY KEY, role TEXT, text TEXT, "
    "metadata TEXT, at INTEGER)",
    "CREATE TABLE IF NOT EXISTS inject_calls (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
    "kind TEXT, key TEXT, at INTEGER)",
)


class ChatParent(Parent):
    """Stands in for a chat host: implements the two notify hooks and records what it would
    inject, idempotently by the SDK's keys (as Think's submissions and AIChatAgent's message
    ids are)."""

    silence_completion = False

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        for statement in INJECTED_DDL:
            self.sql(statement)

    def _inject(self, kind: str, key: str, role: str, text: str, metadata: dict[str, Any]) -> None:
        now = self.host.clock.now_ms()
        self.sql("INSERT INTO inject_calls (kind, key, at) VALUES (?, ?, ?)", kind, key, now)
        self.sql(
            "INSERT OR IGNORE INTO injected (key, role, text, metadata, at) VALUES (?, ?, ?, ?, ?)",
            key,
            role,
            text,
            json.dumps(metadata, sort_keys=True),
            now,
        )

    async def _cf_detached_notify_finish(self, run: Any, lifecycle: Any) -> None:
        text = self.format_detached_completion(run, lifecycle)
        if not text:
            return
        status = lifecycle["status"]
        self._inject(
            "finish",
            detached_finish_key(run.run_id, status),
            "user",
            text,
            detached_notify_metadata(run, status=status),
        )

    async def _cf_detached_notify_milestone(self, run: Any, milestone: Any, mode: str) -> None:
        text = self.format_detached_milestone(run, milestone)
        if not text:
            return
        role = "assistant" if mode == "narrate" else "user"
        self._inject(
            "milestone",
            detached_milestone_key(run.run_id, milestone["name"]),
            role,
            text,
            detached_notify_metadata(run, milestone=milestone["name"]),
        )

    def format_detached_completion(self, run: Any, result: Any) -> str:
        if self.silence_completion:
            return ""
        return super().format_detached_completion(run, result)


class SilentChatParent(ChatParent):
    silence_completion = True


# -- reading helpers --------------------------------------------------------------------------
def hooks(sim: Simulation, ref: Any, run_id: str | None = None) -> list[tuple[Any, ...]]:
    rows = sim.query(ref, "SELECT * FROM hook_log ORDER BY seq")
    return [
        (r["hook"], r["status"], r["reason"])
        for r in rows
        if run_id is None or r["run_id"] == run_id
    ]


def run_row(sim: Simulation, ref: Any, run_id: str) -> dict[str, Any]:
    return sim.query(ref, "SELECT * FROM cf_agent_tool_runs WHERE run_id = ?", run_id)[0]


def child_row(sim: Simulation, ref: Any, run_id: str, cls: type = ScriptedChild) -> dict[str, Any]:
    rows = sim.query(
        sim.facet(ref, cls, run_id), "SELECT * FROM child_runs WHERE run_id = ?", run_id
    )
    return rows[0] if rows else {}


def tool_frames(client: Any) -> list[dict[str, Any]]:
    """The `agent-tool-event` frames a client received (not the protocol frames of a connect)."""
    return [f for f in client.frames if f.get("type") == "agent-tool-event"]


def terminal_frames(client: Any, run_id: str) -> list[dict[str, Any]]:
    return [
        f
        for f in tool_frames(client)
        if f["event"]["runId"] == run_id
        and f["event"]["kind"] != "started"
        and f["event"]["kind"] != "chunk"
    ]


def run_frames(client: Any, run_id: str) -> list[tuple[int, str]]:
    return [
        (f["sequence"], f["event"]["kind"])
        for f in tool_frames(client)
        if f["event"]["runId"] == run_id
    ]


HANG = [["hang"]]


# -- E. delivery ledger -----------------------------------------------------------------------
def test_T051_finish_and_give_up_are_each_delivered_once(sim: Simulation) -> None:
    """A finish delivered twice fires the global hook and on_finish once, and so does a
    give-up delivered twice."""
    ref = sim.agent(Parent, "p")
    sim.call(ref, "dispatch", "r1", HANG, {"on_finish": "on_detached_done"})
    assert sim.call(ref, "deliver", "r1", "finish", "completed") is True
    assert sim.call(ref, "deliver", "r1", "finish", "completed") is False
    assert hooks(sim, ref) == [
        ("on_agent_tool_finish", "completed", None),
        ("on_detached_done", "completed", None),
    ]
    assert run_row(sim, ref, "r1")["status"] == "completed"

    sim.call(ref, "dispatch", "r2", HANG, {"on_finish": "on_detached_done"})
    sim.call(ref, "deliver", "r2", "give_up", "interrupted", "budget-exceeded")
    sim.call(ref, "deliver", "r2", "give_up", "interrupted", "budget-exceeded")
    assert hooks(sim, ref, "r2") == [
        ("on_agent_tool_finish", "interrupted", "budget-exceeded"),
        ("on_detached_done", "interrupted", "budget-exceeded"),
    ]


def test_T053_give_up_then_real_completion_are_two_deliveries(sim: Simulation) -> None:
    """The give-up and finish slots are independent: interrupted/budget-exceeded, then the
    real completion repairs the row and fires on_finish again."""
    ref = sim.agent(Parent, "p")
    sim.call(ref, "dispatch", "r1", HANG, {"on_finish": "on_detached_done"})
    sim.call(ref, "deliver", "r1", "give_up", "interrupted", "budget-exceeded")
    assert run_row(sim, ref, "r1")["status"] == "interrupted"
    sim.call(ref, "deliver", "r1", "finish", "completed")
    row = run_row(sim, ref, "r1")
    assert (row["status"], row["interrupted_reason"], row["summary"]) == ("completed", None, "done")
    assert [h for h in hooks(sim, ref) if h[0] == "on_detached_done"] == [
        ("on_detached_done", "interrupted", "budget-exceeded"),
        ("on_detached_done", "completed", None),
    ]
    assert sim.probes["ledger.finish_after_give_up"] == 1


# -- E. backbone and budgets ------------------------------------------------------------------
def test_T055_recent_progress_keeps_the_run_alive(sim: Simulation) -> None:
    """A child that signalled recently is not given up within its one-hour window, however
    many ticks run."""
    ref = sim.agent(Parent, "p")
    steps = [
        ["progress", {"fraction": 0.1}],
        ["sleep", 20 * 60_000],
        ["progress", {"fraction": 0.5}],
        ["hang"],
    ]
    sim.call(ref, "dispatch", "r1", steps, {"on_finish": "on_detached_done"})
    sim.run_for(50 * 60_000)
    row = run_row(sim, ref, "r1")
    assert (row["status"], row["give_up_claimed_at"], row["finish_claimed_at"]) == (
        "running",
        None,
        None,
    )
    assert hooks(sim, ref) == []
    assert len(sim.trace.select("schedule:execute", callback=DETACHED_RECONCILE_CALLBACK)) >= 20


def test_T057_backbone_cadence_escalates_and_caps(sim: Simulation) -> None:
    """After a dispatch the ticks come 5 s, then 15, 30 and every 120 s, always one pending."""
    ref = sim.agent(Parent, "p")
    sim.call(ref, "dispatch", "r1", HANG)
    assert sim.call(ref, "backbone") == [{"payload": {"cadenceIndex": 0}, "time": 5}]
    seen = []
    for tick_s in (5, 20, 50, 170, 290):
        sim.run_until(tick_s * 1000 + 1)
        pending = sim.call(ref, "backbone")
        assert len(pending) == 1
        seen.append((pending[0]["payload"]["cadenceIndex"], pending[0]["time"] - tick_s))
    assert seen == [(1, 15), (2, 30), (3, 120), (3, 120), (3, 120)]
    ticks = [
        r.t_ms // 1000
        for r in sim.trace.select("schedule:execute", callback=DETACHED_RECONCILE_CALLBACK)
    ]
    assert ticks == [5, 20, 50, 170, 290]


def test_T058_concurrent_resetting_arms_leave_one_schedule(sim: Simulation) -> None:
    """Five concurrent resetting arms collapse to exactly one tick at 5 s, cadence 0."""
    ref = sim.agent(Parent, "p")
    sim.call(ref, "arm_many", 5)
    assert sim.call(ref, "backbone") == [{"payload": {"cadenceIndex": 0}, "time": 5}]


def test_T059_cancelling_an_awaited_run_delivers_nothing(sim: Simulation) -> None:
    """Cancelling an awaited row nobody awaits cancels the child but leaves the row running,
    with no ledger claim and no hook."""
    ref = sim.agent(Parent, "p")
    sim.call(ref, "start_child_directly", "a1", HANG)
    sim.call(ref, "insert_awaited_row", "a1")
    sim.call(ref, "cancel", "a1", "stop")
    row = run_row(sim, ref, "a1")
    assert (row["status"], row["finish_claimed_at"], row["give_up_claimed_at"]) == (
        "running",
        None,
        None,
    )
    assert hooks(sim, ref) == []
    assert child_row(sim, ref, "a1")["status"] == "aborted"


def test_T061_cancel_and_give_up_each_broadcast_one_terminal_frame(sim: Simulation) -> None:
    """A cancelled detached run broadcasts one `aborted` frame; a given-up one broadcasts one
    `interrupted` frame (and nothing for the abort its own teardown causes)."""
    ref = sim.agent(Parent, "p")
    client = sim.connect(ref)
    sim.call(ref, "dispatch", "r1", HANG)
    sim.call(ref, "cancel", "r1")
    sim.call(ref, "cancel", "r1")
    assert [f["event"]["kind"] for f in terminal_frames(client, "r1")] == ["aborted"]
    assert terminal_frames(client, "r1")[0]["event"]["reason"] == "cancelled by parent"

    sim.call(ref, "dispatch", "r2", HANG, {"max_budget_ms": 1_000})
    sim.run_for(10 * 60_000)
    frames = terminal_frames(client, "r2")
    assert [f["event"]["kind"] for f in frames] == ["interrupted"]
    assert frames[0]["event"]["reason"] == "budget-exceeded"
    assert frames[0]["event"]["childStillRunning"] is False


def test_T062_dispatch_returns_running_at_once_with_default_budgets(sim: Simulation) -> None:
    """run_agent_tool returns {runId, agentType, status: running} before the child finishes;
    the row is detached with a 24 h ceiling and a 1 h no-progress window."""
    ref = sim.agent(Parent, "p")
    sim.run_for(1_000)
    handle = sim.call(ref, "dispatch", "r1", [["sleep", 60_000], ["finish", "completed", "ok"]])
    assert handle == {"runId": "r1", "agentType": "ScriptedChild", "status": "running"}
    assert sim.now_ms < 2_000
    row = run_row(sim, ref, "r1")
    assert row["detached"] == 1 and row["status"] == "running"
    assert row["detached_max_budget_at"] == row["started_at"] + DAY_MS
    assert row["detached_no_progress_budget_ms"] == HOUR_MS
    assert row["detached_on_finish"] is None
    sim.run_for(61_000)
    assert run_row(sim, ref, "r1")["status"] == "completed"


def test_T063_a_signal_is_ignored_with_a_warning(sim: Simulation) -> None:
    """A detached dispatch with a signal warns, and aborting the signal does not cancel the
    child."""
    ref = sim.agent(Parent, "p")
    sim.call(
        ref, "dispatch", "r1", [["sleep", 1_000], ["finish", "completed", "ok"]], with_signal=True
    )
    sim.call(ref, "abort_signal")
    warnings = [r.get("message") for r in sim.trace.select("console:warn")]
    assert any("signal is ignored for detached runs" in w for w in warnings)
    sim.run_for(2_000)
    assert child_row(sim, ref, "r1")["status"] == "completed"
    assert run_row(sim, ref, "r1")["status"] == "completed"


def test_T064_on_finish_must_name_a_method(sim: Simulation) -> None:
    """A detached.on_finish that is not a method of the parent (or is a closure) raises
    before any row is written."""
    ref = sim.agent(Parent, "p")
    with pytest.raises(
        InvalidArgument,
        match=r'detached\.on_finish "on_nothing" is not a method on Parent\. '
        r"Pass the NAME of a method",
    ):
        sim.call(ref, "dispatch", "r1", HANG, {"on_finish": "on_nothing"})
    with pytest.raises(InvalidArgument, match="must be the NAME of a method on Parent"):
        sim.call(ref, "dispatch", "r2", HANG, {"on_finish": len})
    with pytest.raises(InvalidArgument, match=r"unknown detached option\(s\) \['onFinish'\]"):
        sim.call(ref, "dispatch", "r3", HANG, {"onFinish": "on_detached_done"})
    assert sim.query(ref, "SELECT run_id FROM cf_agent_tool_runs") == []
    assert sim.platform.records.get("Parent/p/ScriptedChild/r1") is None


def test_T068_never_signalling_or_disabled_window_is_bounded_only_by_the_ceiling(
    sim: Simulation,
) -> None:
    """A child that never signals, or a window of 0 or infinity with stale progress, is never
    given up for silence; only the absolute ceiling gives it up."""
    ref = sim.agent(Parent, "p")
    stale = [["progress", {"fraction": 0.1}], ["hang"]]
    sim.call(ref, "dispatch", "quiet", HANG, {"no_progress_budget_ms": 10_000})
    sim.call(ref, "dispatch", "zero", stale, {"no_progress_budget_ms": 0})
    sim.call(ref, "dispatch", "inf", stale, {"no_progress_budget_ms": float("inf")})
    sim.call(
        ref,
        "dispatch",
        "ceiling",
        HANG,
        {"no_progress_budget_ms": 10_000, "max_budget_ms": 30 * 60_000},
    )
    assert run_row(sim, ref, "inf")["detached_no_progress_budget_ms"] is None
    sim.run_for(20 * 60_000)
    for run_id in ("quiet", "zero", "inf", "ceiling"):
        assert run_row(sim, ref, run_id)["status"] == "running", run_id
    sim.run_for(15 * 60_000)
    row = run_row(sim, ref, "ceiling")
    assert (row["status"], row["interrupted_reason"]) == ("interrupted", "budget-exceeded")
    assert hooks(sim, ref) == [("on_agent_tool_finish", "interrupted", "budget-exceeded")]
    assert sim.probes["agent_tool.give_up_budget_exceeded"] >= 1
    assert sim.probes.get("agent_tool.give_up_no_progress", 0) == 0


def test_T069_a_recent_milestone_resets_the_no_progress_window(sim: Simulation) -> None:
    """With only a recent milestone (no progress) and a stale last_progress_at, a tick within
    the milestone's window does not give up; a tick past it does."""
    ref = sim.agent(Parent, "p")
    steps = [["sleep", 40_000], ["milestone", "halfway"], ["hang"]]
    sim.call(ref, "dispatch", "r1", steps, {"no_progress_budget_ms": 30_000})
    sim.run_for(45_000)
    sim.call(ref, "set_last_progress_at", "r1", 1)
    sim.run_until(51_000)  # the tick at 50 s: 10 s after the milestone
    assert run_row(sim, ref, "r1")["status"] == "running"
    sim.run_until(180_000)  # the tick at 170 s: 130 s after it
    row = run_row(sim, ref, "r1")
    assert (row["status"], row["interrupted_reason"]) == ("interrupted", "no-progress")


@pytest.mark.parametrize("child", ["RowlessChild", "BrokenInspectChild"])
def test_T070_a_null_or_failing_inspection_keeps_the_backbone_going(
    sim: Simulation, child: str
) -> None:
    """Ticks that see no child row (or a throwing inspect) deliver nothing and keep
    rescheduling."""
    ref = sim.agent(Parent, "p")
    sim.call(ref, "dispatch", "r1", HANG, {"on_finish": "on_detached_done"}, child=child)
    sim.run_for(15 * 60_000)
    row = run_row(sim, ref, "r1")
    assert (row["status"], row["finish_claimed_at"], row["give_up_claimed_at"]) == (
        "running",
        None,
        None,
    )
    assert hooks(sim, ref) == []
    assert len(sim.call(ref, "backbone")) == 1
    assert len(sim.trace.select("schedule:execute", callback=DETACHED_RECONCILE_CALLBACK)) >= 9


def test_T072_cancel_is_idempotent_and_delivers_aborted_after_a_give_up(sim: Simulation) -> None:
    """Cancelling an unknown or hard-terminal run does nothing; cancelling a given-up
    (interrupted) run fires on_finish with aborted."""
    ref = sim.agent(Parent, "p")
    sim.call(ref, "cancel", "nobody")
    sim.call(
        ref, "dispatch", "done", [["finish", "completed", "ok"]], {"on_finish": "on_detached_done"}
    )
    sim.run_for(100)
    sim.call(ref, "cancel", "done")
    assert run_row(sim, ref, "done")["status"] == "completed"
    assert [h for h in hooks(sim, ref, "done") if h[0] == "on_detached_done"] == [
        ("on_detached_done", "completed", None)
    ]

    sim.call(ref, "dispatch", "gave-up", HANG, {"on_finish": "on_detached_done"})
    sim.call(ref, "deliver", "gave-up", "give_up", "interrupted", "budget-exceeded")
    sim.call(ref, "cancel", "gave-up", "user said stop")
    sim.call(ref, "cancel", "gave-up")
    assert [h for h in hooks(sim, ref, "gave-up") if h[0] == "on_detached_done"] == [
        ("on_detached_done", "interrupted", "budget-exceeded"),
        ("on_detached_done", "aborted", None),
    ]
    row = run_row(sim, ref, "gave-up")
    assert (row["status"], row["error_message"]) == ("aborted", "user said stop")
    assert child_row(sim, ref, "gave-up")["status"] == "aborted"
    # Ignored: the unknown run, the completed one and the second cancel of the aborted one.
    assert sim.probes["agent_tool.cancel_ignored_settled_run"] == 3


def test_T074_live_count_warning_is_edge_triggered_at_50(sim: Simulation) -> None:
    """The 50th live detached run emits one live_count_warning {liveCount: 50, threshold: 50};
    the 51st emits none."""
    ref = sim.agent(Parent, "p")
    for index in range(49):
        sim.call(ref, "dispatch", f"r{index:02d}", HANG)
    assert sim.trace.select("agent_tool:detached:live_count_warning") == []
    sim.call(ref, "dispatch", "r49", HANG)
    sim.call(ref, "dispatch", "r50", HANG)
    warnings = sim.trace.select("agent_tool:detached:live_count_warning")
    assert [(w.get("liveCount"), w.get("threshold")) for w in warnings] == [(50, 50)]


def test_T075_the_warm_fast_path_forwards_and_delivers_before_any_tick(sim: Simulation) -> None:
    """A warm parent forwards the child's chunks @1..N and delivers the finish @N+1 before the
    first backbone tick."""
    ref = sim.agent(Parent, "p")
    client = sim.connect(ref)
    steps = [["text", "a"], ["sleep", 100], ["text", "b"], ["finish", "completed", "ok"]]
    sim.call(ref, "dispatch", "r1", steps, {"on_finish": "on_detached_done"})
    sim.run_for(1_000)
    assert run_frames(client, "r1") == [(0, "started"), (1, "chunk"), (2, "chunk"), (3, "finished")]
    assert hooks(sim, ref) == [
        ("on_agent_tool_finish", "completed", None),
        ("on_detached_done", "completed", None),
    ]
    assert sim.trace.select("schedule:execute", callback=DETACHED_RECONCILE_CALLBACK) == []
    row = run_row(sim, ref, "r1")
    assert row["finish_delivered_at"] == 100
    sim.run_for(10_000)  # the first tick finds nothing outstanding and stops the backbone
    assert len(sim.trace.select("schedule:execute", callback=DETACHED_RECONCILE_CALLBACK)) == 1
    assert sim.call(ref, "backbone") == []


def test_a_child_evicted_mid_tail_is_left_asleep_until_the_backbone_wakes_it(
    sim: Simulation,
) -> None:
    """The tail a parent reads dies with the child's incarnation (the SDK's stream errors with
    it): the parent sends no close to the dead child, which would start a new incarnation of
    it (on 0.32.0 with its startup, resuming its work early). The backbone's next tick wakes it."""
    ref = sim.agent(Parent, "p")
    steps = [["text", "a"], ["sleep", 60_000], ["finish", "completed", "ok"]]
    sim.call(ref, "dispatch", "r1", steps, {"on_finish": "on_detached_done"})
    sim.run_for(1_000)
    child = sim.facet(ref, ScriptedChild, "r1")
    assert sim.evict(child, "explicit")
    sim.run_for(3_000)  # before the backbone's first tick, at 5 s
    assert [r for r in sim.trace.select("incarnation:start", agent=child.path) if r.inc > 1] == []
    assert sim.trace.select("rpc", agent=child.path, method="close_agent_tool_tail") == []
    sim.run_for(2_000)
    (woken,) = [r for r in sim.trace.select("incarnation:start", agent=child.path) if r.inc == 2]
    assert woken.t_ms == 5_000


# -- §11 edge cases -----------------------------------------------------------------------------
def test_E02_a_detached_reissue_says_running_and_keeps_the_cadence(sim: Simulation) -> None:
    """A detached re-issue answers `running` even for a completed run (arming nothing), and for
    a live run keeps the pending tick instead of resetting it to 5 s."""
    ref = sim.agent(Parent, "p")
    sim.call(ref, "dispatch", "done", [["finish", "completed", "ok"]])
    sim.run_for(10_000)
    assert sim.call(ref, "backbone") == []
    again = sim.call(ref, "dispatch", "done", HANG)
    assert again == {"runId": "done", "agentType": "ScriptedChild", "status": "running"}
    assert sim.call(ref, "backbone") == []

    sim.call(ref, "dispatch", "live", HANG)
    sim.run_until(60_000)
    before = sim.call(ref, "backbone")
    assert before[0]["payload"] == {"cadenceIndex": 3}
    sim.call(ref, "dispatch", "live", HANG)
    assert sim.call(ref, "backbone") == before


def test_E12_a_zero_budget_gives_up_at_the_first_tick_and_infinity_never(sim: Simulation) -> None:
    """max_budget_ms 0 gives the run up at the first tick (5 s); an infinite one is stored as
    NULL and never fires."""
    ref = sim.agent(Parent, "p")
    sim.call(ref, "dispatch", "zero", HANG, {"max_budget_ms": 0})
    sim.call(ref, "dispatch", "inf", HANG, {"max_budget_ms": float("inf")})
    assert run_row(sim, ref, "inf")["detached_max_budget_at"] is None
    sim.run_for(3 * DAY_MS)
    zero = run_row(sim, ref, "zero")
    assert (zero["status"], zero["interrupted_reason"], zero["completed_at"]) == (
        "interrupted",
        "budget-exceeded",
        5_000,
    )
    assert run_row(sim, ref, "inf")["status"] == "running"


def test_E32_a_throwing_on_finish_is_retried_after_the_lease(sim: Simulation) -> None:
    """A throwing on_finish ends that tick (delivery_failed, on_error); the retried tick skips
    the leased run and delivers the others; the failed slot is re-claimed by the first tick
    after the 60 s lease and both hooks fire again."""
    ref = sim.agent(Parent, "p")
    steps = [["sleep", 1_000], ["finish", "completed", "ok"]]
    sim.call(
        ref, "dispatch", "r1", steps, {"on_finish": "on_detached_fails_once"}, child="NoTailChild"
    )
    sim.call(ref, "dispatch", "r2", steps, {"on_finish": "on_detached_done"}, child="NoTailChild")
    sim.run_for(10 * 60_000)
    log = sim.query(ref, "SELECT at, hook, run_id FROM hook_log ORDER BY seq")
    r1 = [(r["hook"], r["at"] // 1000) for r in log if r["run_id"] == "r1"]
    assert r1 == [
        ("on_agent_tool_finish", 5),
        ("on_detached_fails_once", 5),
        ("on_agent_tool_finish", 170),
        ("on_detached_fails_once", 170),
    ]
    r2 = [(r["hook"], r["at"] < 6_000) for r in log if r["run_id"] == "r2"]
    assert r2 == [("on_agent_tool_finish", True), ("on_detached_done", True)]
    failed = sim.trace.select("agent_tool:detached:delivery_failed")
    assert [(f.get("runId"), f.get("kind"), f.get("callback"), f.get("error")) for f in failed] == [
        ("r1", "finish", "on_detached_fails_once", "handler broke")
    ]
    assert len(sim.trace.select("schedule:retry", callback=DETACHED_RECONCILE_CALLBACK)) == 1
    assert run_row(sim, ref, "r1")["finish_delivered_at"] == 170_000
    assert sim.call(ref, "backbone") == []
    # Reclaimed once: by the incarnation whose handler threw, or (when the parent idled out
    # before the lease ended, as here) by the next one, which knows only a claim left behind.
    probes = ("ledger.failed_handler_reclaimed", "ledger.dead_claim_reclaimed")
    reclaims = [sim.probes.get(name, 0) for name in probes]
    assert sum(reclaims) == 1


def test_E33_a_give_up_frees_the_concurrency_slot_even_if_the_teardown_failed(
    sim: Simulation,
) -> None:
    """A given-up run no longer holds a max_concurrent_agent_tools slot, even when its child
    could not be cancelled and still runs."""
    ref = sim.agent(Parent, "p")
    sim.call(ref, "set_cap", 1)
    sim.call(ref, "dispatch", "bg", HANG, {"max_budget_ms": 1_000}, child="StubbornChild")
    rejected = sim.call(ref, "dispatch", "a1", [["finish", "completed", "ok"]], None)
    assert rejected["error"] == "maxConcurrentAgentTools (1) exceeded"
    sim.run_for(6_000)
    row = run_row(sim, ref, "bg")
    assert (row["status"], row["child_still_running"]) == ("interrupted", 1)
    admitted = sim.call(ref, "dispatch", "a2", [["finish", "completed", "ok"]], None)
    assert admitted["status"] == "completed"
    assert sim.probes["agent_tool.give_up_teardown_failed"] >= 1


@pytest.mark.parametrize("child", ["RowlessChild", "StubbornChild"])
def test_S8_a_cancel_whose_on_finish_threw_is_redelivered_from_the_row(
    sim: Simulation, child: str
) -> None:
    """The parent made the run hard terminal itself (a cancel) and its on_finish threw. The
    child cannot report the abort (it has no record of the run, or it refused the cancel and
    still runs), so the first tick after the 60 s lease delivers the finish again from the row,
    with the row's error, and the backbone stops."""
    ref = sim.agent(Parent, "p")
    sim.call(ref, "dispatch", "r1", HANG, {"on_finish": "on_detached_fails_once"}, child=child)
    sim.run_for(1_000)
    with pytest.raises(RuntimeError, match="handler broke"):
        sim.call(ref, "cancel", "r1", "user said stop")
    sim.run_for(10 * 60_000)
    log = sim.query(ref, "SELECT at, hook, status, error FROM hook_log ORDER BY seq")
    assert [(r["at"] // 1000, r["hook"], r["status"], r["error"]) for r in log] == [
        (1, "on_agent_tool_finish", "aborted", "user said stop"),
        (1, "on_detached_fails_once", "aborted", "user said stop"),
        (170, "on_agent_tool_finish", "aborted", "user said stop"),
        (170, "on_detached_fails_once", "aborted", "user said stop"),
    ]
    row = run_row(sim, ref, "r1")
    assert (row["status"], row["finish_delivered_at"]) == ("aborted", 170_000)
    assert sim.call(ref, "backbone") == []
    assert sim.probes["agent_tool.finish_redelivered_from_row"] == 1
    assert sim.probes.get("agent_tool.give_up_budget_exceeded", 0) == 0
