"""A Task step whose callback ignores its signal, on SDK 0.32.0 (spec sdk-0.32 §6.5; the
0.32.0 dist's `tasks` module, `_executeAttempt` and `_raceTimeout`; docs/divergences.md T18):
the step races the callback against its signal, so at its timeout, or at a cancel of its run,
the step, the attempt and the run settle at once while the abandoned callback runs on. What
it answers then is dropped, its writes through the step are fenced by the attempt's
generation, and its other writes land (`agents_core/releases/v0_32/task_race.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents_core import Agent
from sim import AgentRef, Simulation
from tests.releases import on_release

on_0_32 = on_release("0.32.0")

TIMED_OUT_AT_10S = 'Step "slow" attempt {n} timed out after 10000ms'


class Stubborn(Agent):
    """Declares Task definitions whose step `slow` sleeps `input.naps` (ms each, 30 s by
    default) without watching its signal, noting in `notes` when it starts and ends, and
    writing the run's status before and after its naps."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql("CREATE TABLE IF NOT EXISTS notes (what TEXT, attempt INTEGER, t INTEGER)")

    @property
    def task_definitions(self) -> Mapping[str, Any]:
        return {
            "work": self._work,
            "quitter": self._quitter,
            "parallel": self._parallel,
        }

    def _note(self, what: str, attempt: int) -> None:
        self.sql("INSERT INTO notes VALUES (?, ?, ?)", what, attempt, self.host.clock.now_ms())

    def _slow(self, input: Any, step: Any) -> Any:
        async def slow(context: Any) -> str:
            self._note("start", context.attempt)
            await step.status(f"working {context.attempt}")
            for nap in input.get("naps", [30_000]):
                await self.host.clock.sleep(nap)
            await step.status(f"late {context.attempt}")
            self._note("end", context.attempt)
            if input.get("raise_late"):
                raise RuntimeError("too late to matter")
            return f"slow {context.attempt}"

        return slow

    async def _work(self, input: Any, step: Any) -> str:
        try:
            answer = await step.do("slow", input.get("config", {}), self._slow(input, step))
        except Exception as error:
            if not input.get("catch"):
                raise
            answer = f"caught: {error}"
        self._note("after", 0)
        return str(answer)

    async def _quitter(self, input: Any, step: Any) -> int:
        async def quitter(context: Any) -> int:
            await self.host.clock.sleep(1_000)
            await self.tasks.cancel(input["me"], "changed my mind")
            self._note("cancelled", context.attempt)
            await self.host.clock.sleep(20_000)
            self._note("end", context.attempt)
            return 1

        return int(await step.do("quitter", quitter))

    async def _parallel(self, input: Any, step: Any) -> list[Any]:
        async def quick(_context: Any) -> str:
            return "quick"

        return list(
            await self.host.tasks.gather(
                step.do("slow", input["config"], self._slow(input, step)),
                step.do("quick", quick),
            )
        )

    async def start(self, definition: str, input: Any, run_id: str | None = None) -> Any:
        return dict(await self.tasks.run(definition, input, run_id=run_id))

    async def attached(self, input: Any) -> int:
        """Drive an attached run of `work` here; the time the call goes on."""
        await self.tasks.run_attached("work", input)
        return self.host.clock.now_ms()

    async def get(self, run_id: str) -> dict[str, Any] | None:
        return await self.tasks.get(run_id)

    async def cancel(self, run_id: str, reason: str | None = None) -> bool:
        return await self.tasks.cancel(run_id, reason)


def notes(sim: Simulation, ref: AgentRef, since: int) -> list[tuple[str, int, int]]:
    rows = sim.query(ref, "SELECT * FROM notes ORDER BY rowid")
    return [(r["what"], r["attempt"], r["t"] - since) for r in rows]


def step_row(sim: Simulation, ref: AgentRef, name: str) -> dict[str, Any]:
    (row,) = sim.query(
        ref,
        "SELECT state, attempt, result, error_message FROM cf_agents_task_steps "
        "WHERE step_name = ?",
        name,
    )
    return row


def status_message(sim: Simulation, ref: AgentRef, run_id: str) -> str | None:
    (row,) = sim.query(
        ref, "SELECT status_message FROM cf_agents_task_runs WHERE run_id = ?", run_id
    )
    return row["status_message"]


