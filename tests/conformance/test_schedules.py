"""Schedules and their alarm: forms, dedupe, cancel and listing, due-row processing, retries, the
deferred failures of one-shot rows and the memory-limit breaker (spec fibers §4, F-16…F-38).

Every test drives an agent on the simulated platform: real alarms, real evictions, virtual time.
Callbacks record each run in the agent's own `runs` table, read back through `sim.query`.
"""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

import pytest

from agents_core import Agent
from agents_core.cron import InvalidCronExpression
from agents_core.errors import InvalidArgument
from agents_core.schedule_dispatch import (
    is_code_update_reset,
    is_memory_limit_reset,
    is_platform_transient,
)
from sim import Simulation
from sim.simulation import AgentRef
from sim.sqlite import KV_TABLE
from tests.releases import alarm_computation, on_both_releases, on_release, stored_schedules

SUPERSEDED = "Durable Object reset because its code was updated."
CONNECTION_LOST = "Network connection lost."
MEMORY_LIMIT = "Durable Object's isolate exceeded its memory limit and was reset."


class Recorder(Agent):
    """Schedules its own callbacks; each callback records its run (time, id, payload, row)."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql(
            "CREATE TABLE IF NOT EXISTS runs (t INTEGER, callback TEXT, schedule_id TEXT, "
            "payload TEXT, row TEXT)"
        )
        self.sql("CREATE TABLE IF NOT EXISTS errors (t INTEGER, error TEXT)")

    def _record(self, callback: str, payload: Any, row: dict[str, Any]) -> int:
        self.sql(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?)",
            self.host.clock.now_ms(),
            callback,
            row["id"],
            json.dumps(payload),
            json.dumps(row),
        )
        found = self.sql("SELECT COUNT(*) AS n FROM runs WHERE schedule_id = ?", row["id"])
        return found[0]["n"]

    # -- callbacks --------------------------------------------------------------------------
    async def tick(self, payload: Any, row: dict[str, Any]) -> None:
        self._record("tick", payload, row)

    async def other(self, payload: Any, row: dict[str, Any]) -> None:
        self._record("other", payload, row)

    async def slow(self, payload: Any, row: dict[str, Any]) -> None:
        self._record("slow", payload, row)
        await self.host.clock.sleep(payload["ms"])

    async def fail(self, payload: Any, row: dict[str, Any]) -> None:
        """Raise `payload["errors"][n-1]` on the n-th run of this schedule, then succeed."""
        run = self._record("fail", payload, row)
        errors = payload["errors"]
        if run <= len(errors) or payload.get("forever"):
            raise RuntimeError(errors[min(run, len(errors)) - 1])

    def on_error(self, error: BaseException) -> None:
        self.sql("INSERT INTO errors VALUES (?, ?)", self.host.clock.now_ms(), str(error))

    # -- test controls ----------------------------------------------------------------------
    async def drop_alarm(self) -> None:
        """What the SDK test does with `ctx.storage.deleteAlarm()`: lose the armed alarm."""
        self.host.alarm.delete_alarm()

    async def hold_keep_alive(self) -> None:
        self.lease = await self.keep_alive()

    async def plant_row(self, schedule_id: str, callback: str, payload_text: str) -> None:
        """A one-shot row written by other code (a legacy version, a hand edit), due now."""
        self.sql(
            "INSERT INTO cf_agents_schedules (id, callback, payload, type, time) "
            "VALUES (?, ?, ?, 'delayed', ?)",
            schedule_id,
            callback,
            payload_text,
            self.host.clock.now_ms() // 1000,
        )
        await self._schedule_next_alarm()


def runs(sim: Simulation, ref: AgentRef, callback: str | None = None) -> list[dict[str, Any]]:
    rows = sim.query(ref, "SELECT * FROM runs ORDER BY rowid")
    return [r for r in rows if callback is None or r["callback"] == callback]


def run_times(sim: Simulation, ref: AgentRef, callback: str | None = None) -> list[int]:
    return [r["t"] for r in runs(sim, ref, callback)]


def schedule_rows(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    return sim.query(ref, "SELECT * FROM cf_agents_schedules ORDER BY rowid")


def events(sim: Simulation, ref: AgentRef, name: str, **match: Any) -> list[dict[str, Any]]:
    return [dict(r.fields) for r in sim.trace.select(name, agent=ref.path, **match)]


def warnings(sim: Simulation, ref: AgentRef) -> list[str]:
    return [r.get("message") for r in sim.trace.select("console:warn", agent=ref.path)]


def wake(sim: Simulation, cls: type[Agent], name: str) -> AgentRef:
    """`sim.agent` (startup included), then let that startup run."""
    ref = sim.agent(cls, name)
    sim.run_for(0)
    return ref


def at(sim: Simulation, seconds_from_now: float) -> datetime:
    return datetime.fromtimestamp(sim.now_ms / 1000 + seconds_from_now, tz=UTC)


# -- F-16 … F-21: creating, cancelling, reading --------------------------------------------------
@on_both_releases
def test_F016_cancel_schedule_reports_whether_a_row_was_removed(sim: Simulation) -> None:
    """cancel_schedule answers False for an unknown id, True (and deletes) for an existing one."""
    ref = sim.agent(Recorder, "a")
    assert sim.call(ref, "cancel_schedule", "missing00") is False
    created = sim.call(ref, "schedule", 60, "tick")
    assert sim.alarm_of(ref) == 60_000
    assert sim.call(ref, "cancel_schedule", created.id) is True
    assert stored_schedules(sim, ref) == []
    assert events(sim, ref, "schedule:cancel") == [{"callback": "tick", "id": created.id}]
    assert sim.alarm_of(ref) is None
    assert sim.call(ref, "cancel_schedule", created.id) is False
    sim.run_for(120_000)
    assert runs(sim, ref) == []


@on_both_releases
def test_F017_returned_schedules_expose_no_storage_columns(sim: Simulation) -> None:
    """A delayed schedule reads back with exactly callback, delayInSeconds, id, payload, retry,
    time and type."""
    ref = sim.agent(Recorder, "a")
    sim.run_for(5_000)
    created = sim.call(ref, "schedule", 30, "tick", {"n": 1})
    fetched = sim.call(ref, "get_schedule_by_id", created.id)
    (listed,) = sim.call(ref, "list_schedules")
    keys = {"callback", "delayInSeconds", "id", "payload", "retry", "time", "type"}
    for schedule in (created, fetched, listed):
        assert set(schedule.to_dict()) == keys
        assert schedule.to_dict() == {
            "callback": "tick",
            "delayInSeconds": 30,
            "id": created.id,
            "payload": {"n": 1},
            "retry": None,
            "time": 35,
            "type": "delayed",
        }
    internal = {"running", "created_at", "execution_started_at", "owner_path", "owner_path_key"}
    assert internal.isdisjoint(f.name for f in fields(fetched))


@on_both_releases
def test_F019_same_cron_callback_and_payload_returns_the_existing_row(sim: Simulation) -> None:
    """Scheduling one cron again with the same callback and payload returns the same id and
    keeps one row, however often it is called."""
    ref = sim.agent(Recorder, "a")
    first = sim.call(ref, "schedule", "*/5 * * * *", "tick", {"k": 1})
    ids = {sim.call(ref, "schedule", "*/5 * * * *", "tick", {"k": 1}).id for _ in range(10)}
    assert ids == {first.id}
    assert [r["id"] for r in stored_schedules(sim, ref)] == [first.id]
    assert len(events(sim, ref, "schedule:create")) == 1
    assert sim.probes["schedule.idempotent_dedupe"] >= 1


@on_both_releases
def test_F020_cron_differing_in_expression_payload_or_opted_out_adds_a_row(
    sim: Simulation,
) -> None:
    """A different cron, a different payload, or idempotent=False each create another row."""
    ref = sim.agent(Recorder, "a")
    base = sim.call(ref, "schedule", "*/5 * * * *", "tick", {"k": 1})
    other_cron = sim.call(ref, "schedule", "*/10 * * * *", "tick", {"k": 1})
    other_payload = sim.call(ref, "schedule", "*/5 * * * *", "tick", {"k": 2})
    opted_out = sim.call(ref, "schedule", "*/5 * * * *", "tick", {"k": 1}, idempotent=False)
    ids = [base.id, other_cron.id, other_payload.id, opted_out.id]
    assert len(set(ids)) == 4
    # 0.32.0's jobs table is WITHOUT ROWID: its rows come back in id order, not in call order.
    assert sorted(r["id"] for r in stored_schedules(sim, ref)) == sorted(ids)
    assert len(events(sim, ref, "schedule:create")) == 4


@on_both_releases
def test_F021_one_shots_dedupe_only_when_asked(sim: Simulation) -> None:
    """Delayed and Date schedules with idempotent=True and the same callback and payload share
    one row (time ignored); without the flag each call adds a row."""
    ref = sim.agent(Recorder, "a")
    delayed = sim.call(ref, "schedule", 60, "tick", {"p": 1}, idempotent=True)
    again = sim.call(ref, "schedule", 90, "tick", {"p": 1}, idempotent=True)
    assert again.id == delayed.id
    assert again.time == delayed.time == 60
    dated = sim.call(ref, "schedule", at(sim, 120), "tick", {"p": 1}, idempotent=True)
    dated_again = sim.call(ref, "schedule", at(sim, 500), "tick", {"p": 1}, idempotent=True)
    assert dated.type == "scheduled" and dated_again.id == dated.id
    assert len(stored_schedules(sim, ref)) == 2

    plain = [sim.call(ref, "schedule", 60, "other", {"p": 1}).id for _ in range(2)]
    assert plain[0] != plain[1]
    assert len(stored_schedules(sim, ref)) == 4


# -- F-23: the on_start warning ------------------------------------------------------------------
class WarnsOnStart(Recorder):
    """Schedules one-shots in on_start without saying whether they are idempotent."""

    async def on_start(self) -> None:
        await self.schedule(600, "tick")
        await self.schedule(at_clock(self, 900), "tick")
        await self.schedule("0 * * * *", "other")


class OptsInOnStart(Recorder):
    async def on_start(self) -> None:
        await self.schedule(600, "tick", idempotent=True)


class OptsOutOnStart(Recorder):
    async def on_start(self) -> None:
        await self.schedule(600, "tick", idempotent=False)


def at_clock(agent: Agent, seconds_from_now: int) -> datetime:
    return datetime.fromtimestamp(agent.host.clock.now_ms() // 1000 + seconds_from_now, tz=UTC)


@on_release("0.21.0")
def test_F023_one_shot_scheduled_in_on_start_without_idempotent_warns(sim: Simulation) -> None:
    """A non-string schedule in on_start without idempotent warns once per callback per startup
    and still creates its rows; idempotent=True or False silences it."""
    ref = wake(sim, WarnsOnStart, "w")
    (warning,) = warnings(sim, ref)
    assert 'schedule("tick")' in warning and "idempotent=True" in warning
    assert [r["type"] for r in schedule_rows(sim, ref)] == ["delayed", "scheduled", "cron"]
    sim.evict(ref)
    wake(sim, WarnsOnStart, "w")
    assert len(warnings(sim, ref)) == 2
    assert len(schedule_rows(sim, ref)) == 5  # the cron deduped; the one-shots piled up

    for cls in (OptsInOnStart, OptsOutOnStart):
        quiet = wake(sim, cls, "q")
        assert warnings(sim, quiet) == []
        assert len(schedule_rows(sim, quiet)) == 1


# -- F-24 … F-32: intervals ----------------------------------------------------------------------
@on_release("0.21.0")
def test_F024_schedule_every_dedupes_on_callback_interval_and_payload(sim: Simulation) -> None:
    """schedule_every(30, "tick") twice keeps one row; another interval or payload adds one."""
    ref = sim.agent(Recorder, "a")
    first = sim.call(ref, "schedule_every", 30, "tick")
    assert sim.call(ref, "schedule_every", 30, "tick").id == first.id
    assert len(schedule_rows(sim, ref)) == 1
    longer = sim.call(ref, "schedule_every", 60, "tick")
    with_payload = sim.call(ref, "schedule_every", 30, "tick", {"p": 1})
    assert len({first.id, longer.id, with_payload.id}) == 3
    assert [(r["type"], r["intervalSeconds"]) for r in schedule_rows(sim, ref)] == [
        ("interval", 30),
        ("interval", 60),
        ("interval", 30),
    ]


@on_both_releases
def test_F025_dedupe_onto_an_interval_rearms_a_lost_alarm(sim: Simulation) -> None:
    """With the alarm deleted, calling schedule_every again with the same arguments re-arms it."""
    ref = sim.agent(Recorder, "a")
    created = sim.call(ref, "schedule_every", 30, "tick")
    sim.call(ref, "drop_alarm")
    assert sim.alarm_of(ref) is None
    again = sim.call(ref, "schedule_every", 30, "tick")
    assert again.id == created.id
    assert sim.alarm_of(ref) == created.time * 1000 == 30_000


@on_both_releases
def test_F026_dedupe_onto_an_overdue_interval_fires_it(sim: Simulation) -> None:
    """An overdue interval row with no alarm runs right after schedule_every dedupes onto it."""
    ref = sim.agent(Recorder, "a")
    sim.call(ref, "schedule_every", 10, "tick")
    sim.call(ref, "drop_alarm")
    sim.run_for(60_000)
    assert runs(sim, ref) == []
    sim.call(ref, "schedule_every", 10, "tick")
    assert sim.alarm_of(ref) == sim.now_ms + 1
    sim.run_for(1_000)
    assert run_times(sim, ref) == [60_001]


@on_release("0.21.0")
def test_F028_an_interval_whose_callback_throws_stays_scheduled(sim: Simulation) -> None:
    """After its callback fails every attempt, the interval row is still there and advanced."""
    ref = sim.agent(Recorder, "a")
    created = sim.call(ref, "schedule_every", 10, "fail", {"errors": ["boom"], "forever": True})
    sim.run_for(12_000)
    assert len(runs(sim, ref)) == 3
    (row,) = schedule_rows(sim, ref)
    assert (row["id"], row["type"], row["running"]) == (created.id, "interval", 0)
    assert row["time"] > 10
    errors = events(sim, ref, "schedule:error")
    assert errors == [{"callback": "fail", "id": created.id, "error": "boom", "attempts": 3}]
    assert len(sim.trace.select("alarm:failed", agent=ref.path)) == 0


@on_release("0.21.0")
def test_F029_running_flag_is_cleared_after_an_interval_run(sim: Simulation) -> None:
    """A due interval row runs its callback and ends with running = 0."""
    ref = sim.agent(Recorder, "a")
    sim.call(ref, "schedule_every", 10, "slow", {"ms": 500})
    sim.run_for(10_200)
    assert schedule_rows(sim, ref)[0]["running"] == 1
    sim.run_for(1_000)
    assert run_times(sim, ref) == [10_000]
    (row,) = schedule_rows(sim, ref)
    assert (row["running"], row["execution_started_at"], row["time"]) == (0, 10, 20)


def start_interval_and_evict_mid_run(sim: Simulation) -> AgentRef:
    """An interval (10 s) whose run at t=10 s sleeps 20 s; the agent is evicted at t=13 s. The
    platform retries the interrupted alarm 2 s later, at t=15 s."""
    ref = sim.agent(Recorder, "a")
    sim.call(ref, "schedule_every", 10, "slow", {"ms": 20_000})
    sim.run_until(13_000)
    assert sim.evict(ref)
    return ref


@on_release("0.21.0")
def test_F030_an_interval_still_running_is_skipped(sim: Simulation) -> None:
    """A row with running = 1 that started 5 s ago is skipped by the alarm."""
    ref = start_interval_and_evict_mid_run(sim)
    sim.run_until(15_500)
    assert [r.t_ms for r in sim.trace.select("alarm:done", agent=ref.path)] == [15_000]
    assert run_times(sim, ref) == [10_000]
    (row,) = schedule_rows(sim, ref)
    assert (row["running"], row["execution_started_at"]) == (1, 10)
    assert any("previous execution still running" in w for w in warnings(sim, ref))


@on_both_releases
def test_F032_a_running_interval_arms_the_alarm_at_its_hung_deadline(sim: Simulation) -> None:
    """With only a running, not yet hung interval row, the alarm is (started + 30 s) × 1000."""
    ref = start_interval_and_evict_mid_run(sim)
    sim.run_until(15_500)
    assert sim.alarm_of(ref) == (10 + 30) * 1000


@on_release("0.21.0")
def test_an_interval_stuck_running_is_rerun_30s_after_it_started(sim: Simulation) -> None:
    """After an eviction mid-run, the interval is forced to run again at its hung deadline."""
    ref = start_interval_and_evict_mid_run(sim)
    sim.run_until(45_000)
    assert run_times(sim, ref) == [10_000, 40_000]
    assert any("Forcing reset of hung interval schedule" in w for w in warnings(sim, ref))
    sim.run_until(60_500)
    (row,) = schedule_rows(sim, ref)
    assert (row["running"], row["time"]) == (0, 70)
    assert sim.probes["schedule.hung_interval_forced"] >= 1


# -- F-33: many stale one-shots ------------------------------------------------------------------
@on_release("0.21.0")
def test_F033_many_due_one_shots_all_run_and_fifteen_of_one_callback_warn(
    sim: Simulation,
) -> None:
    """15 due delayed rows of one callback (and 3 of another) all run and are deleted; only the
    callback with at least 10 rows gets a duplicate warning."""
    ref = sim.agent(Recorder, "a")
    for i in range(15):
        sim.call(ref, "schedule", 5, "tick", {"i": i})
    for i in range(3):
        sim.call(ref, "schedule", 5, "other", {"i": i})
    sim.run_for(6_000)
    assert [json.loads(r["payload"])["i"] for r in runs(sim, ref, "tick")] == list(range(15))
    assert len(runs(sim, ref, "other")) == 3
    assert schedule_rows(sim, ref) == []
    assert events(sim, ref, "schedule:duplicate_warning") == [
        {"callback": "tick", "count": 15, "type": "one-shot"}
    ]
    assert sum('15 stale "tick" schedules' in w for w in warnings(sim, ref)) == 1


# -- F-35 … F-38: failures of one-shot rows --------------------------------------------------------
@on_both_releases
def test_F035_an_ordinary_error_is_swallowed_and_the_row_deleted(sim: Simulation) -> None:
    """A one-shot failing with an ordinary error, even one that mentions an upgraded script,
    lets the alarm resolve and is deleted after its attempts."""
    ref = sim.agent(Recorder, "a")
    plain = sim.call(ref, "schedule", 5, "fail", {"errors": ["boom"], "forever": True})
    lookalike = "the upgraded script failed its own checks"
    mention = sim.call(ref, "schedule", 5, "fail", {"errors": [lookalike], "forever": True})
    sim.run_for(10_000)
    assert len(sim.trace.select("alarm:failed", agent=ref.path)) == 0
    assert len(sim.trace.select("alarm:done", agent=ref.path)) == 1
    assert stored_schedules(sim, ref) == []
    assert [(e["id"], e["attempts"]) for e in events(sim, ref, "schedule:error")] == [
        (plain.id, 3),
        (mention.id, 3),
    ]
    assert [r["error"] for r in sim.query(ref, "SELECT error FROM errors")] == ["boom", lookalike]


@on_release("0.21.0")
def test_F036_a_transient_outliving_its_retries_defers_the_row(sim: Simulation) -> None:
    """'Network connection lost.' on every attempt: all attempts run, the alarm rejects and the
    row stays for the platform's retry; if a later attempt succeeds, the row is consumed."""
    ref = sim.agent(Recorder, "always")
    created = sim.call(ref, "schedule", 5, "fail", {"errors": [CONNECTION_LOST], "forever": True})
    sim.run_until(6_500)
    assert len(runs(sim, ref)) == 3
    assert [e.get("attempt") for e in sim.trace.select("alarm:failed", agent=ref.path)] == [0]
    assert [r["id"] for r in schedule_rows(sim, ref)] == [created.id]
    assert events(sim, ref, "schedule:error") == []
    sim.run_until(8_000)  # the platform retries the alarm 2 s after it failed
    assert len(runs(sim, ref)) == 6

    later = sim.agent(Recorder, "later")
    sim.call(later, "schedule", 5, "fail", {"errors": [CONNECTION_LOST] * 2})
    sim.run_for(6_000)
    assert len(runs(sim, later)) == 3
    assert schedule_rows(sim, later) == []
    assert sim.trace.select("alarm:failed", agent=later.path) == []
    assert [e["attempt"] for e in events(sim, later, "schedule:retry")] == [2, 3]
    assert sim.probes["schedule.one_shot_deferred_to_platform"] >= 1
    assert sim.probes["schedule.callback_retried"] >= 1


