"""Conformance on SDK 0.32.0: chat recovery always on, its options and the interrupted-attempts
bound (spec sdk-0.32 §8.1, catalogue J-81 … J-83)."""

from __future__ import annotations

import math
import zlib
from typing import Any

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from agents_core.chat.recovery_config import resolve_chat_recovery_config
from sim import AgentRef, Simulation
from sim.model import ScriptedModel, stall, text
from tests.chat.chat_agents import HOSTS, AiChatChild, user

EVICT_EVERY_MS = 60_000


def incident(sim: Simulation, ref: AgentRef) -> dict[str, Any]:
    (only,) = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    return only


def interrupt(sim: Simulation, host: type, ref: AgentRef, times: int) -> None:
    """Evict the agent every minute and wake it again, `times` times."""
    for _ in range(times):
        sim.run_for(EVICT_EVERY_MS)
        sim.evict(ref)
        sim.agent(host, ref.path.split("/")[-1])
        sim.run_for(1_000)


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_J081_chat_recovery_false_still_recovers_with_the_defaults(
    sim: Simulation, host: type
) -> None:
    """`chat_recovery = False`: an interrupted turn is recovered all the same, and the host's
    options are the defaults."""

    class Off(host):  # type: ignore[valid-type, misc]
        chat_recovery = False

    Off.__name__ = f"Off{host.__name__}"
    model = sim.register_model(ScriptedModel(default=text("the answer", chunks=4, delay_ms=5_000)))
    ref = sim.agent(Off, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(2_000)
    sim.evict(ref)
    sim.agent(Off, "c")
    sim.run_for(60_000)
    assert [r.get("mode") for r in sim.trace.select("chat:recovery:attempt")] in (
        ["continue"],
        ["retry"],
    )
    assert incident(sim, ref)["status"] == "recovered"
    assert len(model.requests) == 2
    config = sim.instance_of(ref)._chat_recovery.config
    assert config == resolve_chat_recovery_config(None)
    assert sim.instance_of(ref).messages[-1]["role"] == "assistant"


def test_J082_the_defaults_and_the_max_oom_retries_alias(sim: Simulation) -> None:
    """No options: `max_interrupted_attempts = 5`, `max_recovery_work = 10 000`, 10 attempts, a
    5-minute window, the new terminal message. `{max_oom_retries: 2}` gives 3;
    `max_interrupted_attempts` wins over it, `inf` is kept and 0 becomes 1."""
    ref = sim.agent(AiChatChild, "c")
    sim.run_for(10)
    config = sim.instance_of(ref)._chat_recovery.config
    assert (config.max_interrupted_attempts, config.max_recovery_work) == (5, 10_000)
    assert (config.max_attempts, config.no_progress_timeout_ms) == (10, 300_000)
    assert config.terminal_message == (
        "The assistant was interrupted and could not recover. Please try again."
    )
    assert resolve_chat_recovery_config({"max_oom_retries": 2}).max_interrupted_attempts == 3
    both = {"max_oom_retries": 2, "max_interrupted_attempts": 7}
    assert resolve_chat_recovery_config(both).max_interrupted_attempts == 7
    unbounded = {"max_interrupted_attempts": math.inf}
    assert resolve_chat_recovery_config(unbounded).max_interrupted_attempts == math.inf
    assert (
        resolve_chat_recovery_config({"max_interrupted_attempts": 0}).max_interrupted_attempts == 1
    )
    assert resolve_chat_recovery_config({"max_recovery_work": -1}).max_recovery_work == 10_000


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_J083_five_interrupted_attempts_exhaust_the_turn(sim: Simulation, host: type) -> None:
    """The model never answers and every attempt's isolate dies (the original turn, then four
    recoveries): the next isolate gives the turn up with `interrupted_attempts_exceeded`, ahead
    of the no-progress window and the attempt cap, and nothing runs again."""
    model = sim.register_model(ScriptedModel(default=stall(3_600_000)))
    ref = sim.agent(host, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    interrupt(sim, host, ref, 5)
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    assert exhausted.get("reason") == "interrupted_attempts_exceeded"
    stored = incident(sim, ref)
    assert (stored["status"], stored["reason"]) == ("exhausted", "interrupted_attempts_exceeded")
    assert stored["interruptedAttempts"] == 5
    assert len(model.requests) == 5
    assert len(sim.trace.select("chat:recovery:detected")) == 1
    interrupt(sim, host, ref, 2)
    assert len(model.requests) == 5, "a given-up turn is never run again"


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_a_turn_interrupted_five_times_on_each_release(sdk: str) -> None:
    """0.21.0 has no interrupted-attempts bound: five interruptions in five minutes leave the
    turn recovering; 0.32.0 gives it up after the fifth."""
    with Simulation(seed=zlib.crc32(f"interrupted-{sdk}".encode()), sdk=sdk) as sim:
        sim.register_model(ScriptedModel(default=stall(3_600_000)))
        ref = sim.agent(AiChatChild, "c")
        sim.start_call(ref, "save_messages", [user("go")])
        interrupt(sim, AiChatChild, ref, 5)
        reasons = [r.get("reason") for r in sim.trace.select("chat:recovery:exhausted")]
        assert reasons == ([] if sdk == "0.21.0" else ["interrupted_attempts_exceeded"])
