"""The job queue `cf_agents_jobs`, its driver and the memory-limit breaker on 0.32.0 (spec
sdk-0.32 §2, J-17 … J-36). Jobs are pushed by two test capabilities (`job_agents.py`) whose
dispatch follows each job's payload; the alarm that drives them is the simulated platform's."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core.errors import InvalidArgument
from sim import Simulation
from sim.simulation import AgentRef
from tests.conformance.sdk032.job_agents import JobsAgent, payload

CONNECTION_LOST = "Network connection lost."
SUPERSEDED = "Durable Object reset because its code was updated."
STORAGE_RESET = "Internal error in Durable Object storage caused object to be reset."
MEMORY_LIMIT = "Durable Object's isolate exceeded its memory limit and was reset."
RETRY = {"maxAttempts": 3, "baseDelayMs": 100, "maxDelayMs": 3000}


def wake(sim: Simulation, name: str = "a") -> AgentRef:
    ref = sim.agent(JobsAgent, name)
    sim.run_for(10_000)
    return ref


def jobs(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    return sim.query(ref, "SELECT * FROM cf_agents_jobs ORDER BY time, id")


def job(sim: Simulation, ref: AgentRef, id: str) -> dict[str, Any] | None:
    rows = sim.query(ref, "SELECT * FROM cf_agents_jobs WHERE id = ?", id)
    return rows[0] if rows else None


def calls(sim: Simulation, ref: AgentRef, id: str | None = None) -> list[dict[str, Any]]:
    rows = sim.query(ref, "SELECT * FROM calls ORDER BY rowid")
    return [r for r in rows if id is None or r["id"] == id]


def events(sim: Simulation, ref: AgentRef, name: str) -> list[dict[str, Any]]:
    return [dict(r.fields) for r in sim.trace.select(name, agent=ref.path)]


def logs(sim: Simulation, ref: AgentRef, level: str) -> list[str]:
    return [r.get("message") for r in sim.trace.select(f"console:{level}", agent=ref.path)]


def overdue(sim: Simulation, ref: AgentRef, ids_times: list[tuple[str, int]], **opts: Any) -> None:
    """Push jobs of `work` at the given times (all in the past) at once, then re-arm."""
    for id, time in ids_times:
        sim.call(ref, "push_raw", "work", "fn", time, id=id, **opts)
    sim.call(ref, "rearm")


# -- §2.2 queue operations ---------------------------------------------------------------------
def test_J017_a_job_id_belongs_to_its_first_owner(sim: Simulation) -> None:
    ref = wake(sim)
    sim.call(ref, "push", "work", "fn", sim.now_ms + 60_000, id="X")
    before = job(sim, ref, "X")
    with pytest.raises(InvalidArgument) as caught:
        sim.call(ref, "push", "bare", "other", sim.now_ms + 5_000, id="X")
    assert str(caught.value) == (
        'Job id "X" already belongs to "work"; job ids are scoped to their owner'
    )
    assert job(sim, ref, "X") == before
    assert sim.call(ref, "cancel_job", "bare", "X") is False
    assert job(sim, ref, "X") == before


@pytest.mark.parametrize(
    ("time", "shown"), [(-1, "-1"), (float("nan"), "NaN"), (float("inf"), "Infinity")]
)
def test_J018_a_job_time_must_be_finite_and_not_negative(
    sim: Simulation, time: float, shown: str
) -> None:
    ref = wake(sim)
    with pytest.raises(InvalidArgument, match=f"^Invalid job time: {shown}$"):
        sim.call(ref, "push", "work", "fn", time)
    with pytest.raises(InvalidArgument, match="^Jobs require a non-empty fn$"):
        sim.call(ref, "push", "work", "  ", sim.now_ms)
    assert jobs(sim, ref) == []


# -- §2.4 driving ------------------------------------------------------------------------------
def test_J019_due_jobs_are_dispatched_in_time_order_one_at_a_time(sim: Simulation) -> None:
    ref = wake(sim)
    now = sim.now_ms
    for id, back in (("c", 1_000), ("a", 3_000), ("b", 2_000)):
        sim.call(ref, "push_raw", "work", "fn", now - back, id=id, payload=payload(sleep_ms=500))
    sim.call(ref, "rearm")
    sim.run_for(5_000)
    seen = calls(sim, ref)
    assert [c["id"] for c in seen] == ["a", "b", "c"]
    assert [c["t"] - seen[0]["t"] for c in seen] == [0, 500, 1_000]
    assert jobs(sim, ref) == []


def test_J020_the_outcome_deletes_keeps_or_re_times_the_job(sim: Simulation) -> None:
    ref = wake(sim)
    now = sim.now_ms
    sim.call(ref, "push", "work", "fn", now + 1_000, id="done")
    sim.call(
        ref,
        "push",
        "work",
        "fn",
        now + 2_000,
        id="yield",
        singleflight=True,
        payload=payload(outcomes=["yield", None]),
    )
    later = now + 5_000.7
    sim.call(
        ref,
        "push",
        "work",
        "fn",
        now + 3_000,
        id="moved",
        payload=payload(outcomes=[{"rescheduleAt": later}, None]),
    )
    sim.run_for(1_500)
    assert job(sim, ref, "done") is None
    sim.run_for(1_000)
    # A single-flight job still marked running would be skipped: it ran again at once, at its
    # own time, so the yield cleared the marker and kept the time.
    first, second = calls(sim, ref, "yield")
    assert (second["t"] - first["t"], second["time"], first["time"]) == (
        1,
        now + 2_000,
        now + 2_000,
    )
    assert job(sim, ref, "yield") is None
    sim.run_for(600)
    moved = job(sim, ref, "moved")
    assert moved is not None and (moved["time"], moved["running"]) == (now + 5_000, 0)
    sim.run_for(3_000)
    assert [c["t"] for c in calls(sim, ref, "moved")] == [now + 3_000, now + 5_000]


def test_J021_a_job_pushed_again_during_its_dispatch_survives_the_outcome(
    sim: Simulation,
) -> None:
    ref = wake(sim)
    now = sim.now_ms
    sim.call(
        ref, "push", "work", "fn", now + 1_000, id="X", payload=payload(repush_at=now + 60_000)
    )
    sim.run_for(2_000)
    assert len(calls(sim, ref, "X")) == 1
    row = job(sim, ref, "X")
    assert row is not None and (row["time"], row["running"]) == (now + 60_000, 0)
    assert sim.alarm_of(ref) == now + 60_000


def test_J022_an_invalid_outcome_fails_the_alarm(sim: Simulation) -> None:
    ref = wake(sim)
    sim.call(
        ref, "push", "work", "fn", sim.now_ms + 1_000, id="X", payload=payload(outcome={"foo": 1})
    )
    sim.run_for(1_500)
    failed = events(sim, ref, "alarm:failed")
    assert failed and "Invalid job outcome for X" in str(failed[0]["error"])


def test_J023_a_running_single_flight_job_is_skipped_until_hung(sim: Simulation) -> None:
    ref = wake(sim)
    now = sim.now_ms
    sim.call(ref, "push_raw", "work", "fn", now, id="S", singleflight=True)
    sim.call(ref, "mark_running", "S", now)
    sim.call(ref, "push", "work", "fn", now + 1_000, id="other")
    sim.run_for(1_500)
    assert [c["id"] for c in calls(sim, ref)] == ["other"]
    assert "Skipping job S: previous execution still running" in logs(sim, ref, "warn")
    sim.run_for(30_000)
    (forced,) = calls(sim, ref, "S")
    assert forced["t"] == now + 30_000
    assert "Forcing reset of hung job S (started 30s ago)" in logs(sim, ref, "warn")
    assert sim.probes["job.hung_forced"] == 1


def test_J024_a_running_single_flight_job_arms_its_hung_recheck(sim: Simulation) -> None:
    ref = wake(sim)
    now = sim.now_ms
    sim.call(
        ref, "push_raw", "work", "fn", now - 500, id="S", singleflight=True, hung_timeout_seconds=10
    )
    sim.call(ref, "mark_running", "S", now - 200)
    sim.call(ref, "rearm")
    assert sim.alarm_of(ref) == now - 200 + 10_000
    sim.call(ref, "push", "work", "fn", now + 4_000, id="earlier")
    assert sim.alarm_of(ref) == now + 4_000


def test_J025_an_exclusive_job_owns_the_alarm(sim: Simulation) -> None:
    ref = wake(sim)
    now = sim.now_ms
    sim.call(ref, "push", "work", "fn", now + 1_000, id="early")
    sim.call(ref, "push", "work", "fn", now + 50_000, id="excl", exclusive=True)
    assert sim.alarm_of(ref) == now + 50_000
    sim.call(ref, "push_raw", "work", "fn", now - 700, id="past", exclusive=True)
    assert sim.call(ref, "next_alarm_time") == now - 700


def test_J026_an_overdue_ready_job_arms_now_plus_one(sim: Simulation) -> None:
    ref = wake(sim)
    now = sim.now_ms
    sim.call(ref, "push_raw", "work", "fn", now - 5_000, id="late")
    assert sim.call(ref, "next_alarm_time") == now + 1


def test_J027_a_job_without_a_dispatcher_is_dropped(sim: Simulation) -> None:
    ref = wake(sim)
    now = sim.now_ms
    sim.call(ref, "push", "ghost", "fn", now + 1_000, id="G")
    sim.call(ref, "push", "host", "nosuch", now + 1_000, id="H")
    sim.run_for(2_000)
    assert jobs(sim, ref) == []
    assert calls(sim, ref) == []
    dropped = [m for m in logs(sim, ref, "error") if m.startswith("No installed capability")]
    assert dropped == [
        'No installed capability or host handler for job G (owner "ghost"); dropping it'
    ]
    # The agent's own dispatcher drops a host job it does not know (spec §3.4).
    assert 'Unknown Agent host job fn "nosuch"' in logs(sim, ref, "warn")


def test_J028_an_ordinary_failure_is_retried_then_handed_to_on_job_error(
    sim: Simulation,
) -> None:
    ref = wake(sim)
    script = payload(errors=["boom"], forever=True, error_outcome={"rescheduleAt": 10**13})
    sim.call(ref, "push", "work", "fn", sim.now_ms + 1_000, id="F", retry=RETRY, payload=script)
    sim.run_for(10_000)
    assert [c["attempt"] for c in calls(sim, ref, "F")] == [1, 2, 3]
    assert sim.query(ref, "SELECT * FROM errors_seen") == [
        {"id": "F", "attempt": 3, "error": "boom"}
    ]
    row = job(sim, ref, "F")
    assert row is not None and row["time"] == 10**13  # the hook's outcome was applied


@pytest.mark.parametrize("message", [CONNECTION_LOST, SUPERSEDED, STORAGE_RESET, "retryable"])
def test_J029_a_platform_failure_keeps_the_job_and_fails_the_alarm(
    sim: Simulation, message: str
) -> None:
    """The four platform transients (a memory-limit reset goes to the breaker: J-34)."""
    ref = wake(sim)
    at = sim.now_ms + 1_000
    if message == "retryable":
        script = payload(errors=["flaky"], forever=True, retryable=True)
    else:
        script = payload(errors=[message], forever=True)
    sim.call(ref, "push", "work", "fn", at, id="P", retry=RETRY, payload=script)
    sim.run_for(1_900)
    failed = events(sim, ref, "alarm:failed")
    assert len(failed) == 1
    row = job(sim, ref, "P")
    assert row is not None and (row["time"], row["running"]) == (at, 0)
    assert sim.query(ref, "SELECT * FROM errors_seen") == []
    deferred = (
        "Deferring job P to a fresh invocation after a platform failure; the job is preserved."
    )
    assert deferred in logs(sim, ref, "warn")


def test_J030_a_code_update_reset_is_not_retried_in_process(sim: Simulation) -> None:
    ref = wake(sim)
    at = sim.now_ms + 1_000
    script = payload(errors=[SUPERSEDED], forever=True)
    sim.call(ref, "push", "work", "fn", at, id="U", retry=RETRY, payload=script)
    sim.run_for(1_900)
    assert [c["attempt"] for c in calls(sim, ref, "U")] == [1]
    row = job(sim, ref, "U")
    assert row is not None and (row["time"], row["running"]) == (at, 0)


@pytest.mark.parametrize("count", [9, 10])
def test_J031_ten_due_jobs_of_one_owner_warn_of_a_backlog(sim: Simulation, count: int) -> None:
    ref = wake(sim)
    now = sim.now_ms
    overdue(sim, ref, [(f"j{i}", now - 1_000 - i) for i in range(count)])
    sim.run_for(1_000)
    assert len(calls(sim, ref)) == count
    expected = [{"capability": "work", "count": 10}] if count == 10 else []
    assert events(sim, ref, "job:backlog_warning") == expected
    assert events(sim, ref, "schedule:duplicate_warning") == []


def test_J032_a_slow_dispatch_warns_once_and_runs_on(sim: Simulation) -> None:
    ref = wake(sim)
    sim.call(
        ref, "push", "work", "slow", sim.now_ms + 1_000, id="W", payload=payload(sleep_ms=45_000)
    )
    sim.call(ref, "push", "work", "fast", sim.now_ms + 1_001, id="Q")
    sim.run_for(60_000)
    assert events(sim, ref, "job:slow_dispatch") == [
        {"capability": "work", "fn": "slow", "id": "W", "thresholdMs": 30_000}
    ]
    notes = [n["note"] for n in sim.query(ref, "SELECT note FROM notes ORDER BY rowid")]
    assert notes.index("done:W") < notes.index("job:Q")
    assert jobs(sim, ref) == []


def test_J033_a_failing_job_without_an_error_hook_is_deleted(sim: Simulation) -> None:
    ref = wake(sim)
    script = payload(errors=["boom"], forever=True)
    sim.call(ref, "push", "bare", "fn", sim.now_ms + 1_000, id="B", retry=RETRY, payload=script)
    sim.run_for(10_000)
    assert [c["attempt"] for c in calls(sim, ref, "B")] == [1, 2, 3]
    assert job(sim, ref, "B") is None
    assert events(sim, ref, "alarm:failed") == []


# -- §2.5 the memory-limit breaker ---------------------------------------------------------------
def _memory_limit_alarm(sim: Simulation, ref: AgentRef) -> int:
    """A job whose dispatch hits a memory-limit reset, beside recovery-loop jobs: one due
    before the backoff ends and one after. Returns the alarm's time."""
    now = sim.now_ms
    at = now + 1_000
    sim.call(ref, "push", "work", "fn", now + 10_000, id="loop_near", recovery_loop=True)
    sim.call(ref, "push", "work", "fn", now + 90_000, id="loop_far", recovery_loop=True)
    sim.call(ref, "push", "work", "fn", now + 95_000, id="plain")
    sim.call(ref, "push", "work", "fn", at, id="M", payload=payload(errors=[MEMORY_LIMIT]))
    sim.run_for(1_500)
    return at