@on_release("0.21.0")
def test_F037_a_supersede_error_defers_at_once(sim: Simulation) -> None:
    """A supersede error on attempt 2 of 5 stops the attempts: attempt 3 never runs in that
    alarm and the row remains; the platform's retry runs it on the new code."""
    ref = sim.agent(Recorder, "a")
    payload = {"errors": ["ordinary failure", SUPERSEDED]}
    created = sim.call(ref, "schedule", 5, "fail", payload, retry={"max_attempts": 5})
    sim.run_until(6_500)
    assert len(runs(sim, ref)) == 2
    assert [e["attempt"] for e in events(sim, ref, "schedule:retry")] == [2]
    assert [r["id"] for r in schedule_rows(sim, ref)] == [created.id]
    assert len(sim.trace.select("alarm:failed", agent=ref.path)) == 1
    assert events(sim, ref, "schedule:error") == []
    sim.run_until(10_000)
    assert len(runs(sim, ref)) == 3
    assert schedule_rows(sim, ref) == []
    assert sim.probes["schedule.one_shot_deferred_to_platform"] >= 1


def oom_events(sim: Simulation, ref: AgentRef) -> list[tuple[int, int, bool]]:
    found = events(sim, ref, "alarm:memory_limit_reset")
    assert all(e["limit"] == 3 and "memory limit" in e["error"] for e in found)
    return [(e["strikes"], e["limit"], e["sealed"]) for e in found]


