"""Agents the checker tests drive on the simulated platform, and helpers that rewrite a finished
run's context (drop, duplicate or add trace records; change final rows) to craft failures.

`Worker` follows the `no_lost_stash` workload convention (`workload:stashed` after each stash,
`workload:resumed` from its recovery hook); `Forgetful` breaks it the way a lossy runtime would
look: its hook ignores the snapshot and starts over. `Ticker` schedules things. `ToolParent`
dispatches agent-tool runs, awaited or detached, to the conformance tests' scripted children.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from agents_core import Agent
from scenarios.language.loader import load_scenario, parse_scenario
from scenarios.run.steps import StepRunner
from sim import Simulation
from sim.checkers import CHECKERS, CheckContext, check, context_from
from sim.sqlite import Write
from sim.trace import TraceRecord
from tests.conformance.fiber_agents import Recorder
from tests.conformance.test_reattach import ResumingChild

STEP_MS = 10_000

MILESTONE = """
    name: milestone
    description: a think parent narrates a milestone once across a deploy
    seed: 8
    agents:
      parent:
        workload: tools
        host: think
        runs:
          - run_id: research
            detached: {notify: true, on_milestones: [sources]}
            steps:
              - sleep: 1m
              - milestone: {name: sources, data: {n: 2}}
              - sleep: 5m
              - finish: {status: completed, summary: done}
    steps:
      - call: {agent: parent, method: dispatch}
      - at: 3m
        deploy: {}
      - run_until: 20m
"""
"""A Think parent narrates one milestone of a detached run, with a deploy between the
milestone and the finish (the ledger and tool checkers' tests both read it)."""


class Worker(Agent):
    """A fiber of `steps` steps of STEP_MS each, stashing `{"step": n}` after step n; its
    recovery hook resumes from the stashed step in a continuation fiber."""

    options = {"keep_alive_interval_ms": 2_000}

    async def work(self, steps: int) -> None:
        self.host.tasks.wait_until(self.run_fiber("work", lambda ctx: self._steps(ctx, 0, steps)))

    async def _steps(self, ctx: Any, done: int, steps: int) -> None:
        for step in range(done + 1, steps + 1):
            await self.host.clock.sleep(STEP_MS)
            ctx.stash({"step": step, "of": steps})
            self.host.trace.emit("workload:stashed", fiberId=ctx.id, step=step)

    def resume_from(self, snapshot: Any) -> int:
        return int(snapshot["step"]) if snapshot else 0

    async def on_fiber_recovered(self, ctx: Any) -> None:
        if ctx.name != "work":
            return
        step = self.resume_from(ctx.snapshot)
        self.host.trace.emit("workload:resumed", fiberId=ctx.id, step=step)
        steps = ctx.snapshot["of"] if ctx.snapshot else 3
        self.host.tasks.wait_until(self.run_fiber("work", lambda c: self._steps(c, step, steps)))


class Forgetful(Worker):
    """Resumes every recovered fiber from step 0, whatever it stashed: a lost stash."""

    def resume_from(self, snapshot: Any) -> int:
        return 0


class Ticker(Recorder):
    """Schedules `tick` callbacks: delayed, every N seconds, on a cron expression, and cancels
    them."""

    async def later(self, seconds: int) -> str:
        return (await self.schedule(seconds, "tick", {"kind": "later"})).id

    async def every(self, seconds: int) -> str:
        return (await self.schedule_every(seconds, "tick", {"kind": "every"})).id

    async def on_cron(self, expression: str) -> str:
        return (await self.schedule(expression, "tick", {"kind": "cron"})).id

    async def drop(self, schedule_id: str) -> bool:
        return await self.cancel_schedule(schedule_id)


class ToolParent(Agent):
    """Runs `ResumingChild` tools (their facets pick their script up again after a restart)."""

    async def on_detached_done(self, run: Any, result: Any) -> None:
        return None

    async def go(self, run_id: str, steps: list[Any], resume: list[Any] | None = None) -> Any:
        """An awaited run."""
        result = await self.run_agent_tool(
            ResumingChild, input={"steps": steps, "resume": resume or []}, run_id=run_id
        )
        return result.to_dict()

    async def dispatch(
        self, run_id: str, steps: list[Any], resume: list[Any] | None = None, **detached: Any
    ) -> Any:
        """A detached run, with `on_finish` wired and the given detached options."""
        result = await self.run_agent_tool(
            ResumingChild,
            input={"steps": steps, "resume": resume or []},
            run_id=run_id,
            detached={"on_finish": "on_detached_done", **detached},
        )
        return result.to_dict()


# -- running a scenario -------------------------------------------------------------------------
def scenario_context(text: str, seed: int | None = None, sdk: str | None = None) -> CheckContext:
    """Run a scenario written inline (its steps, then its liveness phase) and return the
    context checkers read; its steps must all succeed. `sdk`: the release it runs on, over its
    `sdk:` key (a story whose checks read what one release does names it)."""
    scenario = parse_scenario(textwrap.dedent(text), "<test>").on_release(sdk)
    seed = scenario.seed if seed is None else seed
    with Simulation(seed, faults=scenario.faults, sdk=scenario.sdk) as sim:
        steps = StepRunner(sim, scenario)
        for step in scenario.steps:
            steps.run(step)
        sim.quiesce(scenario.liveness_limit_ms)
        assert steps.finish() == [], steps.failures
        return context_from(sim, scenario="<test>")


FOUND = Path(__file__).resolve().parent / "found"
"""Stories the hunt found, kept as the input of the checker tests that fixed its findings."""


def found_context(name: str) -> CheckContext:
    """Run the found story `name` (its steps, some of which its drawn faults may fail, then its
    liveness phase) and return the context checkers read."""
    scenario = load_scenario(str(FOUND / f"{name}.yaml"))
    with Simulation(scenario.seed, faults=scenario.faults, sdk=scenario.sdk) as sim:
        steps = StepRunner(sim, scenario)
        for step in scenario.steps:
            steps.run(step)
        sim.quiesce(scenario.liveness_limit_ms)
        return context_from(sim, scenario=scenario.name)


# -- rewriting a context ------------------------------------------------------------------------
def renumbered(records: list[TraceRecord]) -> tuple[TraceRecord, ...]:
    return tuple(dataclasses.replace(r, seq=n) for n, r in enumerate(records))


def without(context: CheckContext, drop: Callable[[TraceRecord], bool]) -> CheckContext:
    """The context with the records `drop` selects removed (seq numbers renumbered)."""
    kept = [r for r in context.records if not drop(r)]
    assert len(kept) < len(context.records), "the predicate dropped nothing"
    return dataclasses.replace(context, records=renumbered(kept))


def with_record(
    context: CheckContext, after_seq: int, record: TraceRecord, **changes: Any
) -> CheckContext:
    """The context with a copy of `record` (fields updated by `changes`, `t_ms`/`inc`/`agent`/
    `event` settable) inserted after record `after_seq`; seqs renumbered."""
    special = {k: changes.pop(k) for k in ("t_ms", "inc", "agent", "event") if k in changes}
    copy = dataclasses.replace(record, fields={**record.fields, **changes}, **special)
    records = list(context.records)
    index = next(i for i, r in enumerate(records) if r.seq == after_seq)
    if "t_ms" not in special:
        copy = dataclasses.replace(copy, t_ms=records[index].t_ms)
    records.insert(index + 1, copy)
    return dataclasses.replace(context, records=renumbered(records))


def inserted(context: CheckContext, after_seq: int, new: TraceRecord) -> CheckContext:
    """The context with `new` inserted after record `after_seq`; seqs renumbered."""
    records = list(context.records)
    index = next(i for i, r in enumerate(records) if r.seq == after_seq)
    records.insert(index + 1, new)
    return dataclasses.replace(context, records=renumbered(records))


def record(seq: int, t_ms: int, agent: str, inc: int, event: str, **fields: Any) -> TraceRecord:
    return TraceRecord(seq, t_ms, agent, inc, event, fields)


def with_row(
    context: CheckContext, agent: str, table: str, match: Mapping[str, Any], **changes: Any
) -> CheckContext:
    """The context with the rows of `agent`'s `table` matching `match` updated by `changes`."""
    storage = {path: dict(tables) for path, tables in context.storage.items()}
    rows = [dict(r) for r in storage[agent].get(table, [])]
    hits = 0
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()):
            row.update(changes)
            hits += 1
    assert hits, f"no {table} row of {agent} matches {match}"
    storage[agent][table] = rows
    return dataclasses.replace(context, storage=storage)