def at(sim: Simulation, event: str, run_id: str, since: int) -> list[int]:
    return [r.t_ms - since for r in sim.trace.select(event, runId=run_id)]


@on_0_32
def test_a_timed_out_step_settles_at_its_timeout_while_its_callback_runs_on(
    sim: Simulation,
) -> None:
    """`slow` (timeout 10 s, two attempts, 1 s apart) sleeps 30 s ignoring its signal: its
    first attempt fails at 10 s (the run waits for its retry), the second starts at 11 s while
    the first callback still runs, and the run fails at 21 s; each abandoned callback ends
    20 s after its step did, its own writes landing, its status write and its answer
    dropped (the step row keeps no result, and no step completes)."""
    ref = sim.agent(Stubborn, "s")
    config = {"timeout": "10 seconds", "retries": {"limit": 2, "delay": 1_000}}
    receipt = sim.call(ref, "start", "work", {"config": config})
    run_id, started = receipt["runId"], receipt["createdAt"]
    sim.run_for(12_000)
    assert at(sim, "task:waiting", run_id, started) == [10_000]
    assert at(sim, "task:attempt:started", run_id, started) == [0, 11_000]
    assert status_message(sim, ref, run_id) == "working 2"
    sim.run_for(60_000)
    snapshot = sim.call(ref, "get", run_id)
    assert (snapshot["state"], snapshot["settledAt"] - started) == ("failed", 21_000)
    assert snapshot["error"] == {"name": "Error", "message": TIMED_OUT_AT_10S.format(n=2)}
    assert notes(sim, ref, started) == [
        ("start", 1, 0),
        ("start", 2, 11_000),
        ("end", 1, 30_000),
        ("end", 2, 41_000),
    ]
    assert status_message(sim, ref, run_id) == "working 2"
    row = step_row(sim, ref, "slow")
    assert (row["state"], row["attempt"], row["result"]) == ("failed", 2, None)
    assert row["error_message"] == TIMED_OUT_AT_10S.format(n=2)
    assert sim.trace.select("task:step:completed", runId=run_id) == []


@on_0_32
def test_a_handler_that_catches_the_timeout_goes_on_at_once(sim: Simulation) -> None:
    """With one attempt, the timeout fails the step at 10 s and the handler, which catches
    it, completes the run there; the callback ends at 30 s, after the run settled: its note
    lands, its status write does not, and what it raises is dropped (no error is reported)."""
    ref = sim.agent(Stubborn, "s")
    config = {"timeout": "10 seconds", "retries": {"limit": 1}}
    receipt = sim.call(ref, "start", "work", {"config": config, "catch": True, "raise_late": True})
    run_id, started = receipt["runId"], receipt["createdAt"]
    sim.run_for(60_000)
    snapshot = sim.call(ref, "get", run_id)
    assert (snapshot["state"], snapshot["settledAt"] - started) == ("completed", 10_000)
    assert snapshot["result"] == f"caught: {TIMED_OUT_AT_10S.format(n=1)}"
    assert notes(sim, ref, started) == [("start", 1, 0), ("after", 0, 10_000), ("end", 1, 30_000)]
    assert status_message(sim, ref, run_id) == "working 1"
    assert sim.trace.select("task:error") == []
    assert [r for r in sim.trace.select("console:error") if "too late" in str(r.fields)] == []


@on_0_32
def test_cancelling_a_step_that_ignores_its_signal_settles_the_run_at_once(
    sim: Simulation,
) -> None:
    """Cancelled 5 s into `slow`, the run settles `cancelled` then (its wake job gone), though
    the callback runs on to 30 s; what it answers then changes nothing."""
    ref = sim.agent(Stubborn, "s")
    receipt = sim.call(ref, "start", "work", {})
    run_id, started = receipt["runId"], receipt["createdAt"]
    sim.run_for(5_000)
    assert sim.call(ref, "cancel", run_id, "enough") is True
    sim.run_for(100)
    snapshot = sim.call(ref, "get", run_id)
    assert (snapshot["state"], snapshot["reason"], snapshot["settledAt"] - started) == (
        "cancelled",
        "enough",
        5_000,
    )
    assert at(sim, "task:cancelled", run_id, started) == [5_000]
    assert sim.query(ref, "SELECT id FROM cf_agents_jobs WHERE capability = 'tasks'") == []
    sim.run_for(60_000)
    assert notes(sim, ref, started) == [("start", 1, 0), ("end", 1, 30_000)]
    assert sim.call(ref, "get", run_id)["state"] == "cancelled"
    assert step_row(sim, ref, "slow")["state"] == "running"
    assert sim.trace.select("task:step:completed", runId=run_id) == []


