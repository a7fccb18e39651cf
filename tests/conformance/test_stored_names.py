"""Conformance: the names the runtime stores and emits are the SDK's strings (spec README, "Names";
agent-tools §10: the backbone callback `_cfDetachedReconcileTick`, the notify hook
`_cfDetachedNotifyFinish`), each mapped to the Python method that runs it."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core import Agent, InvalidArgument
from agents_core.chat import ThinkAgent
from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from agents_core.chat.parent import CHAT_RECOVERY_PROGRESS_KEY
from agents_core.stored_names import RUNTIME_CALLBACK_METHODS, method_name_of
from sim import AgentEvicted, Simulation
from sim.model import ScriptedModel, text
from tests.chat.chat_agents import ThinkChild, user
from tests.conformance.test_detached import ChatParent, Parent, run_row
from tests.releases import on_both_releases, stored_schedules


def stored_callbacks(sim: Simulation, ref: Any) -> list[str]:
    return [r["callback"] for r in stored_schedules(sim, ref)]


@on_both_releases
def test_the_backbone_tick_is_stored_and_traced_under_the_sdk_name(sim: Simulation) -> None:
    """A detached dispatch stores its backbone row as `_cfDetachedReconcileTick`, and the
    schedule events carry that name; the tick still runs (its Python method)."""
    ref = sim.agent(Parent, "p")
    sim.call(ref, "dispatch", "r1", [["sleep", 60_000], ["finish", "completed", "ok"]])
    assert stored_callbacks(sim, ref) == ["_cfDetachedReconcileTick"]
    sim.run_for(10_000)
    created = sim.trace.select("schedule:create")
    executed = sim.trace.select("schedule:execute")
    assert created and {r.get("callback") for r in created} == {"_cfDetachedReconcileTick"}
    assert executed and {r.get("callback") for r in executed} == {"_cfDetachedReconcileTick"}
    assert "_cf_detached_reconcile_tick" not in {r.get("callback") for r in created + executed}
    sim.run_for(120_000)
    assert run_row(sim, ref, "r1")["status"] == "completed"


def test_a_notify_run_stores_the_sdk_hook_name_and_its_method_runs(sim: Simulation) -> None:
    """`notify` on a chat host stores `_cfDetachedNotifyFinish` as the run's on_finish; the
    delivery resolves it to `_cf_detached_notify_finish` and says the stored name."""
    ref = sim.agent(ChatParent, "p")
    sim.call(ref, "dispatch", "r1", [["finish", "completed", "ok"]], {"notify": True})
    sim.run_for(1_000)
    row = run_row(sim, ref, "r1")
    assert row["detached_on_finish"] == "_cfDetachedNotifyFinish"
    assert row["finish_delivered_at"] is not None
    (hook,) = sim.trace.select("hook:on_finish")
    assert hook.get("callback") == "_cfDetachedNotifyFinish"
    injected = sim.query(ref, "SELECT key FROM injected")
    assert [r["key"] for r in injected] == ["detached-finish:r1:completed"]


class Reminder(Agent):
    async def remind(self, payload: Any, row: Any) -> None:
        self.host.trace.emit("test:reminded", payload=payload)

    async def plan(self, callback: str) -> str:
        return (await self.schedule(1, callback, {"n": 1})).callback


@on_both_releases
def test_a_user_callback_is_stored_as_given(sim: Simulation) -> None:
    """A user's own method name is stored and run as it is: the map covers runtime names only."""
    ref = sim.agent(Reminder, "r")
    assert sim.call(ref, "plan", "remind") == "remind"
    assert stored_callbacks(sim, ref) == ["remind"]
    sim.run_for(2_000)
    assert [r.get("payload") for r in sim.trace.select("test:reminded")] == [{"n": 1}]


@on_both_releases
def test_schedule_takes_a_stored_runtime_name_and_refuses_an_unknown_one(sim: Simulation) -> None:
    """`schedule()` accepts a stored runtime name (it names a method through the map) and
    refuses a name that names no method, in each release's words (sdk-0.32 J-38)."""
    ref = sim.agent(Reminder, "r")
    assert sim.call(ref, "plan", "_cfRedeliverAgentToolHooks") == "_cfRedeliverAgentToolHooks"
    refusal = (
        r"self\._cfNoSuchCallback is not a function"
        if sim.release == "0.21.0"
        else r'^Unknown scheduled callback "_cfNoSuchCallback": not registered on this Scheduler$'
    )
    with pytest.raises(InvalidArgument, match=refusal):
        sim.call(ref, "plan", "_cfNoSuchCallback")


@on_both_releases
def test_chat_recovery_schedules_the_sdk_callback_and_keys_its_incident_the_sdk_way(
    sim: Simulation,
) -> None:
    """A turn cut short by an eviction is recovered through `_chatRecoveryContinue` (method
    `_chat_recovery_continue`), and its incident sits under the SDK's KV prefix. On 0.21.0 the
    callback is a schedule and the recovered incident stays; on 0.32.0 it is the input of a Task
    run of `__cf_internal_chat_recovery` and the incident is deleted once its turn completed
    (sdk-0.32 §8.1, §8.3)."""
    sim.register_model(ScriptedModel(default=text("AAAABBBB", chunks=2, delay_ms=1_000)))
    ref = sim.agent(ThinkChild, "c")
    pending = sim.start_call(ref, "save_messages", [user("tell me")])
    sim.run_for(1_500)
    sim.evict(ref)
    with pytest.raises(AgentEvicted):
        sim.wait(pending)
    sim.agent(ThinkChild, "c")
    sim.run_for(10_000)
    executed = [r.get("callback") for r in sim.trace.select("schedule:execute")]
    keys = sim.query(ref, "SELECT key FROM _cf_KV WHERE key LIKE 'cf:chat-recovery:incident:%'")
    if sim.release == "0.21.0":
        assert executed == ["_chatRecoveryContinue"]
        assert len(keys) == 1
    else:
        assert executed == []
        runs = [
            r
            for r in sim.trace.select("task:accepted")
            if r.get("definition") == "__cf_internal_chat_recovery"
        ]
        assert len(runs) == 1
        assert len(sim.trace.select("chat:recovery:completed")) == 1
        assert keys == []
    assert sim.trace.select("chat:recovery:attempt")


@pytest.mark.parametrize("stored", sorted(RUNTIME_CALLBACK_METHODS))
def test_every_stored_runtime_name_is_camel_case_and_names_a_method(stored: str) -> None:
    """Stored names follow the SDK's spelling (no snake_case), and each maps to a method of the
    classes that schedule it."""
    assert "_" not in stored.lstrip("_"), stored
    owner = ThinkAgent if stored in ("_cfDetachedNotifyFinish", "_chatRecoveryContinue") else Agent
    assert callable(getattr(owner, method_name_of(stored), None)), (stored, owner)


def test_chat_recovery_kv_keys_are_the_sdks() -> None:
    """The chat-recovery incident prefix and progress key are spelled as the SDK stores them."""
    assert INCIDENT_PREFIX == "cf:chat-recovery:incident:"
    assert CHAT_RECOVERY_PROGRESS_KEY == "cf:chat-recovery:progress"
