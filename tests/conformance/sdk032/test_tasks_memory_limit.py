"""The memory-limit breaker's policy for a Task run on 0.32.0 (spec sdk-0.32 §2.5; the 0.32.0
dist's `Tasks.onMemoryLimit`): a strike charged to a run's wake strips the run's claim and
pushes its deadline to the backoff (never pulls it in: a claimed run's deadline, its claim's
330 s, is later), so the next incarnation's startup does not wake it at once;
a sealing strike fails it with `TaskMemoryLimitSealed`. A wake whose attempt outlives the
dispatch budget hands the attempt to the breaker (`agents_core/releases/v0_32/tasks.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from agents_core import Agent
from sim import AgentRef, Simulation

on_0_32 = pytest.mark.parametrize("sim", ["0.32.0"], indirect=True)

MEMORY_LIMIT = "Durable Object's isolate exceeded its memory limit and was reset."
STRIKES = "cf_agents:oom_alarm_strikes"
CLAIM_TIMEOUT_MS = 330_000


class Runner(Agent):
    """Declares `job`: a 1 s sleep, then a step `work` that waits `input.ms` and, while the KV
    key `oom` is set, deletes it and hits a memory-limit reset."""

    @property
    def task_definitions(self) -> Mapping[str, Any]:
        return {"job": self._job}

    async def _job(self, input: Any, step: Any) -> str:
        async def work(_context: Any) -> str:
            await self.host.clock.sleep(input.get("ms", 0))
            if self.host.kv.get("oom"):
                self.host.kv.delete("oom")
                raise RuntimeError(MEMORY_LIMIT)
            return "worked"

        await step.sleep("nap", 1_000)
        return str(await step.do("work", work))

    async def start(self, input: Any) -> str:
        return str((await self.tasks.run("job", input))["runId"])

    async def put_kv(self, key: str, value: Any) -> None:
        self.host.kv.put(key, value)

    async def ping(self) -> None:
        return None


def run_row(sim: Simulation, ref: AgentRef, run_id: str) -> dict[str, Any]:
    (row,) = sim.query(ref, "SELECT * FROM cf_agents_task_runs WHERE run_id = ?", run_id)
    return row


def wake_job_time(sim: Simulation, ref: AgentRef, run_id: str) -> int:
    (job,) = sim.query(ref, "SELECT time FROM cf_agents_jobs WHERE id = ?", f"task:{run_id}")
    return int(job["time"])


def attempts_started(sim: Simulation, run_id: str) -> list[int]:
    return [r.t_ms for r in sim.trace.select("task:attempt:started", runId=run_id)]


def start(sim: Simulation, **input: Any) -> tuple[AgentRef, str, int]:
    """A run whose first attempt parks on its 1 s sleep; the wake then strikes. Its wake's
    time."""
    ref = sim.agent(Runner, "r")
    sim.run_for(1_000)
    sim.call(ref, "put_kv", "oom", True)
    run_id = sim.call(ref, "start", input)
    wake_at = sim.now_ms + 1_000
    return ref, run_id, wake_at


@on_0_32
def test_a_struck_run_keeps_its_state_without_a_claim_until_the_backoff(
    sim: Simulation,
) -> None:
    """The wake's attempt hits a memory-limit reset: the run stays `running` with no claim and
    its deadline where its claim had put it (past the 30 s backoff, which does not pull it in);
    its wake follows it there; an incarnation woken meanwhile leaves it alone; then its next
    attempt finds the interrupted one and completes."""
    ref, run_id, wake_at = start(sim)
    sim.run_until(wake_at + 500)
    (strike,) = sim.trace.select("alarm:memory_limit_reset", agent=ref.path)
    assert (strike.t_ms, strike.get("strikes"), strike.get("sealed")) == (wake_at, 1, False)
    row = run_row(sim, ref, run_id)
    backoff = wake_at + CLAIM_TIMEOUT_MS
    assert (row["state"], row["generation"], row["next_at"]) == ("running", None, backoff)
    assert wake_job_time(sim, ref, run_id) == backoff
    sim.call(ref, "ping")  # a fresh incarnation, whose startup reconciles the runs
    sim.run_until(backoff - 1)
    assert attempts_started(sim, run_id) == [wake_at - 1_000, wake_at]
    sim.run_until(backoff + 1_000)
    assert attempts_started(sim, run_id)[2:] == [backoff]
    (interrupted,) = sim.trace.select("task:attempt:interrupted", runId=run_id)
    assert interrupted.t_ms == backoff
    assert run_row(sim, ref, run_id)["state"] == "completed"


@on_0_32
def test_a_sealing_strike_fails_the_run(sim: Simulation) -> None:
    ref, run_id, wake_at = start(sim)
    sim.call(ref, "put_kv", STRIKES, 2)
    sim.run_until(wake_at + 500)
    row = run_row(sim, ref, run_id)
    assert (row["state"], row["error_name"], row["next_at"]) == (
        "failed",
        "TaskMemoryLimitSealed",
        None,
    )
    (failed,) = sim.trace.select("task:failed", runId=run_id)
    assert (failed.t_ms, failed.get("error")) == (wake_at, "TaskMemoryLimitSealed")
    assert sim.query(ref, "SELECT id FROM cf_agents_jobs WHERE capability = 'tasks'") == []
    sim.call(ref, "ping")
    sim.run_for(60_000)
    assert attempts_started(sim, run_id) == [wake_at - 1_000, wake_at]


@on_0_32
def test_an_attempt_past_the_dispatch_budget_is_struck_against_its_wake(
    sim: Simulation,
) -> None:
    """The wake's attempt outlives the 5 s dispatch budget (the wake returns) and hits a
    memory-limit reset 8 s in: the strike is charged to the run's wake (which the breaker
    backs off), and the policy is applied to the run: its claim goes, and its wake follows its
    deadline (the claim's, refreshed as the step began)."""
    ref, run_id, wake_at = start(sim, ms=8_000)
    sim.run_until(wake_at + 9_000)
    struck_at = wake_at + 8_000
    (strike,) = sim.trace.select("alarm:memory_limit_reset", agent=ref.path)
    assert (strike.t_ms, strike.get("strikes")) == (struck_at, 1)
    assert sim.trace.select("alarm:done", agent=ref.path)[-1].t_ms == wake_at + 5_000
    row = run_row(sim, ref, run_id)
    deadline = wake_at + CLAIM_TIMEOUT_MS
    assert (row["state"], row["generation"], row["next_at"]) == ("running", None, deadline)
    assert wake_job_time(sim, ref, run_id) == deadline
