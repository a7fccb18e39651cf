"""Nondeterminism named at its line (issue 19, part 2): while agent code runs in a step, the real
clock, real sleeps, global randomness, uuid1/uuid4, os.urandom, secrets and asyncio's loop fail
with a `NondeterministicCall` (a TypeError) naming the call, the file and line, and what to use
instead; outside agent code they work, and the escape hatches let a call through."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import secrets
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

import sim
from agents_core import Agent
from sim import NondeterministicCall, Simulation
from tests.unit import sandbox_helper


async def _asyncio_sleep() -> None:
    await asyncio.sleep(1)


async def _asyncio_event() -> None:
    await asyncio.Event().wait()


async def _asyncio_gather() -> None:
    await asyncio.gather()


CALLS: dict[str, tuple[Callable[[], Any], str]] = {
    "time.time": (lambda: time.time(), "self.host.clock.now_ms()"),
    "time.time_ns": (lambda: time.time_ns(), "self.host.clock.now_ms()"),
    "time.monotonic": (lambda: time.monotonic(), "self.host.clock.now_ms()"),
    "time.perf_counter": (lambda: time.perf_counter(), "self.host.clock.now_ms()"),
    "time.sleep": (lambda: time.sleep(0.001), "await self.host.clock.sleep(ms)"),
    "random.random": (lambda: random.random(), "self.host.entropy"),
    "random.randint": (lambda: random.randint(1, 6), "self.host.entropy"),
    "random.choice": (lambda: random.choice("ab"), "self.host.entropy"),
    "random.shuffle": (lambda: random.shuffle([1, 2]), "self.host.entropy"),
    "uuid.uuid4": (lambda: uuid.uuid4(), "self.host.entropy"),
    "uuid.uuid1": (lambda: uuid.uuid1(), "self.host.entropy"),
    "os.urandom": (lambda: os.urandom(4), "self.host.entropy"),
    "secrets.token_hex": (lambda: secrets.token_hex(4), "self.host.entropy"),
    "asyncio.get_running_loop": (lambda: asyncio.get_running_loop(), "self.host.clock.sleep"),
    "asyncio.get_event_loop": (lambda: asyncio.get_event_loop(), "self.host.clock.sleep"),
    "asyncio.sleep": (_asyncio_sleep, "self.host.clock.sleep"),
    "asyncio.Event": (_asyncio_event, "self.host.clock.sleep"),
    "asyncio.gather": (_asyncio_gather, "self.host.tasks.gather"),
}


class Caller(Agent):
    async def make(self, name: str) -> str:
        result = CALLS[name][0]()
        if asyncio.iscoroutine(result):
            await result
        return "no error"

    async def allowed_here(self) -> float:
        with sim.sandbox.allowed():
            return time.time()

    async def through_helper(self) -> float:
        return sandbox_helper.stamp()

    async def logs(self) -> str:
        logging.getLogger("agents.caller").warning("a log record reads the real clock")
        return "logged"


def _line_of(name: str) -> int:
    """The line of the call in this file (the lambda's, or the await in the coroutine)."""
    call = CALLS[name][0]
    first = call.__code__.co_firstlineno
    return first if call.__name__ == "<lambda>" else first + 1


@pytest.mark.parametrize("name", sorted(CALLS))
def test_each_call_fails_in_agent_code_naming_it_its_line_and_what_to_use(
    sim: Simulation, name: str
) -> None:
    with pytest.raises(NondeterministicCall) as caught:
        sim.call(sim.agent(Caller, "c"), "make", name)
    text = str(caught.value)
    assert text.startswith(f"{__file__}:{_line_of(name)}: "), text
    assert CALLS[name][1] in text
    module, _, attribute = name.partition(".")
    assert attribute in text or name == "asyncio.Event", text
    assert isinstance(caught.value, TypeError)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_same_calls_work_outside_agent_code(sim: Simulation, name: str) -> None:
    """The test (and pytest, and the harness between steps) use the real ones."""
    sim.call(sim.agent(Caller, "c"), "allowed_here")  # the sandbox is installed by now
    call = CALLS[name][0]
    if name.startswith("asyncio"):
        return  # asyncio's own outside a loop: its errors are its own (checked below)
    call()


def test_asyncio_outside_agent_code_runs_as_asyncio_does(sim: Simulation) -> None:
    sim.call(sim.agent(Caller, "c"), "allowed_here")

    async def main() -> str:
        await asyncio.sleep(0.001)
        return "ran"

    assert asyncio.run(main()) == "ran"


def test_allowed_lets_a_call_site_through(sim: Simulation) -> None:
    assert isinstance(sim.call(sim.agent(Caller, "c"), "allowed_here"), float)


def test_a_library_called_in_a_turn_is_caught_and_allow_module_lets_it_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caught = pytest.raises(NondeterministicCall, match=r"sandbox_helper\.py:\d+: time\.time")
    with Simulation() as run, caught:
        run.call(run.agent(Caller, "c"), "through_helper")
    with Simulation(sandbox_allow=("tests.unit.sandbox_helper",)) as run:
        assert isinstance(run.call(run.agent(Caller, "c"), "through_helper"), float)
    monkeypatch.setattr(sim.sandbox, "_modules", {*sim.sandbox.LOGGING})
    sim.sandbox.allow_module("tests.unit")
    with Simulation() as run:
        assert isinstance(run.call(run.agent(Caller, "c"), "through_helper"), float)


def test_logging_in_agent_code_is_let_through(sim: Simulation) -> None:
    """A log record's timestamp is output, not a decision: logging reads the clock freely."""
    assert sim.call(sim.agent(Caller, "c"), "logs") == "logged"


def test_the_sandbox_can_be_switched_off_for_a_run() -> None:
    with Simulation(sandbox=False) as run:
        assert run.call(run.agent(Caller, "c"), "make", "time.time") == "no error"


def test_the_harness_s_own_calls_in_a_step_are_not_caught() -> None:
    """A library story runs as before: the runtime, its logging and simpy read what they read."""
    from scenarios import load_scenario
    from scenarios.run.runner import run_scenario
    from tests.scenarios.helpers import library_files

    for path in library_files()[:5]:
        result = run_scenario(load_scenario(path))
        assert not any(
            "NondeterministicCall" in f or "was called in agent code" in f for f in result.failures
        ), result.failures


def _fresh_process(folder: Any, modules: dict[str, str], script: str) -> str:
    """Run `script` beside `modules` in a new interpreter (where agentsim has installed
    nothing yet, so names the modules bind first are the originals); its output."""
    import subprocess
    import sys
    from pathlib import Path

    for name, text in modules.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "script.py").write_text(script, encoding="utf-8")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "script.py"],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{root}"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


