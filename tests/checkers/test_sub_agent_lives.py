"""`sub_agents_registered`: a close of sub-agent `w1` that stops after removing its registry
entry (a storage fault in the root's clean-up) leaves its storage and its fiber's index on the
root; after the root's eviction, the root's alarm must not wake `w1` again, although a twin of
another class keeps the name `w1`. A wake-up of `w1` is caught; `fibers_settled` owes nothing
to the fiber of a sub-agent its parent no longer lists."""

from __future__ import annotations

import pytest

from sim.checkers import CheckContext, check
from tests.checkers.agents import (
    fails_with_a_blind_checker,
    record,
    scenario_context,
    with_record,
)

ROOT = "FiberWorkload/worker"
W1 = f"{ROOT}/FiberWorkload/w1"
TWIN = """
    name: twin-close
    description: w1 is closed while a twin of another class keeps the name
    seed: 1
    agents:
      worker:
        workload: fibers
        start: call
        keep_alive_interval: 5s
        fibers: [{name: f1, steps: 3, step: 20s, managed: true}]
        sub_agents: [w1, twin:w1]
    steps:
      - call: {agent: worker, method: status}
      - call: {agent: worker, method: open, args: [w1]}
      - call: {agent: worker, method: open, args: [twin:w1]}
      - at: 10s
        call: {agent: worker, method: close, args: [w1]}
      - at: 30s
        evict: {agent: worker}
      - run_for: 5m
"""


def messages(context: CheckContext) -> list[str]:
    return [v.message for v in check(context, ["sub_agents_registered"])]


def test_a_sub_agent_its_parent_deleted_is_never_woken_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    context = scenario_context(TWIN)
    registry = context.table(ROOT, "cf_agents_sub_agents")
    assert [(r["class"], r["name"]) for r in registry] == [("FiberTwin", "w1")]
    assert [r.inc for r in context.events("incarnation:start", W1)] == [1]
    assert context.events("facet:deleted", W1) != []
    assert messages(context) == []
    assert check(context, ["fibers_settled"]) == []

    last = context.records[-1]
    woken = with_record(context, last.seq, record(0, last.t_ms, W1, 2, "incarnation:start"))

    def caught(ctx: CheckContext) -> None:
        found = messages(ctx)
        assert len(found) == 1
        assert found[0].startswith(f"sub-agent {W1} started an incarnation at 00:05:30.000")
        assert "no entry for (FiberWorkload, w1) since 00:00:10.000" in found[0]

    caught(woken)
    fails_with_a_blind_checker(monkeypatch, "sub_agents_registered", caught, woken)


def test_the_registry_of_a_deleted_sub_agent_is_still_read() -> None:
    """A sub-agent's registry of its own sub-agents lives in its storage, which its delete
    takes: the checkers still read what it kept, from the journal of the life that ended (here
    `w1` unlisted `x` at 1:26 and was deleted itself later), and every life in order."""
    from sim.checkers.core import CheckContext
    from sim.checkers.sub_agent_registry import registry_history

    parent = "FiberWorkload/worker/FiberWorkload/w1"
    create = (
        "CREATE TABLE cf_agents_sub_agents (class TEXT, name TEXT, created_at INTEGER, "
        "PRIMARY KEY (class, name))",
        (),
    )
    insert = (
        "INSERT INTO cf_agents_sub_agents (class, name, created_at) VALUES (?, ?, ?)",
        ("FiberWorkload", "x", 10_000),
    )
    delete = (
        "DELETE FROM cf_agents_sub_agents WHERE class = ? AND name = ?",
        ("FiberWorkload", "x"),
    )
    first = (((create, insert), (delete,)), (10_000, 86_000))
    second = (((create, insert),), (200_000,))
    key = ("FiberWorkload", "x")
    assert registry_history(CheckContext(records=()), parent) == {}
    gone = CheckContext(records=(), departed={parent: (first,)})
    assert registry_history(gone, parent)[key] == [(10_000, True), (86_000, False)]
    again = CheckContext(records=(), departed={parent: (first, second)})
    assert registry_history(again, parent)[key] == [
        (10_000, True),
        (86_000, False),
        (200_000, True),
    ]
