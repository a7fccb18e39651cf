"""`cron_next_occurrence`: every time a turn gives a cron schedule is the next occurrence after the
turn's instant, by the checkers' own cron model. A runtime that skips an occurrence, or answers
the instant it is asked at, is caught; a time moved on purpose (the memory-limit breaker) is not
judged; a context without journal instants is not judged at all."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

import agents_core.releases.v0_32.scheduler
import agents_core.schedule_dispatch
import agents_core.schedules
from agents_core.cron import next_cron_time_ms
from sim import Simulation
from sim.checkers import CheckContext, check, context_from
from sim.trace import TraceRecord
from tests.checkers.agents import Ticker

T = "Ticker/t"
RUNTIME_MODULES = (
    agents_core.schedules,
    agents_core.schedule_dispatch,
    agents_core.releases.v0_32.scheduler,
)


def ticked(sdk: str, expression: str = "*/2 * * * *") -> tuple[CheckContext, str]:
    """A cron schedule for ten minutes, with a deploy at 3m20s."""
    with Simulation(34, sdk=sdk) as sim:
        ref = sim.agent(Ticker, "t")
        cron = sim.call(ref, "on_cron", expression)
        sim.run_for(200_000)
        sim.deploy()
        sim.run_for(400_000)
        return context_from(sim), cron


def with_runtime_cron(monkeypatch: pytest.MonkeyPatch, answer: Callable[[str, int], int]) -> None:
    for module in RUNTIME_MODULES:
        monkeypatch.setattr(module, "next_cron_time_ms", answer)


def messages(context: CheckContext) -> list[str]:
    return [v.message for v in check(context, ["cron_next_occurrence"])]


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_a_cron_schedule_run_across_a_deploy_holds(sdk: str) -> None:
    context, cron = ticked(sdk)
    assert len(context.events("schedule:execute", T, id=cron)) == 5
    assert messages(context) == []


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_a_runtime_that_skips_an_occurrence_is_caught(
    sdk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row is simply due later, so it still fires, once per stored time: only the time
    written gives the slip away."""

    def one_late(expression: str, after_ms: int) -> int:
        return next_cron_time_ms(expression, next_cron_time_ms(expression, after_ms))

    with_runtime_cron(monkeypatch, one_late)
    context, cron = ticked(sdk)
    assert check(context, ["schedules_fire", "schedules_fire_once"]) == []
    assert messages(context) == [
        f"cron schedule {cron} ('*/2 * * * *', callback tick) of {T} was given the time "
        "00:04:00.000 at 00:00:00.000, but the expression's next occurrence after that instant "
        "is 00:02:00.000"
    ]


def test_a_runtime_that_answers_the_instant_it_is_asked_at_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def not_after(expression: str, after_ms: int) -> int:
        return next_cron_time_ms(expression, after_ms - 1000)

    with_runtime_cron(monkeypatch, not_after)
    context, cron = ticked("0.21.0")
    assert messages(context)[0] == (
        f"cron schedule {cron} ('*/2 * * * *', callback tick) of {T} was given the time "
        "00:00:00.000 at 00:00:00.000, but the expression's next occurrence after that instant "
        "is 00:02:00.000"
    )


def test_a_time_the_breaker_moves_is_not_judged() -> None:
    """The first run's re-time is written one minute late; with the breaker's record in that
    instant it is a backoff, without it a skipped occurrence."""
    context, cron = ticked("0.21.0")
    journal = list(context.journals[T])
    instants = context.journal_ms[T]
    retime = "UPDATE cf_agents_schedules SET time = ?"
    at = next(
        i
        for i, ms in enumerate(instants)
        if ms == 120_000 and any(s.startswith(retime) for s, _ in journal[i])
    )
    journal[at] = tuple(
        (s, (p[0] + 60, *p[1:])) if s.startswith(retime) else (s, p) for s, p in journal[at]
    )
    moved = dataclasses.replace(context, journals={**context.journals, T: tuple(journal)})
    assert messages(moved) == [
        f"cron schedule {cron} ('*/2 * * * *', callback tick) of {T} was given the time "
        "00:05:00.000 at 00:02:00.000, but the expression's next occurrence after that instant "
        "is 00:04:00.000"
    ]
    reset = TraceRecord(len(context.records), 120_000, T, 1, "alarm:memory_limit_reset", {})
    breaker = dataclasses.replace(moved, records=(*context.records, reset))
    assert messages(breaker) == []


def test_a_journal_without_its_instants_is_not_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    with_runtime_cron(monkeypatch, lambda expression, after_ms: after_ms + 7_000)
    context, _ = ticked("0.21.0")
    assert messages(context) != []
    assert messages(dataclasses.replace(context, journal_ms={})) == []
