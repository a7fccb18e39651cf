"""Normalisation: the records and tables of either side in one comparable form.

Both sides become `Story`: records `(t, agent alias, type, payload)` and final tables
`alias -> table -> rows`, with
- times relative to the run's start: the real side's clock starts at `BASE_MS` (a far-future
  instant, `differential/src/harness.ts`), so epoch milliseconds and seconds near it are
  shifted back to the port's clock, which starts at 0;
- ids as ordinals: a string under a key named `id`, `...Id` or `..._id`, or shaped like a
  21-character nanoid, becomes `#1`, `#2`, ... in order of first appearance among the ids of
  its kind (the key's name), that order taken over the records sorted by time, then by their
  id-blind text, so that two sides which create the same ids in a different order within one
  instant still agree;
- null fields of a record left out (the SDK omits an `undefined` field where the port writes
  `None`);
- JSON text parsed wherever it is (a table cell, a frame's chunk body), so key order, spacing
  and the two languages' spelling of numbers (`1.0`, `1`) never count.

Which records are compared at all (the SDK's observability vocabulary, the agents' `story:*`
and `workload:*` notes, the harness's alarm snapshots) is decided here too: `SDK_EVENTS`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BASE_MS",
    "NOT_COMPARED",
    "COLUMNS_NOT_COMPARED",
    "ROWS_NOT_COMPARED",
    "SDK_EVENTS",
    "TABLES_NOT_COMPARED",
    "Story",
    "canonical",
    "normalise",
]

BASE_MS = 4_102_963_200_000
"""`Date.UTC(2100, 0, 7)`, the real side's virtual epoch (`differential/src/harness.ts`)."""
_BASE_S = BASE_MS // 1000
_MS_WINDOW = 10**11
_S_WINDOW = 10**8

SDK_EVENTS = frozenset(
    {
        "fiber:run:started",
        "fiber:run:completed",
        "fiber:run:failed",
        "fiber:run:interrupted",
        "fiber:recovery:detected",
        "fiber:recovery:attempt",
        "fiber:recovery:handled",
        "fiber:recovery:failed",
        "fiber:recovery:skipped",
        "schedule:create",
        "schedule:cancel",
        "schedule:execute",
        "schedule:retry",
        "schedule:error",
        "schedule:duplicate_warning",
        "queue:create",
        "queue:retry",
        "queue:error",
        "destroy",
        "connect",
        "disconnect",
        "alarm:memory_limit_reset",
        "agent_tool:recovery:begin",
        "agent_tool:recovery:row",
        "agent_tool:recovery:deadline",
        "agent_tool:recovery:complete",
        "agent_tool:recovery:failed",
        "agent_tool:recovery:reattach",
        "agent_tool:detached:delivery_failed",
        "agent_tool:detached:live_count_warning",
        "job:backlog_warning",
        "job:slow_dispatch",
    }
)
"""The observability events the SDK emits for what the port models (read from 0.21.0's
`index.ts`; the `job:*` pair from 0.32.0's lifecycle, sdk-0.32 section 9): the port's records
of these types are compared; its own records (platform, `keep_alive:*`,
`fiber:recovery:backoff`, ...) are not, since the SDK has no such event."""

NOT_COMPARED = {
    "state:update": "the port records state in `cf_agents_state`, compared as table rows",
    "rpc": "the SDK's `rpc` is a WebSocket call of a @callable method; plays make none",
    "rpc:error": "the SDK's `rpc:error` is a WebSocket call's; plays make none",
    **dict.fromkeys(
        (
            "message:request",
            "message:response",
            "message:error",
            "message:clear",
            "message:cancel",
            "tool:result",
            "tool:approval",
            "chat:recovery:detected",
            "chat:recovery:scheduled",
            "chat:recovery:attempt",
            "chat:recovery:completed",
            "chat:recovery:skipped",
            "chat:recovery:failed",
            "chat:recovery:exhausted",
        ),
        "the port's chat hosts record their turns and recoveries in a vocabulary of their own "
        "(`chat:recovery:*` with other fields, no `message:*`), so the SDK's chat events are not "
        "compared; what a chat turn did is, through its frames and rows",
    ),
}
"""Real-side event types left out of the comparison, each with the reason."""

TABLES_NOT_COMPARED = {
    "_cf_KV": "workerd's key-value table is internal to the platform, not readable through SQL",
}
"""Tables left out of the comparison, each with the reason."""

