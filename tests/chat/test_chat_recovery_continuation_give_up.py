"""A recovery continuation that gives its turn up, on 0.32.0 (the dist's `exhaustRecoveryGiveUp`):
the clients are told before the incident is sealed, and an incident gone by then is made up so
that the turn is still given up."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from agents_core.chat.recovery_incidents import ChatRecoveryExhaustedContext
from sim import AgentRef, Simulation
from tests.chat.chat_agents import HOSTS, busy_after_the_wake
from tests.releases import on_release

each_host = pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
on_0_32 = on_release("0.32.0")


def incidents(sim: Simulation, ref: AgentRef) -> dict[str, Any]:
    return dict(sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX))


@on_0_32
@each_host
def test_a_continuation_seals_the_incident_after_telling_the_clients(
    sim: Simulation, host: type
) -> None:
    """Given up for a host that stayed busy (`stable_timeout`, its one attempt spent):
    `on_exhausted` still finds the incident as the continuation left it, and it is sealed
    `exhausted` once the clients have the terminal message."""
    seen: list[str] = []
    ref: AgentRef | None = None

    def on_exhausted(ctx: ChatRecoveryExhaustedContext) -> None:
        assert ref is not None
        (stored,) = incidents(sim, ref).values()
        seen.append(stored["status"])

    ref, _model, client = busy_after_the_wake(sim, host, max_attempts=1, on_exhausted=on_exhausted)
    sim.run_for(30_000)
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    assert exhausted.get("reason") == "stable_timeout"
    assert seen == ["attempting"]
    (stored,) = incidents(sim, ref).values()
    assert (stored["status"], stored["reason"]) == ("exhausted", "stable_timeout")
    assert [f["body"] for f in client.frames if f.get("error") and f.get("done")] == [
        exhausted.get("terminalMessage")
    ]


@on_0_32
@each_host
def test_a_continuation_whose_incident_is_gone_still_gives_the_turn_up(
    sim: Simulation, host: type
) -> None:
    """The incident disappears while its continuation waits for the busy host: when the wait
    runs out, an incident is made up (the payload's id and recovery root, every attempt spent)
    and given up with `stable_timeout`, and stored sealed."""
    told: list[ChatRecoveryExhaustedContext] = []
    ref, _model, client = busy_after_the_wake(sim, host, on_exhausted=told.append)
    sim.run_for(1_000)
    ((key, stored),) = incidents(sim, ref).items()
    assert stored["status"] == "attempting"
    sim.instance_of(ref).host.kv.delete(key)
    sim.run_for(30_000)
    (ctx,) = told
    assert (ctx.reason, ctx.incident_id) == ("stable_timeout", stored["incidentId"])
    assert ctx.recovery_root_request_id == stored["originRequestId"]
    assert (ctx.attempt, ctx.max_attempts, ctx.recovery_kind) == (10, 10, "retry")
    sealed = incidents(sim, ref)[key]
    assert (sealed["status"], sealed["reason"]) == ("exhausted", "stable_timeout")
    assert [f["body"] for f in client.frames if f.get("error") and f.get("done")] == [
        ctx.terminal_message
    ]
