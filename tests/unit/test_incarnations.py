"""Incarnations: startup once under the input gate, its triggers, and death without unwinding."""

from __future__ import annotations

import gc

import pytest

from agents_core import Agent, Request
from sim import AgentEvicted, Simulation
from tests.releases import on_release


class Journal(Agent):
    """Writes what happens to it into its own table (which survives incarnations)."""

    def _note(self, what: str) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS journal (seq INTEGER PRIMARY KEY, what TEXT)")
        self.sql("INSERT INTO journal (what) VALUES (?)", what)

    async def on_start(self) -> None:
        self._note("start")
        await self.host.clock.sleep(self.startup_ms)

    startup_ms = 0

    async def on_request(self, request: Request):
        self._note(f"request {request.path}")
        return await super().on_request(request)

    async def ping(self) -> str:
        self._note("ping")
        return "pong"

    async def hold(self, ms: int) -> None:
        """Sleep inside a try whose finally and except would write, if they ever ran."""
        try:
            self._note("hold begins")
            await self.host.clock.sleep(ms)
            self._note("hold ends")
        except BaseException:
            self._note("except ran")
            raise
        finally:
            self._note("finally ran")
            self.host.trace.emit("user:finally")
            self.host.alarm.set_alarm(self.host.clock.now_ms() + 5)


def journal(sim: Simulation, ref) -> list[str]:
    return [row["what"] for row in sim.query(ref, "SELECT what FROM journal ORDER BY seq")]


def test_startup_runs_once_per_incarnation(sim: Simulation) -> None:
    """on_start runs once for the first event of an incarnation, and again after an eviction."""
    ref = sim.agent(Journal, "j")
    sim.fetch(ref, Request(path="/a"))
    sim.fetch(ref, Request(path="/b"))
    sim.evict(ref)
    sim.fetch(ref, Request(path="/c"))
    assert journal(sim, ref) == ["start", "request /a", "request /b", "start", "request /c"]


def test_input_gate_holds_events_until_startup_ends(sim: Simulation) -> None:
    """A request arriving while a slow on_start runs is delivered only after it finishes."""

    class SlowStart(Journal):
        startup_ms = 500

    ref = sim.agent(SlowStart, "slow")
    sim.run_for(100)
    sim.fetch(ref, Request(path="/during-startup"))
    assert journal(sim, ref) == ["start", "request /during-startup"]
    assert sim.now_ms == 500


@pytest.mark.parametrize("trigger", ["request", "connect", "get"])
def test_startup_is_triggered_by_requests_connections_and_get(
    sim: Simulation, trigger: str
) -> None:
    """A request, a connection and get-by-name each wake the agent with startup."""
    ref = sim.agent(Journal, "j")
    sim.run_for(1)
    sim.evict(ref)
    if trigger == "request":
        sim.fetch(ref)
    elif trigger == "connect":
        sim.connect(ref)
    else:
        sim.agent(Journal, "j")
        sim.run_for(1)
    assert journal(sim, ref).count("start") == 2


@on_release("0.21.0")
def test_plain_rpc_on_a_stale_stub_does_not_run_startup(sim: Simulation) -> None:
    """After an eviction, an RPC on the old stub runs without on_start; a request then starts it."""
    ref = sim.agent(Journal, "j")
    assert sim.call(ref, "ping") == "pong"
    sim.evict(ref)
    assert sim.call(ref, "ping") == "pong"
    assert journal(sim, ref) == ["start", "ping", "ping"]
    assert sim.incarnation_of(ref) == 2
    sim.fetch(ref, Request(path="/x"))
    assert journal(sim, ref) == ["start", "ping", "ping", "start", "request /x"]


def test_failed_startup_is_retried_by_the_next_event(sim: Simulation) -> None:
    """If on_start throws, the event fails and the next event tries startup again."""

    class FlakyStart(Agent):
        failures_left = [2]

        async def on_start(self) -> None:
            if self.failures_left[0]:
                self.failures_left[0] -= 1
                raise RuntimeError("not today")

        async def on_request(self, request: Request):
            return await super().on_request(request)

    ref = sim.agent(FlakyStart, "f")  # get-by-name: the first startup, which fails
    with pytest.raises(RuntimeError, match="not today"):
        sim.fetch(ref)
    assert sim.fetch(ref).status == 404
    events = [r.event for r in sim.trace.select("startup:*")]
    assert events == ["startup:begin", "startup:failed"] * 2 + ["startup:begin", "startup:done"]


