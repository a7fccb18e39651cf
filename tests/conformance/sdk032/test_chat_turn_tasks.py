"""Conformance on SDK 0.32.0: a top-level chat host runs each turn as an attached Task run, a
sub-agent's as a fiber (spec sdk-0.32 §8.3, catalogue J-84)."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest

from agents_core import Agent
from sim import AgentRef, Simulation
from sim.model import ScriptedModel, text
from tests.chat.chat_agents import HOSTS, user

SNAPSHOT_PREFIX = "__cf_chat_turn_snapshot:"
TURN_FIBER_PREFIX = "__cf_internal_chat_turn:"


def events(sim: Simulation, ref: AgentRef, name: str) -> list[dict[str, Any]]:
    return [dict(r.fields) for r in sim.trace.select(name, agent=ref.path)]


def has_table(sim: Simulation, ref: AgentRef, table: str) -> bool:
    query = "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?"
    return bool(sim.query(ref, query, table))


def task_runs(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    if not has_table(sim, ref, "cf_agents_task_runs"):
        return []
    return sim.query(
        ref, "SELECT run_id, definition, input, state, metadata, retain FROM cf_agents_task_runs"
    )


def chat_fiber_starts(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    return [
        e
        for e in events(sim, ref, "fiber:run:started")
        if str(e.get("fiberName")).startswith(TURN_FIBER_PREFIX)
    ]


class Parent(Agent):
    """A plain root whose sub-agent is a chat host."""

    async def make(self, host: str, name: str) -> None:
        (cls,) = [c for c in HOSTS if c.__name__ == host]
        await self.sub_agent(cls, name)


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_J084_a_top_level_turn_is_a_task_run_and_no_fiber_row(sim: Simulation, host: type) -> None:
    """While the turn runs: one run `chat_<nonce>` of `__cf_internal_chat_turn` (not retained,
    metadata `{requestId}`), its step `model-turn` running, its wake job `task:chat_<nonce>`, its
    snapshot in KV, and no `cf_agents_runs` row. Once it answered nothing of it is left."""
    sim.register_model(ScriptedModel(default=text("the answer", chunks=4, delay_ms=5_000)))
    ref = sim.agent(host, "c")
    pending = sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(2_000)
    assert sim.query(ref, "SELECT id, name FROM cf_agents_runs") == []
    (run,) = task_runs(sim, ref)
    run_id = run["run_id"]
    nonce = run_id.removeprefix("chat_")
    assert run_id == f"chat_{nonce}" and nonce
    assert (run["definition"], run["state"], run["retain"]) == (
        "__cf_internal_chat_turn",
        "running",
        0,
    )
    request_id = json.loads(run["metadata"])["requestId"]
    assert json.loads(run["input"]) == {
        "requestId": request_id,
        "continuation": False,
        "nonce": nonce,
    }
    assert sim.query(ref, "SELECT step_name, kind, state, attempt FROM cf_agents_task_steps") == [
        {"step_name": "model-turn", "kind": "do", "state": "running", "attempt": 1}
    ]
    assert sim.query(ref, "SELECT id, fn FROM cf_agents_jobs WHERE capability = 'tasks'") == [
        {"id": f"task:{run_id}", "fn": "wake"}
    ]
    kv = sim.instance_of(ref).host.kv
    assert kv.get("cf_agents:tasks_schema_version") == 1
    assert kv.get(SNAPSHOT_PREFIX + run_id)["requestId"] == request_id

    assert sim.wait(pending) == {"requestId": request_id, "status": "completed"}
    assert task_runs(sim, ref) == []
    assert sim.query(ref, "SELECT * FROM cf_agents_task_steps") == []
    assert sim.query(ref, "SELECT id FROM cf_agents_jobs WHERE capability = 'tasks'") == []
    assert kv.get(SNAPSHOT_PREFIX + run_id) is None
    assert chat_fiber_starts(sim, ref) == []
    assert [e["runId"] for e in events(sim, ref, "task:completed")] == [run_id]
    assert events(sim, ref, "task:step:completed") == [
        {
            "runId": run_id,
            "definition": "__cf_internal_chat_turn",
            "step": "model-turn",
            "attempt": 1,
        }
    ]
    assert sim.instance_of(ref).messages[-1]["role"] == "assistant"


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_J084_a_sub_agent_turn_is_a_fiber_as_on_0_21(sim: Simulation, host: type) -> None:
    """A sub-agent's turn is the fiber `__cf_internal_chat_turn:<requestId>`, with its run row,
    and no Task run."""
    sim.register_model(ScriptedModel(default=text("the answer", chunks=4, delay_ms=5_000)))
    parent = sim.agent(Parent, "p")
    sim.call(parent, "make", host.__name__, "f")
    child = sim.facet(parent, host, "f")
    pending = sim.start_call(child, "save_messages", [user("go")])
    sim.run_for(2_000)
    (row,) = sim.query(child, "SELECT name FROM cf_agents_runs")
    assert task_runs(sim, child) == []
    request_id = sim.wait(pending)["requestId"]
    assert row["name"] == TURN_FIBER_PREFIX + request_id
    assert [e["fiberName"] for e in chat_fiber_starts(sim, child)] == [row["name"]]
    assert events(sim, child, "task:accepted") == []


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_J084_an_evicted_turn_run_is_handed_to_chat_recovery(sim: Simulation, host: type) -> None:
    """The isolate running the turn dies: the next one's startup wakes the run now, its wake
    job drives it again, the step finds no live closure and gives the turn to chat recovery
    (`interrupted`, with the stored snapshot), then deletes the snapshot; the run is gone and
    the recovered turn answers (as a Task run of its own)."""
    model = sim.register_model(ScriptedModel(default=text("the answer", chunks=4, delay_ms=5_000)))
    ref = sim.agent(host, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(2_000)
    (first,) = task_runs(sim, ref)
    run_id = first["run_id"]
    request_id = json.loads(first["metadata"])["requestId"]
    sim.evict(ref)
    sim.agent(host, "c")
    sim.run_for(60_000)
    (interrupted,) = events(sim, ref, "task:attempt:interrupted")
    assert interrupted == {
        "runId": run_id,
        "definition": "__cf_internal_chat_turn",
        "attempt": 1,
        "step": "model-turn",
    }
    (detected,) = events(sim, ref, "chat:recovery:detected")
    assert detected["requestId"] == request_id
    assert sim.instance_of(ref).host.kv.get(SNAPSHOT_PREFIX + run_id) is None
    completed = [
        e["runId"]
        for e in events(sim, ref, "task:completed")
        if e["definition"] == "__cf_internal_chat_turn"
    ]
    assert completed[0] == run_id and len(completed) == 2, "the recovered turn is a run too"
    assert task_runs(sim, ref) == []
    assert chat_fiber_starts(sim, ref) == []
    assert len(model.requests) == 2
    assert sim.instance_of(ref).messages[-1]["role"] == "assistant"


def test_J084_on_0_21_a_top_level_turn_is_a_fiber() -> None:
    """0.21.0 has no Tasks: a top-level turn is a fiber row, and no task table is made."""
    host = HOSTS[0]
    with Simulation(seed=zlib.crc32(b"J084-0.21.0"), sdk="0.21.0") as sim:
        sim.register_model(ScriptedModel(default=text("the answer", chunks=4, delay_ms=5_000)))
        ref = sim.agent(host, "c")
        pending = sim.start_call(ref, "save_messages", [user("go")])
        sim.run_for(2_000)
        (row,) = sim.query(ref, "SELECT name FROM cf_agents_runs")
        assert not has_table(sim, ref, "cf_agents_task_runs")
        assert row["name"] == TURN_FIBER_PREFIX + sim.wait(pending)["requestId"]
