"""The seed page's detached-run stories, end to end on the simulated platform: a long import
that survives deploys and an eviction, a run past its budget, a child that goes silent, and a
crash in the middle of a delivery (seed 000, "Odpojené běhy"; decisions S7 and S8).
"""

from __future__ import annotations

import json
from typing import Any

from sim import Simulation
from tests.agent_tools.scripted_child import ScriptedChild
from tests.conformance.test_detached import CHILDREN, Parent, hooks, run_frames, run_row
from tests.releases import on_both_releases

pytestmark = on_both_releases  # divergences S7, B4 and A15 hold on both releases

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
IMPORT_STEPS: list[Any] = [
    step
    for index in range(1, 6)
    for step in (
        ["progress", {"fraction": index / 6, "phase": "ingesting"}],
        ["sleep", 8 * MINUTE_MS],
    )
] + [["finish", "completed", "Imported 80k rows"]]


class ResumableChild(ScriptedChild):
    """A child that keeps its script and its place in it durably, and resumes it whenever it
    starts again (as a chat host's own recovery resumes its turn); each resume is recorded."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql(
            "CREATE TABLE IF NOT EXISTS child_scripts (run_id TEXT PRIMARY KEY, steps_json TEXT, "
            "cursor INTEGER NOT NULL DEFAULT 0, sleep_until INTEGER)"
        )
        self.sql("CREATE TABLE IF NOT EXISTS child_resumes (run_id TEXT, at INTEGER)")

    async def start_agent_tool_run(self, input: Any, run_id: str) -> dict[str, Any]:
        steps = list((input or {}).get("steps", []))
        self.sql(
            "INSERT OR IGNORE INTO child_scripts (run_id, steps_json) VALUES (?, ?)",
            run_id,
            json.dumps(steps),
        )
        return await super().start_agent_tool_run(input, run_id)

    async def on_start(self) -> None:
        pending = self.sql(
            "SELECT s.run_id, s.steps_json FROM child_scripts s JOIN child_runs r "
            "ON r.run_id = s.run_id WHERE r.completed_at IS NULL"
        )
        for row in pending:
            run_id, steps = row["run_id"], json.loads(row["steps_json"])
            self.sql("INSERT INTO child_resumes VALUES (?, ?)", run_id, self.host.clock.now_ms())
            self.host.tasks.wait_until(
                self.keep_alive_while(lambda r=run_id, s=steps: self._drive(r, s))
            )

    async def _drive(self, run_id: str, steps: list[Any]) -> None:
        place = self.sql("SELECT cursor FROM child_scripts WHERE run_id = ?", run_id)
        start = place[0]["cursor"] if place else 0
        for index in range(start, len(steps)):
            if await self._is_terminal(run_id):
                return
            step = steps[index]
            if step[0] == "sleep":
                now = self.host.clock.now_ms()
                until = self.sql("SELECT sleep_until FROM child_scripts WHERE run_id = ?", run_id)[
                    0
                ]["sleep_until"]
                if until is None:
                    until = now + step[1]
                    self.sql(
                        "UPDATE child_scripts SET sleep_until = ? WHERE run_id = ?", until, run_id
                    )
                if until > now:
                    await self.host.clock.sleep(until - now)
            else:
                await ScriptedChild._drive(self, run_id, [step])
            self.sql(
                "UPDATE child_scripts SET cursor = ?, sleep_until = NULL WHERE run_id = ?",
                index + 1,
                run_id,
            )


CHILDREN["ResumableChild"] = ResumableChild


class Importer(Parent):
    async def start_import(
        self, run_id: str, steps: list[Any], child: str = "ResumableChild", **detached: Any
    ) -> str:
        options = {"on_finish": "on_import_done", "max_budget_ms": HOUR_MS, **detached}
        handle = await self.run_agent_tool(
            CHILDREN[child], input={"steps": steps}, run_id=run_id, detached=options
        )
        return handle.run_id

    async def on_import_done(self, run: Any, result: Any) -> None:
        self._record("on_import_done", run, result)


class SlowImporter(Importer):
    """Its on_finish handler takes two seconds and notes when it begins and ends."""

    async def on_import_done(self, run: Any, result: Any) -> None:
        self._record("on_import_done:begin", run, result)
        await self.host.clock.sleep(2_000)
        self._record("on_import_done:end", run, result)


def finishes(sim: Simulation, ref: Any, run_id: str) -> list[tuple[Any, ...]]:
    return [h for h in hooks(sim, ref, run_id) if h[0].startswith("on_import_done")]


def test_an_hour_long_import_survives_two_deploys_and_an_idle_eviction(sim: Simulation) -> None:
    """An import detached for up to an hour keeps going through two deploys and an idle
    eviction, and on_import_done runs exactly once, with the real result."""
    ref = sim.agent(Importer, "importer")
    assert sim.call(ref, "start_import", "import-1", IMPORT_STEPS) == "import-1"
    sim.run_until(7 * MINUTE_MS)
    assert sim.deploy()
    sim.run_until(19 * MINUTE_MS)
    assert sim.deploy()
    sim.run_until(30 * MINUTE_MS)
    assert sim.evict(ref, "idle")
    sim.run_until(HOUR_MS + 10 * MINUTE_MS)

    assert finishes(sim, ref, "import-1") == [("on_import_done", "completed", None)]
    assert [h[0] for h in hooks(sim, ref)] == ["on_agent_tool_finish", "on_import_done"]
    summary = sim.query(ref, "SELECT summary FROM hook_log WHERE hook = 'on_import_done'")
    assert summary == [{"summary": "Imported 80k rows"}]
    row = run_row(sim, ref, "import-1")
    assert (row["status"], row["give_up_claimed_at"]) == ("completed", None)
    child = sim.facet(ref, ResumableChild, "import-1")
    assert len(sim.query(child, "SELECT * FROM child_resumes")) == 3
    assert sim.call(ref, "backbone") == []
    assert sim.probes["agent_tool.backbone_delivered_finish"] == 1
    assert sim.probes["agent_tool.startup_found_owed_detached_finish"] >= 1


def test_a_run_past_its_budget_is_interrupted_and_its_child_cancelled(sim: Simulation) -> None:
    """Past max_budget_ms the run is given up as interrupted/budget-exceeded and its child is
    cancelled; S7: the abort that cancel causes delivers nothing more, seen live or after an
    eviction."""
    ref = sim.agent(Importer, "importer")
    client = sim.connect(ref)
    sim.call(
        ref,
        "start_import",
        "warm",
        IMPORT_STEPS,
        child="ScriptedChild",
        max_budget_ms=10 * MINUTE_MS,
    )
    sim.call(
        ref, "start_import", "cold", IMPORT_STEPS, child="NoTailChild", max_budget_ms=10 * MINUTE_MS
    )
    sim.run_until(12 * MINUTE_MS)
    for run_id in ("warm", "cold"):
        row = run_row(sim, ref, run_id)
        assert (row["status"], row["interrupted_reason"], row["child_still_running"]) == (
            "interrupted",
            "budget-exceeded",
            0,
        )
        assert 10 * MINUTE_MS <= row["completed_at"] < 12 * MINUTE_MS
    warm_child = sim.query(sim.facet(ref, ScriptedChild, "warm"), "SELECT * FROM child_runs")
    assert (warm_child[0]["status"], warm_child[0]["error"]) == (
        "aborted",
        "detached budget exceeded",
    )
    sim.evict(ref, "idle")  # the cold run's abort is only seen by a tick of the next incarnation
    sim.run_until(3 * HOUR_MS)

    for run_id in ("warm", "cold"):
        assert finishes(sim, ref, run_id) == [("on_import_done", "interrupted", "budget-exceeded")]
        assert [h[0] for h in hooks(sim, ref, run_id)] == ["on_agent_tool_finish", "on_import_done"]
        row = run_row(sim, ref, run_id)
        assert (row["status"], row["interrupted_reason"]) == ("interrupted", "budget-exceeded")
        assert row["finish_delivered_at"] is not None
    cold_child = sim.query(
        sim.facet(ref, CHILDREN["NoTailChild"], "cold"), "SELECT * FROM child_runs"
    )
    assert cold_child[0]["status"] == "aborted"
    assert [kind for _, kind in run_frames(client, "warm")].count("aborted") == 0
    assert [kind for _, kind in run_frames(client, "warm")][-1] == "interrupted"
    assert sim.call(ref, "backbone") == []
    # The warm run and the cold one each gave up once, and each child's abort closed silently.
    assert sim.probes["agent_tool.give_up_budget_exceeded"] == 2
    assert sim.probes["agent_tool.own_teardown_abort_closed"] == 2


def test_a_real_completion_after_a_give_up_fires_on_finish_again(sim: Simulation) -> None:
    """S7: when the give-up could not tear the child down and the child then completes, the
    real result is delivered too (interrupted, then completed)."""
    ref = sim.agent(Importer, "importer")
    sim.call(
        ref, "start_import", "r1", IMPORT_STEPS, child="StubbornChild", max_budget_ms=10 * MINUTE_MS
    )
    sim.run_until(HOUR_MS)
    assert finishes(sim, ref, "r1") == [
        ("on_import_done", "interrupted", "budget-exceeded"),
        ("on_import_done", "completed", None),
    ]
    still = sim.query(ref, "SELECT still_running FROM hook_log WHERE hook = 'on_import_done'")
    assert [r["still_running"] for r in still] == [1, None]
    assert run_row(sim, ref, "r1")["status"] == "completed"
    assert sim.probes["ledger.finish_after_give_up"] == 1


def test_a_child_that_goes_silent_is_sealed_no_progress(sim: Simulation) -> None:
    """A child that signalled once and then went silent is given up as no-progress one window
    after its last signal, and torn down."""
    ref = sim.agent(Importer, "importer")
    steps = [
        ["progress", {"fraction": 0.1}],
        ["sleep", MINUTE_MS],
        ["progress", {"fraction": 0.2}],
        ["hang"],
    ]
    sim.call(ref, "start_import", "r1", steps, child="ScriptedChild", max_budget_ms=24 * HOUR_MS)
    sim.run_until(61 * MINUTE_MS - 1)
    assert run_row(sim, ref, "r1")["status"] == "running"
    sim.run_until(3 * HOUR_MS)
    row = run_row(sim, ref, "r1")
    assert (row["status"], row["interrupted_reason"], row["child_still_running"]) == (
        "interrupted",
        "no-progress",
        0,
    )
    assert row["error_message"] == "detached run went silent past its no-progress window"
    assert 61 * MINUTE_MS <= row["completed_at"] <= 63 * MINUTE_MS
    assert finishes(sim, ref, "r1") == [("on_import_done", "interrupted", "no-progress")]
    child = sim.query(sim.facet(ref, ScriptedChild, "r1"), "SELECT status FROM child_runs")
    assert child == [{"status": "aborted"}]
    assert sim.probes["agent_tool.give_up_no_progress"] == 1


def test_a_crash_between_claim_and_delivered_mark_redelivers_after_the_lease(
    sim: Simulation,
) -> None:
    """S8: a deploy while on_finish runs leaves the finish claimed but undelivered; the
    backbone re-delivers it once, on the first tick after the 60 s lease, and never again."""
    ref = sim.agent(SlowImporter, "importer")
    steps = [["sleep", 1_000], ["finish", "completed", "done"]]
    sim.call(ref, "start_import", "r1", steps, child="ScriptedChild")
    sim.run_until(1_500)
    assert finishes(sim, ref, "r1") == [("on_import_done:begin", "completed", None)]
    assert sim.deploy()
    row = run_row(sim, ref, "r1")
    assert (row["finish_claimed_at"], row["finish_delivered_at"]) == (1_000, None)
    sim.run_until(60_000)
    assert len(finishes(sim, ref, "r1")) == 1, "no re-claim inside the lease"
    sim.run_until(HOUR_MS)
    at = sim.query(ref, "SELECT hook, at FROM hook_log WHERE hook LIKE 'on_import_done%'")
    assert [(r["hook"], r["at"]) for r in at] == [
        ("on_import_done:begin", 1_000),
        ("on_import_done:begin", 170_000),
        ("on_import_done:end", 172_000),
    ]
    row = run_row(sim, ref, "r1")
    assert (row["status"], row["finish_delivered_at"]) == ("completed", 172_000)
    assert sim.call(ref, "backbone") == []
    assert sim.probes["ledger.dead_claim_reclaimed"] == 1
    assert sim.probes["agent_tool.detached_finish_redelivered"] == 1
    assert sim.probes["agent_tool.backbone_delivered_finish"] == 1


class CancelThenFailChild(ScriptedChild):
    """Its cancel settles the run `aborted`, then fails (a later write of its own throws)."""

    async def cancel_agent_tool_run(self, run_id: str, reason: Any = None) -> None:
        await super().cancel_agent_tool_run(run_id, reason)
        raise RuntimeError("the run was aborted, then noting the cancel failed")


class CancelThenFailNoTailChild(CancelThenFailChild):
    """The same, without a live tail: only a backbone tick sees its abort."""

    open_agent_tool_tail = None  # type: ignore[assignment]


CHILDREN["CancelThenFailChild"] = CancelThenFailChild
CHILDREN["CancelThenFailNoTailChild"] = CancelThenFailNoTailChild


def test_a_give_up_whose_cancel_aborted_the_child_then_failed_delivers_nothing_more(
    sim: Simulation,
) -> None:
    """S7: the give-up's cancel call raises, but only after the child had aborted the run. The
    abort is still the parent's own doing: the give-up is delivered once and the child's
    `aborted` closes the finish slot silently, live and after an eviction alike."""
    ref = sim.agent(Importer, "importer")
    children = {"warm": CancelThenFailChild, "cold": CancelThenFailNoTailChild}
    for run_id, cls in children.items():
        sim.call(
            ref,
            "start_import",
            run_id,
            IMPORT_STEPS,
            child=cls.__name__,
            max_budget_ms=10 * MINUTE_MS,
        )
    sim.run_until(12 * MINUTE_MS)
    sim.evict(ref, "idle")  # the cold run's abort is only seen by a tick of the next incarnation
    sim.run_until(3 * HOUR_MS)
    for run_id, cls in children.items():
        assert finishes(sim, ref, run_id) == [("on_import_done", "interrupted", "budget-exceeded")]
        row = run_row(sim, ref, run_id)
        assert (row["status"], row["interrupted_reason"]) == ("interrupted", "budget-exceeded")
        assert row["finish_delivered_at"] is not None
        child = sim.query(sim.facet(ref, cls, run_id), "SELECT * FROM child_runs")
        assert (child[0]["status"], child[0]["error"]) == ("aborted", "detached budget exceeded")
    assert sim.call(ref, "backbone") == []
    assert sim.probes["agent_tool.give_up_teardown_may_have_landed"] == 2
    assert sim.probes["agent_tool.own_teardown_abort_closed"] == 2


class FirstCancelFailsChild(ScriptedChild):
    """Its first cancel fails before it touches anything (a transient error); later ones land."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.cancels = 0

    async def cancel_agent_tool_run(self, run_id: str, reason: Any = None) -> None:
        self.cancels += 1
        if self.cancels == 1:
            raise RuntimeError("the child is busy")
        await super().cancel_agent_tool_run(run_id, reason)