@on_0_32
def test_a_step_callback_that_cancels_its_own_run_ends_its_step_as_it_next_waits(
    sim: Simulation,
) -> None:
    """A callback that cancels its own run and sleeps on: the run settles `cancelled` as the
    callback waits (1 s in), and the callback ends 20 s later, unobserved."""
    ref = sim.agent(Stubborn, "s")
    receipt = sim.call(ref, "start", "quitter", {"me": "task_me"}, "task_me")
    started = receipt["createdAt"]
    sim.run_for(30_000)
    snapshot = sim.call(ref, "get", "task_me")
    assert (snapshot["state"], snapshot["settledAt"] - started) == ("cancelled", 1_000)
    assert notes(sim, ref, started) == [("cancelled", 1, 1_000), ("end", 1, 21_000)]


@on_0_32
def test_a_wake_whose_step_times_out_ends_its_alarm_dispatch_then(sim: Simulation) -> None:
    """The retry runs under the run's wake job (an alarm at 3 s); its step times out at 5 s,
    within the dispatch budget, and the alarm is done then, not when the budget runs out."""
    ref = sim.agent(Stubborn, "s")
    config = {"timeout": "2 seconds", "retries": {"limit": 2, "delay": 1_000}}
    receipt = sim.call(ref, "start", "work", {"config": config})
    run_id, started = receipt["runId"], receipt["createdAt"]
    sim.run_for(60_000)
    snapshot = sim.call(ref, "get", run_id)
    assert (snapshot["state"], snapshot["settledAt"] - started) == ("failed", 5_000)
    assert [r.t_ms - started for r in sim.trace.select("alarm:fired")] == [3_000]
    assert [r.t_ms - started for r in sim.trace.select("alarm:done")] == [5_000]


@on_0_32
def test_a_step_the_handler_runs_in_a_task_of_its_own_ends_at_its_callbacks_next_wake(
    sim: Simulation,
) -> None:
    """Under `gather`, a step's await is not the attempt's to cut (T18): `slow` (timeout
    10 s, naps of 15 s and 15 s) ends with its timeout as its first nap ends, at 15 s, and its
    callback goes on alone to 30 s."""
    ref = sim.agent(Stubborn, "s")
    config = {"timeout": "10 seconds", "retries": {"limit": 1}}
    receipt = sim.call(ref, "start", "parallel", {"config": config, "naps": [15_000, 15_000]})
    run_id, started = receipt["runId"], receipt["createdAt"]
    sim.run_for(60_000)
    snapshot = sim.call(ref, "get", run_id)
    assert (snapshot["state"], snapshot["settledAt"] - started) == ("failed", 15_000)
    assert snapshot["error"]["message"] == TIMED_OUT_AT_10S.format(n=1)
    assert notes(sim, ref, started) == [("start", 1, 0), ("end", 1, 30_000)]


@on_0_32
def test_an_attached_runs_caller_goes_on_at_the_abandoned_callbacks_next_wake(
    sim: Simulation,
) -> None:
    """An attached run (the chat turn's form) settles at its step's timeout, 10 s in; its
    caller, whose task waits on the abandoned callback, goes on as the callback's first nap
    ends (15 s), not when the callback ends (30 s) (T18)."""
    ref = sim.agent(Stubborn, "s")
    config = {"timeout": "10 seconds", "retries": {"limit": 1}}
    started = sim.now_ms
    resumed_at = sim.call(ref, "attached", {"config": config, "naps": [15_000, 15_000]})
    assert resumed_at - started == 15_000
    (run,) = sim.query(ref, "SELECT state, settled_at FROM cf_agents_task_runs")
    assert (run["state"], run["settled_at"] - started) == ("failed", 10_000)
    sim.run_for(60_000)
    assert notes(sim, ref, started) == [("start", 1, 0), ("end", 1, 30_000)]