def test_eviction_never_unwinds_the_dying_incarnation(sim: Simulation) -> None:
    """No except, no finally, no storage write, no alarm change and no trace record after death."""
    ref = sim.agent(Journal, "j")
    pending = sim.start_call(ref, "hold", 60_000)
    sim.run_for(1_000)
    assert sim.evict(ref, "deploy")
    with pytest.raises(AgentEvicted, match="evicted \\(deploy\\)"):
        sim.wait(pending)
    sim.run_for(120_000)
    assert journal(sim, ref) == ["start", "hold begins"]
    assert sim.alarm_of(ref) is None
    assert sim.trace.select("user:finally") == []
    assert sim.trace.select("alarm:set") == []


def test_dead_coroutines_are_never_closed_during_the_run(sim: Simulation) -> None:
    """Garbage collection does not close a killed task while the simulation lives."""
    ref = sim.agent(Journal, "j")
    sim.start_call(ref, "hold", 60_000)
    sim.run_for(10)
    sim.evict(ref)
    gc.collect()
    sim.run_for(100_000)
    assert journal(sim, ref) == ["start", "hold begins"]
    assert len(sim.platform.kernel.graveyard) >= 1


def test_a_dead_coroutine_closed_late_cannot_touch_the_world() -> None:
    """Closing a buried coroutine by hand runs its finally, but every host call is refused."""
    sim = Simulation(seed=3)
    ref = sim.agent(Journal, "j")
    sim.start_call(ref, "hold", 60_000)
    sim.run_for(10)
    sim.evict(ref)
    before = len(sim.trace)
    for task in sim.platform.kernel.graveyard:
        task.coro.close()
    assert journal(sim, ref) == ["start", "hold begins"]
    assert len(sim.trace) == before
    assert sim.alarm_of(ref) is None


def test_state_survives_eviction_and_memory_does_not(sim: Simulation) -> None:
    """set_state persists through an eviction; plain attributes start over."""

    class Memo(Agent):
        initial_state = {"n": 0}
        in_memory = 0

        async def bump(self) -> list[int]:
            self.in_memory += 1
            self.set_state({"n": self.state["n"] + 1})
            return [self.state["n"], self.in_memory]

    ref = sim.agent(Memo, "m")
    assert sim.call(ref, "bump") == [1, 1]
    assert sim.call(ref, "bump") == [2, 2]
    sim.evict(ref)
    assert sim.call(ref, "bump") == [3, 1]


def test_set_state_rejects_what_json_cannot_hold(sim: Simulation) -> None:
    """State must be JSON; the error shows the value."""

    class Bad(Agent):
        async def store(self) -> None:
            self.set_state({"when": object})

    ref = sim.agent(Bad, "b")
    with pytest.raises(TypeError, match="JSON-serialisable.*'when'"):
        sim.call(ref, "store")


def test_unknown_method_and_eviction_reason_are_named(sim: Simulation) -> None:
    """Misuse errors say what was asked and what is allowed."""
    ref = sim.agent(Journal, "j")
    with pytest.raises(AttributeError, match="Journal has no public method 'nope'"):
        sim.start_call(ref, "nope")
    with pytest.raises(ValueError, match=r"unknown eviction reason 'bored'; allowed: \['idle'"):
        sim.evict(ref, "bored")


def test_a_delivery_whose_incarnation_died_first_leaves_no_coroutine(sim: Simulation) -> None:
    """Connecting, disconnecting and evicting at one instant makes no never-awaited coroutine."""
    import warnings

    ref = sim.agent(Journal, "j")
    sim.run_for(1)
    client = sim.connect(ref)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        client.disconnect()
        sim.evict(ref)
        sim.run_for(10)
        gc.collect()
    assert sim.incarnation_of(ref) == 0


def test_closing_a_simulation_ends_live_tasks_quietly() -> None:
    """close() ends running tasks too: their finally blocks meet a dead host, nothing is written
    and nothing is raised."""
    sim = Simulation(seed=4)
    ref = sim.agent(Journal, "j")
    sim.start_call(ref, "hold", 60_000)
    sim.run_for(10)
    records = len(sim.trace)
    sim.close()
    assert journal(sim, ref) == ["start", "hold begins"]
    assert len(sim.trace) == records
    assert sim.platform.kernel.graveyard == []


@on_release("0.21.0")
def test_a_current_schema_is_not_recreated_by_each_incarnation(sim: Simulation) -> None:
    """The first incarnation creates the tables and records both schema markers; later ones
    only read them."""
    ref = sim.agent(Journal, "j")
    sim.run_for(1)
    storage = sim.platform.records[ref.path].storage
    first = storage.statements
    markers = {r["id"]: r["state"] for r in sim.query(ref, "SELECT id, state FROM cf_agents_state")}
    assert markers["cf_schema_version"] == "11" and len(markers["agentsim_schema_extras"]) == 16
    sim.evict(ref)
    before = storage.statements
    sim.agent(Journal, "j")
    sim.run_for(1)
    assert storage.statements - before < first * 0.6  # the DDL (most of the first) is skipped
