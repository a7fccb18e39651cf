"""`mcp_servers_durable`: the MCP servers an agent registered are kept across restarts, a removed
one stays removed, and startup connects them again before the fiber recovery scan runs, so a
recovery hook can use them (fibers §1.4 step 3, F-65).

The fibers workload adds and removes servers by calls and says so: `workload:mcp_added {name,
id}` once `add_mcp_server` returned, `workload:mcp_removed {name, ids}` once `remove_mcp_server`
returned for each id. Its recovery hook, when any server is connected, writes what it can use:
`workload:hook_saw_mcp {fiberId, servers}` (the names). The runtime's restore at startup is
`mcp:connected {id, restored: true}`.

For every agent, in trace order, the servers it should have are those added and not removed
since. A record that may have rolled back (its incarnation crashed in that instant) leaves its
server uncertain, and an uncertain server is not judged. Then, in every incarnation that ran
its startup:
1. each server it should have when that incarnation starts is restored by its startup;
2. no server removed before that (and not added again) is restored;
3. every server restored in it before its recovery hook ran, and not removed since, is among
   those the hook saw.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.trace import TraceRecord, format_sim_time

__all__ = ["mcp_servers_durable"]

NAME = "mcp_servers_durable"
EVENTS = (
    "workload:mcp_added",
    "workload:mcp_removed",
    "workload:hook_saw_mcp",
    "mcp:connected",
    "incarnation:start",
    "startup:done",
)


@invariant(NAME)
def mcp_servers_durable(context: CheckContext) -> list[Violation]:
    """Fibers §1.4 step 3, F-65 — an added MCP server is restored at every later startup, a
    removed one never, and before the recovery hook (see the module docstring)."""
    by_agent: dict[str, list[TraceRecord]] = defaultdict(list)
    for record in context.records:
        if record.event in EVENTS:
            by_agent[record.agent].append(record)
    found: list[Violation] = []
    for agent in sorted(by_agent):
        records = by_agent[agent]
        if not any(r.event == "workload:mcp_added" for r in records):
            continue
        found += _judge(context, agent, records)
    return found


def _judge(context: CheckContext, agent: str, records: list[TraceRecord]) -> list[Violation]:
    should: dict[Any, str] = {}
    """id -> name of the servers added and not removed, as far as the records are certain."""
    gone: dict[Any, TraceRecord] = {}
    """id -> the record that removed it."""
    uncertain: set[Any] = set()
    expected: dict[int, dict[Any, str]] = {}
    removed_by: dict[int, dict[Any, TraceRecord]] = {}
    restored: dict[int, dict[Any, TraceRecord]] = defaultdict(dict)
    dropped: dict[int, set[Any]] = defaultdict(set)
    """incarnation -> the servers removed in it (after its startup restored them)."""
    started: set[int] = set()
    found: list[Violation] = []
    for record in records:
        inc = record.inc
        if record.event == "incarnation:start":
            expected[inc] = dict(should)
            removed_by[inc] = dict(gone)
        elif record.event == "startup:done":
            started.add(inc)
        elif record.event == "mcp:connected" and record.get("restored"):
            restored[inc][record.get("id")] = record
        elif record.event == "workload:mcp_added":
            server = record.get("id")
            if context.may_have_rolled_back(record):
                uncertain.add(server)
            should[server] = str(record.get("name"))
            gone.pop(server, None)
        elif record.event == "workload:mcp_removed":
            for server in record.get("ids") or ():
                if context.may_have_rolled_back(record):
                    uncertain.add(server)
                should.pop(server, None)
                gone[server] = record
                dropped[inc].add(server)
        elif record.event == "workload:hook_saw_mcp":
            seen = set(record.get("servers") or ())
            for server, connected in restored[inc].items():
                if server in dropped[inc]:
                    continue  # removed since its restore: the hook rightly no longer sees it
                name = connected.get("name")
                if name not in seen and server not in uncertain:
                    found.append(
                        _violation(
                            agent,
                            server,
                            f"the recovery hook of fiber {record.get('fiberId')} on {agent} at "
                            f"{format_sim_time(record.t_ms)} saw MCP servers {sorted(seen)}, "
                            f"without {name!r} ({server}), which its startup had restored: "
                            "startup restores the servers before the recovery scan",
                            (connected.seq, record.seq),
                        )
                    )
    for inc in sorted(started):
        if inc not in expected:
            continue
        for server, name in sorted(expected[inc].items(), key=lambda item: str(item[0])):
            if server in uncertain or server in restored[inc]:
                continue
            found.append(
                _violation(
                    agent,
                    server,
                    f"MCP server {name!r} ({server}) of {agent}, added and never removed, was not "
                    f"restored by the startup of incarnation {inc}: a registered server is kept "
                    "across restarts",
                    (),
                )
            )
        for server, connected in sorted(restored[inc].items(), key=lambda item: str(item[0])):
            removal = removed_by[inc].get(server)
            if removal is None or server in uncertain:
                continue
            found.append(
                _violation(
                    agent,
                    server,
                    f"MCP server {connected.get('name')!r} ({server}) of {agent} was removed at "
                    f"{format_sim_time(removal.t_ms)}, yet incarnation {inc} restored it at "
                    f"{format_sim_time(connected.t_ms)}: a removed server stays removed",
                    (removal.seq, connected.seq),
                )
            )
    return found


def _violation(agent: str, server: Any, sentence: str, seqs: tuple[int, ...]) -> Violation:
    return Violation(NAME, agent, str(server), sentence, seqs)
