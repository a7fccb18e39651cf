"""What a chat turn's give-up leaves in the transcript, on each release: 0.32.0 (as
@cloudflare/ai-chat 0.12.2 does) persists the partial answer of a stream the dead isolate left
open before it tells clients the terminal message; 0.21.0 keeps only the terminal outcome."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from sim import Simulation
from sim.model import ScriptedModel, text
from tests.chat.chat_agents import HOSTS, user
from tests.releases import on_both_releases


def given_up_at_once(host: type) -> type:
    """`host` whose recovery gives a turn up at its first look: no attempt allowed (0.21.0's
    `max_chat_recovery_attempts = 0`), one interrupted attempt allowed (0.32.0's
    `max_interrupted_attempts = 1`, which the original turn spends)."""
    fields: dict[str, Any] = {
        "max_chat_recovery_attempts": 0,
        "chat_recovery": {"max_interrupted_attempts": 1},
    }
    return type(f"GivenUp{host.__name__}", (host,), fields)


@on_both_releases
@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_given_up_turn_keeps_its_partial_answer_on_0_32_0_only(
    sim: Simulation, host: type
) -> None:
    """A turn evicted mid-answer and given up: 0.32.0 persists the answer streamed so far as the
    assistant message (the stream was still open); 0.21.0 persists nothing. Neither asks the
    model again."""
    given_up = given_up_at_once(host)
    model = sim.register_model(
        ScriptedModel(default=text("the whole answer", chunks=4, delay_ms=1_000))
    )
    ref = sim.agent(given_up, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(2_500)
    sim.evict(ref)
    sim.agent(given_up, "c")
    sim.run_for(30_000)
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    (stored,) = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    assert stored["status"] == "exhausted"
    messages = sim.instance_of(ref).messages
    if sim.platform.release == "0.21.0":
        assert exhausted.get("reason") == "max_attempts_exceeded"
        assert [m["role"] for m in messages] == ["user"]
        assert sim.probes.get("chat.recovery_gave_up_partial_saved", 0) == 0
    else:
        assert exhausted.get("reason") == "interrupted_attempts_exceeded"
        assert [m["role"] for m in messages] == ["user", "assistant"]
        said = "".join(p.get("text", "") for p in messages[1]["parts"])
        assert said and "the whole answer".startswith(said)
        assert sim.probes["chat.recovery_gave_up_partial_saved"] == 1
    assert len(model.requests) == 1
