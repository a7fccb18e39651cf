"""The coroutine driver: host awaitables, combinators, eager starts and bad awaits."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from agents_core import Agent
from sim import AgentEvicted, Simulation

RAN_AFTER_DEATH: list[str] = []
UNSTARTED: list[Coroutine[Any, Any, Any]] = []


class Worker(Agent):
    async def crash_in_background(self) -> None:
        def background_statement() -> None:
            self.sql("SELECT 1 AS background")  # a crash fault is armed on this one

        async def background() -> None:
            background_statement()
            await self.host.clock.sleep(5)

        self.host.tasks.wait_until(background())
        RAN_AFTER_DEATH.append("the caller went on after its incarnation died")
        self.sql("SELECT 2 AS caller")

    async def gather_after_a_crash(self, combinator: str) -> None:
        async def first() -> None:
            self.sql("SELECT 1 AS background")  # a crash fault is armed on this one
            await self.host.clock.sleep(5)

        async def second() -> None:
            await self.host.clock.sleep(5)

        later = second()
        UNSTARTED.append(later)
        await getattr(self.host.tasks, combinator)(first(), later)

    async def bad_await(self) -> None:
        await asyncio.sleep(0)  # the line the error must name

    async def caught_bad_await(self) -> str:
        try:
            await asyncio.sleep(0)
        except TypeError as exc:
            return str(exc)
        return "no error"

    async def gather_three(self) -> list[object]:
        async def after(ms: int, value: object) -> object:
            await self.host.clock.sleep(ms)
            return value

        return await self.host.tasks.gather(after(30, "a"), after(10, "b"), after(20, "c"))

    async def gather_failing(self) -> str:
        async def fail_after(ms: int) -> None:
            await self.host.clock.sleep(ms)
            raise ValueError(f"failed after {ms}")

        async def ok_after(ms: int) -> int:
            await self.host.clock.sleep(ms)
            return ms

        try:
            await self.host.tasks.gather(ok_after(50), fail_after(20), fail_after(30))
        except ValueError as exc:
            return f"{exc} at {self.host.clock.now_ms()}"
        return "no error"

    async def race_two(self) -> object:
        async def after(ms: int, value: object) -> object:
            await self.host.clock.sleep(ms)
            return value

        return [
            await self.host.tasks.race(after(40, "slow"), after(15, "fast")),
            self.host.clock.now_ms(),
        ]

    async def eager_start(self) -> list[str]:
        seen: list[str] = []

        async def background() -> None:
            seen.append("background before its first await")
            await self.host.clock.sleep(5)
            seen.append("background after sleep")

        self.host.tasks.wait_until(background())
        seen.append("caller after wait_until")
        await self.host.clock.sleep(10)
        return seen

    async def deferred_twice(self) -> list[object]:
        deferred = self.host.tasks.deferred()

        async def settle() -> None:
            await self.host.clock.sleep(7)
            deferred.resolve("settled")

        self.host.tasks.wait_until(settle())
        first = await deferred
        second = await deferred
        return [first, second, self.host.clock.now_ms()]

    async def same_time_order(self) -> list[int]:
        order: list[int] = []

        async def mark(index: int) -> None:
            await self.host.clock.sleep(100)
            order.append(index)

        tasks = [self.host.tasks.wait_until(mark(i)) for i in range(6)]
        await self.host.tasks.gather(*tasks)
        return order


def test_awaiting_a_foreign_awaitable_raises_type_error_naming_the_line(sim: Simulation) -> None:
    """Awaiting asyncio inside agent code fails with a TypeError that names file and line."""
    worker = sim.agent(Worker, "w")
    with pytest.raises(TypeError, match=r"test_kernel\.py:\d+: awaited .* not a host awaitable"):
        sim.call(worker, "bad_await")
    message = sim.call(worker, "caught_bad_await")
    line = next(
        number
        for number, text in enumerate(Path(__file__).read_text().splitlines(), start=1)
        if "await asyncio.sleep(0)" in text and "the line" not in text
    )
    assert f"test_kernel.py:{line}:" in message


def test_gather_returns_results_in_argument_order(sim: Simulation) -> None:
    """gather resolves with every result, in the order the awaitables were given."""
    worker = sim.agent(Worker, "w")
    assert sim.call(worker, "gather_three") == ["a", "b", "c"]
    assert sim.now_ms == 30


def test_gather_fails_with_the_first_error(sim: Simulation) -> None:
    """gather rejects as soon as one awaitable fails, with that error (Promise.all)."""
    worker = sim.agent(Worker, "w")
    assert sim.call(worker, "gather_failing") == "failed after 20 at 20"


def test_race_settles_with_the_first(sim: Simulation) -> None:
    """race resolves with whichever settles first (Promise.race)."""
    worker = sim.agent(Worker, "w")
    assert sim.call(worker, "race_two") == ["fast", 15]


def test_wait_until_runs_eagerly_up_to_the_first_await(sim: Simulation) -> None:
    """A background task runs synchronously until its first await, as a JavaScript call does."""
    worker = sim.agent(Worker, "w")
    assert sim.call(worker, "eager_start") == [
        "background before its first await",
        "caller after wait_until",
        "background after sleep",
    ]


def test_a_crash_in_a_task_s_first_stretch_stops_the_task_that_started_it(
    sim: Simulation,
) -> None:
    """A background task started eagerly dies in its first step (a crash on its statement):
    the caller that started it dies at that call too, and no line of it runs after the death."""
    worker = sim.agent(Worker, "w")
    sim.call(worker, "eager_start")  # wakes it: startup is done
    sim.arm_storage_fault(worker, "crash", match="AS background")
    RAN_AFTER_DEATH.clear()
    with pytest.raises(AgentEvicted):
        sim.call(worker, "crash_in_background")
    assert RAN_AFTER_DEATH == []
    ended = [r for r in sim.trace.records if r.event == "incarnation:end"]
    assert [r.fields["reason"] for r in ended] == ["crash"]
    later = sim.trace.records[sim.trace.records.index(ended[0]) + 1 :]
    assert [r for r in later if r.agent == worker.path] == []


@pytest.mark.parametrize("combinator", ["gather", "race"])
def test_coroutines_a_dying_gather_never_started_are_closed(
    sim: Simulation, combinator: str
) -> None:
    """Starting the first coroutine of a gather (or race) kills the incarnation: the ones after
    it, made by the dying turn, are closed (no 'never awaited' warning when they are
    collected), not left open."""
    worker = sim.agent(Worker, "w")
    sim.call(worker, "eager_start")
    sim.arm_storage_fault(worker, "crash", match="AS background")
    UNSTARTED.clear()
    with pytest.raises(AgentEvicted):
        sim.call(worker, "gather_after_a_crash", combinator)
    (later,) = UNSTARTED
    assert later.cr_frame is None  # closed before it ever ran


def test_deferred_can_be_awaited_after_it_settled(sim: Simulation) -> None:
    """A deferred gives its value to every await, before and after settling."""
    worker = sim.agent(Worker, "w")
    assert sim.call(worker, "deferred_twice") == ["settled", "settled", 7]


def test_same_time_events_run_in_the_order_they_were_scheduled(sim: Simulation) -> None:
    """Tasks waking at the same instant resume first-scheduled first (FIFO)."""
    worker = sim.agent(Worker, "w")
    assert sim.call(worker, "same_time_order") == [0, 1, 2, 3, 4, 5]


def test_negative_and_float_sleeps_are_refused(sim: Simulation) -> None:
    """Time is whole non-negative milliseconds; anything else says what it got."""

    class Sleeper(Agent):
        async def nap(self, ms: object) -> None:
            await self.host.clock.sleep(ms)  # type: ignore[arg-type]

    sleeper = sim.agent(Sleeper, "s")
    with pytest.raises(ValueError, match="negative delay -5 ms"):
        sim.call(sleeper, "nap", -5)
    with pytest.raises(TypeError, match=r"integer milliseconds, got 1\.5"):
        sim.call(sleeper, "nap", 1.5)


def test_context_variables_stay_inside_their_task(sim: Simulation) -> None:
    """A context variable set in one task is invisible to a concurrent one, and a task inherits
    its creator's value (as an async-local store does)."""
    import contextvars

    current: contextvars.ContextVar[str] = contextvars.ContextVar("current", default="none")

    class Ctx(Agent):
        async def run(self) -> list[str]:
            seen: list[str] = []

            async def worker(label: str) -> None:
                current.set(label)
                await self.host.clock.sleep(10)
                seen.append(f"{label} sees {current.get()}")

                async def child() -> None:
                    seen.append(f"child of {label} sees {current.get()}")

                await self.host.tasks.wait_until(child())

            await self.host.tasks.gather(worker("a"), worker("b"))
            seen.append(f"caller sees {current.get()}")
            return seen

    ref = sim.agent(Ctx, "c")
    assert sim.call(ref, "run") == [
        "a sees a",
        "child of a sees a",
        "b sees b",
        "child of b sees b",
        "caller sees none",
    ]


def test_closing_a_simulation_leaves_the_callers_context_alone() -> None:
    """Closing buried tasks runs their finally blocks in their own context: a context variable
    they restore is not restored in the code that closed the simulation."""
    import contextvars

    probe: contextvars.ContextVar[str] = contextvars.ContextVar("probe", default="outside")

    class Setter(Agent):
        async def hold(self) -> None:
            outer = probe.get()
            probe.set("inside")
            try:
                await self.host.clock.sleep(60_000)
            finally:
                probe.set(outer + "-restored")

    sim = Simulation(seed=2)
    ref = sim.agent(Setter, "s")
    sim.start_call(ref, "hold")
    sim.run_for(10)
    sim.evict(ref)
    probe.set("caller")
    sim.close()
    assert probe.get() == "caller"