def strikes_stored(sim: Simulation, ref: AgentRef) -> int | None:
    rows = sim.query(ref, f"SELECT value FROM {KV_TABLE} WHERE key = 'cf_agents:oom_alarm_strikes'")
    return json.loads(rows[0]["value"]) if rows else None


@on_release("0.21.0")
def test_F038_memory_limit_resets_back_off_then_seal(sim: Simulation) -> None:
    """Strikes 1 and 2 resolve the alarm and push the row back 30 s then 60 s; strike 3 purges it;
    a clean alarm in between resets the count."""
    ref = sim.agent(Recorder, "a")
    oom = {"errors": [MEMORY_LIMIT], "forever": True}
    created = sim.call(ref, "schedule", 10, "fail", oom, retry={"max_attempts": 1})
    sim.run_until(10_500)
    assert oom_events(sim, ref) == [(1, 3, False)]
    assert sim.trace.select("alarm:failed", agent=ref.path) == []
    assert [(r["id"], r["time"]) for r in schedule_rows(sim, ref)] == [(created.id, 40)]
    assert sim.alarm_of(ref) == 40_000
    sim.run_until(40_500)
    assert oom_events(sim, ref)[-1] == (2, 3, False)
    assert [r["time"] for r in schedule_rows(sim, ref)] == [100]
    sim.run_until(100_500)
    assert oom_events(sim, ref)[-1] == (3, 3, True)
    assert schedule_rows(sim, ref) == []
    assert strikes_stored(sim, ref) is None
    assert run_times(sim, ref) == [10_000, 40_000, 100_000]

    sim.run_until(200_000)
    reset = sim.agent(Recorder, "reset")
    sim.call(reset, "schedule", 10, "fail", oom, retry={"max_attempts": 1})
    sim.call(reset, "schedule", 20, "tick")
    sim.run_until(215_000)
    assert oom_events(sim, reset) == [(1, 3, False)]
    assert strikes_stored(sim, reset) == 1
    sim.run_until(225_000)  # the tick row at 220 s: a clean alarm
    assert run_times(sim, reset, "tick") == [220_000]
    assert strikes_stored(sim, reset) is None
    sim.run_until(245_000)  # the row pushed to 240 s strikes again, counting from 1
    assert oom_events(sim, reset) == [(1, 3, False), (1, 3, False)]
    assert sim.probes["alarm.memory_limit_backed_off"] >= 1
    assert sim.probes["alarm.memory_limit_sealed"] >= 1


