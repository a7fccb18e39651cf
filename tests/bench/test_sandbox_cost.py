"""What the sandbox and the turn limit cost (`sim.sandbox`, `sim.watchdog`).

Run: `python -m pytest tests/bench/test_sandbox_cost.py -m bench --benchmark-enable -s`.
Printed, not asserted: a caught name (`time.monotonic`) called outside agent code, from harness
code and from elsewhere, beside the original; and a durable step with the turn limit watched
beside one without (`RunBudget.unlimited()`). The durable-step figures of `test_speed.py` are
the ones that must stay within a few percent of what they were before the sandbox.
"""

from __future__ import annotations

import time
import timeit
from typing import Any

import pytest

from agents_core import Agent
from sim import Simulation, sandbox
from sim.budget import RunBudget

pytestmark = pytest.mark.bench

CALLS = 200_000


class Stepper(Agent):
    async def steps(self, count: int) -> int:
        for _ in range(count):
            await self.host.clock.sleep(1)
        return count


def _steps_per_s(budget: RunBudget) -> float:
    with Simulation(budget=budget) as run:
        ref = run.agent(Stepper, "s")
        started = time.perf_counter()
        run.call(ref, "steps", 50_000)
        return 50_000 / (time.perf_counter() - started)


def test_the_cost_of_the_sandbox_outside_agent_code(enabled_benchmark: Any) -> None:
    Simulation().close()  # installs the wrappers
    original = sandbox._ORIGINALS[("time", "monotonic")]
    wrapped = time.monotonic
    assert wrapped is not original
    harness = compile("for _ in range(n): call()", sandbox.__file__, "exec")  # as harness code

    def from_harness(call: Any) -> float:
        return timeit.timeit(lambda: exec(harness, {"n": CALLS, "call": call}), number=1)  # noqa: S102

    figures = enabled_benchmark.pedantic(
        lambda: {
            "original_ns": from_harness(original) / CALLS * 1e9,
            "from_harness_ns": from_harness(wrapped) / CALLS * 1e9,
            "from_elsewhere_ns": timeit.timeit(wrapped, number=CALLS) / CALLS * 1e9,
        },
        rounds=1,
        iterations=1,
    )
    print(", ".join(f"{key}={value:,.0f}" for key, value in figures.items()))
    assert all(value > 0 for value in figures.values())


def test_the_cost_of_watching_steps(enabled_benchmark: Any) -> None:
    figures = enabled_benchmark.pedantic(
        lambda: {
            "watched_steps_per_s": _steps_per_s(RunBudget.unlimited(turn_s=5.0)),
            "unwatched_steps_per_s": _steps_per_s(RunBudget.unlimited()),
        },
        rounds=1,
        iterations=1,
    )
    print(", ".join(f"{key}={value:,.0f}" for key, value in figures.items()))
    assert all(value > 0 for value in figures.values())