def test_J034_a_memory_limit_strike_backs_off_the_job_and_the_recovery_loop(
    sim: Simulation,
) -> None:
    ref = wake(sim)
    now = sim.now_ms
    at = _memory_limit_alarm(sim, ref)
    backoff = at + 30_000
    times = {r["id"]: r["time"] for r in jobs(sim, ref)}
    assert times == {
        "M": backoff,
        "loop_near": backoff,
        "loop_far": now + 90_000,
        "plain": now + 95_000,
    }
    (event,) = events(sim, ref, "alarm:memory_limit_reset")
    assert {k: event[k] for k in ("strikes", "limit", "sealed")} == {
        "strikes": 1,
        "limit": 3,
        "sealed": False,
    }
    assert events(sim, ref, "alarm:failed") == []  # swallowed: no platform retry
    assert sim.call(ref, "get_kv", "cf_agents:oom_alarm_strikes") == 1
    assert sim.alarm_of(ref) == backoff


def _lives(sim: Simulation, ref: AgentRef) -> list[tuple[str, int, int, dict[str, Any]]]:
    wanted = (
        "incarnation:start",
        "incarnation:end",
        "alarm:fired",
        "alarm:done",
        "alarm:failed",
        "alarm:interrupted",
        "alarm:retry",
        "alarm:memory_limit_reset",
    )
    return [
        (r.event, r.t_ms, r.inc, dict(r.fields))
        for r in sim.trace.records
        if r.agent == ref.path and r.event in wanted
    ]