# -- beyond the catalogue ------------------------------------------------------------------------
MISUSE_ON_0_32 = {
    r"Callback must be a string.*got 123": r"^Callback must be a string$",
    r"self\.nope is not a function": (
        r'^Unknown scheduled callback "nope": not registered on this Scheduler$'
    ),
}
"""The refusals 0.32.0's Scheduler words otherwise (sdk-0.32 J-38), by 0.21.0's `match`."""


@pytest.mark.parametrize(
    ("method", "args", "kwargs", "error", "match"),
    [
        ("schedule", (10, 123), {}, InvalidArgument, r"Callback must be a string.*got 123"),
        ("schedule", (10, "nope"), {}, InvalidArgument, r"self\.nope is not a function"),
        ("schedule", ([1], "tick"), {}, InvalidArgument, r"Invalid schedule type: \[1\] \(list\)"),
        ("schedule", (True, "tick"), {}, InvalidArgument, r"Invalid schedule type: True \(bool\)"),
        ("schedule", ("61 * * * *", "tick"), {}, InvalidCronExpression, r"'61 \* \* \* \*'"),
        (
            "schedule",
            (datetime(2030, 1, 1), "tick"),  # noqa: DTZ001 - the naive datetime is the point
            {},
            InvalidArgument,
            r"aware datetime.*naive datetime\.datetime\(2030, 1, 1",
        ),
        (
            "schedule",
            (10, "tick"),
            {"retry": {"max_attempts": 0}},
            ValueError,
            r"max_attempts must be an integer >= 1, got 0",
        ),
        (
            "schedule",
            (10, "tick"),
            {"retry": 5},
            InvalidArgument,
            r"retry must be a mapping.*got 5",
        ),
        ("schedule_every", (0, "tick"), {}, InvalidArgument, r"> 0 and <= 2592000.*got 0"),
        ("schedule_every", (2_592_001, "tick"), {}, InvalidArgument, r"got 2592001"),
        ("schedule_every", ("10", "tick"), {}, InvalidArgument, r"got '10'"),
        ("schedule_every", (10, "nope"), {}, InvalidArgument, r"self\.nope is not a function"),
    ],
)
@on_both_releases
def test_misuse_is_refused_with_the_value_and_creates_no_row(
    sim: Simulation,
    method: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    error: type[Exception],
    match: str,
) -> None:
    """Each misuse raises an error that shows the bad value, and writes nothing (0.32.0's
    Scheduler words two of the refusals its own way)."""
    ref = sim.agent(Recorder, "a")
    if sim.release != "0.21.0":
        match = MISUSE_ON_0_32.get(match, match)
    with pytest.raises(error, match=match):
        sim.call(ref, method, *args, **kwargs)
    assert stored_schedules(sim, ref) == []
    assert sim.alarm_of(ref) is None


