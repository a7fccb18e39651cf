"""What chat recovery's continuations take of 0.32.0's Tasks capability, on a plain agent: a run
enqueued (its first attempt left to its wake job), joined by its idempotency key, and a durable
`step.sleep` that parks the run until its wake time and is not slept again on replay (spec
sdk-0.32 §8.3; `agents_core/releases/v0_32/tasks.py`, `task_steps.py`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents_core import Agent
from agents_core.errors import InvalidArgument
from sim import AgentRef, Simulation

on_0_32 = pytest.mark.parametrize("sim", ["0.32.0"], indirect=True)


class Sleeper(Agent):
    """Registers `__cf_test_sleeper`: a step, a sleep of `input.ms`, another step."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._tasks = self._lifecycle.capability("tasks")
        self._tasks.register("__cf_test_sleeper", self._sleeper)
        self._tasks.register("__cf_test_other", self._sleeper)

    async def _sleeper(self, input: Any, step: Any) -> str:
        self.host.trace.emit("workload:handler", ms=input["ms"])

        async def first(_context: Any) -> int:
            return self.host.clock.now_ms()

        async def second(_context: Any) -> int:
            return self.host.clock.now_ms()

        began = await step.do("first", {"retries": {"limit": 1}}, first)
        await step.sleep("nap", input["ms"])
        ended = await step.do("second", {"retries": {"limit": 1}}, second)
        return f"{began}->{ended}"

    async def enqueue(self, definition: str, ms: int, **options: Any) -> dict[str, Any]:
        return dict(await self._tasks.enqueue(definition, {"ms": ms}, **options))


def runs(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    return sim.query(ref, "SELECT run_id, state, next_at, attempt, result FROM cf_agents_task_runs")


@on_0_32
def test_an_enqueued_run_waits_for_its_wake_job(sim: Simulation) -> None:
    """`enqueue` answers at once with a `pending` receipt (default run id `task_<nanoid>`); no
    attempt starts in the caller; the wake job's alarm drives the first attempt."""
    ref = sim.agent(Sleeper, "s")
    receipt = sim.call(ref, "enqueue", "__cf_test_sleeper", 0)
    run_id = receipt["runId"]
    assert run_id.startswith("task_") and len(run_id) == len("task_") + 21
    assert (receipt["accepted"], receipt["state"]) == (True, "pending")
    assert sim.trace.select("task:attempt:started") == []
    assert sim.query(ref, "SELECT fn FROM cf_agents_jobs WHERE id = ?", f"task:{run_id}") == [
        {"fn": "wake"}
    ]
    sim.run_for(1_000)
    (started,) = sim.trace.select("task:attempt:started", runId=run_id)
    assert started.get("attempt") == 1
    assert [r.get("runId") for r in sim.trace.select("task:completed")] == [run_id]


@on_0_32
def test_an_idempotency_key_joins_the_live_run(sim: Simulation) -> None:
    """A second enqueue with the same key joins the first run (`accepted` false, one row); the
    key on another definition, or a run id joined with another key, is refused."""
    ref = sim.agent(Sleeper, "s")
    first = sim.call(ref, "enqueue", "__cf_test_sleeper", 0, idempotency_key="k")
    again = sim.call(ref, "enqueue", "__cf_test_sleeper", 0, idempotency_key="k")
    assert (again["runId"], again["accepted"]) == (first["runId"], False)
    assert len(runs(sim, ref)) == 1
    with pytest.raises(InvalidArgument, match='already belongs to definition "__cf_test_sleeper"'):
        sim.call(ref, "enqueue", "__cf_test_other", 0, idempotency_key="k")
    with pytest.raises(InvalidArgument, match='carries idempotency key "k"; refusing to join'):
        sim.call(ref, "enqueue", "__cf_test_sleeper", 0, run_id=first["runId"], idempotency_key="j")
    with pytest.raises(InvalidArgument, match="idempotencyKey must be a non-empty string"):
        sim.call(ref, "enqueue", "__cf_test_sleeper", 0, idempotency_key="")


@on_0_32
def test_a_sleep_parks_the_run_and_is_not_slept_again(sim: Simulation) -> None:
    """The first attempt journals `first`, then the sleep: the run is `waiting` until 5 s later
    (`task:waiting {reason: sleep}`). The second attempt, at that time, replays `first` from
    the journal, finds the sleep due and runs `second`: the result spans the sleep."""
    ref = sim.agent(Sleeper, "s")
    run_id = sim.call(ref, "enqueue", "__cf_test_sleeper", 5_000)["runId"]
    sim.run_for(100)
    (waiting,) = sim.trace.select("task:waiting", runId=run_id)
    wake_at = waiting.get("wakeAt")
    assert waiting.get("reason") == "sleep"
    (run,) = runs(sim, ref)
    assert (run["state"], run["next_at"]) == ("waiting", wake_at)
    steps = "SELECT step_name, kind, state, next_at FROM cf_agents_task_steps ORDER BY created_at"
    assert [(s["step_name"], s["kind"], s["state"]) for s in sim.query(ref, steps)] == [
        ("first", "do", "completed"),
        ("nap", "sleep", "waiting"),
    ]
    sim.run_for(10_000)
    attempts = sim.trace.select("task:attempt:started", runId=run_id)
    assert [(r.get("attempt"), r.t_ms >= wake_at) for r in attempts] == [(1, False), (2, True)]
    assert [r.get("step") for r in sim.trace.select("task:step:started", runId=run_id)] == [
        "first",
        "second",
    ]
    (run,) = runs(sim, ref)
    began, ended = (int(t) for t in json.loads(run["result"]).split("->"))
    assert ended - began >= 5_000
    assert len(sim.trace.select("workload:handler")) == 2


@on_0_32
def test_a_sleep_already_due_does_not_suspend(sim: Simulation) -> None:
    """A sleep of 0 ms is journaled `completed` at once: one attempt runs the whole handler."""
    ref = sim.agent(Sleeper, "s")
    run_id = sim.call(ref, "enqueue", "__cf_test_sleeper", 0)["runId"]
    sim.run_for(1_000)
    assert sim.trace.select("task:waiting") == []
    assert len(sim.trace.select("task:attempt:started", runId=run_id)) == 1
    nap = sim.query(ref, "SELECT state FROM cf_agents_task_steps WHERE step_name = 'nap'")
    assert nap == [{"state": "completed"}]
