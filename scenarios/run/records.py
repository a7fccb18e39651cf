"""Trace records and values as expectations compare them: JSON equality, containment (the
subset match of `contains:`), event-name patterns, and the short rendering of records that
failure sentences quote."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scenarios.language.fields import show
from sim import TraceRecord, format_sim_time
from sim.trace import holds_sim_time

__all__ = [
    "MISSING",
    "contains",
    "expected_text",
    "fields_match",
    "json_equal",
    "name_matches",
    "records_text",
]

MISSING: Any = object()
"""A field the record does not have (never equal to any value)."""


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: a bool never equals a number; lists and tuples are arrays."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping | list | tuple) or isinstance(b, Mapping | list | tuple):
        return False
    return bool(a == b)


def contains(actual: Any, wanted: Any) -> bool:
    """Whether `actual` contains `wanted`: a mapping holds at least the wanted keys, each
    value containing the wanted one (at any depth); a list holds as many items as the wanted
    list, each containing the wanted item at its place; anything else is `json_equal`."""
    if isinstance(wanted, Mapping):
        return isinstance(actual, Mapping) and all(
            key in actual and contains(actual[key], value) for key, value in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(wanted)
            and all(contains(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return json_equal(actual, wanted)


def name_matches(name: str, pattern: str) -> bool:
    """An event name against a pattern: equal, or (trailing `*`) starting with the rest."""
    return name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern


def fields_match(
    fields: Mapping[str, Any],
    wanted: Mapping[str, Any],
    contained: Mapping[str, Any] | None = None,
) -> bool:
    """Every wanted key is present in `fields` with a JSON-equal value, and every `contained`
    key with a value that `contains` the one given."""
    if not all(json_equal(fields.get(key, MISSING), value) for key, value in wanted.items()):
        return False
    return all(key in fields and contains(fields[key], v) for key, v in (contained or {}).items())


def _value(event: str, key: str, value: Any) -> str:
    return format_sim_time(value) if holds_sim_time(event, key, value) else show(value)


def expected_text(event: str, key: str, value: Any) -> str:
    """A field value an expectation asks for; an alarm time in ms also shows the form records
    are shown in (`at=00:03:10.000 (190000 ms)`), so that the two compare at a glance."""
    if holds_sim_time(event, key, value):
        return f"{format_sim_time(value)} ({value} ms)"
    return show(value)


def records_text(records: Sequence[TraceRecord], limit: int = 4) -> str:
    """The first `limit` records, each `event agent#inc at time (fields)`, and how many more."""
    shown = []
    for record in records[:limit]:
        fields = ", ".join(
            f"{key}={_value(record.event, key, value)}" for key, value in record.fields.items()
        )
        where = f"{record.agent}#{record.inc}" if record.agent else "platform"
        shown.append(f"{record.event} {where} at {format_sim_time(record.t_ms)} ({fields})")
    more = f" and {len(records) - limit} more" if len(records) > limit else ""
    return "; ".join(shown) + more