@on_release("0.21.0")
def test_cron_schedules_fire_on_their_minutes_and_collapse_missed_ones(sim: Simulation) -> None:
    """'*/5 * * * *' made at 00:01:01 runs at 00:05, 00:10, 00:15; a run that outlasts the next
    occurrences is followed by one run at the next occurrence after it ends."""
    ref = sim.agent(Recorder, "a")
    sim.run_for(61_000)
    created = sim.call(ref, "schedule", "*/5 * * * *", "tick")
    assert (created.type, created.cron, created.time) == ("cron", "*/5 * * * *", 300)
    sim.run_until(1_000_000)
    assert run_times(sim, ref, "tick") == [300_000, 600_000, 900_000]
    assert schedule_rows(sim, ref)[0]["time"] == 1_200

    slow = sim.agent(Recorder, "slow")
    sim.call(slow, "schedule", "* * * * *", "slow", {"ms": 150_000})
    sim.run_until(1_000_000 + 400_000)
    starts = run_times(sim, slow)
    assert starts[:2] == [1_020_000, 1_200_000]  # 1_080_000 and 1_140_000 collapsed


@on_both_releases
def test_an_interval_counts_from_the_end_of_each_run(sim: Simulation) -> None:
    """A 10 s interval whose runs take 3 s starts at 10 s, 23 s, 36 s."""
    ref = sim.agent(Recorder, "a")
    sim.call(ref, "schedule_every", 10, "slow", {"ms": 3_000})
    sim.run_until(40_000)
    assert run_times(sim, ref) == [10_000, 23_000, 36_000]