ROWS_NOT_COMPARED = {
    ("cf_agents_state", "agentsim_schema_extras"): "the digest of the port's own extra tables "
    "(`agents_core/schema.py`); the SDK has no such tables",
}
"""(table, id) rows left out of the comparison, each with the reason."""

COLUMNS_NOT_COMPARED = {
    ("cf_agents_jobs", "created_at"): "0.32.0's job rows take it from SQLite's `unixepoch()` "
    "(sdk-0.32 section 2.1, informational): in workerd that is the machine's clock, not the "
    "play's virtual one, so it differs from play to play",
}
"""(table, column) cells left out of the comparison, each with the reason."""

ROW_ID_SPACES = {
    "cf_ai_chat_stream_chunks": "stream_chunk_id",
    "cf_ai_chat_stream_metadata": "stream_row_id",
    "cf_ai_chat_agent_messages": "message_id",
}
"""Tables whose rows number every `id` in them (the row's, a stored message's) in a space of
their own: the SDK's chat agent writes rows and schedules the port's does not (it packs up to
ten stored chunks into one row and schedules a stream cleanup: divergence T11), and those must
not shift the numbers of the chat rows' ids."""

_OWN_PREFIXES = ("story:", "workload:", "harness:")
_CONSTANT_ID = re.compile(r"^cf_[a-z_]+$")
_ID_SUFFIX = re.compile(r"(_ids?|Ids?)$")
_NANOID = re.compile(r"^[A-Za-z0-9_-]{21}$")
_NANOID_IN_TEXT = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{21}(?![A-Za-z0-9_-])")
_METHOD_NAME = re.compile(r"^_?[a-z]+(?:[A-Z][a-z]+)+$")
"""A camelCase method name (a schedule's callback, `_cleanupStreamBuffers`): never an id, even
when it has a nanoid's length."""
_CHAT_RESPONSE = "cf_agent_use_chat_response"
"""A chat response frame: its `id` is the id of the request (turn) it answers."""
_PART_CHUNKS = ("text-", "reasoning-")
"""UI chunks whose `id` names a part of the answer: numbered in a space of their own, so an
extra schedule on one side cannot shift the numbers of the parts."""


def _looks_random(token: str) -> bool:
    """A nanoid mixes cases or digits; a 21-letter word of prose does not."""
    if _METHOD_NAME.match(token):
        return False
    return any(c.isdigit() for c in token) or (token.lower() != token and token.upper() != token)


@dataclass
class Story:
    """One side of one play, normalised."""

    records: list[tuple[int, str, str, Any]]
    """(t, agent alias, type, payload), sorted by time then text."""
    tables: dict[str, dict[str, list[Any]]]
    """alias -> table -> rows (each a dict), rows sorted by their text."""


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _is_id(key: str, value: str) -> bool:
    """An id to number: under an id-named key (but not a constant name such as
    `cf_state_row_id`), or shaped like a nanoid wherever it is."""
    if _NANOID.match(value) and not _METHOD_NAME.match(value):
        return True
    named = key == "id" or key.endswith("Id") or key.endswith("_id")
    return named and not _CONSTANT_ID.match(value)


def _shift_time(value: int, real: bool) -> int:
    if not real or isinstance(value, bool):
        return value
    if abs(value - BASE_MS) < _MS_WINDOW:
        return value - BASE_MS
    if abs(value - _BASE_S) < _S_WINDOW:
        return value - _BASE_S
    return value


def _parse_json_text(value: str) -> Any:
    """JSON text (an object, an array, or a quoted string holding either) parsed; anything else
    as it is. The port writes JSON with Python's spelling (`1.0`), the SDK with JavaScript's."""
    text = value.strip()
    quoted = len(text) >= 2 and text[0] == '"' and text[-1] == '"'
    if (text[:1] in "{[" and text[-1:] in "}]") or quoted:
        try:
            return json.loads(text)
        except ValueError:
            return value
    return value


class _Ids:
    """Ordinals per kind of id (the key's name without its `Id` / `_id`): a connection id the
    port never records cannot shift the numbers of the fibers after it."""

    def __init__(self) -> None:
        self.ordinals: dict[str, dict[str, str]] = {}

    def of(self, value: str, key: str) -> str:
        space = _ID_SUFFIX.sub("", key).replace("_", "").lower()
        ordinals = self.ordinals.setdefault(space, {})
        if value not in ordinals:
            ordinals[value] = f"#{len(ordinals) + 1}"
        return ordinals[value]


