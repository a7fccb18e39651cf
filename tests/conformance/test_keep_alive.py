"""Conformance: keepAlive leases and the heartbeat they put in the one alarm slot (spec fibers
§3, catalogue F-02 … F-15)."""

from __future__ import annotations

import pytest

from sim import Simulation
from tests.conformance.fiber_agents import Recorder, journal
from tests.releases import alarm_computation, on_both_releases, on_release, stored_schedules


class SlowHeartbeat(Recorder):
    """The SDK's default 30 s heartbeat."""

    options = {}


def refs(sim: Simulation, ref) -> int:
    return sim.instance_of(ref)._keep_alive_refs


@on_both_releases
def test_F002_held_lease_writes_no_schedule_rows(sim: Simulation) -> None:
    """A held keepAlive arms the heartbeat but creates no schedule row and lists no schedule
    (on 0.32.0 the lease is the host job `cf:keep-alive`, not a schedule: sdk-0.32 J-02)."""
    ref = sim.agent(Recorder, "ka")
    sim.call(ref, "acquire")
    assert sim.alarm_of(ref) == sim.now_ms + 2_000
    assert stored_schedules(sim, ref) == []
    assert sim.call(ref, "list_schedules") == []


@on_both_releases
def test_a_failed_acquire_gives_its_ref_back(sim: Simulation) -> None:
    """When arming the heartbeat fails inside keep_alive (a storage error), the caller gets the
    error and no lease, and the count it had taken is given back: no heartbeat leaks."""
    ref = sim.agent(Recorder, "ka")
    sim.run_for(1)
    sim.arm_storage_fault(ref, "error", match=alarm_computation(sim))
    with pytest.raises(Exception, match="injected storage fault"):
        sim.call(ref, "acquire")
    assert refs(sim, ref) == 0
    assert sim.probes.get("keep_alive.acquire_failed") == 1
    # What is left is the check-back of a failed alarm computation (K5), not a heartbeat.
    sim.run_for(10_000)
    assert sim.alarm_of(ref) is None
    assert len(sim.trace.select("alarm:fired")) == 1
    sim.call(ref, "acquire")
    assert refs(sim, ref) == 1


def test_F003_disposing_the_only_lease_clears_the_alarm(sim: Simulation) -> None:
    """The one disposer drops the count to 0 and, with nothing else due, deletes the alarm."""
    ref = sim.agent(Recorder, "ka")
    lease = sim.call(ref, "acquire")
    assert refs(sim, ref) == 1
    assert sim.alarm_of(ref) is not None
    sim.call(ref, "release", lease)
    assert refs(sim, ref) == 0
    assert sim.alarm_of(ref) is None


def test_F004_a_disposer_is_idempotent_and_refs_never_go_negative(sim: Simulation) -> None:
    """Calling one disposer twice releases one lease only, and the count never drops below 0."""
    ref = sim.agent(Recorder, "ka")
    first = sim.call(ref, "acquire")
    second = sim.call(ref, "acquire")
    sim.call(ref, "release", first)
    sim.call(ref, "release", first)
    assert refs(sim, ref) == 1
    assert sim.alarm_of(ref) is not None
    sim.call(ref, "release", second)
    sim.call(ref, "release", second)
    assert refs(sim, ref) == 0
    assert sim.alarm_of(ref) is None


def test_F005_the_alarm_stays_armed_until_the_last_lease_goes(sim: Simulation) -> None:
    """With two leases, releasing one keeps the heartbeat; releasing the second clears it."""
    ref = sim.agent(Recorder, "ka")
    first = sim.call(ref, "acquire")
    second = sim.call(ref, "acquire")
    assert refs(sim, ref) == 2
    sim.call(ref, "release", first)
    assert refs(sim, ref) == 1
    assert sim.alarm_of(ref) == sim.now_ms + 2_000
    sim.call(ref, "release", second)
    assert refs(sim, ref) == 0
    assert sim.alarm_of(ref) is None


def test_F006_keep_alive_while_returns_the_value_and_cleans_up(sim: Simulation) -> None:
    """keep_alive_while holds a lease while fn runs, returns fn's value, then clears the alarm."""
    ref = sim.agent(Recorder, "ka")
    assert sim.call(ref, "while_returning", {"answer": 42}, 5_000) == {"answer": 42}
    assert [row["data"] for row in journal(sim, ref, "inside")] == [{"refs": 1}]
    assert sim.trace.select("alarm:set", agent=ref.path)[0].get("at") == 2_000
    assert refs(sim, ref) == 0
    assert sim.alarm_of(ref) is None


def test_F007_keep_alive_while_releases_the_lease_when_fn_throws(sim: Simulation) -> None:
    """keep_alive_while re-raises fn's error and the count returns to 0."""
    ref = sim.agent(Recorder, "ka")
    with pytest.raises(RuntimeError, match="upstream gave up after 3 s"):
        sim.call(ref, "while_failing", "upstream gave up after 3 s", 3_000)
    assert refs(sim, ref) == 0
    assert sim.alarm_of(ref) is None


@on_release("0.21.0")
def test_F009_the_heartbeat_falls_back_to_the_next_schedule(sim: Simulation) -> None:
    """A lease pulls the alarm to now+30 s; releasing it moves the alarm back to the schedule."""
    ref = sim.agent(SlowHeartbeat, "ka")
    sim.call(ref, "schedule", 600, "tick")
    (row,) = sim.query(ref, "SELECT time FROM cf_agents_schedules")
    assert sim.alarm_of(ref) == row["time"] * 1000
    lease = sim.call(ref, "acquire")
    assert sim.alarm_of(ref) == sim.now_ms + 30_000
    sim.call(ref, "release", lease)
    assert sim.alarm_of(ref) == row["time"] * 1000


def test_F015_a_stale_heartbeat_after_eviction_clears_itself(sim: Simulation) -> None:
    """The heartbeat armed before an eviction fires on a new incarnation with 0 refs and
    leaves no alarm behind."""
    ref = sim.agent(Recorder, "ka")
    sim.call(ref, "acquire")
    armed = sim.alarm_of(ref)
    sim.evict(ref, "deploy")
    assert sim.run_to_next_alarm() == armed
    assert sim.incarnation_of(ref) == 2
    assert [r.inc for r in sim.trace.select("alarm:done", agent=ref.path)] == [2]
    assert refs(sim, ref) == 0
    assert sim.alarm_of(ref) is None