@on_both_releases
def test_due_callbacks_run_one_after_another(sim: Simulation) -> None:
    """Rows due in one alarm are awaited in turn: each starts when the previous one ended."""
    ref = sim.agent(Recorder, "a")
    for _ in range(3):
        sim.call(ref, "schedule", 5, "slow", {"ms": 700})
    sim.run_for(10_000)
    assert run_times(sim, ref) == [5_000, 5_700, 6_400]


@on_both_releases
def test_a_one_shot_killed_mid_run_runs_again(sim: Simulation) -> None:
    """An eviction during a one-shot's callback leaves the row; the retried alarm re-runs it."""
    ref = sim.agent(Recorder, "a")
    created = sim.call(ref, "schedule", 10, "slow", {"ms": 5_000})
    sim.run_until(12_000)
    sim.evict(ref, "deploy")
    assert [r["id"] for r in stored_schedules(sim, ref)] == [created.id]
    sim.run_until(30_000)
    assert run_times(sim, ref) == [10_000, 14_000]
    assert len(sim.trace.select("alarm:interrupted", agent=ref.path)) == 1
    assert stored_schedules(sim, ref) == []


@on_both_releases
def test_a_past_date_runs_one_millisecond_later(sim: Simulation) -> None:
    """A datetime in the past makes an overdue row, armed at now + 1 ms."""
    ref = sim.agent(Recorder, "a")
    sim.run_for(50_000)
    created = sim.call(ref, "schedule", at(sim, -20), "tick", {"late": True})
    assert (created.type, created.time) == ("scheduled", 30)
    assert sim.alarm_of(ref) == 50_001
    sim.run_for(10)
    assert run_times(sim, ref) == [50_001]