CHILDREN["FirstCancelFailsChild"] = FirstCancelFailsChild


def test_a_give_up_whose_teardown_failed_tears_the_child_down_on_a_later_tick(
    sim: Simulation,
) -> None:
    """docs/divergences.md B4: the give-up's cancel fails, so `interrupted` is delivered with
    childStillRunning true; while the budget stays exceeded and the child still runs, a later
    tick cancels it again. Its `aborted` is the parent's own teardown (S7): nothing more is
    delivered, the finish slot closes and the backbone stops (the SDK ticks every 120 s for as
    long as the child runs)."""
    ref = sim.agent(Importer, "importer")
    steps = [["progress", {"fraction": 0.1}], ["hang"]]
    sim.call(
        ref, "start_import", "r", steps, child="FirstCancelFailsChild", max_budget_ms=10 * MINUTE_MS
    )
    sim.run_until(3 * HOUR_MS)
    assert finishes(sim, ref, "r") == [("on_import_done", "interrupted", "budget-exceeded")]
    still = sim.query(ref, "SELECT still_running FROM hook_log WHERE hook = 'on_import_done'")
    assert still == [{"still_running": 1}]
    child = sim.query(sim.facet(ref, FirstCancelFailsChild, "r"), "SELECT * FROM child_runs")
    assert (child[0]["status"], child[0]["error"]) == ("aborted", "detached budget exceeded")
    row = run_row(sim, ref, "r")
    assert (row["status"], row["interrupted_reason"]) == ("interrupted", "budget-exceeded")
    assert row["finish_delivered_at"] is not None
    assert sim.call(ref, "backbone") == []
    assert sim.probes["agent_tool.give_up_teardown_retried"] == 1
