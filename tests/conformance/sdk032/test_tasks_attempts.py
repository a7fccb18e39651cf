"""What becomes of a Task run's attempt on SDK 0.32.0 (spec sdk-0.32 §6.5; the 0.32.0 dist's
`tasks` module): cancelled while it waits or while a step runs (the step's signal aborts),
lost with its isolate in the middle of a step (its wake job drives it again; steps already
journaled are not run again), and a step's attempt that outlives its `timeout`
(`agents_core/releases/v0_32/tasks.py`, `task_steps.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from agents_core import Agent
from agents_core.errors import InvalidArgument
from agents_core.releases.v0_32.task_steps import StepPolicy
from agents_core.releases.v0_32.task_values import parse_task_duration
from sim import AgentRef, Simulation

on_0_32 = pytest.mark.parametrize("sim", ["0.32.0"], indirect=True)

CLAIM_TIMEOUT_MS = 330_000


class Workers(Agent):
    """Declares `work`: a step `prepare`, then a step `crunch` that waits `input.ms` of clock
    (`input.cooperative`: or until its signal aborts) under `input.config`, then a step
    `publish`. Every callback journals its call and what its signal says in `calls`."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql(
            "CREATE TABLE IF NOT EXISTS calls (step TEXT, attempt INTEGER, t INTEGER, "
            "aborted INTEGER, reason TEXT, interrupted TEXT)"
        )

    @property
    def task_definitions(self) -> Mapping[str, Any]:
        return {"work": self._work}

    def _journal(self, step: str, context: Any, interrupted: Any) -> None:
        signal = context.signal
        self.sql(
            "INSERT INTO calls VALUES (?, ?, ?, ?, ?, ?)",
            step,
            context.attempt,
            self.host.clock.now_ms(),
            1 if signal.aborted else 0,
            None if signal.reason is None else f"{type(signal.reason).__name__}: {signal.reason}",
            None if interrupted is None else f"{interrupted['name']}#{interrupted['attempt']}",
        )

    async def _wait(self, ms: int, signal: Any, cooperative: bool) -> None:
        if not cooperative:
            await self.host.clock.sleep(ms)
            return
        aborted = self.host.tasks.deferred()
        signal.add_listener(lambda _reason: aborted.resolve(None))
        await self.host.tasks.race(self.host.clock.sleep(ms), aborted)

    async def _work(self, input: Any, step: Any) -> str:
        async def prepare(context: Any) -> str:
            self._journal("prepare", context, step.interrupted)
            return "prepared"

        async def crunch(context: Any) -> str:
            await step.status("crunching")
            await self._wait(input["ms"], context.signal, input.get("cooperative", False))
            self._journal("crunch", context, step.interrupted)
            return "crunched"

        async def publish(context: Any) -> str:
            self._journal("publish", context, step.interrupted)
            return "published"

        await step.do("prepare", prepare)
        await step.do("crunch", input.get("config", {}), crunch)
        if input.get("nap"):
            await step.sleep("nap", input["nap"])
        return str(await step.do("publish", publish))

    async def start(self, input: Any, **options: Any) -> dict[str, Any]:
        return dict(await self.tasks.run("work", input, **options))

    async def get(self, run_id: str) -> dict[str, Any] | None:
        return await self.tasks.get(run_id)

    async def cancel(self, run_id: str, reason: str | None = None) -> bool:
        return await self.tasks.cancel(run_id, reason)


