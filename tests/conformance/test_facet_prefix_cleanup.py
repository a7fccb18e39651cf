"""The prune of a sub-tree on its root (spec sdk-0.32 §3.5, J-59; spec fibers §4.7 for 0.21.0):
when a walk down finds a hop gone from its parent's registry, or a sub-agent is deleted, the
root drops what that sub-tree owns there.

On 0.32.0 that is every scheduler, tasks and queue job whose owner key is the pruned prefix or
lies below it (`key == prefix` or `key` starting with `prefix + "/"`), each schedule with its
`schedule:cancel` on the root, and the facet-run leases. The port's Tasks never routes a
sub-agent's run to its root, so these tests plant the wake job the SDK mirrors into a root for a
sub-agent's Task run (`task:<ownerKey>:<runId>`, fn `wake`, payload `{runId, owner_path,
owner_path_key}`): a state the SDK leaves in a root's queue, which a port run can meet in
storage the SDK wrote. The runs themselves are the sub-agents' rows; nothing of them is on the
root. On 0.21.0 there is no job queue: the prune drops schedules rows and leases only.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sim import AgentRef, Simulation
from tests.conformance.sub_agent_fixtures import (
    Child,
    Grandchild,
    Root,
    journal,
    owner_key,
    owner_path_json,
)
from tests.conformance.test_sub_agents import events, fire_next_alarm

on_0_32 = pytest.mark.parametrize("sim", ["0.32.0"], indirect=True)
on_0_21 = pytest.mark.parametrize("sim", ["0.21.0"], indirect=True)

HOUR_MS = 3_600_000


def wake(sim: Simulation) -> AgentRef:
    root = sim.agent(Root, "root")
    sim.run_for(10_000)
    return root


def plant_task_wake(sim: Simulation, root: AgentRef, owner: AgentRef | None, run_id: str) -> str:
    """The root's wake job of a Task run of `owner` (None: the root's own run), due in an hour;
    its id."""
    payload: dict[str, Any] = {"runId": run_id}
    job_id = f"task:{run_id}"
    if owner is not None:
        key = owner_key(owner)
        payload["owner_path"] = json.dumps(owner_path_json(owner), separators=(",", ":"))
        payload["owner_path_key"] = key
        job_id = f"task:{key}:{run_id}"
    sim.query(
        root,
        "INSERT INTO cf_agents_jobs (id, capability, fn, time, payload, retry_options) "
        "VALUES (?, 'tasks', 'wake', ?, ?, ?)",
        job_id,
        sim.now_ms + HOUR_MS,
        json.dumps(payload),
        json.dumps({"maxAttempts": 1}),
    )
    return job_id


def jobs_of(sim: Simulation, root: AgentRef, capability: str) -> set[str]:
    rows = sim.query(root, "SELECT id FROM cf_agents_jobs WHERE capability = ?", capability)
    return {row["id"] for row in rows}


def task_events(sim: Simulation, root: AgentRef) -> list[str]:
    return [r.event for r in sim.trace.records if r.agent == root.path and r.event[:5] == "task:"]


@on_0_32
def test_J059_a_walk_to_a_lost_owner_cancels_the_task_wakes_under_it(sim: Simulation) -> None:
    """The walk of `c`'s due schedule finds `c` gone: the wakes of `c`'s runs and of its
    grandchild's go with the schedule, silently; those of a sibling, of a sibling whose name
    only begins like `c`'s, and of the root's own run stay."""
    root = wake(sim)
    child = sim.facet(root, Child, "c")
    created = sim.call(root, "at", [(Child, "c")], "schedule", 5, "tick", "lost")
    kept_schedule = sim.call(root, "at", [(Child, "c2")], "schedule", 600, "tick", "kept")
    plant_task_wake(sim, root, child, "r1")
    plant_task_wake(sim, root, sim.facet(child, Grandchild, "g"), "r2")
    kept = {
        plant_task_wake(sim, root, sim.facet(root, Child, "c2"), "r3"),
        plant_task_wake(sim, root, sim.facet(root, Child, "cx"), "r4"),
        plant_task_wake(sim, root, None, "r5"),
    }
    sim.call(root, "forget_child", "Child", "c")
    fire_next_alarm(sim)
    assert journal(sim, child, "tick") == []
    assert jobs_of(sim, root, "tasks") == kept
    assert jobs_of(sim, root, "scheduler") == {kept_schedule.id}
    assert events(sim, root, "schedule:cancel") == [{"callback": "tick", "id": created.id}]
    assert task_events(sim, root) == []


@on_0_32
def test_J059_deleting_a_sub_agent_cancels_the_task_wakes_of_its_sub_tree(
    sim: Simulation,
) -> None:
    root = wake(sim)
    sim.call(root, "at", [(Child, "c"), (Grandchild, "g")], "tick", "born")
    c = sim.facet(root, Child, "c")
    plant_task_wake(sim, root, c, "r1")
    plant_task_wake(sim, root, sim.facet(c, Grandchild, "g"), "r2")
    kept = plant_task_wake(sim, root, sim.facet(root, Child, "c2"), "r3")
    sim.call(root, "delete_child", Child, "c")
    assert jobs_of(sim, root, "tasks") == {kept}


@on_0_21
def test_F046_on_0_21_the_prune_drops_schedule_rows_and_leaves_any_jobs_table_alone(
    sim: Simulation,
) -> None:
    """0.21.0 has no job queue: a `cf_agents_jobs` table left in its storage (by a later
    release) is not read by the prune, which drops only the sub-tree's schedule rows."""
    root = wake(sim)
    child = sim.facet(root, Child, "c")
    created = sim.call(root, "at", [(Child, "c")], "schedule", 5, "tick", "lost")
    sim.query(
        root,
        "CREATE TABLE cf_agents_jobs (id TEXT PRIMARY KEY NOT NULL, capability TEXT NOT NULL, "
        "fn TEXT NOT NULL, time INTEGER NOT NULL, payload TEXT, retry_options TEXT)",
    )
    left = plant_task_wake(sim, root, child, "r1")
    sim.call(root, "forget_child", "Child", "c")
    fire_next_alarm(sim)
    assert journal(sim, child, "tick") == []
    assert events(sim, root, "schedule:cancel") == [{"callback": "tick", "id": created.id}]
    assert sim.query(root, "SELECT id FROM cf_agents_schedules") == []
    assert jobs_of(sim, root, "tasks") == {left}
