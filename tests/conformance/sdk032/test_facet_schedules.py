"""A sub-agent's schedules on 0.32.0 are jobs in its root's queue (spec sdk-0.32 §3.5; J-57 ...
J-61): the root announces each run (`schedule:execute` on the root), routes it hop by hop to its
owner, which runs it, prunes a sub-tree whose registry entry is gone, and leaves a job whose
route threw due, unrun."""

from __future__ import annotations

import json
from typing import Any

from sim import Simulation
from sim.simulation import AgentRef
from tests.conformance.sub_agent_fixtures import (
    Child,
    Grandchild,
    Root,
    journal,
    owner_key,
    owner_path_json,
)
from tests.conformance.test_sub_agents import events, fire_next_alarm


def wake(sim: Simulation) -> AgentRef:
    ref = sim.agent(Root, "root")
    sim.run_for(10_000)
    return ref


def root_jobs(sim: Simulation, root: AgentRef) -> list[dict[str, Any]]:
    return sim.query(
        root, "SELECT * FROM cf_agents_jobs WHERE capability = 'scheduler' ORDER BY time, id"
    )


def test_J057_a_facet_schedule_is_a_job_of_its_root(sim: Simulation) -> None:
    root = wake(sim)
    created = sim.call(root, "at", [(Child, "c")], "schedule", 5, "tick")
    child = sim.facet(root, Child, "c")
    (job,) = root_jobs(sim, root)
    assert (job["id"], job["fn"]) == (created.id, "tick")
    envelope = json.loads(job["payload"])
    assert json.loads(envelope["owner_path"]) == owner_path_json(child)
    assert envelope["owner_path_key"] == owner_key(child)
    creates = [dict(r.fields) for r in sim.trace.select("schedule:create")]
    assert creates == [{"callback": "tick", "id": created.id}]
    assert [r.agent for r in sim.trace.select("schedule:create")] == [child.path]
    assert sim.query(child, "SELECT * FROM cf_agents_jobs WHERE capability = 'scheduler'") == []


def test_J061_sibling_facets_cancel_only_their_own(sim: Simulation) -> None:
    root = wake(sim)
    # An interval dedupes by default: the owner is part of what it matches on.
    first = sim.call(root, "at", [(Child, "a")], "schedule_every", 60, "tick")
    second = sim.call(root, "at", [(Child, "b")], "schedule_every", 60, "tick")
    again = sim.call(root, "at", [(Child, "a")], "schedule_every", 60, "tick")
    assert again.id == first.id
    assert first.id != second.id
    assert {j["id"] for j in root_jobs(sim, root)} == {first.id, second.id}
    assert sim.call(root, "at", [(Child, "a")], "cancel_schedule", second.id) is False
    assert sim.call(root, "at", [(Child, "a")], "cancel_schedule", first.id) is True
    assert [j["id"] for j in root_jobs(sim, root)] == [second.id]


def test_J058_a_due_facet_schedule_is_announced_on_the_root_and_runs_in_the_facet(
    sim: Simulation,
) -> None:
    root = wake(sim)
    deep = [(Child, "c"), (Grandchild, "g")]
    grandchild = sim.facet(sim.facet(root, Child, "c"), Grandchild, "g")
    created = sim.call(root, "at", deep, "schedule", 5, "tick", "deep")
    fire_next_alarm(sim)
    assert events(sim, root, "schedule:execute") == [{"callback": "tick", "id": created.id}]
    assert events(sim, grandchild, "schedule:execute") == []
    assert [r["data"] for r in journal(sim, grandchild, "tick")] == ["deep"]
    assert journal(sim, root, "tick") == []
    assert root_jobs(sim, root) == []


def test_J059_a_schedule_whose_owner_left_the_registry_is_pruned_unrun(sim: Simulation) -> None:
    root = wake(sim)
    created = sim.call(root, "at", [(Child, "c")], "schedule", 5, "tick", "lost")
    kept = sim.call(root, "at", [(Child, "c2")], "schedule", 600, "tick", "kept")
    sim.call(root, "forget_child", "Child", "c")
    fire_next_alarm(sim)
    assert journal(sim, sim.facet(root, Child, "c"), "tick") == []
    assert events(sim, root, "schedule:cancel") == [{"callback": "tick", "id": created.id}]
    assert [job["id"] for job in root_jobs(sim, root)] == [kept.id]


def test_J060_a_route_that_throws_leaves_the_job_due_and_unrun(sim: Simulation) -> None:
    root = wake(sim)
    created = sim.call(root, "at", [(Child, "c")], "schedule", 5, "tick", "x")
    (job,) = root_jobs(sim, root)
    envelope = {**json.loads(job["payload"]), "owner_path": "not a path"}
    sim.query(
        root, "UPDATE cf_agents_jobs SET payload = ? WHERE id = ?", json.dumps(envelope), job["id"]
    )
    sim.run_to_next_alarm()
    sim.run_for(0)
    errors = events(sim, root, "schedule:error")
    assert errors and all((e["id"], e["attempts"]) == (created.id, 0) for e in errors)
    (after,) = root_jobs(sim, root)
    assert after["time"] == job["time"]
    assert journal(sim, sim.facet(root, Child, "c"), "tick") == []
