"""The alarm slot: replace-on-set, durable across eviction, at-least-once with retries, and the
15-minute handler limit."""

from __future__ import annotations

from agents_core import Agent
from sim import Simulation
from sim.alarms import ALARM_HANDLER_LIMIT_MS


class Alarmed(Agent):
    """Counts alarm runs in storage; behaviour per run is scripted through its state."""

    initial_state = {"mode": "ok", "handler_ms": 0}

    async def on_start(self) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS runs (t INTEGER, slot INTEGER)")

    async def arm(self, at_ms: int) -> None:
        self.host.alarm.set_alarm(at_ms)

    async def configure(self, mode: str, handler_ms: int = 0) -> None:
        self.set_state({"mode": mode, "handler_ms": handler_ms})

    async def alarm(self) -> None:
        self.sql(
            "INSERT INTO runs VALUES (?, ?)", self.host.clock.now_ms(), self.host.alarm.get_alarm()
        )
        if self.state["handler_ms"]:
            await self.host.clock.sleep(self.state["handler_ms"])
        if self.state["mode"] == "throw":
            raise RuntimeError("alarm handler failed")


def run_times(sim: Simulation, ref) -> list[int]:
    return [row["t"] for row in sim.query(ref, "SELECT t FROM runs ORDER BY rowid")]


def test_setting_the_alarm_replaces_the_previous_time(sim: Simulation) -> None:
    """One slot: the last set wins, and the earlier time never fires."""
    ref = sim.agent(Alarmed, "a")
    sim.call(ref, "arm", 5_000)
    sim.call(ref, "arm", 9_000)
    assert sim.alarm_of(ref) == 9_000
    sim.run_for(20_000)
    assert run_times(sim, ref) == [9_000]


def test_the_slot_reads_empty_inside_the_handler(sim: Simulation) -> None:
    """While the handler runs, get_alarm is None unless the handler set it again."""
    ref = sim.agent(Alarmed, "a")
    sim.call(ref, "arm", 1_000)
    sim.run_for(2_000)
    assert sim.query(ref, "SELECT slot FROM runs") == [{"slot": None}]


def test_an_armed_alarm_survives_eviction_and_wakes_the_agent_with_startup(sim: Simulation) -> None:
    """After an eviction the alarm still fires; it starts a new incarnation, startup first."""
    ref = sim.agent(Alarmed, "a")
    sim.call(ref, "arm", 300_000)
    sim.evict(ref, "deploy")
    sim.run_for(310_000)
    assert run_times(sim, ref) == [300_000]
    assert sim.incarnation_of(ref) == 2
    start = sim.trace.select("incarnation:start", agent=ref.path)[-1]
    assert start.get("trigger") == "alarm"
    order = [r.event for r in sim.trace.select(agent=ref.path) if r.inc == 2]
    assert order.index("startup:done") < order.index("alarm:done")


def test_a_throwing_handler_is_retried_from_2s_doubling_six_times(sim: Simulation) -> None:
    """At-least-once: 6 retries at 2, 4, 8, 16, 32, 64 s after each failure, then given up."""
    ref = sim.agent(Alarmed, "a")
    sim.call(ref, "configure", "throw")
    sim.call(ref, "arm", 10_000)
    sim.run_for(3_600_000)
    times = run_times(sim, ref)
    assert len(times) == 7
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    assert gaps == [2_000, 4_000, 8_000, 16_000, 32_000, 64_000]
    assert len(sim.trace.select("alarm:given_up", agent=ref.path)) == 1


def test_a_handler_that_recovers_stops_the_retries(sim: Simulation) -> None:
    """Once a retry succeeds, no further run happens."""

    class Twice(Alarmed):
        async def alarm(self) -> None:
            await super().alarm()
            if len(self.sql("SELECT t FROM runs")) < 3:
                raise RuntimeError("not yet")

    ref = sim.agent(Twice, "t")
    sim.call(ref, "arm", 1_000)
    sim.run_for(600_000)
    assert run_times(sim, ref) == [1_000, 3_000, 7_000]


def test_a_handler_past_fifteen_minutes_is_killed_and_retried(sim: Simulation) -> None:
    """The 15-minute limit kills the incarnation mid-handler; the alarm is retried 2 s later."""
    ref = sim.agent(Alarmed, "a")
    sim.call(ref, "configure", "ok", 20 * 60_000)
    sim.call(ref, "arm", 1_000)
    sim.run_for(1_000 + ALARM_HANDLER_LIMIT_MS + 2_000)
    ends = sim.trace.select("incarnation:end", agent=ref.path)
    assert [(e.t_ms, e.get("reason")) for e in ends] == [
        (1_000 + ALARM_HANDLER_LIMIT_MS, "alarm-limit")
    ]
    assert run_times(sim, ref) == [1_000, 1_000 + ALARM_HANDLER_LIMIT_MS + 2_000]
    assert sim.trace.select("alarm:done", agent=ref.path) == []


def test_a_handler_just_under_the_limit_completes(sim: Simulation) -> None:
    """A handler that ends at 14m59s is not killed."""
    ref = sim.agent(Alarmed, "a")
    sim.call(ref, "configure", "ok", ALARM_HANDLER_LIMIT_MS - 1_000)
    sim.call(ref, "arm", 1_000)
    sim.run_for(ALARM_HANDLER_LIMIT_MS + 10_000)
    assert [r.get("reason") for r in sim.trace.select("incarnation:end", agent=ref.path)] in (
        [],
        ["idle"],
    )
    assert len(sim.trace.select("alarm:done", agent=ref.path)) == 1


