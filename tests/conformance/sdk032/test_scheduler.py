"""The Scheduler on jobs on 0.32.0: storage mapping, API, execution through `on_job` and the
schedule events as 0.32.0 emits them (spec sdk-0.32 §3.1 … §3.4; J-37 … J-50)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from agents_core import Agent
from agents_core.errors import InvalidArgument
from sim import Simulation
from sim.simulation import AgentRef

CONNECTION_LOST = "Network connection lost."
RETRY3 = {"max_attempts": 3, "base_delay_ms": 100, "max_delay_ms": 3000}


class Timed(Agent):
    """Callbacks note each run (time, id, the payload and the Schedule they got)."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql("CREATE TABLE IF NOT EXISTS runs (t, callback, id, payload, schedule)")
        self.sql("CREATE TABLE IF NOT EXISTS errors (t, error)")

    def _note(self, callback: str, payload: Any, schedule: Any) -> int:
        self.sql(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?)",
            self.host.clock.now_ms(),
            callback,
            schedule["id"],
            json.dumps(payload),
            json.dumps(schedule, sort_keys=True),
        )
        return self.sql("SELECT COUNT(*) AS n FROM runs WHERE id = ?", schedule["id"])[0]["n"]

    async def cb(self, payload: Any, schedule: Any) -> None:
        self._note("cb", payload, schedule)

    async def slow(self, payload: Any, schedule: Any) -> None:
        self._note("slow", payload, schedule)
        await self.host.clock.sleep(payload["ms"])

    async def fail(self, payload: Any, schedule: Any) -> None:
        self._note("fail", payload, schedule)
        raise RuntimeError(payload["error"])

    def on_error(self, error: BaseException) -> None:
        self.sql("INSERT INTO errors VALUES (?, ?)", self.host.clock.now_ms(), str(error))

    async def drop_alarm(self) -> None:
        """The alarm is lost (the SDK test's `ctx.storage.deleteAlarm()`)."""
        self.host.alarm.delete_alarm()

    async def forget_method(self, name: str) -> None:
        """The callback's method is gone (code that dropped it): shadowed by a non-callable."""
        setattr(self, name, None)


class StartsWithSchedules(Timed):
    async def on_start(self) -> None:
        at = datetime.fromtimestamp(self.host.clock.now_ms() / 1000 + 60, tz=UTC)
        await self.schedule(at, "cb")
        await self.schedule(at, "cb")
        await self.schedule(at, "slow", {"ms": 1}, idempotent=False)


def wake(sim: Simulation, cls: type[Agent] = Timed, name: str = "a") -> AgentRef:
    ref = sim.agent(cls, name)
    sim.run_for(10_500)
    return ref


def job(sim: Simulation, ref: AgentRef, id: str) -> dict[str, Any] | None:
    rows = sim.query(ref, "SELECT * FROM cf_agents_jobs WHERE id = ?", id)
    return rows[0] if rows else None


