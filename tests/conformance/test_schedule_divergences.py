"""The port's own choices for `schedule()` where the SDK's JavaScript has no counterpart or reads
the real clock (docs/divergences.md K1-K4), on each release: 0.21.0 keeps schedules in
`cf_agents_schedules`, 0.32.0 as scheduler jobs in `cf_agents_jobs`."""

from __future__ import annotations

import math
from datetime import datetime

import pytest

from agents_core import InvalidArgument
from sim import Simulation
from tests.conformance.test_schedules import Recorder
from tests.releases import on_both_releases, schedule_table, stored_schedules

pytestmark = on_both_releases


def test_K1_a_naive_datetime_is_refused_and_writes_nothing(sim: Simulation) -> None:
    """A `datetime` without `tzinfo` names no instant: it is refused, asking for one."""
    ref = sim.agent(Recorder, "a")
    naive = datetime(2030, 1, 1)  # noqa: DTZ001 - the naive datetime is the point
    with pytest.raises(InvalidArgument, match=r"aware datetime.*tzinfo"):
        sim.call(ref, "schedule", naive, "tick")
    assert stored_schedules(sim, ref) == []
    assert sim.alarm_of(ref) is None


@pytest.mark.parametrize("delay", [math.nan, math.inf, -math.inf], ids=str)
def test_K2_a_delay_that_is_not_finite_is_refused(sim: Simulation, delay: float) -> None:
    """NaN and infinite delays are refused with the value (0.21.0 would store a NaN time;
    0.32.0 refuses too, in its job queue)."""
    ref = sim.agent(Recorder, "a")
    with pytest.raises(InvalidArgument, match=rf"finite.*got {delay!r}"):
        sim.call(ref, "schedule", delay, "tick")
    assert stored_schedules(sim, ref) == []


def test_K3_created_at_is_the_host_clock_in_seconds(sim: Simulation) -> None:
    """The row's `created_at` comes from the simulated clock, not the real one."""
    ref = sim.agent(Recorder, "a")
    sim.run_for(7_500)
    created = sim.call(ref, "schedule", 60, "tick")
    (row,) = sim.query(
        ref, f"SELECT created_at FROM {schedule_table(sim)} WHERE id = ?", created.id
    )
    assert row["created_at"] == 7


def test_K4_an_absent_payload_and_an_explicit_none_dedupe_together(sim: Simulation) -> None:
    """Python has one `None` for JavaScript's `undefined` and `null`: an idempotent schedule
    with no payload and one with `None` are the same schedule."""
    ref = sim.agent(Recorder, "a")
    first = sim.call(ref, "schedule", 60, "tick", idempotent=True)
    again = sim.call(ref, "schedule", 60, "tick", None, idempotent=True)
    assert again.id == first.id
    assert [s["id"] for s in stored_schedules(sim, ref)] == [first.id]
