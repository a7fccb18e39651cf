"""`scenarios.tools.ToolChild`: an agent-tool child written as one `work(run)` method, run by
a parent awaited and detached, cancelled, and cut short by a deploy; and the page
docs/agent-tools.md shows the classes docs/examples/importer.py ships."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

import pytest

from agents_core import Agent
from scenarios.tools import ToolChild, ToolResult, ToolRun
from sim import Simulation
from sim.checkers import assert_invariants
from tests.doc_blocks import ROOT, blocks_of


class Counting(ToolChild):
    """Four slow steps with a progress after each and a milestone halfway; counts its runs."""

    async def work(self, run: ToolRun) -> ToolResult:
        self.host.trace.emit("test:work", runId=run.id, resumed=run.resumed)
        run.text("counting")
        for step in range(1, 5):
            await run.sleep(30_000)
            run.progress(fraction=step / 4)
            if step == 2:
                run.milestone("halfway", {"n": run.input["n"] // 2})
        return ToolResult(summary=f"counted {run.input['n']}", output={"n": run.input["n"]})


class Saving(ToolChild):
    """Saves its place after each step and goes on from it when resumed."""

    async def work(self, run: ToolRun) -> str:
        start = run.saved["done"] if run.saved else 0
        self.host.trace.emit("test:work", runId=run.id, resumed=run.resumed, start=start)
        for step in range(start, 4):
            await run.sleep(30_000)
            run.save({"done": step + 1})
        return "saved"


class Failing(ToolChild):
    async def work(self, run: ToolRun) -> str:
        await run.sleep(1_000)
        raise RuntimeError("upstream said no")


class Plain(ToolChild):
    async def work(self, run: ToolRun) -> str:
        return "plain done"


class Unwritten(ToolChild):
    """Forgot to write `work`."""


class Parent(Agent):
    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql("CREATE TABLE IF NOT EXISTS finished (run_id TEXT, status TEXT)")

    async def awaited(self, child: str, n: int = 4) -> dict[str, Any]:
        result = await self.run_agent_tool(CHILDREN[child], input={"n": n}, run_id=child)
        return {
            "status": result.status,
            "summary": result.summary,
            "error": result.error,
            "output": result.output,
        }

    async def detached(self, run_id: str, n: int = 4) -> str:
        handle = await self.run_agent_tool(
            Counting, input={"n": n}, run_id=run_id, detached={"on_finish": "done"}
        )
        return handle.status

    async def cancel(self, run_id: str) -> None:
        await self.cancel_agent_tool(run_id, "no longer needed")

    async def done(self, run: Any, lifecycle: dict[str, Any]) -> None:
        self.sql("INSERT INTO finished VALUES (?, ?)", run.run_id, lifecycle["status"])


CHILDREN = {
    "saving": Saving,
    "counting": Counting,
    "failing": Failing,
    "plain": Plain,
    "unwritten": Unwritten,
}


@pytest.fixture
def sim() -> Iterator[Simulation]:
    with Simulation(seed=5) as simulation:
        yield simulation


def test_an_awaited_run_returns_the_work_s_summary_and_output(sim: Simulation) -> None:
    """`work`'s ToolResult is the awaited run's result; its milestone and progress are the
    child's durable record of the run, and its text chunk is stored."""
    parent = sim.agent(Parent, "p")
    result = sim.call(parent, "awaited", "counting", 8)
    assert result == {
        "status": "completed",
        "summary": "counted 8",
        "error": None,
        "output": {"n": 8},
    }
    child = sim.facet(parent, Counting, "counting")
    inspection = sim.call(child, "inspect_agent_tool_run", "counting")
    assert [m["name"] for m in inspection["milestones"]] == ["halfway"]
    assert inspection["progress"]["fraction"] == 1.0
    chunks = sim.call(child, "get_agent_tool_chunks", "counting")
    assert [c["sequence"] for c in chunks] == [0, 1]  # the text, then the milestone


def test_a_string_is_the_summary_and_an_exception_ends_the_run_error(sim: Simulation) -> None:
    """Returning a string completes the run with it; raising ends it `error` with the message;
    a child without `work` says so in the run's error."""
    parent = sim.agent(Parent, "p")
    assert sim.call(parent, "awaited", "plain")["summary"] == "plain done"
    failed = sim.call(parent, "awaited", "failing")
    assert (failed["status"], failed["error"]) == ("error", "upstream said no")
    unwritten = sim.call(parent, "awaited", "unwritten")
    assert unwritten["status"] == "error"
    assert "Unwritten must define async def work(self, run)" in unwritten["error"]


