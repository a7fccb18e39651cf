"""`sim.strategies`: fault schedules drawn as `agentsim fuzz` draws them, a driver that writes
down what it did, a state machine over a user's agents, and reproducers written in one call."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import rule

from agents_core.state_store import STATE_ROW_ID
from scenarios.hunt.fault_draws import STORAGE_FAULTS, Schedule
from scenarios.language.loader import load_scenario
from scenarios.run.runner import run_scenario
from scenarios.workloads import Counter
from sim import AgentEvicted, Simulation, StorageError
from sim.checkers import CHECKERS, register
from sim.kernel import IncarnationKilled
from sim.strategies import (
    AgentMachine,
    ExpectationFailed,
    FaultDriver,
    fault_schedules,
    run_machine,
    write_reproducer,
)
from tests.strategies.agents import ForgetfulCounter, counts_go_up

ROOT = Path(__file__).resolve().parents[2]
FAST = settings(
    max_examples=15,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
FAULT_ERRORS = (AgentEvicted, StorageError, IncarnationKilled)


@pytest.fixture
def counts_invariant() -> Iterator[str]:
    register("counts_go_up", counts_go_up)
    try:
        yield "counts_go_up"
    finally:
        CHECKERS.pop("counts_go_up", None)


def _base_sites() -> list:
    """The statement sites of a fault-free run of the workload below."""
    with Simulation(seed=0) as sim:
        driver = FaultDriver(sim, {"counter": Counter})
        for _ in range(3):
            driver.call("counter", "increment")
        return driver.sites()


SITES = _base_sites()


@given(schedule=fault_schedules(["counter"], sites=SITES, horizon_ms=30_000))
@FAST
def test_schedules_draw_fuzz_faults_over_the_given_agents(schedule: Schedule) -> None:
    """Every drawn fault is an eviction, deploy or storage fault on the agents and sites given."""
    assert 1 <= len(schedule.faults) <= 4
    patterns = {site.pattern for site in SITES}
    for fault in schedule.faults:
        args = dict(fault.args)
        assert fault.action in {"evict", "deploy", "arm_storage_fault"}
        if fault.action == "evict":
            assert args["agent"] == "counter" and 0 <= fault.at_ms <= 30_000
        if fault.action == "arm_storage_fault":
            assert args["match"] in patterns and args["kind"] in STORAGE_FAULTS


def test_fault_schedules_refuse_what_they_cannot_draw() -> None:
    """A kind a Python test cannot use, or no agent, is a ValueError saying what is allowed."""
    with pytest.raises(ValueError, match=r"allowed: \['evict', 'deploy', 'storage', 'reconnect'\]"):
        fault_schedules(["counter"], kinds=["repeat"])
    with pytest.raises(ValueError, match="at least one agent"):
        fault_schedules([])


@given(schedule=fault_schedules(["counter"], sites=SITES, horizon_ms=20_000))
@FAST
def test_counts_are_whole_under_drawn_faults(schedule: Schedule) -> None:
    """A property of the Counter: under any drawn schedule, state.count never runs ahead of its
    rows, and agrees with them unless a storage `error` was drawn (a statement that raises does
    not roll back its turn, so a count whose state read or write failed keeps its row)."""
    with Simulation(seed=schedule.seed) as sim:
        driver = FaultDriver(sim, {"counter": Counter})
        driver.arm(schedule)
        for _ in range(3):
            with contextlib.suppress(FAULT_ERRORS):
                driver.call("counter", "increment")
            driver.run_for(5_000)
        driver.run_until(25_000)
        sim.quiesce()
        # Read the committed storage as it is (waking the agent could meet an armed fault).
        tables = sim.snapshot(driver.ref("counter"))
        stored = {row["id"]: row["state"] for row in tables.get("cf_agents_state", [])}
        count = json.loads(stored[STATE_ROW_ID])["count"] if STATE_ROW_ID in stored else 0
        rows = len(tables.get("counts", []))
        errors = [f for f in schedule.faults if dict(f.args).get("kind") == "error"]
        assert count <= rows if errors else count == rows


def test_the_driver_script_replays_as_a_scenario(tmp_path: Path) -> None:
    """What a driver did, written as a scenario file, runs the same steps to the same state:
    the expectation the test stated through the driver fails there as it did in Python."""
    with Simulation(seed=3) as sim:
        driver = FaultDriver(sim, {"counter": Counter})
        driver.call("counter", "increment")
        driver.arm(Schedule(3, (fault_at(2_000, "evict", agent="counter", reason="explicit"),)))
        driver.run_for(4_000)
        driver.call("counter", "increment")
        with pytest.raises(ExpectationFailed) as caught:
            driver.expect_query("counter", "SELECT count(*) AS n FROM counts", [{"n": 1}])
    path = write_reproducer(driver.script, tmp_path / "replayed.yaml", failure=caught.value)
    text = path.read_text()
    assert "The test failed with: ExpectationFailed: the query" in text, text
    scenario = load_scenario(path)
    assert [step.kind for step in scenario.steps] == [
        "call",
        "run_until",
        "evict",
        "run_until",
        "call",
    ]
    result = run_scenario(scenario)
    assert [f.split(": ", 1)[1] for f in result.failures] == [
        "expect 1 (query): the query 'SELECT count(*) AS n FROM counts' on counter returned "
        "[{'n': 2}], expected [{'n': 1}]"
    ]


def fault_at(at_ms: int, action: str, **args: object):
    from scenarios.hunt.fault_draws import Fault

    return Fault(at_ms, action, tuple(args.items()))


class CounterMachine(AgentMachine):
    """The Counter workload under faults: every count that returned is stored."""

    agents = {"counter": Counter}
    checked_invariants = ("turns_atomic", "eviction_final")

    def __init__(self) -> None:
        super().__init__()
        self.returned = 0
        self.tried = 0

    @rule()
    def increment(self) -> None:
        self.tried += 1
        try:
            self.rpc("counter", "increment")
        except FAULT_ERRORS:
            return
        self.returned += 1
        rows = self.sim.query(self.driver.ref("counter"), "SELECT count(*) AS n FROM counts")
        assert self.returned <= rows[0]["n"] <= self.tried


def test_a_machine_over_a_sound_agent_passes() -> None:
    """RPCs interleaved with drawn faults and time, invariants after each step: no failure."""
    run_machine(
        CounterMachine,
        settings=settings(FAST, max_examples=10, stateful_step_count=8),
    )


class ForgetfulMachine(AgentMachine):
    agents = {"counter": ForgetfulCounter}
    checked_invariants = ("counts_go_up",)
    fault_kinds = ("evict", "deploy")

    @rule()
    def increment(self) -> None:
        with contextlib.suppress(FAULT_ERRORS):
            self.rpc("counter", "increment")


def test_a_machine_finds_the_planted_bug_and_writes_a_reproducer(
    counts_invariant: str, tmp_path: Path
) -> None:
    """The shrunk failure is written as a scenario that breaks the same invariant when run."""
    target = tmp_path / "forgetful.yaml"
    with pytest.raises(AssertionError, match="counts_go_up") as caught:
        run_machine(
            ForgetfulMachine,
            reproducer=target,
            settings=settings(FAST, max_examples=60, stateful_step_count=6),
        )
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert f"agentsim reproducer: {target}" in notes, notes
    scenario = load_scenario(target)
    kinds = [step.kind for step in scenario.steps]
    assert kinds.count("call") == 2 and len(kinds) <= 4, kinds  # shrunk: count, fault, count
    result = run_scenario(scenario)
    assert not result.passed
    assert any("counts_go_up" in failure for failure in result.failures)


def test_sim_never_imports_the_scenario_language() -> None:
    """Importing `sim` and every module of it but the `sim.strategies` re-export loads nothing
    of `scenarios` and nothing of Hypothesis (the layers hold at run time as on paper:
    tests/test_import_graph.py reads the imports)."""
    code = (
        "import pkgutil, importlib, sys, sim\n"
        "for info in pkgutil.walk_packages(sim.__path__, 'sim.'):\n"
        "    if info.name != 'sim.strategies':\n"
        "        importlib.import_module(info.name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('scenarios', 'hypothesis'))\n"
        "print(bad)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "[]"


@given(st.data())
@FAST
def test_fault_now_draws_only_what_exists(data: st.DataObject) -> None:
    """A fault drawn now names a known agent, a connected client, or a shape already run."""
    with Simulation(seed=1) as sim:
        driver = FaultDriver(sim, {"counter": Counter})
        driver.call("counter", "increment")
        driver.connect("alice", "counter")
        fault = data.draw(driver.fault_now())
        args = dict(fault.args)
        if fault.action == "reconnect":
            assert args["client"] == "alice"
        if fault.action == "arm_storage_fault":
            assert args["skip"] == 0 and args["agent"] == "counter"
        driver.apply(fault)
        assert driver.script.steps[-1].keys() == {fault.action}


def test_a_drawn_reconnect_needs_the_client_connected_through_the_driver() -> None:
    """A reconnect of a client the driver never connected says how to connect it."""
    reconnect = fault_at(0, "reconnect", client="alice")
    with Simulation(seed=2) as sim:
        driver = FaultDriver(sim, {"counter": Counter})
        with pytest.raises(KeyError, match=r"driver.connect\(name, alias\)"):
            driver.apply(reconnect)
        client = driver.connect("alice", "counter")
        driver.apply(reconnect)
        assert driver.script.steps[-1] == {"reconnect": {"client": "alice"}}
        assert client.connected
        assert len(sim.trace.select("connection:open", client="alice")) == 2
