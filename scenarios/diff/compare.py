"""Comparison: two normalised stories (`scenarios.diff.normalise.Story`) agree or differ, and a
difference may be allowed only by a row of `docs/divergences.md`.

Records are compared instant by instant, each instant as a multiset: workerd has two concurrent
paths within one instant (a request and a background fiber, say), so the order of records that
share a time says nothing. Tables are compared row set by row set, on the columns both sides
have; a table only one side has is a difference only when it holds rows (each runtime has
tables of features the other lacks). The first
differences are reported with both sides' records, so a reader sees what each side did.

`ALLOWED` is the allow-list: each entry names its divergence row (S1, K3, ...) and says which
field, column or record type it forgives. Nothing else may differ.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from scenarios.diff.normalise import STREAM_CLEANUP_CALLBACK, Story, canonical

__all__ = ["ALLOWED", "Allowed", "Outcome", "compare", "first_difference", "without_allowed"]


@dataclass(frozen=True)
class Allowed:
    """One forgiven difference and the divergence row that explains it."""

    row: str
    """The row's id in `docs/divergences.md` (S1, K3, ...)."""
    why: str
    table: str | None = None
    """This table: with neither `column` nor `row_id`, the whole table is not compared."""
    column: str | None = None
    """With `table`: this column is not compared."""
    row_id: str | None = None
    """With `table`: the row whose `id` is this is not compared."""
    where: tuple[tuple[str, Any], ...] = ()
    """Only rows or records whose values at these dotted paths are these (`data.status`): with
    `table` and `column`, the column of such rows; with `table` alone, such rows; with `event`
    and no `payload_field`, such records."""
    event: str | None = None
    payload_field: str | None = None
    """With `event`: this payload field is not compared (None: no record of that type is); a
    dotted path (`frame.event.chunkSequence`) names a field inside nested objects."""
    scenario: str | None = None
    """Only for this scenario (None: every scenario)."""
    cleanup_alarm: bool = False
    """With `event` and `payload_field`: only records whose `at` is when a stream cleanup the
    same agent, or a sub-agent below it, scheduled is due (`CLEANUP_CALLBACK`, `CLEANUP_DELAY_S`
    after its creation, in whole seconds, as the SDK schedules it): a sub-agent's alarm is its
    root's."""

    def applies(self, scenario: str) -> bool:
        return self.scenario is None or self.scenario == scenario


def _scoped(
    row: str, why: str, scenarios: tuple[str, ...], *parts: dict[str, Any]
) -> tuple[Allowed, ...]:
    """One rule per scenario and part (what each forgives: an event, a table, a column...)."""
    return tuple(
        Allowed(row=row, why=why, scenario=scenario, **part)
        for scenario in scenarios
        for part in parts
    )


CLEANUP_CALLBACK = STREAM_CLEANUP_CALLBACK
HOOK_THREW = re.compile(r"fiber .+ \(.+\) was not recovered: the workload's recovery is throw")
"""The message of the fibers workload's throwing recovery hook, on both sides (S1)."""
CLEANUP_DELAY_S = 600
"""The SDK schedules that reclaim ten minutes after a chat stream begins."""

