"""A sub-agent's schedules on 0.32.0 are jobs in its root's queue (spec sdk-0.32 §3.5; J-57,
J-61). How 0.32.0 runs them (`schedule:execute` on the root, the owner's own retry loop) is not
built yet: `docs/not-built-yet.md`."""

from __future__ import annotations

import json
from typing import Any

from sim import Simulation
from sim.simulation import AgentRef
from tests.conformance.sub_agent_fixtures import Child, Root, owner_key, owner_path_json


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
