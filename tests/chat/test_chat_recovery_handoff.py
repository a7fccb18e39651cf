"""A chat recovery continuation runs up to its turn's hand-off (spec sdk-0.32 §8.3,
`chat/recovery_handoff.py`): on 0.32.0 a platform failure before the hand-off fails the
continuation's step, which is retried, and one after it (the recovered turn's) re-enqueues the
continuation 3 s later; on 0.21.0 a recovered turn's failure is recorded as the recovery's."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from sim import Simulation
from tests.chat.chat_agents import HOSTS
from tests.chat.interrupted_turns import events, interrupt_a_turn, raising_once_in_recovery
from tests.releases import on_both_releases

RECOVERY = "__cf_internal_chat_recovery"
CONNECTION_LOST = "Network connection lost."
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")

on_0_32 = pytest.mark.parametrize("sim", ["0.32.0"], indirect=True)
each_host = pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)


def failing_once_in_recovery(host: type, message: str) -> type:
    """`host` whose system prompt raises `message` the first time a recovered turn asks it."""
    return raising_once_in_recovery(host, message, prefix="Flaky")


@on_0_32
@each_host
def test_a_platform_failure_after_the_hand_off_enqueues_the_continuation_again(
    sim: Simulation, host: type
) -> None:
    """The recovered turn fails on the platform after the continuation handed it off: the
    continuation's step had completed, so a new run of the recovery definition is enqueued
    (its run id a random UUID, no idempotency key, `delaySeconds: 3`), its backoff sleep wakes
    it 3 s later, and its turn answers; the incident never reads `failed`."""
    ref, model = interrupt_a_turn(sim, failing_once_in_recovery(host, CONNECTION_LOST))
    sim.run_for(60_000)
    accepted = events(sim, ref, "task:accepted", definition=RECOVERY)
    assert len(accepted) == 2
    first, second = (r.get("runId") for r in accepted)
    assert first.startswith("task_") and UUID.match(second)
    (handed_off,) = events(sim, ref, "task:step:completed", runId=first)
    assert handed_off.get("step") == "continuation"
    assert accepted[1].t_ms == handed_off.t_ms
    (slept,) = events(sim, ref, "task:step:completed", runId=second, step="continuation")
    assert slept.t_ms >= accepted[1].t_ms + 3_000
    assert sim.probes["chat.recovery_redeferred"] == 1
    assert sim.trace.select("chat:recovery:failed") == []
    assert len(sim.trace.select("chat:recovery:completed")) == 1
    assert sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX) == {}
    assert len(model.requests) == 2
    assert sim.instance_of(ref).messages[-1]["role"] == "assistant"


@on_0_32
@each_host
def test_a_failed_re_enqueue_is_tried_again_within_500_ms(sim: Simulation, host: type) -> None:
    """The re-enqueue's first insert (the third of a Task run here: the continuation's, the
    recovered turn's, then the re-enqueue's) fails: it is tried again 50–500 ms later (full
    jitter), and the continuation runs from there."""
    ref, model = interrupt_a_turn(sim, failing_once_in_recovery(host, CONNECTION_LOST))
    sim.arm_storage_fault(ref, "error", match=r"^INSERT INTO cf_agents_task_runs\b", skip=2)
    sim.run_for(60_000)
    (fault,) = sim.trace.select("fault:storage_error")
    accepted = events(sim, ref, "task:accepted", definition=RECOVERY)
    assert len(accepted) == 2 and UUID.match(accepted[1].get("runId"))
    assert fault.t_ms <= accepted[1].t_ms <= fault.t_ms + 500
    assert len(sim.trace.select("chat:recovery:completed")) == 1
    assert len(model.requests) == 2


@on_0_32
@each_host
def test_a_platform_failure_before_the_hand_off_retries_the_continuation_step(
    sim: Simulation, host: type
) -> None:
    """`on_chat_recovery` raises a platform failure before the recovered turn starts: the
    continuation's step fails, the incident is `scheduled` again, the step is retried 100 ms
    later and its turn answers; nothing is enqueued again."""

    class Flaky(host):  # type: ignore[valid-type, misc]
        raised = False

        async def on_chat_recovery(self, ctx: Any) -> str | None:
            if not Flaky.raised:
                Flaky.raised = True
                raise RuntimeError(CONNECTION_LOST)
            return None

    ref, model = interrupt_a_turn(sim, Flaky)
    sim.run_for(60_000)
    (accepted,) = events(sim, ref, "task:accepted", definition=RECOVERY)
    run_id = accepted.get("runId")
    (retry,) = events(sim, ref, "task:step:retry", runId=run_id)
    assert (retry.get("step"), retry.get("attempt")) == ("continuation", 2)
    assert sim.probes.get("chat.recovery_redeferred", 0) == 0
    assert sim.trace.select("chat:recovery:failed") == []
    assert len(sim.trace.select("chat:recovery:completed")) == 1
    assert len(model.requests) == 2


@on_0_32
@each_host
def test_any_other_failure_after_the_hand_off_fails_the_recovery(
    sim: Simulation, host: type
) -> None:
    """A recovered turn that raises an application error is the recovery's failure: the
    incident is `failed` with the error as its reason, and nothing is enqueued again."""
    ref, _model = interrupt_a_turn(sim, failing_once_in_recovery(host, "prompt store corrupt"))
    sim.run_for(60_000)
    assert len(events(sim, ref, "task:accepted", definition=RECOVERY)) == 1
    (stored,) = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    assert (stored["status"], stored["reason"]) == ("failed", "prompt store corrupt")
    (failed,) = sim.trace.select("chat:recovery:failed")
    assert failed.get("reason") == "prompt store corrupt"
    assert sim.probes.get("chat.recovery_redeferred", 0) == 0


@on_both_releases
@each_host
def test_a_recovered_turn_failing_on_the_platform_on_each_release(
    sim: Simulation, host: type
) -> None:
    """0.21.0 records the platform failure of a recovered turn as the recovery's (`failed`, no
    further model call); 0.32.0 hands it back to a new continuation, whose turn answers."""
    ref, model = interrupt_a_turn(sim, failing_once_in_recovery(host, CONNECTION_LOST))
    sim.run_for(60_000)
    incidents = list(sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values())
    roles = [m["role"] for m in sim.instance_of(ref).messages]
    if sim.platform.release == "0.21.0":
        assert [i["status"] for i in incidents] == ["failed"]
        assert len(model.requests) == 1
        assert sim.probes.get("chat.recovery_redeferred", 0) == 0
    else:
        assert incidents == []
        assert len(model.requests) == 2 and roles[-1] == "assistant"
        assert sim.probes["chat.recovery_redeferred"] == 1