ALLOWED: tuple[Allowed, ...] = (
    Allowed(
        row="S5",
        why="the port's agent-tool chunk events carry `chunkSequence`, the child's stored chunk "
        "index, for the client to dedupe by; the SDK's carry none",
        event="harness:frame",
        payload_field="frame.event.chunkSequence",
    ),
    *(
        Allowed(
            row="S8",
            why="the port finishes an awaited run through the delivery ledger too (a claim and a "
            "delivered mark on its row, in the give_up slot for a soft interrupt); the SDK calls "
            "its hook unguarded and leaves them null",
            table="cf_agent_tool_runs",
            column=column,
            where=(("detached", 0),),
        )
        for column in (
            "finish_claimed_at",
            "finish_delivered_at",
            "give_up_claimed_at",
            "give_up_delivered_at",
        )
    ),
    *_scoped(
        "A8",
        "a re-issue of an awaited run the recovery sweep is still giving up gives up again: the "
        "SDK calls the give_up hook for it and the sweep calls it a second time; the port "
        "delivers the slot once (its notes renumber the story log after it)",
        ("reissue-during-long-recovery-finishes-once",),
        {"event": "story:finish", "where": (("reason", "no-progress"),)},
        {"table": "story_log", "where": (("kind", "finish"), ("data.reason", "no-progress"))},
        {"table": "story_log", "column": "seq"},
    ),
    *_scoped(
        "S7",
        "after a budget give-up the parent's own teardown aborts the child: the SDK delivers "
        "that `aborted` a second time (frame, hooks, row), the port closes the finish slot "
        "silently and the row stays the give-up's",
        ("detached-budget-exceeded-gives-up-once", "detached-silent-child-sealed-no-progress"),
        {"event": "harness:frame", "where": (("frame.event.kind", "aborted"),)},
        {"event": "story:finish", "where": (("status", "aborted"),)},
        {"event": "story:on-finish", "where": (("status", "aborted"),)},
        {"table": "story_log", "where": (("data.status", "aborted"),)},
        *(
            {"table": "cf_agent_tool_runs", "column": column}
            for column in ("status", "error_message", "interrupted_reason", "child_still_running")
        ),
    ),
    *(
        Allowed(
            row="F9",
            why="workerd addresses a facet by a path-v2 routing identity (a hash of the root's "
            "Durable Object name, which differs per play); the port routes by path and leaves "
            "the registry's identity columns null",
            table="cf_agents_sub_agents",
            column=column,
        )
        for column in ("identity_version", "identity_name")
    ),
    Allowed(
        row="F3",
        why="a sub-agent that died on its own leaves its keepAlive leases on its root: on 0.32.0 "
        "the SDK keeps the root's `cf:keep-alive` host job for as long as the root lives, the "
        "port drops those leases (and the job with the last of them) within one interval",
        table="cf_agents_jobs",
        where=(("capability", "host"), ("fn", "keepAlive")),
    ),
    Allowed(
        row="K3",
        why="the SDK stamps schedule rows with SQLite's unixepoch() (the real clock); the port "
        "with the host clock",
        table="cf_agents_schedules",
        column="created_at",
    ),
    Allowed(
        row="S1",
        why="the fibers workload's recovery hook throws for a managed fiber (`recovery: throw`): "
        "the SDK settles the row `error`, the port keeps it `interrupted`; the hook's message, "
        "which both record, is compared",
        table="cf_agents_fibers",
        column="status",
        where=(("error_message", HOOK_THREW),),
    ),
    *_scoped(
        "S1",
        "the recovery hook throws for a managed fiber: the SDK settles it `error`, the port keeps "
        "it `interrupted` for the duplicate delivery to resolve, so the receipts, the duplicate's "
        "reply and the ledger row tell that story on each side",
        ("managed-hook-throws-then-duplicate-resolves",),
        {"event": "story:receipt", "payload_field": "status"},
        {"event": "story:reply"},
        {"event": "story:resolved"},
        {"table": "cf_agents_fibers", "column": "status"},
        {"table": "cf_agents_fibers", "column": "error_message"},
        {"table": "cf_agents_fibers", "column": "completed_at"},
        {"table": "story_log"},
        {"event": "harness:reply"},
    ),
    *(
        Allowed(
            row="T11",
            why="the SDK reclaims a chat stream's stored chunks ten minutes after it starts "
            "(`_cleanupStreamBuffers`, a schedule of the chat agent); the port keeps them",
            event=event,
            where=(("callback", CLEANUP_CALLBACK),),
        )
        for event in ("schedule:create", "schedule:execute")
    ),
    Allowed(
        row="T11",
        why="the SDK's stream cleanup schedule (`_cleanupStreamBuffers`) has a row",
        table="cf_agents_schedules",
        where=(("callback", CLEANUP_CALLBACK),),
    ),
    Allowed(
        row="T11",
        why="the SDK packs up to ten stored chunks of a chat stream into one row (and keeps them "
        "in memory until then); the port stores each chunk in a row of its own as it broadcasts "
        "it",
        table="cf_ai_chat_stream_chunks",
    ),
    Allowed(
        row="T11",
        why="the SDK's stream cleanup, due ten minutes after a chat stream began, is the "
        "agent's armed alarm once nothing else is due (a sub-agent's, its root's alarm)",
        event="harness:alarm",
        payload_field="at",
        cleanup_alarm=True,
    ),
    *(
        Allowed(
            row="T13",
            why="the SDK's notify reply turn, run inline in the serialized delivery slot, takes "
            "the slot's queue key `detached-delivery:<uuid>` as its request id, so its fiber is "
            "named after it; the port's turn has a request id of its own",
            event=event,
            payload_field="fiberName",
            scenario="chat-host-narrates-a-detached-finish",
        )
        for event in ("fiber:run:started", "fiber:run:completed")
    ),
    Allowed(
        row="T12",
        why="the SDK stamps chat messages with SQLite's current_timestamp (the real clock, as "
        "text); the port with the host clock",
        table="cf_ai_chat_agent_messages",
        column="created_at",
    ),
)