def test_an_alarm_due_while_the_handler_runs_fires_after_it(sim: Simulation) -> None:
    """Handlers never overlap: a slot re-armed for 'now' fires once the running handler ends."""

    class Rearm(Alarmed):
        async def alarm(self) -> None:
            await super().alarm()
            if len(self.sql("SELECT t FROM runs")) == 1:
                self.host.alarm.set_alarm(self.host.clock.now_ms())
                await self.host.clock.sleep(500)

    ref = sim.agent(Rearm, "r")
    sim.call(ref, "arm", 1_000)
    sim.run_for(5_000)
    assert run_times(sim, ref) == [1_000, 1_500]


def test_an_eviction_during_the_handler_retries_the_alarm(sim: Simulation) -> None:
    """A deploy that kills a running handler counts as a failed run: retried 2 s later."""
    ref = sim.agent(Alarmed, "a")
    sim.call(ref, "configure", "ok", 60_000)
    sim.call(ref, "arm", 1_000)
    sim.run_for(10_000)
    sim.deploy()
    sim.run_for(100_000)
    assert run_times(sim, ref) == [1_000, 12_000]
    assert len(sim.trace.select("alarm:interrupted", agent=ref.path)) == 1


def test_a_retry_held_behind_a_running_handler_keeps_its_attempt(sim: Simulation) -> None:
    """A slot re-armed while a failing handler runs makes a second chain of runs; each chain's
    retry that comes due while the other chain's handler runs waits for it and keeps its
    attempt number, so both chains still give up after six retries (7 runs each) and the
    slot ends empty, rather than a held retry starting over at attempt 0 for ever."""
    ref = sim.agent(Alarmed, "a")
    sim.call(ref, "configure", "throw", 60_000)
    sim.call(ref, "arm", 1_000)
    sim.run_for(2_000)  # the first handler is running
    sim.call(ref, "arm", 3_000)  # comes due while it runs
    sim.run_for(24 * 3_600_000)
    fired = sim.trace.select("alarm:fired", agent=ref.path)
    assert len(fired) == 14
    assert sorted(record.get("attempt") for record in fired) == sorted([*range(7)] * 2)
    assert len(sim.trace.select("alarm:given_up", agent=ref.path)) == 2
    assert sim.alarm_of(ref) is None


class RearmLater(Alarmed):
    """Its first run arms the slot for now (that due is held behind the run), works 500 ms,
    then writes the slot again: `later_ms` from then, or deletes it when `later_ms` is 0."""

    later_ms = 10_000

    async def alarm(self) -> None:
        await super().alarm()
        if len(self.sql("SELECT t FROM runs")) == 1:
            self.host.alarm.set_alarm(self.host.clock.now_ms())
            await self.host.clock.sleep(500)
            if self.later_ms:
                self.host.alarm.set_alarm(self.host.clock.now_ms() + self.later_ms)
            else:
                self.host.alarm.delete_alarm()


def test_a_due_held_behind_the_handler_is_replaced_by_a_later_set(sim: Simulation) -> None:
    """The slot holds one time: a due held behind the running handler is gone once the handler
    arms the slot for later, so the next run comes at the later time, not when the handler
    ends."""
    ref = sim.agent(RearmLater, "r")
    sim.call(ref, "arm", 1_000)
    sim.run_for(20_000)
    assert run_times(sim, ref) == [1_000, 11_500]
    assert sim.probes.get("platform.alarm_held_due_superseded") == 1


def test_a_due_held_behind_the_handler_is_dropped_by_a_delete(sim: Simulation) -> None:
    class DeleteAfter(RearmLater):
        later_ms = 0

    ref = sim.agent(DeleteAfter, "d")
    sim.call(ref, "arm", 1_000)
    sim.run_for(20_000)
    assert run_times(sim, ref) == [1_000]
    assert sim.alarm_of(ref) is None
    # The delete is written down with the time it deleted (the held due's), so a reader of
    # the trace knows the slot no longer owes it.
    deleted = sim.trace.select("alarm:deleted", agent=ref.path)
    assert [(r.t_ms, r.get("was")) for r in deleted] == [(1_500, 1_000)]


def test_a_rolled_back_set_leaves_the_held_due_owed(sim: Simulation) -> None:
    """The write that replaced a held due belongs to its turn: when a crash rolls the turn back,
    the slot is again the due it held, which fires once the crashed handler is gone (at once),
    before the crashed run's own retry 2 s later."""

    class CrashAfterRearm(Alarmed):
        async def on_start(self) -> None:
            await super().on_start()
            self.sql("CREATE TABLE IF NOT EXISTS marks (t INTEGER)")

        async def alarm(self) -> None:
            await super().alarm()
            if len(self.sql("SELECT t FROM runs")) == 1:
                self.host.alarm.set_alarm(self.host.clock.now_ms())
                await self.host.clock.sleep(500)
                self.sql("INSERT INTO marks VALUES (?)", self.host.clock.now_ms())
                self.host.alarm.set_alarm(self.host.clock.now_ms() + 10_000)
                self.sql("INSERT INTO marks VALUES (?)", self.host.clock.now_ms())

    ref = sim.agent(CrashAfterRearm, "c")
    sim.call(ref, "arm", 1_000)
    sim.arm_storage_fault(ref, "crash", match="INSERT INTO marks", skip=1)
    sim.run_for(20_000)
    assert run_times(sim, ref) == [1_000, 1_500, 3_500]
    fired = sim.trace.select("alarm:fired", agent=ref.path)
    assert [(r.t_ms, r.get("attempt")) for r in fired] == [(1_000, 0), (1_500, 0), (3_500, 1)]
    assert sim.alarm_of(ref) is None
    put_back = [r for r in sim.trace.select("alarm:set", agent=ref.path) if r.get("rolled_back")]
    assert [(r.t_ms, r.get("at")) for r in put_back] == [(1_500, 1_000)]