def test_J034_the_strike_resets_the_isolate_and_the_backed_off_alarm_wakes_a_fresh_one(
    sim: Simulation,
) -> None:
    """After the strike is handled and the alarm re-armed, the incarnation aborts itself in that
    instant with `retryAlarm: false` (no platform retry); the backed-off alarm then fires in a
    new incarnation, which runs the job again."""
    ref = wake(sim)
    inc = sim.incarnation_of(ref)
    at = _memory_limit_alarm(sim, ref)
    backoff = at + 30_000
    seen = [e for e in _lives(sim, ref) if e[1] >= at]
    assert [(event, t, n) for event, t, n, _ in seen] == [
        ("alarm:fired", at, inc),
        ("alarm:memory_limit_reset", at, inc),
        ("alarm:done", at, inc),
        ("incarnation:end", at, inc),
    ]
    assert seen[-1][3] == {
        "reason": "reset",
        "message": "Alarm memory-limit strike 1/3; resetting isolate (#1825)",
    }
    # The breaker's writes committed before the abort: the backoff and the strike survive it.
    assert job(sim, ref, "M")["time"] == backoff  # type: ignore[index]
    assert sim.alarm_of(ref) == backoff
    sim.run_until(backoff - 1)
    assert [c["t"] for c in calls(sim, ref, "M")] == [at]  # nothing ran it in between
    sim.run_until(backoff + 100)
    later = [e for e in _lives(sim, ref) if e[1] > at]
    assert [(event, t, n) for event, t, n, _ in later[:2]] == [
        ("incarnation:start", backoff, inc + 1),
        ("alarm:fired", backoff, inc + 1),
    ]
    assert later[0][3] == {"trigger": "alarm"}
    assert [c["t"] for c in calls(sim, ref, "M")] == [at, backoff]
    assert events(sim, ref, "alarm:retry") == []