@dataclass
class Outcome:
    """The verdict of one comparison."""

    agree: bool
    differences: list[str] = field(default_factory=list)
    """Sentences, first differences first."""
    allowed: list[str] = field(default_factory=list)
    """Rows of the allow-list that forgave something in this comparison."""


def _without(payload: Any, path: list[str]) -> Any:
    """`payload` without the field at `path` (a copy; unchanged where the path is absent)."""
    if not isinstance(payload, dict) or path[0] not in payload:
        return payload
    if len(path) == 1:
        return {k: v for k, v in payload.items() if k != path[0]}
    return {**payload, path[0]: _without(payload[path[0]], path[1:])}


def _at(value: Any, path: str) -> Any:
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _matches(value: Any, where: tuple[tuple[str, Any], ...]) -> bool:
    return all(_is(_at(value, path), wanted) for path, wanted in where)


def _is(found: Any, wanted: Any) -> bool:
    """A value is the one wanted, or a text the wanted pattern matches whole."""
    if isinstance(wanted, re.Pattern):
        return isinstance(found, str) and wanted.fullmatch(found) is not None
    return bool(found == wanted)


def _strip_row(row: dict[str, Any], name: str, rules: Sequence[Allowed]) -> dict[str, Any]:
    columns = {r.column for r in rules if r.table == name and r.column and _matches(row, r.where)}
    return {k: v for k, v in row.items() if k not in columns}


def _row_dropped(row: dict[str, Any], name: str, rules: Sequence[Allowed]) -> bool:
    return any(
        r.table == name and not r.column and r.where and _matches(row, r.where) for r in rules
    ) or any(r.table == name and r.row_id is not None and row.get("id") == r.row_id for r in rules)


def _record_dropped(kind: str, payload: Any, rules: Sequence[Allowed]) -> bool:
    return any(
        r.event == kind and not r.payload_field and _matches(payload, r.where) for r in rules
    )