@on_release("0.21.0")
def test_the_callback_gets_the_payload_and_the_raw_row(sim: Simulation) -> None:
    """The callback's arguments are the parsed payload and the storage row with its internal
    columns and its payload still JSON text."""
    ref = sim.agent(Recorder, "a")
    created = sim.call(ref, "schedule", 5, "tick", {"a": [1, 2]}, retry={"max_attempts": 2})
    sim.run_for(6_000)
    (run,) = runs(sim, ref)
    assert json.loads(run["payload"]) == {"a": [1, 2]}
    row = json.loads(run["row"])
    assert row["id"] == created.id and row["payload"] == '{"a":[1,2]}'
    assert row["retry_options"] == '{"maxAttempts":2}'
    assert {"running", "created_at", "owner_path", "owner_path_key"} <= set(row)


class PatientRecorder(Recorder):
    options = {"retry": {"max_attempts": 4, "base_delay_ms": 1_000, "max_delay_ms": 5_000}}


@on_both_releases
def test_retries_use_the_class_defaults_with_full_jitter(sim: Simulation) -> None:
    """The class's retry options apply; each wait is below min(2^attempt × base, max), and a
    schedule's own retry options override the class's."""
    ref = sim.agent(PatientRecorder, "a")
    created = sim.call(ref, "schedule", 5, "fail", {"errors": ["no"], "forever": True})
    sim.run_for(30_000)
    times = run_times(sim, ref)
    assert len(times) == 4
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert all(0 <= gap < bound for gap, bound in zip(gaps, [2_000, 4_000, 5_000], strict=True))
    assert events(sim, ref, "schedule:retry") == [
        {"callback": "fail", "id": created.id, "attempt": n, "maxAttempts": 4} for n in (2, 3, 4)
    ]
    assert [e["attempts"] for e in events(sim, ref, "schedule:error")] == [4]

    sim.call(
        ref, "schedule", 5, "fail", {"errors": ["no"], "forever": True}, retry={"max_attempts": 1}
    )
    sim.run_for(10_000)
    assert len(runs(sim, ref)) == 5
    assert [e["attempts"] for e in events(sim, ref, "schedule:error")] == [4, 1]


@on_release("0.21.0")
def test_rows_with_a_missing_method_or_bad_payload_are_dropped(sim: Simulation) -> None:
    """A due row naming no method is deleted without running; one whose payload is not JSON is
    reported with attempts 0 and deleted."""
    ref = sim.agent(Recorder, "a")
    sim.call(ref, "plant_row", "gone00001", "no_such_method", "{}")
    sim.call(ref, "plant_row", "badjson01", "tick", "{not json")
    sim.run_for(1_000)
    assert schedule_rows(sim, ref) == []
    assert runs(sim, ref) == []
    assert events(sim, ref, "schedule:execute") == []
    (error,) = events(sim, ref, "schedule:error")
    assert (error["id"], error["attempts"]) == ("badjson01", 0)


@on_release("0.21.0")
def test_recurring_rows_never_defer_platform_errors(sim: Simulation) -> None:
    """A cron row failing with 'Network connection lost.' is reported and advanced; the alarm
    resolves."""
    ref = sim.agent(Recorder, "a")
    sim.call(ref, "schedule", "* * * * *", "fail", {"errors": [CONNECTION_LOST], "forever": True})
    sim.run_for(61_000)
    assert len(runs(sim, ref)) == 3
    assert sim.trace.select("alarm:failed", agent=ref.path) == []
    assert [e["attempts"] for e in events(sim, ref, "schedule:error")] == [3]
    assert schedule_rows(sim, ref)[0]["time"] == 120