def test_a_cancelled_run_stops_at_its_next_sleep_and_finishes_aborted_once(
    sim: Simulation,
) -> None:
    """The parent's cancel seals the run `aborted`: `run.sleep` raises, `work` reports nothing
    more, and the detached callback fires once with `aborted`."""
    parent = sim.agent(Parent, "p")
    assert sim.call(parent, "detached", "job") == "running"
    sim.run_for(45_000)  # one step done, the second sleeping
    sim.call(parent, "cancel", "job")
    sim.quiesce(3_600_000)
    assert sim.query(parent, "SELECT * FROM finished") == [{"run_id": "job", "status": "aborted"}]
    child = sim.facet(parent, Counting, "job")
    inspection = sim.call(child, "inspect_agent_tool_run", "job")
    assert inspection["status"] == "aborted"
    assert inspection["progress"]["fraction"] == 0.25  # nothing reported after the cancel
    assert_invariants(sim)


def test_a_deploy_mid_run_reruns_the_work_and_finishes_once(sim: Simulation) -> None:
    """A deploy kills parent and child mid-run: the child's next incarnation runs `work` again
    (`run.resumed`), the run completes, and the detached callback fires exactly once."""
    parent = sim.agent(Parent, "p")
    assert sim.call(parent, "detached", "job") == "running"
    sim.run_for(70_000)
    sim.deploy()
    sim.quiesce(3_600_000)
    works = [(r.inc, r.get("resumed")) for r in sim.trace.select("test:work")]
    assert works == [(1, False), (2, True)]
    assert sim.query(parent, "SELECT * FROM finished") == [{"run_id": "job", "status": "completed"}]
    assert len(sim.trace.select("hook:on_finish", runId="job")) == 1
    assert_invariants(sim)


def test_a_resumed_run_goes_on_from_what_it_saved(sim: Simulation) -> None:
    """`run.save` is durable: after a deploy at 70 s (two steps saved) the work starts at
    step 2 with `run.saved`, and the awaited run, re-attached by the parent, completes."""
    parent = sim.agent(Parent, "p")
    call = sim.start_call(parent, "awaited", "saving")
    sim.run_for(70_000)
    sim.deploy()
    sim.quiesce(3_600_000)
    del call  # the call died with its incarnation; the parent's recovery finishes the run
    works = [(r.get("resumed"), r.get("start")) for r in sim.trace.select("test:work")]
    assert works == [(False, 0), (True, 2)]
    child = sim.facet(parent, Saving, "saving")
    assert sim.call(child, "inspect_agent_tool_run", "saving")["summary"] == "saved"
    assert_invariants(sim)


def test_without_resume_a_cut_run_stays_silent_for_the_parent_s_budgets(
    sim: Simulation,
) -> None:
    """`resume = False`: the next incarnation leaves the cut run alone, and the detached run's
    budget gives it up (`interrupted`) instead of the work running twice."""

    class Once(Counting):
        resume = False

    CHILDREN["once"] = Once
    try:

        class OnceParent(Parent):
            async def detached(self, run_id: str, n: int = 4) -> str:
                handle = await self.run_agent_tool(
                    Once,
                    input={"n": n},
                    run_id=run_id,
                    detached={"on_finish": "done", "max_budget_ms": 600_000},
                )
                return handle.status

        parent = sim.agent(OnceParent, "p")
        sim.call(parent, "detached", "job")
        sim.run_for(70_000)
        sim.deploy()
        sim.quiesce(3_600_000)
    finally:
        del CHILDREN["once"]
    assert len(sim.trace.select("test:work")) == 1
    statuses = [r["status"] for r in sim.query(parent, "SELECT status FROM finished")]
    assert statuses[0] == "interrupted"


def _classes(source: str) -> dict[str, str]:
    return {
        node.name: ast.get_source_segment(source, node) or ""
        for node in ast.parse(source).body
        if isinstance(node, ast.ClassDef)
    }


def test_the_page_shows_the_shipped_example() -> None:
    """docs/agent-tools.md's Python example defines docs/examples/importer.py's classes, word
    for word (its YAML scenario runs those), and the page's blocks are run by
    tests/test_doc_examples.py."""
    page = [b for b in blocks_of(ROOT / "docs/agent-tools.md") if b.kind == "python"]
    shipped = _classes((ROOT / "docs/examples/importer.py").read_text(encoding="utf-8"))
    shown = _classes(page[0].text)
    assert {k: shown.get(k) for k in shipped} == shipped
    assert "importer:Dispatcher" in (ROOT / "docs/agent-tools.md").read_text(encoding="utf-8")
