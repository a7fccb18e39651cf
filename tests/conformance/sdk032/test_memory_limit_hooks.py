"""The memory-limit breaker's hooks on 0.32.0 (spec sdk-0.32 §2.5; the 0.32.0 dist's
`JobDriver` memory-limit handling and `CapabilityRunner.memoryLimit`): on every strike each
capability's `on_memory_limit`, then the agent's `on_alarm_memory_limit`, with `sealed`,
`next_time`, the executing job, and, on a sealing strike, the recovery-loop jobs it purged. A
hook's error does not stop the breaker (`agents_core/releases/v0_32/breaker.py`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sim import Simulation
from sim.simulation import AgentRef
from tests.conformance.sdk032.job_agents import JobsAgent, payload

on_0_32 = pytest.mark.parametrize("sim", ["0.32.0"], indirect=True)

MEMORY_LIMIT = "Durable Object's isolate exceeded its memory limit and was reset."


def _described(who: str, context: Any) -> dict[str, Any]:
    executing = context.executing
    purged = context.purged_recovery_loop_jobs
    return {
        "who": who,
        "sealed": context.sealed,
        "next_time": context.next_time,
        "executing": None if executing is None else [executing.capability, executing.id],
        "purged": None if purged is None else [[j.id, j.time, j.recovery_loop] for j in purged],
    }


class Policy:
    """A capability with no jobs of its own whose `on_memory_limit` records what it is told
    (and raises when the agent's `policy_raises` KV key names it)."""

    def __init__(self, agent: HookedAgent, id: str) -> None:
        self._agent = agent
        self._id = id

    @property
    def id(self) -> str:
        return self._id

    async def on_start(self) -> None:
        return None

    async def on_job(self, job: Any, attempt: int) -> Any:
        return None

    @property
    def on_job_error(self) -> None:
        return None

    async def on_memory_limit(self, context: Any) -> None:
        self._agent.heard(_described(self._id, context))
        if self._agent.host.kv.get("policy_raises") == self._id:
            raise RuntimeError(f"{self._id} policy broke")


class HookedAgent(JobsAgent):
    """`JobsAgent` with two policy capabilities and an `on_alarm_memory_limit` that records
    what it is told (and raises when the `agent_raises` KV key is set)."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql("CREATE TABLE IF NOT EXISTS heard (t, what)")
        self._lifecycle.use(Policy(self, "first"))
        self._lifecycle.use(Policy(self, "second"))

    def heard(self, what: dict[str, Any]) -> None:
        self.sql("INSERT INTO heard VALUES (?, ?)", self.host.clock.now_ms(), json.dumps(what))

    async def on_alarm_memory_limit(self, context: Any) -> None:
        self.heard(_described("agent", context))
        if self.host.kv.get("agent_raises"):
            raise RuntimeError("agent policy broke")


def heard(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    return [json.loads(r["what"]) for r in sim.query(ref, "SELECT what FROM heard ORDER BY rowid")]


def strike(sim: Simulation, ref: AgentRef) -> int:
    """A job `M` whose dispatch hits a memory-limit reset, beside two recovery-loop jobs and a
    plain one; the alarm's time."""
    now = sim.now_ms
    sim.call(ref, "push", "work", "fn", now + 10_000, id="loop_near", recovery_loop=True)
    sim.call(ref, "push", "work", "fn", now + 90_000, id="loop_far", recovery_loop=True)
    sim.call(ref, "push", "work", "fn", now + 95_000, id="plain")
    at = now + 1_000
    sim.call(ref, "push", "work", "fn", at, id="M", payload=payload(errors=[MEMORY_LIMIT]))
    sim.run_for(1_500)
    return at


def wake(sim: Simulation) -> AgentRef:
    ref = sim.agent(HookedAgent, "a")
    sim.run_for(10_000)
    return ref


@on_0_32
def test_J034_a_strike_tells_each_capability_then_the_agent(sim: Simulation) -> None:
    """Below the limit the hooks still run, in install order and the agent last, told where
    the jobs were backed off to and which job struck; no purge to tell of."""
    ref = wake(sim)
    at = strike(sim, ref)
    told = {
        "sealed": False,
        "next_time": at + 30_000,
        "executing": ["work", "M"],
        "purged": None,
    }
    assert heard(sim, ref) == [{"who": who, **told} for who in ("first", "second", "agent")]


@on_0_32
def test_J035_a_sealing_strike_tells_the_hooks_what_it_purged(sim: Simulation) -> None:
    """The recovery-loop jobs are told as they were before the purge, in time order; the
    executing job is told though it was deleted; there is no backoff time."""
    ref = wake(sim)
    now = sim.now_ms
    sim.call(ref, "put_kv", "cf_agents:oom_alarm_strikes", 2)
    strike(sim, ref)
    purged = [["loop_near", now + 10_000, True], ["loop_far", now + 90_000, True]]
    told = {"sealed": True, "next_time": None, "executing": ["work", "M"], "purged": purged}
    assert heard(sim, ref) == [{"who": who, **told} for who in ("first", "second", "agent")]
    assert [r["id"] for r in sim.query(ref, "SELECT id FROM cf_agents_jobs")] == ["plain"]


@on_0_32
def test_a_capability_policy_that_raises_is_logged_and_the_next_still_runs(
    sim: Simulation,
) -> None:
    ref = wake(sim)
    sim.call(ref, "put_kv", "policy_raises", "first")
    strike(sim, ref)
    assert [h["who"] for h in heard(sim, ref)] == ["first", "second", "agent"]
    errors = [r.get("message") for r in sim.trace.select("console:error", agent=ref.path)]
    assert any(
        m.startswith("Lifecycle capability memory-limit policy failed") and "first policy" in m
        for m in errors
    )


@on_0_32
def test_an_agent_policy_that_raises_leaves_the_breaker_to_finish(sim: Simulation) -> None:
    """The agent's hook raising changes nothing of the event: the alarm is re-armed at the
    backoff, the isolate reset, and the alarm not failed."""
    ref = wake(sim)
    sim.call(ref, "put_kv", "agent_raises", True)
    at = strike(sim, ref)
    assert [h["who"] for h in heard(sim, ref)] == ["first", "second", "agent"]
    assert sim.alarm_of(ref) == at + 30_000
    ends = sim.trace.select("incarnation:end", agent=ref.path)
    assert ends[-1].get("message") == "Alarm memory-limit strike 1/3; resetting isolate (#1825)"
    assert sim.trace.select("alarm:failed", agent=ref.path) == []


@on_0_32
def test_a_strike_of_the_agents_own_alarm_hook_is_charged_to_no_job(sim: Simulation) -> None:
    """A memory-limit reset of `on_alarm` (outside any job) tells the hooks of no job."""

    class Striking(HookedAgent):
        async def on_alarm(self) -> None:
            if self.host.kv.get("strike"):
                self.host.kv.delete("strike")
                raise RuntimeError(MEMORY_LIMIT)

    ref = sim.agent(Striking, "s")
    sim.run_for(10_000)
    sim.call(ref, "put_kv", "strike", True)
    at = sim.now_ms + 1_000
    sim.call(ref, "push", "work", "fn", at, id="ok")
    sim.run_for(1_500)
    assert [(h["who"], h["executing"], h["next_time"]) for h in heard(sim, ref)] == [
        (who, None, at + 30_000) for who in ("first", "second", "agent")
    ]