@on_both_releases
def test_list_and_get_are_scoped_and_never_show_keep_alive(sim: Simulation) -> None:
    """keepAlive has no row; list filters by id, type and time range; get misses with None."""
    ref = sim.agent(Recorder, "a")
    sim.call(ref, "hold_keep_alive")
    assert sim.call(ref, "list_schedules") == []
    assert stored_schedules(sim, ref) == []
    assert sim.alarm_of(ref) == 30_000
    delayed = sim.call(ref, "schedule", 100, "tick")
    every = sim.call(ref, "schedule_every", 50, "tick")
    listed = sim.call(ref, "list_schedules")
    # 0.21.0 lists in the order the rows were written, 0.32.0 by time (its queue's `list`).
    in_order = [delayed.id, every.id] if sim.release == "0.21.0" else [every.id, delayed.id]
    assert [s.id for s in listed] == in_order
    assert [s.id for s in sim.call(ref, "list_schedules", type="interval")] == [every.id]
    assert [s.id for s in sim.call(ref, "list_schedules", id=delayed.id)] == [delayed.id]
    window = {"start": at(sim, 60), "end": None}
    assert [s.id for s in sim.call(ref, "list_schedules", time_range=window)] == [delayed.id]
    window = {"end": at(sim, 60)}
    assert [s.id for s in sim.call(ref, "list_schedules", time_range=window)] == [every.id]
    assert sim.call(ref, "get_schedule_by_id", "missing00") is None
    assert sim.call(ref, "get_schedule_by_id", every.id).to_dict()["intervalSeconds"] == 50


def test_platform_error_classes_follow_the_cause_chain() -> None:
    """Supersede, transient and memory-limit errors are recognised through `__cause__`; a
    look-alike message is not."""
    try:
        try:
            raise RuntimeError(SUPERSEDED)
        except RuntimeError as inner:
            raise ValueError("SQL query failed") from inner
    except ValueError as wrapped:
        outer = wrapped
    assert is_code_update_reset(outer) and is_platform_transient(outer)
    assert not is_code_update_reset(RuntimeError("our script was upgraded last week"))
    flagged = RuntimeError("flaky")
    flagged.retryable = True  # type: ignore[attr-defined]
    assert is_platform_transient(flagged)
    flagged.overloaded = True  # type: ignore[attr-defined]
    assert not is_platform_transient(flagged)
    assert is_memory_limit_reset(RuntimeError(MEMORY_LIMIT))
    assert not is_platform_transient(RuntimeError(MEMORY_LIMIT))
    assert not is_platform_transient(RuntimeError("boom"))


class Planner(Recorder):
    async def plan(self, seconds: int) -> str:
        schedule = await self.schedule(seconds, "tick", {"n": 1})
        return schedule.id


@on_both_releases
def test_a_schedule_whose_alarm_could_not_be_armed_still_fires(sim: Simulation) -> None:
    """The row is written, then arming the alarm fails on a storage fault: the caller gets the
    error, and a check-back alarm makes sure the schedule still runs (divergence K5)."""
    ref = wake(sim, Planner, "p")
    sim.arm_storage_fault(ref, "error", match=alarm_computation(sim))
    with pytest.raises(Exception, match="injected storage fault"):
        sim.call(ref, "plan", 120)
    assert len(stored_schedules(sim, ref)) == 1
    assert sim.alarm_of(ref) is not None
    assert sim.probes.get("alarm.reschedule_failed") == 1
    sim.run_for(600_000)
    assert [r["callback"] for r in runs(sim, ref)] == ["tick"]
    assert 120_000 <= run_times(sim, ref)[0] <= 121_000
    assert stored_schedules(sim, ref) == []


@on_both_releases
def test_the_deprecated_sync_reads_see_the_agents_own_rows(sim: Simulation) -> None:
    """`get_schedule` / `get_schedules` (the SDK's deprecated synchronous `getSchedule` /
    `getSchedules`) answer as the async pair does on a top-level agent: same rows, same filters,
    None for a missing id."""
    ref = sim.agent(Recorder, "a")
    delayed = sim.call(ref, "schedule", 100, "tick", {"n": 1})
    every = sim.call(ref, "schedule_every", 50, "tick")
    assert sim.call(ref, "get_schedule", delayed.id) == delayed
    assert sim.call(ref, "get_schedule", "missing00") is None
    assert sim.call(ref, "get_schedules") == sim.call(ref, "list_schedules")
    # 0.21.0 lists in the order the rows were written, 0.32.0 by time (its queue's `list`).
    in_order = [delayed.id, every.id] if sim.release == "0.21.0" else [every.id, delayed.id]
    assert [s.id for s in sim.call(ref, "get_schedules")] == in_order
    assert [s.id for s in sim.call(ref, "get_schedules", type="interval")] == [every.id]
    assert [s.id for s in sim.call(ref, "get_schedules", id=delayed.id)] == [delayed.id]
    window = {"start": at(sim, 60), "end": None}
    assert [s.id for s in sim.call(ref, "get_schedules", time_range=window)] == [delayed.id]