def _cleanups_due(story: Story) -> set[tuple[str, Any]]:
    """(agent, ms) of every stream cleanup an agent of `story` scheduled, when it is due, for
    that agent and each agent above it (`parent/child`: its root's alarm carries it)."""
    due: set[tuple[str, Any]] = set()
    for t, agent, kind, payload in story.records:
        if not (
            kind == "schedule:create"
            and isinstance(payload, dict)
            and payload.get("callback") == CLEANUP_CALLBACK
        ):
            continue
        at = (t // 1000 + CLEANUP_DELAY_S) * 1000
        hops = agent.split("/")
        due.update(("/".join(hops[:n]), at) for n in range(1, len(hops) + 1))
    return due


def _strip(story: Story, rules: Sequence[Allowed]) -> Story:
    records = []
    cleanups = _cleanups_due(story) if any(r.cleanup_alarm for r in rules) else set()
    for t, agent, kind, payload in story.records:
        if _record_dropped(kind, payload, rules):
            continue
        for rule in rules:
            if rule.event == kind and rule.payload_field and _matches(payload, rule.where):
                if rule.cleanup_alarm and (agent, _at(payload, "at")) not in cleanups:
                    continue
                payload = _without(payload, rule.payload_field.split("."))
        records.append((t, agent, kind, payload))
    tables: dict[str, dict[str, list[Any]]] = {}
    for alias, by_name in story.tables.items():
        tables[alias] = {}
        for name, rows in by_name.items():
            if any(
                r.table == name and not r.column and not r.row_id and not r.where for r in rules
            ):
                continue
            stripped = [
                _strip_row(row, name, rules) for row in rows if not _row_dropped(row, name, rules)
            ]
            tables[alias][name] = sorted(stripped, key=canonical)
    return replace(story, records=records, tables=tables)


def without_allowed(story: Story, scenario: str, allowed: Sequence[Allowed] = ALLOWED) -> Story:
    """`story` without what the allow-list forgives in `scenario` (a real-clock column differs
    between two plays of the real side as well)."""
    return _strip(story, [rule for rule in allowed if rule.applies(scenario)])


def _show(record: tuple[int, str, str, Any]) -> str:
    t, agent, kind, payload = record
    return f"{agent} {kind} {canonical(payload)}"


def _clock(t: int) -> str:
    seconds, ms = divmod(t, 1000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}.{ms:03d}"


def _record_differences(left: Story, right: Story, names: tuple[str, str], limit: int) -> list[str]:
    by_t: dict[int, tuple[Counter[str], Counter[str]]] = {}
    shown: dict[str, str] = {}
    for side, story in enumerate((left, right)):
        for record in story.records:
            key = canonical(record[1:])
            shown[key] = _show(record)
            counters = by_t.setdefault(record[0], (Counter(), Counter()))
            counters[side][key] += 1
    out = []
    for t in sorted(by_t):
        a, b = by_t[t]
        if a == b:
            continue
        only_a = sorted((a - b).elements())
        only_b = sorted((b - a).elements())
        lines = [f"at {_clock(t)}:"]
        lines += [f"      {names[0]} only: {shown[k]}" for k in only_a[:6]]
        lines += [f"      {names[1]} only: {shown[k]}" for k in only_b[:6]]
        hidden = max(0, len(only_a) - 6) + max(0, len(only_b) - 6)
        if hidden:
            lines.append(f"      ... and {hidden} more at this instant")
        out.append("\n".join(lines))
        if len(out) >= limit:
            break
    return out


def _table_differences(left: Story, right: Story, names: tuple[str, str]) -> list[str]:
    out = []
    for alias in sorted(set(left.tables) | set(right.tables)):
        a_tables = left.tables.get(alias, {})
        b_tables = right.tables.get(alias, {})
        for name in sorted(set(a_tables) | set(b_tables)):
            if name not in a_tables or name not in b_tables:
                side, rows = (0, a_tables[name]) if name in a_tables else (1, b_tables[name])
                if rows:  # a table of one runtime alone matters only when it holds rows
                    out.append(
                        f"table {alias}.{name}: only {names[side]} has it ({len(rows)} rows)"
                    )
                continue
            a_rows, b_rows = a_tables[name], b_tables[name]
            columns = set().union(*a_rows) if a_rows else set()
            other = set().union(*b_rows) if b_rows else set()
            shared = columns & other if a_rows and b_rows else columns | other
            a_cut = sorted(({k: r.get(k) for k in shared} for r in a_rows), key=canonical)
            b_cut = sorted(({k: r.get(k) for k in shared} for r in b_rows), key=canonical)
            if a_cut == b_cut:
                continue
            a_keys = Counter(canonical(r) for r in a_cut)
            b_keys = Counter(canonical(r) for r in b_cut)
            only_a = sorted((a_keys - b_keys).elements())[:4]
            only_b = sorted((b_keys - a_keys).elements())[:4]
            lines = [f"table {alias}.{name}:"]
            lines += [f"      {names[0]} only: {row}" for row in only_a]
            lines += [f"      {names[1]} only: {row}" for row in only_b]
            out.append("\n".join(lines))
    return out


def first_difference(
    left: Story, right: Story, names: tuple[str, str] = ("agentsim", "workerd"), limit: int = 3
) -> list[str]:
    """Up to `limit` sentences naming where two stories differ (records, then tables)."""
    found = _record_differences(left, right, names, limit)
    if len(found) < limit:
        found += _table_differences(left, right, names)[: limit - len(found)]
    return found


def compare(
    python: Story,
    real: Story,
    scenario: str,
    allowed: Sequence[Allowed] = ALLOWED,
    limit: int = 3,
) -> Outcome:
    """Whether the port's story and the real SDK's agree, once the allow-list has spoken."""
    rules = [rule for rule in allowed if rule.applies(scenario)]
    raw = first_difference(python, real, limit=limit)
    if not raw:
        return Outcome(True)
    stripped = first_difference(_strip(python, rules), _strip(real, rules), limit=limit)
    if stripped:
        return Outcome(False, stripped)
    # A rule forgave something when the stories differ without it (leave one out).
    forgiven = [
        rule.row
        for rule in rules
        if first_difference(
            _strip(python, [r for r in rules if r is not rule]),
            _strip(real, [r for r in rules if r is not rule]),
            limit=1,
        )
    ]
    return Outcome(True, [], sorted(set(forgiven)))
