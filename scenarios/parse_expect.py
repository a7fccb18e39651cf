"""Validation of the `expect` list of a scenario document into expectation dataclasses.

Three kinds: a trace matcher (`event:` with optional `agent`, `incarnation`, `fields`, `count`,
`between`), a SQL `query:` on an agent's final storage with the rows it must return, and an
agent's persisted `state:`. Agent aliases are checked against the scenario's agents.
"""

from __future__ import annotations

from typing import Any

from scenarios.errors import InvalidScenario
from scenarios.fields import Fields, line_of, plain, show
from scenarios.parse_steps import StepContext, known_agent
from scenarios.schema import (
    EXPECTATIONS,
    AgentSpec,
    Count,
    EventExpectation,
    Expectation,
    QueryExpectation,
    StateExpectation,
)
from sim.trace import RESERVED_KEYS

__all__ = ["COUNT_KEYS", "EVENT_KEYS", "parse_expectations"]

EVENT_KEYS = ("event", "agent", "incarnation", "fields", "count", "between")
COUNT_KEYS = ("exactly", "at_least", "at_most", "never")


def parse_expectations(top: Fields, agents: dict[str, AgentSpec]) -> tuple[Expectation, ...]:
    items = top.sequence("expect", [])
    lines = getattr(items, "lines", [])
    context = StepContext(top.path, agents)
    out: list[Expectation] = []
    for index, item in enumerate(items, start=1):
        line = lines[index - 1] if index <= len(lines) else top.line
        out.append(_expectation(context, index, item, line))
    return tuple(out)


def _expectation(context: StepContext, index: int, item: Any, line: int) -> Expectation:
    allowed = (
        "each expectation is a trace matcher {event: name, ...} or one of "
        "{query: {...}}, {state: {...}}"
    )
    where = f"expect {index}"
    if not isinstance(item, dict):
        raise InvalidScenario(context.path, line, where, f"{show(item)} is not a mapping", allowed)
    if "event" in item:
        return _event(
            context,
            index,
            Fields(
                context.path, f"{where} (event)", item, line, keys=EVENT_KEYS, required=("event",)
            ),
        )
    keys = list(item)
    if len(keys) != 1 or keys[0] not in EXPECTATIONS:
        raise InvalidScenario(context.path, line, where, f"keys {show(keys)}", allowed)
    kind = keys[0]
    value_line = getattr(item, "lines", {}).get(kind, line)
    where = f"{where} ({kind})"
    if kind == "query":
        fields = Fields(
            context.path,
            where,
            item[kind],
            value_line,
            name=kind,
            keys=("agent", "sql", "params", "rows"),
            required=("agent", "sql", "rows"),
        )
        rows = fields.sequence("rows")
        if any(
            not isinstance(row, dict) or not all(isinstance(k, str) for k in row) for row in rows
        ):
            fields.bad("rows", "expected a list of mappings, column name to value")
        return QueryExpectation(
            index=index,
            line=line,
            agent=known_agent(context, fields).alias,
            sql=fields.text("sql"),
            params=tuple(plain(fields.sequence("params", []))),
            rows=tuple(plain(rows)),
        )
    fields = Fields(
        context.path,
        where,
        item[kind],
        value_line,
        keys=("agent", "equals"),
        required=("agent", "equals"),
        name=kind,
    )
    return StateExpectation(
        index=index,
        line=line,
        agent=known_agent(context, fields).alias,
        equals=plain(fields.raw("equals")),
    )


def _event(context: StepContext, index: int, fields: Fields) -> EventExpectation:
    agent = known_agent(context, fields).alias if "agent" in fields else None
    matched = plain(fields.mapping("fields", {}))
    for key in matched:
        if key in RESERVED_KEYS:
            fields.fail(
                "fields",
                f"fields: {key!r} is not a field of the record",
                "use agent: and incarnation: to match where a record is from",
            )
    between = None
    if "between" in fields:
        pair = fields.sequence("between")
        if len(pair) != 2:
            fields.bad("between", "expected [from, to]: two absolute sim times, e.g. [70s, 140s]")
        low, high = (fields.duration_value("between", value) for value in pair)
        if low > high:
            fields.bad("between", "expected from <= to")
        between = (low, high)
    return EventExpectation(
        index=index,
        line=fields.line,
        event=fields.text("event"),
        agent=agent,
        incarnation=fields.whole("incarnation", None, minimum=1),
        fields=matched,
        count=_count(fields),
        between_ms=between,
    )


def _count(fields: Fields) -> Count:
    if "count" not in fields:
        return Count()
    shapes = "give {exactly: N}, {never: true}, or at_least: and/or at_most:"
    if not isinstance(fields.raw("count"), dict):
        fields.bad("count", shapes)
    count = Fields(
        fields.path,
        fields.where,
        fields.raw("count"),
        line_of(fields.raw("count"), fields.line_of("count")),
        keys=COUNT_KEYS,
        name="count",
    )
    given = [key for key in COUNT_KEYS if key in count]
    if not given:
        fields.bad("count", shapes)
    if "never" in count:
        if count.flag("never") is not True or len(given) > 1:
            fields.bad("count", shapes)
        return Count(0, 0)
    if "exactly" in count:
        if len(given) > 1:
            fields.bad("count", shapes)
        exactly = count.whole("exactly")
        return Count(exactly, exactly)
    low = count.whole("at_least", 0)
    high = count.whole("at_most", None)
    if high is not None and low > high:
        fields.bad("count", "expected at_least <= at_most")
    return Count(low, high)
