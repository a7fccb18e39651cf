"""A scheduled chat recovery the user cancels, on 0.32.0 (the dist's `cancelScheduledRecovery`
and the reason `user_cancelled`; ai-chat's `cancel` frame): the incident is settled `skipped`,
the recovering flag cleared, and its continuation, when it fires, runs nothing."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from sim import AgentRef, Simulation
from sim.model import ScriptedModel
from tests.chat.chat_agents import HOSTS, busy_after_the_wake
from tests.releases import on_release

each_host = pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
CANCEL = "cf_agent_chat_request_cancel"


def incident(sim: Simulation, ref: AgentRef) -> dict[str, Any]:
    (only,) = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    return dict(only)


def recovery_waiting_out_a_busy_host(
    sim: Simulation, host: type
) -> tuple[AgentRef, ScriptedModel, Any]:
    """A turn whose model never answers, interrupted; after the wake a second turn keeps the
    host busy, so the recovery times out waiting for it (10 s) and is scheduled again 3 s
    later: the incident is `scheduled`, its continuation not yet running."""
    ref, model, client = busy_after_the_wake(sim, host, max_attempts=3)
    sim.run_for(11_000)
    stored = incident(sim, ref)
    assert (stored["status"], stored["reason"]) == ("scheduled", "stable_timeout_retry")
    return ref, model, client


@on_release("0.32.0")
@each_host
def test_cancelling_a_scheduled_recovery_skips_it_for_good(sim: Simulation, host: type) -> None:
    """The client cancels the interrupted request while its recovery waits to run again: the
    incident is kept `skipped` with `user_cancelled` (reported), the recovering flag is cleared
    and the clients told; the continuation that fires later leaves it, so the turn is neither
    run again nor given up."""
    ref, model, client = recovery_waiting_out_a_busy_host(sim, host)
    origin = incident(sim, ref)["originRequestId"]
    requests = len(model.requests)
    client.send({"type": CANCEL, "id": origin})
    sim.run_for(1)
    stored = incident(sim, ref)
    assert (stored["status"], stored["reason"]) == ("skipped", "user_cancelled")
    (skipped,) = sim.trace.select("chat:recovery:skipped")
    assert (skipped.get("originRequestId"), skipped.get("reason")) == (origin, "user_cancelled")
    assert sim.instance_of(ref).host.kv.get("cf:chat:recovering") is None
    recovering = [f for f in client.frames if f.get("type") == "cf_agent_chat_recovering"]
    assert recovering[-1] == {"type": "cf_agent_chat_recovering", "recovering": False, "id": origin}
    sim.run_for(120_000)
    assert incident(sim, ref)["status"] == "skipped"
    assert sim.trace.select("chat:recovery:exhausted") == []
    assert len(sim.trace.select("chat:recovery:skipped")) == 1
    assert len(model.requests) == requests, "the cancelled recovery never ran its turn"


@on_release("0.32.0")
@each_host
def test_a_cancel_of_another_request_leaves_the_recovery_alone(sim: Simulation, host: type) -> None:
    """Only a `scheduled` incident whose recovery root or latest request is the cancelled one
    is touched: a cancel naming another request changes nothing, and the recovery goes on to
    give the busy host up as before."""
    ref, _model, client = recovery_waiting_out_a_busy_host(sim, host)
    client.send({"type": CANCEL, "id": "some-other-request"})
    sim.run_for(1)
    assert incident(sim, ref)["status"] == "scheduled"
    sim.run_for(100_000)
    assert sim.trace.select("chat:recovery:skipped") == []
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    assert exhausted.get("reason") == "stable_timeout"