def with_rows(
    context: CheckContext, agent: str, table: str, rows: list[dict[str, Any]]
) -> CheckContext:
    """The context with `agent`'s `table` replaced by `rows`."""
    storage = {path: dict(tables) for path, tables in context.storage.items()}
    storage.setdefault(agent, {})[table] = rows
    return dataclasses.replace(context, storage=storage)


def with_journal(
    context: CheckContext, agent: str, rewrite: Callable[[Write], Write | None]
) -> CheckContext:
    """The context with every committed write of `agent`'s journal passed through `rewrite`
    (which returns the write to keep, changed or not, or None to drop it)."""
    turns = []
    for turn in context.journals[agent]:
        kept = tuple(w for w in (rewrite(write) for write in turn) if w is not None)
        if kept:
            turns.append(kept)
    return dataclasses.replace(context, journals={**context.journals, agent: tuple(turns)})


def with_turn(
    context: CheckContext, agent: str, *writes: Write, at_ms: int | None = None
) -> CheckContext:
    """The context with one more committed turn of `writes` at the end of `agent`'s journal
    (committed at `at_ms`, for the readers of instants, when given)."""
    turns = (*context.journals[agent], tuple(writes))
    changed = dataclasses.replace(context, journals={**context.journals, agent: turns})
    if at_ms is None:
        return changed
    instants = (*context.journal_ms[agent], at_ms)
    return dataclasses.replace(changed, journal_ms={**context.journal_ms, agent: instants})


def messages_of(context: CheckContext, *names: str) -> list[str]:
    """The sentences of the violations the named invariants find in `context`."""
    return [v.message for v in check(context, list(names))]


def fails_with_a_blind_checker(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    test: Callable[[CheckContext], None],
    context: CheckContext,
) -> None:
    """`test(context)` goes red when checker `name` is replaced by one that finds nothing: the
    test asserts something its checker alone provides."""
    monkeypatch.setitem(CHECKERS, name, lambda context: [])
    with pytest.raises(AssertionError):
        test(context)
