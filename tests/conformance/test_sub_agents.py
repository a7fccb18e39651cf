"""Sub-agents (facets): keepAlive leases, schedules and fiber recovery routed through the root,
deferred destroy, pruning of deleted sub-trees, and the facet's life inside the root's isolate
(spec fibers §1.3–1.4, §2.4–2.6, §3.3–3.4, §4.7, §5.2, §6.9, §10.2 items 14–16; F-11 … F-123).

Every test drives agents on the simulated platform: a `Root` reaches its descendants with
`at(path, method, ...)` the way agent code does (`await self.sub_agent(Cls, name)`), time and
alarms are virtual, and deaths are real evictions. Behaviour is read back from committed
storage (`sim.query`), the trace, and, where an item is about in-memory counters, the root's
live instance.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents_core.alarm import DESTROY_PENDING_KEY, FIBER_RECOVERY_MAX_BACKOFF_MS
from agents_core.errors import AgentsError
from sim import AgentEvicted, Simulation, StorageError
from sim.simulation import AgentRef
from sim.sqlite import KV_TABLE
from tests.conformance.sub_agent_fixtures import (
    AGING_MAX_AGE_MS,
    ROOT_HEARTBEAT_MS,
    AgingChild,
    Child,
    DeadlineChild,
    Grandchild,
    InternalChild,
    ResolvingChild,
    Root,
    facet_runs,
    journal,
    owner_key,
    owner_path_json,
    root_instance,
    schedule_rows,
)
from tests.releases import alarm_computation, on_both_releases, on_release


def wake(sim: Simulation, name: str = "r") -> AgentRef:
    """A root, woken with its startup (as `getAgentByName`)."""
    ref = sim.agent(Root, name)
    sim.run_for(0)
    return ref


def events(sim: Simulation, ref: AgentRef, name: str, **match: Any) -> list[dict[str, Any]]:
    return [dict(r.fields) for r in sim.trace.select(name, agent=ref.path, **match)]


ALARM_ENDINGS = ("alarm:done", "alarm:failed", "alarm:interrupted")


def fire_next_alarm(sim: Simulation) -> int:
    """Advance to the next armed alarm and run until its handler has ended; its due time."""
    ended: list[str] = []
    stop = sim.trace.subscribe(
        lambda r: ended.append(r.event) if r.event in ALARM_ENDINGS else None
    )
    try:
        due = sim.run_to_next_alarm()
        assert due is not None, "no alarm is armed"
        sim.run_while(lambda: not ended, limit_ms=60_000)
    finally:
        stop()
    assert ended[0] == "alarm:done", f"the alarm handler did not complete: {ended}"
    sim.run_for(0)
    return due


def kv(sim: Simulation, ref: AgentRef) -> dict[str, str]:
    return {row["key"]: row["value"] for row in sim.query(ref, f"SELECT * FROM {KV_TABLE}")}


# -- keepAlive and the alarm slot ------------------------------------------------------------
def test_F011_deferred_destroy_arms_now_even_with_a_lease_and_the_alarm_destroys(
    sim: Simulation,
) -> None:
    """destroy(deferred=True) with a keepAlive lease held sets the destroy marker and arms the
    alarm at now, not at the heartbeat; that alarm wipes the storage and ends the incarnation."""
    ref = wake(sim, "doomed")
    sim.call(ref, "at", [(Child, "c")], "tick", "child data")
    sim.call(ref, "schedule", 600, "tick")
    sim.call(ref, "hold")
    assert sim.alarm_of(ref) == sim.now_ms + ROOT_HEARTBEAT_MS
    sim.run_for(500)
    condemned_at = sim.now_ms

    seen = sim.call(ref, "destroy_later")

    assert kv(sim, ref)[DESTROY_PENDING_KEY] == "true"
    assert seen == {"marker": True, "alarm": condemned_at, "refs": 1}
    armed = [r.get("at") for r in sim.trace.select("alarm:set", agent=ref.path)]
    assert armed[-1] == condemned_at  # not condemned_at + ROOT_HEARTBEAT_MS
    sim.run_for(0)
    ended = events(sim, ref, "incarnation:end")
    assert ended == [{"reason": "destroyed"}]
    assert sim.trace.select("storage:wiped", agent=ref.path)[0].t_ms == condemned_at
    assert sim.incarnation_of(ref) == 0
    assert sim.snapshot(ref) == {KV_TABLE: []}
    assert sim.alarm_of(ref) is None
    child = sim.facet(ref, Child, "c")
    with pytest.raises(LookupError, match="does not exist"):
        sim.query(child, "SELECT * FROM journal")

    # Nothing wakes it later: the alarm that destroyed it is not retried, and it stays empty.
    sim.run_for(120_000)
    assert sim.trace.select("incarnation:start", agent=ref.path)[-1].t_ms < condemned_at
    assert sim.snapshot(ref) == {KV_TABLE: []}
    assert sim.alarm_of(ref) is None


def test_F014_keep_alive_while_in_a_sub_agent_releases_the_root_ref_when_it_throws(
    sim: Simulation,
) -> None:
    """A sub-agent's keep_alive_while whose callback throws holds one ref on the root while it
    runs (at the root's interval) and gives it back when the error propagates."""
    root = wake(sim)
    child = sim.facet(root, Child, "c")
    pending = sim.start_call(root, "at", [(Child, "c")], "while_failing", "boom", 5_000)
    sim.run_for(1_000)
    instance = root_instance(sim, root)
    assert instance._keep_alive_refs == 1
    (token,) = instance._facet_keep_alive_tokens
    assert token.startswith(owner_key(child) + ":")
    assert sim.alarm_of(root) == 2_000  # acquired at 0 with the root's 2 s interval

    with pytest.raises(RuntimeError, match="^boom$"):
        sim.wait(pending)
    sim.run_for(0)

    assert [r["data"] for r in journal(sim, child, "inside")] == [{"message": "boom"}]
    assert instance._keep_alive_refs == 0
    assert instance._facet_keep_alive_tokens == {}
    assert sim.alarm_of(root) is None


@on_both_releases
def test_a_sub_agent_whose_keep_alive_fails_at_the_root_leaves_no_heartbeat(
    sim: Simulation,
) -> None:
    """When arming the root's heartbeat fails while a sub-agent takes a lease (a storage error
    in the root), the sub-agent gets the error and no lease, and the root gives the ref and
    its token back: no heartbeat runs on for a lease nobody holds (F4)."""
    root = wake(sim)
    sim.facet(root, Child, "c")
    sim.run_for(1)
    sim.arm_storage_fault(root, "error", match=alarm_computation(sim))
    with pytest.raises(Exception, match="injected storage fault"):
        sim.call(root, "at", [(Child, "c")], "hold")
    instance = root_instance(sim, root)
    assert instance._keep_alive_refs == 0
    assert instance._facet_keep_alive_tokens == {}
    assert sim.probes.get("keep_alive.acquire_failed") == 1
    sim.run_for(60_000)  # at most the check-back of the failed alarm computation (K5)
    assert sim.alarm_of(root) is None
    assert len(sim.trace.select("alarm:fired", agent=root.path)) <= 1


# -- schedules of a sub-agent live on the root ----------------------------------------------
@on_release("0.21.0")
def test_F041_sub_agent_interval_schedule_is_idempotent_and_stays_recurring(
    sim: Simulation,
) -> None:
    """schedule_every called twice in a child keeps one root row; each root alarm runs it once
    in the child, and the row stays an interval."""
    root = wake(sim)
    child = sim.facet(root, Child, "c")
    first = sim.call(root, "at", [(Child, "c")], "schedule_every", 10, "tick", {"n": 1})
    again = sim.call(root, "at", [(Child, "c")], "schedule_every", 10, "tick", {"n": 1})
    assert again.id == first.id
    (row,) = schedule_rows(sim, root)
    assert (row["id"], row["type"]) == (first.id, "interval")
    assert row["owner_path_key"] == owner_key(child)
    assert schedule_rows(sim, child) == []
    assert len(events(sim, child, "schedule:create")) == 1

    assert fire_next_alarm(sim) == 10_000
    assert [r["t"] for r in journal(sim, child, "tick")] == [10_000]
    (row,) = schedule_rows(sim, root)
    assert (row["type"], row["running"], row["time"]) == ("interval", 0, 20)
    assert fire_next_alarm(sim) == 20_000
    assert [r["t"] for r in journal(sim, child, "tick")] == [10_000, 20_000]
    assert journal(sim, root, "tick") == []


@on_release("0.21.0")
def test_F042_sub_agent_cancels_its_schedule_through_the_root(sim: Simulation) -> None:
    """A child's cancel_schedule removes its row from the root, which the root itself could not
    cancel by id; nothing runs afterwards."""
    root = wake(sim)
    child = sim.facet(root, Child, "c")
    created = sim.call(root, "at", [(Child, "c")], "schedule", 30, "tick", "later")
    assert [s.id for s in sim.call(root, "at", [(Child, "c")], "list_schedules")] == [created.id]
    assert sim.call(root, "list_schedules") == []
    assert sim.call(root, "cancel_schedule", created.id) is False
    assert len(schedule_rows(sim, root)) == 1

    assert sim.call(root, "at", [(Child, "c")], "cancel_schedule", created.id) is True

    assert schedule_rows(sim, root) == []
    assert sim.alarm_of(root) is None
    assert sim.call(root, "at", [(Child, "c")], "cancel_schedule", created.id) is False
    sim.run_for(120_000)
    assert journal(sim, child, "tick") == []


def test_sync_schedule_reads_throw_in_a_sub_agent_while_the_async_pair_works(
    sim: Simulation,
) -> None:
    """A sub-agent's schedules live on the root: the deprecated synchronous `get_schedule` /
    `get_schedules` raise there, naming the async call to use instead, while
    `get_schedule_by_id` / `list_schedules` reach the root. The root's own sync reads do not
    see the child's row (it is not the root's own schedule)."""
    root = wake(sim)
    child = [(Child, "c")]
    created = sim.call(root, "at", child, "schedule", 30, "tick", "later")
    with pytest.raises(AgentsError, match=r"get_schedule\(\) is synchronous.*get_schedule_by_id"):
        sim.call(root, "at", child, "get_schedule", created.id)
    with pytest.raises(AgentsError, match=r"get_schedules\(\) is synchronous.*list_schedules"):
        sim.call(root, "at", child, "get_schedules")
    assert sim.call(root, "at", child, "get_schedule_by_id", created.id).id == created.id
    assert [s.id for s in sim.call(root, "at", child, "list_schedules")] == [created.id]
    assert sim.call(root, "get_schedule", created.id) is None
    assert sim.call(root, "get_schedules") == []


@on_release("0.21.0")
def test_F046_grandchild_schedules_dispatch_hop_by_hop_and_die_with_an_ancestor(
    sim: Simulation,
) -> None:
    """A grandchild's schedule runs in the grandchild through each parent hop; deleting or
    destroying the child in between removes every row of that sub-tree from the root."""
    root = wake(sim)
    deep = [(Child, "c0"), (Grandchild, "g")]
    grandchild = sim.facet(sim.facet(root, Child, "c0"), Grandchild, "g")
    created = sim.call(root, "at", deep, "schedule", 10, "tick", "deep")
    (row,) = schedule_rows(sim, root)
    assert row["owner_path_key"] == owner_key(grandchild)
    assert len(owner_path_json(grandchild)) == 3

    fire_next_alarm(sim)
    assert [r["data"] for r in journal(sim, grandchild, "tick")] == ["deep"]
    assert journal(sim, sim.facet(root, Child, "c0"), "tick") == journal(sim, root, "tick") == []
    assert events(sim, grandchild, "schedule:execute") == [{"callback": "tick", "id": created.id}]
    assert schedule_rows(sim, root) == []

    for name in ("deleted", "destroyed", "kept"):
        sim.call(root, "at", [(Child, name)], "schedule", 600, "tick", name)
        sim.call(root, "at", [(Child, name), (Grandchild, "g")], "schedule", 600, "tick", name)
    assert len(schedule_rows(sim, root)) == 6

    sim.call(root, "delete_child", Child, "deleted")
    with pytest.raises(AgentEvicted, match="deleted"):  # destroy() ends the calling facet
        sim.call(root, "at", [(Child, "destroyed")], "destroy")

    kept = sim.facet(root, Child, "kept")
    assert {r["owner_path_key"] for r in schedule_rows(sim, root)} == {
        owner_key(kept),
        owner_key(sim.facet(kept, Grandchild, "g")),
    }
    assert sim.call(root, "has_child", "Child", "deleted") is False
    assert sim.call(root, "has_child", "Child", "destroyed") is False
    pruned = events(sim, root, "schedule:cancel")
    assert len(pruned) == 4 and {p["callback"] for p in pruned} == {"tick"}


@on_release("0.21.0")
def test_a_schedule_whose_owner_is_no_longer_registered_is_pruned_unrun(sim: Simulation) -> None:
    """When the root's alarm dispatches a sub-agent's schedule and the owner's registry entry
    is gone (a lost write), nothing runs: the root prunes that sub-tree's rows and observes the
    cancel."""
    root = wake(sim)
    created = sim.call(root, "at", [(Child, "c")], "schedule", 10, "tick", "lost")
    sim.call(root, "forget_child", "Child", "c")
    fire_next_alarm(sim)
    assert journal(sim, sim.facet(root, Child, "c"), "tick") == []
    assert schedule_rows(sim, root) == []
    assert events(sim, root, "schedule:cancel") == [{"callback": "tick", "id": created.id}]
    assert sim.probes["facet.schedule_owner_gone_pruned"] == 1


@on_release("0.21.0")
def test_a_sub_agent_schedule_whose_dispatch_throws_is_left_to_run_again(
    sim: Simulation,
) -> None:
    """A dispatch that throws (here an unreadable owner path) is reported as a schedule error
    with 0 attempts and leaves the row as it was, neither run nor deleted (spec fibers §4.4)."""
    root = wake(sim)
    sim.call(root, "at", [(Child, "c")], "schedule", 10, "tick", "x")
    sim.query(root, "UPDATE cf_agents_schedules SET owner_path = 'not a path'")
    fire_next_alarm(sim)
    (error,) = events(sim, root, "schedule:error")
    assert (error["callback"], error["attempts"]) == ("tick", 0)
    assert [row["owner_path"] for row in schedule_rows(sim, root)] == ["not a path"]
    assert journal(sim, sim.facet(root, Child, "c"), "tick") == []
    assert sim.probes["schedule.facet_dispatch_failed"] == 1


@on_release("0.21.0")
def test_F047_names_with_slashes_or_like_wildcards_do_not_prune_siblings(
    sim: Simulation,
) -> None:
    """Deleting "slash-child", "wild%child" or "wild_child" leaves the schedules and fiber
    leases of "slash-child/nested-looking", "wildXchild/nested" and "wildYchild" alone."""
    root = wake(sim)
    pairs = [
        ("slash-child", "slash-child/nested-looking"),
        ("wild%child", "wildXchild/nested"),
        ("wild_child", "wildYchild"),
    ]
    for doomed, survivor in pairs:
        for name in (doomed, survivor):
            sim.call(root, "at", [(Child, name)], "schedule", 60, "tick", name)
            sim.call(root, "at", [(Child, name)], "spawn", "work", None, 30_000)
    survivors = {owner_key(sim.facet(root, Child, s)) for _, s in pairs}
    assert len({r["owner_path_key"] for r in facet_runs(sim, root)}) == 6

    for doomed, _ in pairs:
        sim.call(root, "delete_child", Child, doomed)

    assert {r["owner_path_key"] for r in schedule_rows(sim, root)} == survivors
    assert {r["owner_path_key"] for r in facet_runs(sim, root)} == survivors
    sim.run_for(60_000)
    for _, survivor in pairs:
        ref = sim.facet(root, Child, survivor)
        assert [r["data"] for r in journal(sim, ref, "tick")] == [survivor]
        assert len(journal(sim, ref, "fiber:end")) == 1


def test_F048_schedule_create_and_cancel_are_observed_on_the_sub_agent(sim: Simulation) -> None:
    """A sub-agent's schedule:create and schedule:cancel events come from the sub-agent, not
    from the root that stores the row."""
    root = wake(sim)
    child = sim.facet(root, Child, "c")
    created = sim.call(root, "at", [(Child, "c")], "schedule", 60, "tick")
    assert sim.call(root, "at", [(Child, "c")], "cancel_schedule", created.id) is True

    expected = {"callback": "tick", "id": created.id}
    assert events(sim, child, "schedule:create") == [expected]
    assert events(sim, child, "schedule:cancel") == [expected]
    assert events(sim, root, "schedule:*") == []


# -- sub-agent fibers --------------------------------------------------------------------------
def test_F114_managed_sub_agent_fiber_holds_root_leases_until_it_settles(
    sim: Simulation,
) -> None:
    """While a child's managed fiber runs, its ledger says running (with its key) and the root
    holds a keepAlive ref and a facet-run lease for it; once it completes both are gone."""
    root = wake(sim)
    child = sim.facet(root, Child, "c")
    started = sim.call(
        root, "at", [(Child, "c")], "start", "job", {"step": 1}, 10_000, idempotency_key="k1"
    )
    assert (started.accepted, started.status) == (True, "pending")
    sim.run_for(1_000)

    (ledger,) = sim.query(child, "SELECT * FROM cf_agents_fibers")
    assert (ledger["status"], ledger["idempotency_key"]) == ("running", "k1")
    (lease,) = facet_runs(sim, root)
    assert (lease["owner_path_key"], lease["run_id"]) == (owner_key(child), started.fiber_id)
    instance = root_instance(sim, root)
    assert instance._keep_alive_refs == 1
    assert sim.alarm_of(root) is not None
    assert sim.alarm_of(root) <= sim.now_ms + ROOT_HEARTBEAT_MS

    sim.run_for(10_000)
    (ledger,) = sim.query(child, "SELECT * FROM cf_agents_fibers")
    assert ledger["status"] == "completed"
    assert facet_runs(sim, root) == []
    assert instance._keep_alive_refs == 0
    assert instance._facet_keep_alive_tokens == {}
    assert sim.alarm_of(root) is None


def test_F116_root_alarm_applies_the_child_hooks_managed_recovery_result(
    sim: Simulation,
) -> None:
    """After a deploy interrupts a child's managed fiber, the root alarm recovers it in the
    child: the hook's result becomes the ledger row and the root lease is deleted."""
    root = wake(sim)
    child = sim.facet(root, ResolvingChild, "c")
    path = [(ResolvingChild, "c")]
    started = sim.call(root, "at", path, "start", "job", {"step": 1}, 60_000, idempotency_key="k1")
    sim.run_for(3_000)
    sim.evict(root, "deploy")
    assert [r["status"] for r in sim.query(child, "SELECT status FROM cf_agents_fibers")] == [
        "running"
    ]
    assert len(facet_runs(sim, root)) == 1

    fire_next_alarm(sim)

    (hook,) = journal(sim, child, "hook")
    assert hook["data"]["id"] == started.fiber_id
    assert (hook["data"]["status"], hook["data"]["idempotencyKey"]) == ("interrupted", "k1")
    (ledger,) = sim.query(child, "SELECT * FROM cf_agents_fibers")
    assert ledger["status"] == "completed"
    assert ledger["snapshot"] == '{"last":{"step":1},"recovered":true}'
    assert ledger["metadata_json"] == '{"recoveredBy":"child"}'
    assert sim.query(child, "SELECT id FROM cf_agents_runs") == []
    assert facet_runs(sim, root) == []
    assert sim.alarm_of(root) is None


def test_F117_nested_sub_agent_fiber_is_recovered_through_each_hop(sim: Simulation) -> None:
    """A grandchild's orphaned fiber, leased on the root under the grandchild's path, is handed
    to the grandchild's hook by the root alarm, and the lease is deleted."""
    root = wake(sim)
    child = sim.facet(root, Child, "c")
    grandchild = sim.facet(child, Grandchild, "g")
    fiber_id = sim.call(
        root, "at", [(Child, "c"), (Grandchild, "g")], "spawn", "deep", {"at": "g"}, 60_000
    )
    (lease,) = facet_runs(sim, root)
    assert (lease["owner_path_key"], lease["run_id"]) == (owner_key(grandchild), fiber_id)
    sim.run_for(1_000)
    sim.deploy()

    fire_next_alarm(sim)

    (hook,) = journal(sim, grandchild, "hook")
    assert hook["data"] | {"id": fiber_id} == {
        "id": fiber_id,
        "name": "deep",
        "snapshot": {"at": "g"},
        "status": None,
        "idempotencyKey": None,
    }
    assert hook["inc"] == 2
    assert journal(sim, child, "hook") == journal(sim, root, "hook") == []
    assert sim.query(grandchild, "SELECT id FROM cf_agents_runs") == []
    assert facet_runs(sim, root) == []


def test_F118_stale_leases_are_pruned_when_the_facet_has_no_rows_or_no_registry_entry(
    sim: Simulation,
) -> None:
    """A root lease whose child has no run rows, or whose registry entry is gone, is deleted by
    the next root alarm; the unregistered child's orphan waits for its next start."""
    root = wake(sim)
    empty = sim.facet(root, Child, "empty")
    sim.call(root, "at", [(Child, "empty")], "tick")
    sim.call(root, "plant_facet_lease", owner_path_json(empty), "ghost-run")
    assert sim.alarm_of(root) == sim.now_ms + ROOT_HEARTBEAT_MS

    fire_next_alarm(sim)
    assert facet_runs(sim, root) == []
    assert sim.alarm_of(root) is None
    assert journal(sim, empty, "hook") == []

    lost = sim.facet(root, Child, "lost")
    fiber_id = sim.call(root, "at", [(Child, "lost")], "spawn", "work", {"n": 1}, 60_000)
    sim.run_for(500)
    sim.deploy()
    sim.call(root, "forget_child", "Child", "lost")
    assert [r["run_id"] for r in facet_runs(sim, root)] == [fiber_id]

    fire_next_alarm(sim)
    assert facet_runs(sim, root) == []
    assert journal(sim, lost, "hook") == []
    assert [r["id"] for r in sim.query(lost, "SELECT id FROM cf_agents_runs")] == [fiber_id]

    # §10.2 item 16: starting the child again is what recovers it.
    sim.call(root, "at", [(Child, "lost")], "tick")
    assert [h["data"]["id"] for h in journal(sim, lost, "hook")] == [fiber_id]
    assert sim.query(lost, "SELECT id FROM cf_agents_runs") == []
    assert sim.probes["facet.stale_fiber_lease_pruned"] >= 1


@on_release("0.21.0")
def test_F119_internal_recovery_in_a_child_schedules_a_continuation_the_root_runs(
    sim: Simulation,
) -> None:
    """A child's internal recovery handler that schedules a continuation: the first root alarm
    recovers and drops the lease, the second runs the continuation in the child."""
    root = wake(sim)
    child = sim.facet(root, InternalChild, "c")
    fiber_id = sim.call(
        root, "at", [(InternalChild, "c")], "spawn", "internal:turn", {"turn": 3}, 60_000
    )
    sim.run_for(1_000)
    sim.deploy()

    first = fire_next_alarm(sim)
    assert facet_runs(sim, root) == []
    assert [r["data"] for r in journal(sim, child, "internal")] == [
        {"id": fiber_id, "snapshot": {"turn": 3}}
    ]
    assert journal(sim, child, "hook") == []  # the user hook never saw it
    handled = events(sim, child, "fiber:recovery:handled", fiberId=fiber_id)
    assert [h["status"] for h in handled] == ["internal"]
    (continuation,) = schedule_rows(sim, root)
    assert continuation["owner_path_key"] == owner_key(child)
    assert journal(sim, child, "continued") == []

    second = fire_next_alarm(sim)
    assert second > first
    (done,) = journal(sim, child, "continued")
    assert done["t"] == second
    assert done["data"] == {"fiber": fiber_id, "snapshot": {"turn": 3}}
    assert schedule_rows(sim, root) == []


@on_both_releases
def test_F120_deleting_or_destroying_a_child_drops_its_sub_trees_leases(sim: Simulation) -> None:
    """delete_sub_agent drops the root leases of the child and its grandchild at once, and a
    child's own destroy() drops its leases; a sibling's lease stays, and the root's keepAlive
    refs for the dead sub-trees go with them."""
    root = wake(sim)
    sim.call(root, "at", [(Child, "deleted")], "spawn", "a", None, 600_000)
    sim.call(root, "at", [(Child, "deleted"), (Grandchild, "g")], "spawn", "b", None, 600_000)
    sim.call(root, "at", [(Child, "destroyed")], "spawn", "c", None, 600_000)
    sim.call(root, "at", [(Child, "sibling")], "spawn", "d", None, 60_000)
    sim.run_for(10)
    assert len(facet_runs(sim, root)) == 4
    instance = root_instance(sim, root)
    assert instance._keep_alive_refs == 4

    sim.call(root, "delete_child", Child, "deleted")
    sibling = owner_key(sim.facet(root, Child, "sibling"))
    assert {r["owner_path_key"] for r in facet_runs(sim, root)} == {
        owner_key(sim.facet(root, Child, "destroyed")),
        sibling,
    }
    assert instance._keep_alive_refs == 2

    with pytest.raises(AgentEvicted, match="deleted"):
        sim.call(root, "at", [(Child, "destroyed")], "destroy")
    assert [r["owner_path_key"] for r in facet_runs(sim, root)] == [sibling]
    assert instance._keep_alive_refs == 1
    assert all(t.startswith(sibling + ":") for t in instance._facet_keep_alive_tokens)

    sim.run_for(60_000)  # the sibling's fiber ends: nothing keeps the root awake any more
    assert facet_runs(sim, root) == []
    assert instance._keep_alive_refs == 0
    assert sim.alarm_of(root) is None


def test_F121_child_fibers_killed_by_a_restart_are_recovered_by_the_parent_alarm(
    sim: Simulation,
) -> None:
    """An unmanaged and a managed child fiber killed by a restart are recovered in the child by
    the root's persisted alarm alone, with no request to either agent."""
    root = wake(sim)
    child = sim.facet(root, Child, "c")
    unmanaged = sim.call(root, "at", [(Child, "c")], "spawn", "u", {"kind": "u"}, 600_000)
    managed = sim.call(
        root, "at", [(Child, "c")], "start", "m", {"kind": "m"}, 600_000, idempotency_key="km"
    )
    sim.run_for(5_000)
    sim.deploy()
    assert events(sim, child, "incarnation:end") == [{"reason": "deploy"}]
    assert sim.incarnation_of(root) == sim.incarnation_of(child) == 0

    fire_next_alarm(sim)

    starts = sim.trace.select("incarnation:start", agent=root.path)
    assert starts[-1].get("trigger") == "alarm"
    hooks = {h["data"]["id"]: h["data"] for h in journal(sim, child, "hook")}
    assert hooks.keys() == {unmanaged, managed.fiber_id}
    assert hooks[unmanaged]["snapshot"] == {"kind": "u"}
    assert hooks[managed.fiber_id]["status"] == "interrupted"
    (ledger,) = sim.query(child, "SELECT status, snapshot FROM cf_agents_fibers")
    assert ledger == {"status": "interrupted", "snapshot": '{"kind":"m"}'}
    assert sim.query(child, "SELECT id FROM cf_agents_runs") == []
    assert facet_runs(sim, root) == []
    assert sim.probes["facet.recovery_driven_by_root"] >= 1


def test_F122_child_recovery_yields_at_its_deadline_and_drains_over_root_passes(
    sim: Simulation,
) -> None:
    """Twenty child orphans with a 75 ms child scan deadline and 25 ms hooks are recovered over
    several root alarm passes: the scan yields at least once and every fiber is recovered once."""
    root = wake(sim)
    child = sim.facet(root, DeadlineChild, "c")
    ids = sim.call(root, "at", [(DeadlineChild, "c")], "spawn_many", "job", 20, 600_000)
    assert len(set(ids)) == 20
    sim.run_for(1_000)
    sim.deploy()

    passes = 0
    while facet_runs(sim, root):
        passes += 1
        assert passes <= 20, "the child's rows never drained"
        fire_next_alarm(sim)

    assert passes > 1
    skipped = events(sim, child, "fiber:recovery:skipped", reason="scan_deadline_exceeded")
    assert len(skipped) >= 1
    recovered = [h["data"]["id"] for h in journal(sim, child, "hook")]
    assert sorted(recovered) == sorted(ids)
    assert sim.query(child, "SELECT id FROM cf_agents_runs") == []
    assert sim.alarm_of(root) is None


def test_F123_a_facet_lease_keeps_the_root_alarm_at_its_interval_whatever_the_backoff(
    sim: Simulation,
) -> None:
    """While a facet lease exists the root re-arms at now + its own keepAlive interval, even as
    its own recovery backoff grows; once the lease is gone the backoff shows."""
    root = wake(sim)
    child = sim.facet(root, AgingChild, "c")
    sim.call(root, "spawn", "poison:root", None, 600_000)
    sim.call(root, "at", [(AgingChild, "c")], "spawn", "poison:child", None, 600_000)
    sim.run_for(1_000)
    sim.deploy()

    delays = []
    while facet_runs(sim, root):
        fired = fire_next_alarm(sim)
        delays.append(sim.alarm_of(root) - fired)
        assert len(delays) <= 20, "the child's poison row never aged out"
    assert set(delays[:-1]) == {ROOT_HEARTBEAT_MS}
    assert len(delays) >= AGING_MAX_AGE_MS // ROOT_HEARTBEAT_MS
    assert len(journal(sim, child, "hook")) >= len(delays)
    streak = root_instance(sim, root)._recovery_no_progress_scans
    assert streak >= 3  # the root's own backoff, which the lease overrode
    assert delays[-1] == min(FIBER_RECOVERY_MAX_BACKOFF_MS, ROOT_HEARTBEAT_MS * 2**streak)


# -- the facet's life inside the root's isolate ---------------------------------------------
def test_a_facet_has_no_alarm_slot_of_its_own(sim: Simulation) -> None:
    """A sub-agent that sets the alarm directly is refused with a message saying its timers go
    through the root; the root's slot is untouched."""
    root = wake(sim)
    with pytest.raises(RuntimeError, match=r"Root/r/Child/c is a sub-agent: it has no alarm"):
        sim.call(root, "at", [(Child, "c")], "arm_alarm", 5_000)
    assert sim.alarm_of(root) is None


@on_both_releases
def test_a_facet_dies_with_its_root_and_starts_again_when_next_resolved(sim: Simulation) -> None:
    """A facet keeps its identity in its own KV; a deploy of the root ends the facet too, and
    the next resolution by the parent gives it a new incarnation that runs its startup again.
    On 0.32.0 the same KV also holds the schema versions (sdk-0.32 §6.1, §6.2)."""
    root = wake(sim)
    child = sim.facet(root, Child, "c")
    sim.call(root, "at", [(Child, "c")], "tick")
    assert sim.incarnation_of(child) == 1
    stored = {k: json.loads(v) for k, v in kv(sim, child).items()}
    versions = {k: v for k, v in stored.items() if k.startswith("cf_agents:")}
    identity = {k: v for k, v in stored.items() if k not in versions}
    assert identity == {
        "cf_agents_is_facet": True,
        "cf_agents_facet_name": "c",
        "cf_agents_parent_path": [{"className": "Root", "name": "r"}],
    }
    assert versions == (
        {}
        if sim.release == "0.21.0"
        else {
            "cf_agents:schema_version": 14,
            "cf_agents:schedules_schema_version": 2,
            "cf_agents:queue_schema_version": 1,
            "cf_agents:tasks_schema_version": 1,
            "cf_agents:mcp_schema_version": 1,
            "cf_agents:state_schema_version": 1,
        }
    )

    assert sim.evict(root, "deploy") is True
    assert events(sim, child, "incarnation:end") == [{"reason": "deploy"}]
    assert sim.incarnation_of(child) == 0

    sim.call(root, "at", [(Child, "c")], "tick")
    assert sim.incarnation_of(child) == 2
    assert [(r["inc"], r["kind"]) for r in journal(sim, child)] == [
        (1, "start"),
        (1, "tick"),
        (2, "start"),
        (2, "tick"),
    ]


def test_delete_sub_agent_wipes_the_child_so_a_new_one_starts_empty(sim: Simulation) -> None:
    """delete_sub_agent ends the child, forgets its registry entry and its storage; a child
    created again under the same name starts from nothing."""
    root = wake(sim)
    child = sim.facet(root, Child, "c")
    sim.call(root, "at", [(Child, "c")], "tick", "old")
    sim.call(root, "at", [(Child, "c")], "set_state", {"kept": False})

    sim.call(root, "delete_child", Child, "c")
    assert events(sim, child, "incarnation:end") == [{"reason": "deleted"}]
    assert sim.call(root, "has_child", "Child", "c") is False
    with pytest.raises(LookupError, match="does not exist"):
        sim.query(child, "SELECT * FROM journal")

    sim.call(root, "at", [(Child, "c")], "tick", "new")
    assert [r["data"] for r in journal(sim, child)] == [None, "new"]
    assert sim.call(root, "at", [(Child, "c")], "has_child", "Grandchild", "x") is False
    assert sim.query(child, "SELECT * FROM cf_agents_state WHERE id = 'cf_state_row_id'") == []


def test_a_crash_in_a_childs_storage_kills_the_whole_isolate(sim: Simulation) -> None:
    """A process crash injected into a sub-agent's statement ends the root and every facet in
    its isolate at once; the child's half-done turn is rolled back."""
    root = wake(sim)
    child = sim.facet(root, Child, "c")
    sibling = sim.facet(root, Child, "s")
    sim.call(root, "at", [(Child, "c")], "tick", "before")
    sim.call(root, "at", [(Child, "s")], "tick", "before")
    sim.arm_storage_fault(child, "crash", match="INSERT INTO journal", skip=1)

    with pytest.raises(AgentEvicted, match="crash"):
        sim.call(root, "at", [(Child, "c")], "note_all", "tick", ["written", "crashes"])

    for ref in (root, child, sibling):
        assert events(sim, ref, "incarnation:end") == [{"reason": "crash"}], ref.path
        assert sim.incarnation_of(ref) == 0
    assert [r["data"] for r in journal(sim, child, "tick")] == ["before"]
    assert [r["data"] for r in journal(sim, sibling, "tick")] == ["before"]


def test_a_sub_agent_name_that_spells_another_agents_path_is_refused(sim: Simulation) -> None:
    """A child named "a/Grandchild/b" would share the simulator path of grandchild "b" of
    child "a"; the simulator refuses it instead of mixing their storage."""
    root = wake(sim)
    sim.call(root, "at", [(Child, "a"), (Grandchild, "b")], "tick", "nested")
    with pytest.raises(ValueError, match="already the path of Grandchild 'b'"):
        sim.call(root, "at", [(Child, "a/Grandchild/b")], "tick", "flat")
    nested = sim.facet(sim.facet(root, Child, "a"), Grandchild, "b")
    assert [r["data"] for r in journal(sim, nested, "tick")] == ["nested"]


def test_a_stub_kept_across_its_sub_agents_deletion_does_not_revive_it(sim: Simulation) -> None:
    """A call on a stub obtained before delete_sub_agent fails with the reason `deleted` and
    starts no incarnation on the deleted child's storage."""
    from agents_core import Agent, AgentReset

    class Kid(Agent):
        async def hello(self) -> str:
            return "hi"

    class Holder(Agent):
        async def keep_then_delete(self) -> str:
            stub = await self.sub_agent(Kid, "k")
            await self.delete_sub_agent(Kid, "k")
            try:
                await stub.hello()
            except AgentReset as exc:
                return exc.reason
            return "revived"

    ref = sim.agent(Holder, "h")
    assert sim.call(ref, "keep_then_delete") == "deleted"
    starts = sim.trace.select("incarnation:start", agent="Holder/h/Kid/k")
    assert len(starts) == 1


def _delete_with_a_failed_prune(sim: Simulation, data: str) -> AgentRef:
    """A child that noted `data`, deleted by its root while the root's prune of its sub-tree
    fails on a storage error (the delete raises it); the child."""
    root = wake(sim)
    child = sim.facet(root, Child, "c")
    sim.call(root, "at", [(Child, "c")], "tick", data)
    prune_read = "SELECT owner_path, owner_path_key, run_id FROM cf_agents_facet_runs"
    sim.arm_storage_fault(root, "error", match=prune_read)
    with pytest.raises(StorageError):
        sim.call(root, "delete_child", Child, "c")
    return child


@on_release("0.21.0")
def test_a_delete_whose_prune_fails_keeps_the_child_listed_on_0_21(sim: Simulation) -> None:
    """0.21.0's `deleteSubAgent` prunes the sub-tree on the root first, then deletes the facet
    and forgets the registry row: a prune that fails (a storage error on the root) leaves the
    child listed and its storage in place."""
    child = _delete_with_a_failed_prune(sim, "kept")
    assert sim.call(wake(sim), "has_child", "Child", "c") is True
    assert events(sim, child, "incarnation:end") == []
    assert [r["data"] for r in journal(sim, child, "tick")] == ["kept"]


@on_release("0.32.0")
def test_a_delete_whose_prune_fails_has_unlisted_the_child_on_0_32(sim: Simulation) -> None:
    """0.32.0's sub-agent delete deletes the facet and forgets the registry row first, and
    prunes the sub-tree on the root last: a prune that fails leaves the child gone and
    unlisted."""
    child = _delete_with_a_failed_prune(sim, "gone")
    assert sim.call(wake(sim), "has_child", "Child", "c") is False
    assert events(sim, child, "incarnation:end") == [{"reason": "deleted"}]
    with pytest.raises(LookupError, match="does not exist"):
        sim.query(child, "SELECT * FROM journal")