PREBOUND_AGENTS = """\
from random import random
from time import time
from uuid import uuid4

from agents_core import Agent


class Prebound(Agent):
    async def stamp(self, which):
        return {"time": time, "uuid4": uuid4, "random": random}[which]()
"""

PREBOUND_RUN = """\
import sys

import prebound_agents  # imported before sim, as import sorting puts an agent module's imports

import sim

for which in ("time", "uuid4", "random"):
    with sim.Simulation() as run:
        try:
            run.call(run.agent(prebound_agents.Prebound, "p"), "stamp", which)
        except sim.NondeterministicCall as error:
            print("caught", which, str(error).split(":")[1])
        else:
            print("passed", which)
"""


def test_names_an_agent_module_imported_before_the_simulation_are_caught(tmp_path: Any) -> None:
    """`from time import time` in an agent's module, imported before agentsim installed its
    wrappers, is caught at its line as `time.time()` is (the module's names are rebound when
    the agent is first constructed)."""
    out = _fresh_process(tmp_path, {"prebound_agents.py": PREBOUND_AGENTS}, PREBOUND_RUN)
    assert out.splitlines() == ["caught time 10", "caught uuid4 10", "caught random 10"]


DATED_AGENTS = """\
import datetime as dt
import pickle
from datetime import date, datetime

from agents_core import Agent


class Dated(Agent):
    async def read(self, which):
        return {
            "datetime.now": lambda: datetime.now(),
            "datetime.utcnow": lambda: datetime.utcnow(),
            "datetime.today": lambda: datetime.today(),
            "date.today": lambda: date.today(),
            "dt.datetime.now": lambda: dt.datetime.now(),
            "dt.date.today": lambda: dt.date.today(),
        }[which]()

    async def make(self):
        made = datetime(2026, 12, 2, 12, 0)
        parsed = datetime.fromisoformat("2026-12-02T12:00:00")
        stamp = dt.datetime.fromtimestamp(self.host.clock.now_ms() / 1000, dt.timezone.utc)
        return [
            type(made) is dt.datetime.__agentsim_original__,
            made == parsed,
            isinstance(made, datetime),
            isinstance(stamp, dt.datetime),
            isinstance(date(2026, 1, 1), date),
            pickle.loads(pickle.dumps(made)) == made,
            repr(made),
        ]
"""

DATED_RUN = """\
import datetime

import dated_agents

import sim

with sim.Simulation() as run:
    agent = run.agent(dated_agents.Dated, "d")
    for which in (
        "datetime.now", "datetime.utcnow", "datetime.today", "date.today",
        "dt.datetime.now", "dt.date.today",
    ):
        try:
            run.call(agent, "read", which)
        except sim.NondeterministicCall as error:
            print("caught", which, str(error).split(":")[1], str(error).split(": ")[1].split()[0])
        else:
            print("passed", which)
    print(run.call(agent, "make"))
    print(dated_agents.datetime.now().year >= 2026, dated_agents.date.today().year >= 2026)
    print(datetime.datetime.now is not dated_agents.datetime.now)
"""


def test_datetime_clock_readers_in_an_agent_module_are_caught_and_dates_stay_dates(
    tmp_path: Any,
) -> None:
    """`datetime.now()`, `utcnow()`, `today()` and `date.today()` in an agent's module (bound
    as classes or through the module) fail at their line in a step; dates the agent makes are
    the real class's (construction, isinstance, pickling, repr), the same readers work outside
    a step, and the `datetime` module itself is left as it was."""
    lines = _fresh_process(tmp_path, {"dated_agents.py": DATED_AGENTS}, DATED_RUN).splitlines()
    assert lines[:6] == [
        "caught datetime.now 11 datetime.datetime.now()",
        "caught datetime.utcnow 12 datetime.datetime.utcnow()",
        "caught datetime.today 13 datetime.datetime.today()",
        "caught date.today 14 datetime.date.today()",
        "caught dt.datetime.now 15 datetime.datetime.now()",
        "caught dt.date.today 16 datetime.date.today()",
    ], lines
    assert lines[6] == str(
        [True, True, True, True, True, True, "datetime.datetime(2026, 12, 2, 12, 0)"]
    )
    assert lines[7:] == ["True True", "True"]