def calls(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    return sim.query(ref, "SELECT * FROM calls ORDER BY rowid")


def run_row(sim: Simulation, ref: AgentRef, run_id: str) -> dict[str, Any]:
    (row,) = sim.query(ref, "SELECT * FROM cf_agents_task_runs WHERE run_id = ?", run_id)
    return row


def wake_jobs(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    return sim.query(ref, "SELECT id, time FROM cf_agents_jobs WHERE capability = 'tasks'")


@on_0_32
def test_cancelling_a_waiting_run_settles_it_at_once(sim: Simulation) -> None:
    """A run parked on a sleep is cancelled at once: `cancelled`, with the request and its
    reason kept, `task:cancelled`, its wake job gone; the sleep never ends in another attempt,
    and a second cancel (or one of an unknown run) answers False."""
    ref = sim.agent(Workers, "w")
    run_id = sim.call(ref, "start", {"ms": 0, "nap": "1 hour"})["runId"]
    assert sim.call(ref, "get", run_id)["state"] == "waiting"
    assert sim.call(ref, "cancel", run_id, "no longer needed") is True
    row = run_row(sim, ref, run_id)
    assert (row["state"], row["cancel_requested"], row["cancel_reason"], row["next_at"]) == (
        "cancelled",
        1,
        "no longer needed",
        None,
    )
    assert [r.get("reason") for r in sim.trace.select("task:cancelled", runId=run_id)] == [
        "no longer needed"
    ]
    assert wake_jobs(sim, ref) == []
    snapshot = sim.call(ref, "get", run_id)
    assert (snapshot["state"], snapshot["reason"]) == ("cancelled", "no longer needed")
    sim.run_for(2 * 3_600_000)
    assert len(sim.trace.select("task:attempt:started", runId=run_id)) == 1
    assert [c["step"] for c in calls(sim, ref)] == ["prepare", "crunch"]
    assert sim.call(ref, "cancel", run_id) is False
    assert sim.call(ref, "cancel", "missing") is False


@on_0_32
def test_cancelling_a_running_step_aborts_its_signal_and_ends_the_run(sim: Simulation) -> None:
    """Cancel while `crunch` runs: the request is written (`cancel_requested` 1, deadline now),
    the step's signal aborts with the cancellation as its reason, the step (which watches its
    signal) returns at once, and the run settles `cancelled` there: `publish` never runs."""
    ref = sim.agent(Workers, "w")
    run_id = sim.call(ref, "start", {"ms": 60_000, "cooperative": True})["runId"]
    sim.run_for(3_000)
    assert sim.call(ref, "get", run_id)["statusMessage"] == "crunching"
    cancelled_at = sim.now_ms
    assert sim.call(ref, "cancel", run_id, "user left") is True
    sim.run_for(100)
    row = run_row(sim, ref, run_id)
    assert (row["state"], row["cancel_reason"], row["settled_at"]) == (
        "cancelled",
        "user left",
        cancelled_at,
    )
    crunch = [c for c in calls(sim, ref) if c["step"] == "crunch"]
    assert [(c["t"], c["aborted"], c["reason"]) for c in crunch] == [
        (cancelled_at, 1, "TaskCancellation: Task run cancelled (user left)")
    ]
    assert [c["step"] for c in calls(sim, ref)] == ["prepare", "crunch"]
    assert sim.trace.select("task:step:completed", runId=run_id, step="crunch") == []
    assert wake_jobs(sim, ref) == []


@on_0_32
def test_a_run_lost_mid_step_is_driven_again_by_its_wake_job(sim: Simulation) -> None:
    """The isolate dies while `crunch` runs. Its wake job (the claim's deadline, 330 s after
    the attempt claimed the run) starts the agent again: the run, still claimed, wakes now
    (`task:attempt:interrupted` at `crunch`), the second attempt replays `prepare` from the
    journal without calling it, runs `crunch` again (its attempt 2; `step.interrupted` names
    the step lost) and completes."""
    ref = sim.agent(Workers, "w")
    receipt = sim.call(ref, "start", {"ms": 10_000})
    run_id = receipt["runId"]
    sim.run_for(4_000)
    assert sim.evict(ref, "crash")
    claimed = run_row(sim, ref, run_id)
    assert (claimed["state"], claimed["attempt"]) == ("running", 1)
    assert wake_jobs(sim, ref) == [
        {"id": f"task:{run_id}", "time": receipt["createdAt"] + CLAIM_TIMEOUT_MS}
    ]
    sim.run_for(CLAIM_TIMEOUT_MS + 20_000)
    (interrupted,) = sim.trace.select("task:attempt:interrupted", runId=run_id)
    assert (interrupted.get("attempt"), interrupted.get("step")) == (1, "crunch")
    assert interrupted.t_ms == receipt["createdAt"] + CLAIM_TIMEOUT_MS
    assert [(c["step"], c["attempt"], c["interrupted"]) for c in calls(sim, ref)] == [
        ("prepare", 1, None),
        ("crunch", 2, "crunch#1"),
        ("publish", 1, "crunch#1"),
    ]
    done = run_row(sim, ref, run_id)
    assert (done["state"], done["attempt"], done["result"]) == ("completed", 2, '"published"')


@on_0_32
def test_a_step_attempt_that_outlives_its_timeout_fails_and_is_retried(sim: Simulation) -> None:
    """`crunch` with `timeout: "10 seconds"` and two attempts waits 60 s, watching its signal:
    each attempt's signal aborts 10 s after it started, with the error `Step "crunch" attempt
    <n> timed out after 10000ms`; the first is retried 1 s later, the second fails the step
    and the run with it (name `Error`)."""
    ref = sim.agent(Workers, "w")
    config = {"timeout": "10 seconds", "retries": {"limit": 2}}
    receipt = sim.call(ref, "start", {"ms": 60_000, "cooperative": True, "config": config})
    run_id = receipt["runId"]
    sim.run_for(60_000)
    started = receipt["createdAt"]
    crunch = [c for c in calls(sim, ref) if c["step"] == "crunch"]
    assert [(c["attempt"], c["t"] - started, c["aborted"]) for c in crunch] == [
        (1, 10_000, 1),
        (2, 21_000, 1),
    ]
    (failed,) = sim.trace.select("task:failed", runId=run_id)
    assert failed.get("error") == "Error"
    snapshot = sim.call(ref, "get", run_id)
    assert snapshot["error"] == {
        "name": "Error",
        "message": 'Step "crunch" attempt 2 timed out after 10000ms',
    }
    assert snapshot["settledAt"] == started + 21_000
    (step,) = sim.query(
        ref,
        "SELECT state, attempt, error_message FROM cf_agents_task_steps WHERE step_name = ?",
        "crunch",
    )
    assert (step["state"], step["attempt"]) == ("failed", 2)


@on_0_32
def test_a_step_that_ignores_its_signal_still_ends_as_timed_out(sim: Simulation) -> None:
    """A callback that does not watch its signal runs on past its timeout, cut off there (its
    attempt ends at the timeout: docs/divergences.md T18), and what it answers later is
    dropped: the attempt is the timed-out one."""
    ref = sim.agent(Workers, "w")
    config = {"timeout": "10 seconds", "retries": {"limit": 1}}
    run_id = sim.call(ref, "start", {"ms": 30_000, "config": config})["runId"]
    sim.run_for(40_000)
    assert sim.call(ref, "get", run_id)["error"]["message"] == (
        'Step "crunch" attempt 1 timed out after 10000ms'
    )
    assert [c["step"] for c in calls(sim, ref)] == ["prepare", "crunch"]


def test_durations_are_milliseconds_or_text() -> None:
    """A duration is ms (floored) or `<number> <unit>[s]` for second, minute, hour, day and
    week; a step's timeout defaults to 5 minutes; anything else is refused, naming the field."""
    assert parse_task_duration("1 day", "t") == 86_400_000
    assert parse_task_duration(" 1.5 minutes ", "t") == 90_000
    assert parse_task_duration("2 weeks", "t") == 1_209_600_000
    assert parse_task_duration(250.9, "t") == 250
    assert StepPolicy.of({"timeout": "1 day"}).timeout_ms == 86_400_000
    assert StepPolicy.of(None).timeout_ms == 300_000
    with pytest.raises(InvalidArgument, match='Invalid step timeout: .* got "10 secs"'):
        StepPolicy.of({"timeout": "10 secs"})
    with pytest.raises(InvalidArgument, match="Invalid sleep duration: .* got -1"):
        parse_task_duration(-1, "sleep duration")
