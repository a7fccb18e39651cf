"""`mcp_servers_durable`: MCP servers added by calls are restored at the next startup, before the
recovery hook runs; a removed one is not. A runtime that forgets the removal's DELETE, or its
restore, is caught; a hook that did not see a restored server is caught; a record that may have
rolled back is not judged."""

from __future__ import annotations

import dataclasses

import pytest

from agents_core.mcp import Mcp
from sim.checkers import CheckContext, check
from tests.checkers.agents import fails_with_a_blind_checker, scenario_context, with_record

F = "FiberWorkload/f"
STORY = """
name: mcp
description: two MCP servers added, one removed, then a deploy mid-fiber and a request
seed: 3
agents:
  f:
    workload: fibers
    fibers:
      - {name: job, steps: 4, step: 10s, stash: true}
steps:
  - {at: 0s, call: {agent: f, method: status}}
  - {at: 1s, call: {agent: f, method: connect_mcp, args: [search]}}
  - {at: 2s, call: {agent: f, method: connect_mcp, args: [files]}}
  - {at: 5s, call: {agent: f, method: disconnect_mcp, args: [files]}}
  - at: 15s
    deploy: {}
  - {at: 16s, request: {agent: f, path: /, status: 404}}
"""


def servers_run() -> CheckContext:
    return scenario_context(STORY)


def ids(context: CheckContext) -> dict[str, str]:
    return {str(r.get("name")): str(r.get("id")) for r in context.events("workload:mcp_added")}


def test_the_kept_server_is_restored_before_the_hook_and_the_removed_one_is_not() -> None:
    context = servers_run()
    restored = [r.get("name") for r in context.events("mcp:connected") if r.get("restored")]
    assert restored == ["search"]
    (saw,) = context.events("workload:hook_saw_mcp")
    assert saw.get("servers") == ["search"]
    assert check(context, ["mcp_servers_durable"]) == []


def test_a_removal_that_forgets_its_delete_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def forgetful(self: Mcp, server_id: str) -> None:
        self.connections.pop(server_id, None)
        self._broadcast_servers()

    monkeypatch.setattr(Mcp, "remove_server", forgetful)
    context = servers_run()
    files = ids(context)["files"]
    (violation,) = check(context, ["mcp_servers_durable"])
    assert violation.message == (
        f"MCP server 'files' ({files}) of {F} was removed at 00:00:05.000, yet incarnation 2 "
        "restored it at 00:00:16.000: a removed server stays removed"
    )


def test_a_startup_that_restores_nothing_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Mcp, "on_start", lambda self: self._broadcast_servers())
    context = servers_run()
    search = ids(context)["search"]
    assert [v.message for v in check(context, ["mcp_servers_durable"])] == [
        f"MCP server 'search' ({search}) of {F}, added and never removed, was not restored by "
        "the startup of incarnation 2: a registered server is kept across restarts"
    ]


def test_a_hook_that_did_not_see_a_restored_server_is_caught() -> None:
    context = servers_run()
    (saw,) = context.events("workload:hook_saw_mcp")
    blind = with_record(context, saw.seq, saw, servers=[])
    messages = [v.message for v in check(blind, ["mcp_servers_durable"])]
    assert messages == [
        f"the recovery hook of fiber {saw.get('fiberId')} on {F} at 00:00:16.000 saw MCP servers "
        f"[], without 'search' ({ids(context)['search']}), which its startup had restored: "
        "startup restores the servers before the recovery scan"
    ]


def test_a_removal_that_may_have_rolled_back_is_not_judged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def forgetful(self: Mcp, server_id: str) -> None:
        self.connections.pop(server_id, None)

    monkeypatch.setattr(Mcp, "remove_server", forgetful)
    context = servers_run()
    (removed,) = context.events("workload:mcp_removed")
    crash = dataclasses.replace(
        removed, event="incarnation:end", fields={"reason": "crash"}, seq=len(context.records)
    )
    crashed = dataclasses.replace(context, records=(*context.records, crash))
    assert check(crashed, ["mcp_servers_durable"]) == []


def test_the_rules_are_this_checkers_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    context = servers_run()
    (saw,) = context.events("workload:hook_saw_mcp")

    def caught(context: CheckContext) -> None:
        assert check(context, ["mcp_servers_durable"]), "nothing found"

    fails_with_a_blind_checker(
        monkeypatch, "mcp_servers_durable", caught, with_record(context, saw.seq, saw, servers=[])
    )


def test_a_server_removed_after_its_restore_is_not_expected_by_a_later_hook() -> None:
    """A generated run found this: startup restores a server, a call removes it, and a later
    recovery pass's hook rightly sees the servers left."""
    context = servers_run()
    (saw,) = context.events("workload:hook_saw_mcp")
    search = ids(context)["search"]
    removed = with_record(
        context, saw.seq, saw, event="workload:mcp_removed", name="search", ids=[search]
    )
    later = with_record(removed, removed.records[-1].seq, saw, servers=[])
    assert check(later, ["mcp_servers_durable"]) == []