def _clean(
    value: Any, real: bool, ids: _Ids | None, key: str = "", id_space: str | None = None
) -> Any:
    """Times shifted, ids masked (ids None) or numbered, JSON text parsed (a table cell's, or a
    frame's chunk body: times and numbers inside it count as anywhere else)."""
    if isinstance(value, dict):
        kind = "message" if "role" in value and "parts" in value else value.get("type")
        return {
            k: _clean(v, real, ids, _space_of(k, kind, id_space), id_space)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_clean(v, real, ids, key, id_space) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return _shift_time(value, real)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return _shift_time(int(value), real)
    if isinstance(value, str):
        parsed = _parse_json_text(value)
        if parsed is not value:
            return _clean(parsed, real, ids, key, id_space)
        if _is_id(key, value):
            return "#?" if ids is None else ids.of(value, key)
        # An id quoted in a message (an error naming a fiber) is numbered in place.
        return _NANOID_IN_TEXT.sub(
            lambda m: (
                m.group(0)
                if not _looks_random(m.group(0))
                else ("#?" if ids is None else ids.of(m.group(0), "text"))
            ),
            value,
        )
    return value


def _space_of(key: str, kind: Any, id_space: str | None) -> str:
    """The key an `id` is numbered under, in an object of type `kind`: a UI part's, a chat
    message's, a chat response frame's (its request's), a table's own space, or its name."""
    if key != "id":
        return key
    if isinstance(kind, str) and kind.startswith(_PART_CHUNKS):
        return "part_id"
    if kind == "message":
        return "message_id"
    if kind == _CHAT_RESPONSE:
        return "request_id"
    return id_space or key


def _without_nulls(value: Any) -> Any:
    """A record's fields without the null ones: the SDK leaves a field out (`undefined`, which
    JSON drops) where the port writes `None`."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


CHECKER_NOTES = {
    "workload:run_input": (
        "the tools workload's note of each dispatch's input, written for a checker "
        "(`input_preview_derived`) on the port's side only; the preview itself is compared, in "
        "the started frames and the rows"
    ),
}
"""The port's workload records that only its checkers read, left out on both sides."""


def _kept(record_type: str, real: bool) -> bool:
    if record_type in CHECKER_NOTES:
        return False
    if record_type.startswith(_OWN_PREFIXES):
        return True
    if real:
        return record_type not in NOT_COMPARED
    return record_type in SDK_EVENTS


STREAM_CLEANUP_CALLBACK = "_cleanupStreamBuffers"
"""The SDK chat agent's scheduled reclaim of its stream buffers (divergence T11), a schedule the
port does not make: its ids are numbered apart, so that they shift no other schedule's."""


def _cleanup(value: Any) -> bool:
    return isinstance(value, dict) and value.get("callback") == STREAM_CLEANUP_CALLBACK


def normalise(
    records: list[dict[str, Any]], tables: dict[str, dict[str, list[dict[str, Any]]]], real: bool
) -> Story:
    """One side's raw records (`{t, agent, type, payload}`) and tables as a `Story`."""
    kept = [r for r in records if _kept(str(r["type"]), real)]
    blind = [
        (int(r["t"]), str(r["agent"]), str(r["type"]), _clean(r.get("payload"), real, None))
        for r in kept
    ]
    order = sorted(range(len(kept)), key=lambda i: (blind[i][0], canonical(blind[i][1:])))
    ids, cleanup_ids = _Ids(), _Ids()
    normal = []
    for i in order:
        r = kept[i]
        payload = r.get("payload")
        payload = _without_nulls(_clean(payload, real, cleanup_ids if _cleanup(payload) else ids))
        normal.append((int(r["t"]), str(r["agent"]), str(r["type"]), payload))
    out_tables: dict[str, dict[str, list[Any]]] = {}
    for alias in sorted(tables):
        out_tables[alias] = {}
        for name in sorted(tables[alias]):
            if name in TABLES_NOT_COMPARED:
                continue
            dropped = {column for table, column in COLUMNS_NOT_COMPARED if table == name}
            kept_rows = [
                {key: value for key, value in row.items() if key not in dropped}
                for row in tables[alias][name]
                if (name, row.get("id")) not in ROWS_NOT_COMPARED
            ]
            space = ROW_ID_SPACES.get(name)
            rows = [
                _clean(dict(row), real, cleanup_ids if _cleanup(row) else ids, id_space=space)
                for row in kept_rows
            ]
            out_tables[alias][name] = sorted(rows, key=canonical)
    return Story(normal, out_tables)
