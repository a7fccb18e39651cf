"""Chat recovery and the alarm memory-limit breaker on 0.32.0 (spec sdk-0.32 §2.5, §8.3; the
0.32.0 dist's `dispatchChatRecoveryToHandoff` and ai-chat's `_cf_sealMemoryLimitedRecovery`): a
continuation hands its recovered turn to the breaker at the hand-off, so a memory-limit reset of
that turn is a strike against the continuation's job; and when the breaker seals, every live
recovery incident is given up with `out_of_memory`."""

from __future__ import annotations

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from sim import Simulation
from tests.chat.chat_agents import HOSTS
from tests.chat.interrupted_turns import events, interrupt_a_turn, striking_once_in_recovery

on_0_32 = pytest.mark.parametrize("sim", ["0.32.0"], indirect=True)
each_host = pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)

RECOVERY = "__cf_internal_chat_recovery"
STRIKES = "cf_agents:oom_alarm_strikes"


@on_0_32
@each_host
def test_a_memory_limit_reset_of_the_handed_off_turn_strikes_the_continuation(
    sim: Simulation, host: type
) -> None:
    """The recovered turn hits a memory-limit reset after its continuation returned: the
    breaker counts a strike then (charged to the continuation's wake job), the isolate is
    reset, and the continuation enqueued again answers the turn in a fresh incarnation."""
    ref, model = interrupt_a_turn(sim, striking_once_in_recovery(host))
    sim.run_for(60_000)
    first = events(sim, ref, "task:accepted", definition=RECOVERY)[0]
    (handed_off,) = events(sim, ref, "task:step:completed", runId=first.get("runId"))
    (strike,) = events(sim, ref, "alarm:memory_limit_reset")
    assert strike.t_ms >= handed_off.t_ms
    assert (strike.get("strikes"), strike.get("sealed")) == (1, False)
    resets = [e for e in events(sim, ref, "incarnation:end") if e.get("reason") == "reset"]
    assert [(e.t_ms, e.get("message")) for e in resets] == [
        (strike.t_ms, "Alarm memory-limit strike 1/3; resetting isolate (#1825)")
    ]
    assert sim.probes["chat.recovery_redeferred"] == 1
    # The fresh incarnation answers the turn once: the struck turn's own run, left claimed and
    # its snapshot deleted as its body unwound, is a snapshot-less incident with no answer to
    # continue (skipped); nothing fails, and a later clean alarm clears the count.
    detected = sim.trace.select("chat:recovery:detected")
    (completed,) = sim.trace.select("chat:recovery:completed")
    (skipped,) = sim.trace.select("chat:recovery:skipped")
    assert [completed.get("originRequestId"), skipped.get("originRequestId")] == [
        e.get("originRequestId") for e in detected
    ]
    assert sim.trace.select("chat:recovery:failed") == []
    assert sim.trace.select("chat:recovery:exhausted") == []  # below the limit: no seal
    assert len(model.requests) == 2
    roles = [m["role"] for m in sim.instance_of(ref).messages]
    assert roles == ["user", "assistant"]
    assert sim.instance_of(ref).host.kv.get(STRIKES) is None


@on_0_32
@each_host
def test_a_sealing_strike_gives_the_live_incident_up_out_of_memory(
    sim: Simulation, host: type
) -> None:
    """At the strike limit the breaker seals: the incident the recovery was carrying is given
    up with `out_of_memory` in that instant (reported; the clients told the terminal
    message), and it stays so: the continuation enqueued again finds it settled and leaves it.
    The struck turn's own run, left claimed with no snapshot, is a new incident to the next
    incarnation, which has no answer to continue and is skipped: no model request runs."""
    ref, _model = interrupt_a_turn(sim, striking_once_in_recovery(host, limit=1))
    sim.run_for(60_000)
    (strike,) = events(sim, ref, "alarm:memory_limit_reset")
    assert (strike.get("strikes"), strike.get("sealed")) == (1, True)
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    assert (exhausted.t_ms, exhausted.get("reason")) == (strike.t_ms, "out_of_memory")
    origin = exhausted.get("originRequestId")
    incidents = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    (sealed,) = [i for i in incidents if i["originRequestId"] == origin]
    assert (sealed["status"], sealed["reason"]) == ("exhausted", "out_of_memory")
    assert sim.probes["chat.recovery_sealed_out_of_memory"] == 1
    (skipped,) = sim.trace.select("chat:recovery:skipped")
    assert skipped.get("originRequestId") != origin
    assert len(_model.requests) == 1  # only the turn first interrupted asked the model