def scheduler_jobs(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    return sim.query(
        ref, "SELECT * FROM cf_agents_jobs WHERE capability = 'scheduler' ORDER BY time, id"
    )


def runs(sim: Simulation, ref: AgentRef, id: str | None = None) -> list[dict[str, Any]]:
    rows = sim.query(ref, "SELECT * FROM runs ORDER BY rowid")
    return [r for r in rows if id is None or r["id"] == id]


def events(sim: Simulation, ref: AgentRef, name: str) -> list[dict[str, Any]]:
    return [dict(r.fields) for r in sim.trace.select(name, agent=ref.path)]


def test_J037_a_schedule_is_a_scheduler_job(sim: Simulation) -> None:
    ref = wake(sim)
    now = sim.now_ms
    created = sim.call(ref, "schedule", 60, "cb")
    row = job(sim, ref, created.id)
    assert row is not None
    assert (row["capability"], row["fn"]) == ("scheduler", "cb")
    assert row["time"] == (now + 60_000) // 1000 * 1000
    assert (row["singleflight"], row["hung_timeout_seconds"], row["exclusive"]) == (0, 30, 0)
    assert json.loads(row["retry_options"]) == {
        "maxAttempts": 3,
        "baseDelayMs": 100,
        "maxDelayMs": 3000,
    }
    assert json.loads(row["payload"]) == {
        "type": "delayed",
        "delayInSeconds": 60,
        "owner_path": None,
        "owner_path_key": None,
    }
    table = "SELECT name FROM sqlite_master WHERE name = 'cf_agents_schedules'"
    assert sim.query(ref, table) == []  # migrated (empty) and dropped at startup
    assert sim.alarm_of(ref) == row["time"]


def test_J038_an_unknown_callback_is_refused(sim: Simulation) -> None:
    ref = wake(sim)
    message = 'Unknown scheduled callback "missing": not registered on this Scheduler'
    with pytest.raises(InvalidArgument) as caught:
        sim.call(ref, "schedule", 5, "missing")
    assert str(caught.value) == message
    with pytest.raises(InvalidArgument) as caught:
        sim.call(ref, "schedule_every", 5, "missing")
    assert str(caught.value) == message


def test_J039_an_interval_again_is_the_same_job_and_re_arms(sim: Simulation) -> None:
    ref = wake(sim)
    first = sim.call(ref, "schedule_every", 10, "cb")
    sim.call(ref, "drop_alarm")
    assert sim.alarm_of(ref) is None
    second = sim.call(ref, "schedule_every", 10, "cb")
    assert second.id == first.id
    assert [r["id"] for r in scheduler_jobs(sim, ref)] == [first.id]
    assert len(events(sim, ref, "schedule:create")) == 1
    assert sim.alarm_of(ref) == job(sim, ref, first.id)["time"]  # type: ignore[index]
    row = job(sim, ref, first.id)
    assert row is not None and row["singleflight"] == 1


def test_J040_an_idempotent_date_returns_the_first_schedule(sim: Simulation) -> None:
    ref = wake(sim)
    t1 = datetime.fromtimestamp(sim.now_ms / 1000 + 100, tz=UTC)
    t2 = datetime.fromtimestamp(sim.now_ms / 1000 + 900, tz=UTC)
    first = sim.call(ref, "schedule", t1, "cb", {"p": 1}, idempotent=True)
    second = sim.call(ref, "schedule", t2, "cb", {"p": 1}, idempotent=True)
    assert (second.id, second.time) == (first.id, first.time)
    assert len(scheduler_jobs(sim, ref)) == 1


def test_J041_the_callback_gets_the_schedule_not_the_row(sim: Simulation) -> None:
    ref = wake(sim)
    created = sim.call(ref, "schedule", 2, "cb", {"k": "v"})
    sim.run_for(3_000)
    (run,) = runs(sim, ref)
    assert json.loads(run["payload"]) == {"k": "v"}
    assert json.loads(run["schedule"]) == {
        "callback": "cb",
        "delayInSeconds": 2,
        "id": created.id,
        "payload": {"k": "v"},
        "retry": None,
        "time": created.time,
        "type": "delayed",
    }


def test_J042_an_interval_is_re_timed_in_milliseconds_after_it_finished(
    sim: Simulation,
) -> None:
    ref = wake(sim)
    created = sim.call(ref, "schedule_every", 10, "slow", {"ms": 1_234})
    sim.run_for(10_000)
    (run,) = runs(sim, ref)
    finished = run["t"] + 1_234
    sim.run_for(1_300)
    row = job(sim, ref, created.id)
    assert row is not None and row["time"] == finished + 10_000
    assert row["time"] % 1000 != 0


def test_J043_a_cron_that_exhausts_its_retries_advances(sim: Simulation) -> None:
    ref = wake(sim)
    created = sim.call(ref, "schedule", "* * * * *", "fail", {"error": "boom"})
    first_due = job(sim, ref, created.id)["time"]  # type: ignore[index]
    sim.run_until(first_due + 5_000)
    assert len(runs(sim, ref, created.id)) == 3
    assert [e["attempts"] for e in events(sim, ref, "schedule:error")] == [3]
    assert [r["error"] for r in sim.query(ref, "SELECT * FROM errors")] == ["boom"]
    row = job(sim, ref, created.id)
    assert row is not None and row["time"] == first_due + 60_000


def test_J044_a_one_shot_that_exhausts_its_retries_is_deleted(sim: Simulation) -> None:
    ref = wake(sim)
    created = sim.call(ref, "schedule", 2, "fail", {"error": "boom"}, retry=RETRY3)
    sim.run_for(8_000)
    assert len(runs(sim, ref, created.id)) == 3
    assert [e["attempts"] for e in events(sim, ref, "schedule:error")] == [3]
    assert job(sim, ref, created.id) is None


@pytest.mark.parametrize("kind", ["cron", "interval"])
def test_J045_a_recurring_platform_failure_keeps_the_job(sim: Simulation, kind: str) -> None:
    ref = wake(sim)
    script = {"error": CONNECTION_LOST}
    if kind == "cron":
        created = sim.call(ref, "schedule", "* * * * *", "fail", script)
    else:
        created = sim.call(ref, "schedule_every", 30, "fail", script)
    due = job(sim, ref, created.id)["time"]  # type: ignore[index]
    sim.run_until(due + 1_500)
    row = job(sim, ref, created.id)
    assert row is not None and (row["time"], row["running"]) == (due, 0)
    assert len(events(sim, ref, "alarm:failed")) == 1
    assert events(sim, ref, "schedule:error") == []


def test_J046_a_retry_is_announced_before_it_runs(sim: Simulation) -> None:
    ref = wake(sim)
    created = sim.call(ref, "schedule", 2, "fail", {"error": "boom"}, retry=RETRY3)
    sim.run_for(8_000)
    wanted = ("schedule:execute", "schedule:retry", "schedule:error")
    seen = [
        (r.event, r.fields.get("attempt"))
        for r in sim.trace.records
        if r.agent == ref.path and r.event in wanted
    ]
    assert seen == [
        ("schedule:execute", None),
        ("schedule:retry", 2),
        ("schedule:retry", 3),
        ("schedule:error", None),
    ]
    (retry, _) = events(sim, ref, "schedule:retry")
    assert retry == {"callback": "fail", "id": created.id, "attempt": 2, "maxAttempts": 3}


@pytest.mark.parametrize("kind", ["delayed", "cron"])
def test_J047_a_missing_callback_is_logged_and_the_recurrence_applied(
    sim: Simulation, kind: str
) -> None:
    ref = wake(sim)
    when: Any = 2 if kind == "delayed" else "* * * * *"
    created = sim.call(ref, "schedule", when, "cb", None)
    due = job(sim, ref, created.id)["time"]  # type: ignore[index]
    sim.call(ref, "forget_method", "cb")
    sim.run_until(due + 100)
    logs = [r.get("message") for r in sim.trace.select("console:error", agent=ref.path)]
    assert "callback cb not found" in logs
    assert events(sim, ref, "schedule:error") == []
    row = job(sim, ref, created.id)
    if kind == "delayed":
        assert row is None
    else:
        assert row is not None and row["time"] == due + 60_000


def test_J048_a_cancel_is_announced_after_the_delete(sim: Simulation) -> None:
    ref = wake(sim)
    created = sim.call(ref, "schedule", 60, "cb")
    seen: list[Any] = []

    def watch(record: Any) -> None:
        if record.event == "schedule:cancel":
            seen.append(job(sim, ref, created.id))

    unsubscribe = sim.trace.subscribe(watch)
    try:
        assert sim.call(ref, "cancel_schedule", created.id) is True
    finally:
        unsubscribe()
    assert seen == [None]
    assert events(sim, ref, "schedule:cancel") == [{"callback": "cb", "id": created.id}]
    assert sim.call(ref, "cancel_schedule", created.id) is False
    assert sim.call(ref, "cancel_schedule", "nosuch") is False
    assert len(events(sim, ref, "schedule:cancel")) == 1


def test_J049_a_date_schedule_in_startup_warns_once_per_callback(sim: Simulation) -> None:
    ref = wake(sim, StartsWithSchedules)
    warned = [
        m
        for m in (r.get("message") for r in sim.trace.select("console:warn", agent=ref.path))
        if m.startswith("Scheduling ")
    ]
    assert warned == [
        'Scheduling "cb" during startup (e.g. onStart()) without { idempotent: true } creates a '
        "new row on every Durable Object restart, which can cause duplicate executions. Pass "
        "{ idempotent: true } to deduplicate, or use an interval schedule for recurring tasks."
    ]


def test_J050_a_stale_one_shot_backlog_warns_by_capability(sim: Simulation) -> None:
    ref = wake(sim)
    for _ in range(10):
        sim.call(ref, "schedule", 5, "cb")
    sim.run_for(6_000)
    assert len(runs(sim, ref)) == 10
    assert events(sim, ref, "schedule:duplicate_warning") == []
    assert events(sim, ref, "job:backlog_warning") == [{"capability": "scheduler", "count": 10}]


# -- §3.2 the recoveryLoop option ---------------------------------------------------------------
MEMORY_LIMIT = "Durable Object's isolate exceeded its memory limit and was reset."


def test_J037_recovery_loop_is_stored_on_the_job(sim: Simulation) -> None:
    ref = wake(sim)
    member = sim.call(ref, "schedule", 60, "cb", {"n": 1}, recovery_loop=True)
    plain = sim.call(ref, "schedule", 60, "cb", {"n": 2})
    refused = sim.call(ref, "schedule", 60, "cb", {"n": 3}, recovery_loop=False)
    flags = {r["id"]: r["recovery_loop"] for r in scheduler_jobs(sim, ref)}
    assert flags == {member.id: 1, plain.id: 0, refused.id: 0}
    # The option is not part of the Schedule the API returns, nor of the timing envelope.
    assert json.loads(job(sim, ref, member.id)["payload"]) == {  # type: ignore[index]
        "payload": {"n": 1},
        "type": "delayed",
        "delayInSeconds": 60,
        "owner_path": None,
        "owner_path_key": None,
    }


def test_J040_an_idempotent_hit_joins_the_recovery_loop_when_asked(sim: Simulation) -> None:
    """The hit lacks the flag and the call asks for it: the job is pushed again under its id,
    as it was (time, payload, retry), flagged; no second job and no `schedule:create`."""
    ref = wake(sim)
    t1 = datetime.fromtimestamp(sim.now_ms / 1000 + 100, tz=UTC)
    t2 = datetime.fromtimestamp(sim.now_ms / 1000 + 900, tz=UTC)
    first = sim.call(ref, "schedule", t1, "cb", {"p": 1}, idempotent=True, retry=RETRY3)
    before = job(sim, ref, first.id)
    assert before is not None and before["recovery_loop"] == 0
    sim.call(ref, "drop_alarm")
    again = sim.call(ref, "schedule", t2, "cb", {"p": 1}, idempotent=True, recovery_loop=True)
    assert (again.id, again.time) == (first.id, first.time)
    after = job(sim, ref, first.id)
    assert after is not None
    assert after["recovery_loop"] == 1
    unchanged = ("capability", "fn", "time", "payload", "retry_options", "singleflight")
    assert {k: after[k] for k in unchanged} == {k: before[k] for k in unchanged}
    assert len(scheduler_jobs(sim, ref)) == 1
    assert len(events(sim, ref, "schedule:create")) == 1
    assert sim.alarm_of(ref) == before["time"]  # the hit re-armed the lost alarm


def test_J040_a_hit_without_the_ask_or_already_a_member_is_left_alone(sim: Simulation) -> None:
    ref = wake(sim)
    plain = sim.call(ref, "schedule", "*/5 * * * *", "cb")
    member = sim.call(ref, "schedule", "*/7 * * * *", "cb", recovery_loop=True)
    sim.call(ref, "schedule", "*/5 * * * *", "cb")  # a hit that does not ask: stays out
    sim.call(ref, "schedule", "*/7 * * * *", "cb")  # a hit that does not ask: stays in
    flags = {r["id"]: r["recovery_loop"] for r in scheduler_jobs(sim, ref)}
    assert flags == {plain.id: 0, member.id: 1}


def test_J040_the_re_push_clears_the_dispatch_marker(sim: Simulation) -> None:
    """A one-shot running when an idempotent call adds it to the recovery loop: the re-push
    clears `running`, so the run's own outcome (delete) no longer applies and the job stays,
    a member, due again at once (as any re-push during a dispatch, J-21)."""
    ref = wake(sim)
    created = sim.call(ref, "schedule", 2, "slow", {"ms": 5_000}, idempotent=True)
    due = job(sim, ref, created.id)["time"]  # type: ignore[index]
    sim.run_until(due + 1_000)
    running = job(sim, ref, created.id)
    assert running is not None and (running["running"], running["recovery_loop"]) == (1, 0)
    sim.call(ref, "schedule", 2, "slow", {"ms": 5_000}, idempotent=True, recovery_loop=True)
    pushed = job(sim, ref, created.id)
    assert pushed is not None
    assert (pushed["running"], pushed["execution_started_at"]) == (0, None)
    assert (pushed["recovery_loop"], pushed["time"]) == (1, due)
    sim.run_until(due + 4_500)  # the first run ends: its delete is dropped
    assert len(runs(sim, ref, created.id)) == 1
    kept = job(sim, ref, created.id)
    assert kept is not None and kept["recovery_loop"] == 1


def test_J034_a_recovery_loop_schedule_backs_off_with_a_strike(sim: Simulation) -> None:
    """Through the option, a schedule is in the pack the breaker backs off: due before the
    backoff ends, it moves to it; a schedule outside the loop keeps its time."""
    ref = wake(sim)
    boom = sim.call(ref, "schedule", 2, "fail", {"error": MEMORY_LIMIT})
    member = sim.call(ref, "schedule", 20, "cb", {"n": 1}, recovery_loop=True)
    plain = sim.call(ref, "schedule", 20, "cb", {"n": 2})
    due = job(sim, ref, boom.id)["time"]  # type: ignore[index]
    plain_due = job(sim, ref, plain.id)["time"]  # type: ignore[index]
    sim.run_until(due + 500)
    (strike,) = events(sim, ref, "alarm:memory_limit_reset")
    assert (strike["strikes"], strike["sealed"]) == (1, False)
    times = {r["id"]: r["time"] for r in scheduler_jobs(sim, ref)}
    assert times == {boom.id: due + 30_000, member.id: due + 30_000, plain.id: plain_due}


def test_J057_a_facet_schedule_can_join_the_recovery_loop(sim: Simulation) -> None:
    """The option travels with a sub-agent's call to its root, whose job stores it."""
    from tests.conformance.sub_agent_fixtures import Child, Root

    root = sim.agent(Root, "root")
    sim.run_for(10_000)
    created = sim.call(root, "at", [(Child, "c")], "schedule", 5, "tick", recovery_loop=True)
    (row,) = sim.query(root, "SELECT * FROM cf_agents_jobs WHERE capability = 'scheduler'")
    assert (row["id"], row["recovery_loop"]) == (created.id, 1)


def test_recovery_loop_is_ignored_on_0_21_0() -> None:
    """0.21.0's `schedule()` reads only `retry` and `idempotent`: the option is neither refused
    nor stored, and the row is the one the call without it writes."""
    with Simulation(seed=21, sdk="0.21.0") as old:
        ref = old.agent(Timed, "a")
        old.run_for(10_500)
        with_it = old.call(ref, "schedule", 60, "cb", {"n": 1}, recovery_loop=True)
        without = old.call(ref, "schedule", 60, "cb", {"n": 2})
        rows = old.query(ref, "SELECT * FROM cf_agents_schedules ORDER BY payload")
        assert [r["id"] for r in rows] == [with_it.id, without.id]
        columns = set(rows[0])
        assert "recovery_loop" not in columns
        strip = {"id", "payload"}
        assert {k: v for k, v in rows[0].items() if k not in strip} == {
            k: v for k, v in rows[1].items() if k not in strip
        }
        assert old.query(ref, "SELECT name FROM sqlite_master WHERE name = 'cf_agents_jobs'") == []


def test_recovery_loop_in_the_scenario_language() -> None:
    """A schedules workload's `recovery_loop: true` reaches schedule(): its job is a member on
    0.32.0; an `every` schedule refuses the key (schedule_every takes no such option)."""
    import textwrap

    from scenarios.language.errors import InvalidScenario
    from scenarios.language.loader import parse_scenario

    text = textwrap.dedent(
        """
        name: recovery-loop-key
        description: two one-shots, one in the recovery loop
        seed: 3
        sdk: "0.32.0"
        agents:
          w: {workload: schedules, schedules: [{name: a, after: 60s, recovery_loop: true},
                                               {name: b, after: 60s}]}
        steps:
          - call: {agent: w, method: status}
        """
    )
    scenario = parse_scenario(text, "<test>")
    (spec,) = scenario.agents
    assert [p.recovery_loop for p in spec.cls.schedules] == [True, False]
    with Simulation(seed=3, sdk="0.32.0") as run:
        ref = run.agent(spec.cls, "w")
        run.run_for(1_000)
        named = {
            r["name"]: r["schedule_id"] for r in run.query(ref, "SELECT * FROM workload_schedules")
        }
        flags = {r["id"]: r["recovery_loop"] for r in scheduler_jobs(run, ref)}
        assert {name: flags[id] for name, id in named.items()} == {"a": 1, "b": 0}
    every = text.replace("after: 60s, recovery_loop: true", "every: 60s, recovery_loop: true")
    with pytest.raises(InvalidScenario, match="recovery_loop"):
        parse_scenario(every, "<test>")
