"""`schedule_attempts_bounded`: a failing callback is called as many times as the row's retry
options, else the class's, else the spec's default allow, on both releases; one attempt more in
one run is caught, and a new run (a new `schedule:execute`) counts afresh."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agents_core import Agent
from sim import Simulation
from sim.checkers import CheckContext, check, context_from
from sim.trace import TraceRecord

F = "Failing/f"
FAST = {"base_delay_ms": 1, "max_delay_ms": 1}


class Failing(Agent):
    """Schedules a callback that always raises."""

    options = {"retry": {"max_attempts": 4, **FAST}}

    async def boom(self, payload: Any, row: Any) -> None:
        raise RuntimeError("boom")

    async def plan(self, retry: dict[str, Any] | None) -> str:
        return (await self.schedule(5, "boom", retry=retry)).id


class FailingByDefault(Failing):
    options: dict[str, Any] = {}


def failed(sdk: str, cls: type = Failing, retry: dict[str, Any] | None = None) -> CheckContext:
    with Simulation(3, sdk=sdk) as sim:
        ref = sim.agent(cls, "f")
        sim.call(ref, "plan", retry)
        sim.run_for(60_000)
        return context_from(sim)


def calls(context: CheckContext) -> int:
    return len(context.events("schedule:execute")) + len(context.events("schedule:retry"))


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
@pytest.mark.parametrize(
    ("cls", "retry", "attempts"),
    [(Failing, {"max_attempts": 2, **FAST}, 2), (Failing, None, 4), (FailingByDefault, None, 3)],
)
def test_a_failing_callback_is_called_as_often_as_its_options_allow(
    sdk: str, cls: type, retry: dict[str, Any] | None, attempts: int
) -> None:
    context = failed(sdk, cls, retry)
    assert calls(context) == attempts
    assert check(context, ["schedule_attempts_bounded"]) == []


def retried_once_more(context: CheckContext) -> CheckContext:
    last = context.events("schedule:retry")[-1]
    extra = dataclasses.replace(
        last, seq=len(context.records), fields={**last.fields, "attempt": 3}
    )
    return dataclasses.replace(context, records=(*context.records, extra))


def test_one_attempt_more_than_the_row_allows_is_caught() -> None:
    context = failed("0.21.0", retry={"max_attempts": 2, **FAST})
    (execute,) = context.events("schedule:execute")
    (violation,) = check(retried_once_more(context), ["schedule_attempts_bounded"])
    assert violation.message == (
        f"schedule {execute.get('id')} (callback boom) of {F} was called 3 times in the run that "
        "began at 00:00:05.000, its retry options allowing 2 attempts"
    )


def test_a_new_run_counts_its_attempts_afresh() -> None:
    context = failed("0.21.0", retry={"max_attempts": 2, **FAST})
    (execute,) = context.events("schedule:execute")
    (retry,) = context.events("schedule:retry")
    n = len(context.records)
    again = TraceRecord(n, 70_000, F, 2, "schedule:execute", execute.fields)
    retried = TraceRecord(n + 1, 70_001, F, 2, "schedule:retry", retry.fields)
    restarted = dataclasses.replace(context, records=(*context.records, again, retried))
    assert check(restarted, ["schedule_attempts_bounded"]) == []
    assert check(retried_once_more(restarted), ["schedule_attempts_bounded"]) != []


def test_an_agent_gone_at_the_end_is_judged_by_its_rows_alone() -> None:
    """A sub-agent deleted before the end leaves no class options in the context: a run whose
    row names no maxAttempts is then not judged (its class may have allowed more)."""
    context = failed("0.21.0", cls=Failing)  # the class allows 4; the row names none
    gone = dataclasses.replace(context, options={})
    assert check(retried_once_more(context), ["schedule_attempts_bounded"]) != []
    assert check(retried_once_more(gone), ["schedule_attempts_bounded"]) == []


class Sparing(Failing):
    """Its class allows 2 attempts; the row it plans allows 4."""

    options = {"retry": {"max_attempts": 2, **FAST}}


def test_a_row_written_before_an_upgrade_is_judged_by_its_own_options() -> None:
    """A run that starts on 0.21.0 and upgrades to 0.32.0 after its schedule ran: the row, in
    0.21.0's table (since deleted), allowed 4 attempts, not its class's 2, and an attempt more
    is still caught."""
    with Simulation(3, sdk="0.21.0") as sim:
        ref = sim.agent(Sparing, "f")
        sim.call(ref, "plan", {"max_attempts": 4, **FAST})
        sim.run_for(60_000)
        sim.deploy(sdk="0.32.0")
        sim.run_for(60_000)
        context = context_from(sim)
    assert context.upgraded and context.release == "0.32.0"
    assert calls(context) == 4
    assert check(context, ["schedule_attempts_bounded"]) == []
    last = context.events("schedule:retry")[-1]
    extra = dataclasses.replace(last, seq=len(context.records), fields={**last.fields})
    more = dataclasses.replace(context, records=(*context.records, extra))
    (violation,) = check(more, ["schedule_attempts_bounded"])
    assert violation.message.endswith(
        "was called 5 times in the run that began at "
        "00:00:05.000, its retry options allowing 4 attempts"
    )
