"""Chat recovery's no-progress window (the SDK's primary recovery bound, `noProgressTimeoutMs`,
5 min by default): a turn interrupted again and again is recovered while the durable progress
counter rises (its own streamed content, or a child's chunks it forwards, §7.8), and given up
with `no_progress_timeout` once it has not risen for longer than the window."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from sim import AgentRef, Simulation
from sim.model import ScriptedModel, continuing, stall, text, when
from tests.chat.chat_agents import HOSTS, user
from tests.releases import on_release

pytestmark = pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)

WINDOW_MS = 300_000
EVICT_EVERY_MS = 60_000


def incident(sim: Simulation, ref: AgentRef) -> dict[str, Any]:
    (only,) = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    return only


def interrupt_repeatedly(
    sim: Simulation, host: type, ref: AgentRef, times: int, between: Any = None
) -> None:
    """Evict the agent every minute and wake it again, `times` times (`between(sim)` runs a
    second after each wake)."""
    for _ in range(times):
        sim.run_for(EVICT_EVERY_MS)
        sim.evict(ref)
        sim.agent(host, ref.path.split("/")[-1])
        sim.run_for(1_000)
        if between is not None:
            between(sim)


@on_release("0.21.0")
def test_a_turn_that_makes_no_progress_is_given_up_after_the_window(
    sim: Simulation, host: type
) -> None:
    """The model never answers; every minute an eviction cuts the attempt short. The recoveries
    within 5 min of the first detection run; the first one after it gives the turn up
    (`no_progress_timeout`, well before `max_chat_recovery_attempts`) and nothing runs again."""
    model = sim.register_model(ScriptedModel(default=stall(3_600_000)))
    ref = sim.agent(host, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    interrupt_repeatedly(sim, host, ref, 8)
    (detected,) = sim.trace.select("chat:recovery:scheduled")[:1]
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    assert exhausted.get("reason") == "no_progress_timeout"
    assert exhausted.t_ms - detected.t_ms > WINDOW_MS
    attempts = sim.trace.select("chat:recovery:attempt")
    assert attempts and all(a.t_ms - detected.t_ms <= WINDOW_MS for a in attempts)
    assert all(a.seq < exhausted.seq for a in attempts)
    stored = incident(sim, ref)
    assert (stored["status"], stored["reason"]) == ("exhausted", "no_progress_timeout")
    assert stored["attempts"] == len(attempts) < host.max_chat_recovery_attempts
    assert len(model.requests) == 1 + len(attempts)
    interrupt_repeatedly(sim, host, ref, 2)
    assert len(model.requests) == 1 + len(attempts), "a given-up turn is never run again"
    assert sim.probes["chat.recovery_no_progress_timeout"] == 1


@on_release("0.21.0")
def test_a_turn_that_streams_between_interruptions_keeps_being_recovered(
    sim: Simulation, host: type
) -> None:
    """Each recovered attempt streams a little of its answer before the next eviction: the
    counter rises every time, so the window never closes, even 8 minutes on."""
    slow = text("x" * 40, chunks=40, delay_ms=20_000)
    sim.register_model(ScriptedModel(rules=[when(continuing(), slow)], default=slow))
    ref = sim.agent(host, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    interrupt_repeatedly(sim, host, ref, 8)
    assert sim.trace.select("chat:recovery:exhausted") == []
    attempts = sim.trace.select("chat:recovery:attempt")
    (detected,) = sim.trace.select("chat:recovery:scheduled")[:1]
    assert max(a.t_ms for a in attempts) - detected.t_ms > WINDOW_MS
    assert incident(sim, ref)["status"] == "attempting"


@on_release("0.21.0")
def test_a_forwarded_child_chunk_counts_as_the_parents_progress(
    sim: Simulation, host: type
) -> None:
    """The parent's own turn never streams, but after each wake it forwards a child's chunk
    (§7.8 credit, the first after a restart always counts): that progress keeps its turn
    recovering past the window."""

    class Orchestrating(host):  # type: ignore[valid-type, misc]
        async def forward_child_chunk(self) -> None:
            """What forwarding a child's chunk does for the parent (§7.8)."""
            self._on_agent_tool_stream_progress()

    Orchestrating.__name__ = f"Orchestrating{host.__name__}"
    sim.register_model(ScriptedModel(default=stall(3_600_000)))
    ref = sim.agent(Orchestrating, "c")
    sim.start_call(ref, "save_messages", [user("go")])

    def forward_a_child_chunk(sim: Simulation) -> None:
        sim.call(ref, "forward_child_chunk")

    interrupt_repeatedly(sim, Orchestrating, ref, 8, between=forward_a_child_chunk)
    assert sim.trace.select("chat:recovery:exhausted") == []
    assert len(sim.trace.select("chat:recovery:attempt")) == 8