def test_J035_a_sealing_strike_resets_the_isolate_too(sim: Simulation) -> None:
    ref = wake(sim)
    sim.call(ref, "put_kv", "cf_agents:oom_alarm_strikes", 2)
    at = _memory_limit_alarm(sim, ref)
    ends = [e[3] for e in _lives(sim, ref) if e[0] == "incarnation:end" and e[1] == at]
    assert ends == [
        {
            "reason": "reset",
            "message": "Alarm memory-limit strike 3/3 (sealed); resetting isolate (#1825)",
        }
    ]


class Aborting(JobsAgent):
    """A job of owner `abort` aborts the isolate with no alarm retry (as the breaker's reset
    does) and then works on, so the abort cuts its alarm short; `on_alarm` strikes on demand."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self._lifecycle.use(_AbortingCapability(self))

    async def on_alarm(self) -> None:
        await super().on_alarm()
        if self.host.kv.get("strike_in_on_alarm"):
            self.host.kv.delete("strike_in_on_alarm")
            raise RuntimeError(MEMORY_LIMIT)


class _AbortingCapability:
    def __init__(self, agent: Aborting) -> None:
        self._agent = agent

    @property
    def id(self) -> str:
        return "abort"

    async def on_start(self) -> None:
        return None

    async def on_job(self, job: Any, attempt: int) -> Any:
        agent = self._agent
        agent.note(f"abort:{job.id}")
        agent.host.lifecycle.abort("asked", retry_alarm=False)
        await agent.host.clock.sleep(1_000)
        agent.note(f"after-abort:{job.id}")
        return None

    @property
    def on_job_error(self) -> None:
        return None


def test_J034_an_abort_without_alarm_retry_is_not_retried_by_the_platform(
    sim: Simulation,
) -> None:
    """`retryAlarm: false` on the platform's side: an alarm handler the abort cuts short is not
    retried (an eviction under a handler is retried 2 s later); the slot keeps what the agent
    armed (the deadman), which wakes a fresh incarnation."""
    ref = sim.agent(Aborting, "a")
    sim.run_for(10_000)
    at = sim.now_ms + 1_000
    sim.call(ref, "push", "abort", "fn", at, id="X")
    inc = sim.incarnation_of(ref)
    sim.run_until(at + 5_000)
    seen = [(event, t, fields) for event, t, _, fields in _lives(sim, ref) if t >= at]
    assert seen == [
        ("alarm:fired", at, {"attempt": 0}),
        ("incarnation:end", at, {"reason": "reset", "message": "asked"}),
        ("alarm:interrupted", at, {"attempt": 0, "reason": "reset"}),
    ]
    notes = [n["note"] for n in sim.query(ref, "SELECT note FROM notes ORDER BY rowid")]
    assert "after-abort:X" not in notes
    assert sim.alarm_of(ref) == at + 30_000  # the deadman, armed before the dispatch
    sim.run_until(at + 30_100)
    assert ("incarnation:start", at + 30_000, inc + 1, {"trigger": "alarm"}) in _lives(sim, ref)
    assert notes.count("abort:X") == 1
    assert events(sim, ref, "alarm:retry") == []


def test_J034_a_strike_outside_a_job_resets_the_isolate_too(sim: Simulation) -> None:
    """A memory-limit reset of the user's `on_alarm` is the breaker's as well (charged to no
    job): the strike is counted, the recovery loop backed off, and the isolate reset."""
    ref = sim.agent(Aborting, "a")
    sim.run_for(10_000)
    now = sim.now_ms
    sim.call(ref, "push", "work", "fn", now + 10_000, id="loop", recovery_loop=True)
    sim.call(ref, "put_kv", "strike_in_on_alarm", True)
    sim.call(ref, "push", "work", "fn", now + 1_000, id="ok")
    sim.run_for(1_500)
    (strike,) = events(sim, ref, "alarm:memory_limit_reset")
    assert (strike["strikes"], strike["sealed"]) == (1, False)
    assert job(sim, ref, "ok") is None  # it ran before on_alarm, cleanly
    assert job(sim, ref, "loop")["time"] == now + 1_000 + 30_000  # type: ignore[index]
    ends = [e[3] for e in _lives(sim, ref) if e[0] == "incarnation:end"]
    assert ends == [
        {"reason": "reset", "message": "Alarm memory-limit strike 1/3; resetting isolate (#1825)"}
    ]
    assert events(sim, ref, "alarm:failed") == []


def test_J035_the_last_strike_seals_and_purges_the_recovery_loop(sim: Simulation) -> None:
    ref = wake(sim)
    now = sim.now_ms
    sim.call(ref, "put_kv", "cf_agents:oom_alarm_strikes", 2)
    _memory_limit_alarm(sim, ref)
    assert [r["id"] for r in jobs(sim, ref)] == ["plain"]
    (event,) = events(sim, ref, "alarm:memory_limit_reset")
    assert (event["strikes"], event["sealed"]) == (3, True)
    assert sim.call(ref, "get_kv", "cf_agents:oom_alarm_strikes") is None
    assert sim.alarm_of(ref) == now + 95_000


def test_J036_a_clean_alarm_clears_the_strike_count(sim: Simulation) -> None:
    ref = wake(sim)
    sim.call(ref, "put_kv", "cf_agents:oom_alarm_strikes", 2)
    sim.call(ref, "push", "work", "fn", sim.now_ms + 1_000, id="ok")
    assert sim.call(ref, "get_kv", "cf_agents:oom_alarm_strikes") == 2
    sim.run_for(1_500)
    assert calls(sim, ref, "ok")
    assert sim.call(ref, "get_kv", "cf_agents:oom_alarm_strikes") is None


class OomOnStart(JobsAgent):
    """Its next startup hits a memory-limit reset once the `oom_once` key is set."""

    async def on_start(self) -> None:
        if self.host.kv.get("oom_once"):
            self.host.kv.delete("oom_once")
            raise RuntimeError(MEMORY_LIMIT)
        await super().on_start()


def test_a_memory_limit_reset_in_an_alarm_wakes_startup_is_a_strike(sim: Simulation) -> None:
    """The alarm runs startup inside its breaker (spec sdk-0.32 §1.4, §2.5): a memory-limit
    reset in the startup of an alarm wake is a strike charged to no job. The recovery loop is
    backed off, the alarm is not retried by the platform, the isolate is reset, and the
    backed-off job runs in a fresh incarnation."""
    ref = sim.agent(OomOnStart, "a")
    sim.run_for(10_000)
    due = sim.now_ms + 1_000
    sim.call(ref, "push", "work", "fn", due, id="loop", recovery_loop=True)
    sim.call(ref, "put_kv", "oom_once", True)
    sim.evict(ref)
    sim.run_for(1_500)
    (event,) = events(sim, ref, "alarm:memory_limit_reset")
    assert (event["strikes"], event["sealed"]) == (1, False)
    assert job(sim, ref, "loop")["time"] == due + 30_000
    assert calls(sim, ref, "loop") == []
    assert sim.trace.select("alarm:retry", agent=ref.path) == []
    assert sim.trace.select("incarnation:end", agent=ref.path)[-1].get("reason") == "reset"
    sim.run_for(30_000)
    assert [c["attempt"] for c in calls(sim, ref, "loop")] == [1]


def test_a_strike_in_an_alarm_wakes_startup_keeps_every_invariant(sim: Simulation) -> None:
    """The platform's rules and the runtime's promises hold around such a strike (the alarm
    ends without a retry, the reset ends the incarnation, the next wake starts afresh)."""
    from sim.checkers import check
    from sim.checkers.core import context_from

    ref = sim.agent(OomOnStart, "a")
    sim.run_for(10_000)
    sim.call(ref, "push", "work", "fn", sim.now_ms + 1_000, id="loop", recovery_loop=True)
    sim.call(ref, "put_kv", "oom_once", True)
    sim.evict(ref)
    sim.run_for(60_000)
    assert check(context_from(sim)) == []
