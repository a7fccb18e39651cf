"""Invariants of storage itself, read from the journal of committed turns: `turns_atomic` (the
writes of one turn all land or none do), and the journal readers other checkers share.

`CheckContext.journals[path]` holds, for each agent's current storage, the writes
`(statement, params)` of every committed turn in commit order (`FaultyStorage.journal`). It is a
record of what committed, not of when: a journal entry carries no time and no incarnation. A
storage wiped by `destroy` starts a new journal, so the journal always describes the storage
the context holds.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.sqlite import KV_DDL, KV_TABLE, Write, select_in_key_order

__all__ = [
    "KvWrite",
    "RowChange",
    "inserted_rows",
    "kv_writes",
    "replay_journal",
    "RowTimeline",
    "row_changes",
    "timed_row_changes",
    "turns_atomic",
]

_INSERT = re.compile(
    r"^\s*(?:INSERT(?:\s+OR\s+\w+)?|REPLACE)\s+INTO\s+\"?(\w+)\"?\s*\(([^)]*)\)\s*VALUES\s*"
    r"\((.*?)\)\s*(?:ON\s+CONFLICT\b|;?\s*$)",
    re.IGNORECASE | re.DOTALL,
)
_KV_PUT = re.compile(rf"^\s*INSERT\s+INTO\s+{KV_TABLE}\s*\(key,\s*value\)", re.IGNORECASE)
_KV_DELETE = re.compile(rf"^\s*DELETE\s+FROM\s+{KV_TABLE}\s+WHERE\s+key\s*=\s*\?", re.IGNORECASE)
_KV_CLEAR = re.compile(rf"^\s*DELETE\s+FROM\s+{KV_TABLE}\s*$", re.IGNORECASE)


def replay_journal(turns: Sequence[Sequence[Write]]) -> tuple[sqlite3.Connection, str | None]:
    """A fresh in-memory database with `KV_DDL` and every turn replayed in order, and the first
    replay error as a sentence (None when every statement ran)."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.row_factory = sqlite3.Row
    db.execute(KV_DDL)
    for number, turn in enumerate(turns, start=1):
        for statement, params in turn:
            try:
                db.execute(statement, tuple(params))
            except sqlite3.Error as exc:
                short = " ".join(statement.split())[:80]
                return db, f"committed turn {number} does not replay ({exc}: {short})"
    return db, None


def _snapshot(db: sqlite3.Connection) -> dict[str, list[dict[str, Any]]]:
    names = [
        row["name"]
        for row in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        )
    ]
    return {
        name: [dict(row) for row in db.execute(select_in_key_order(db, name))] for name in names
    }


def _first_difference(
    committed: Mapping[str, Sequence[Mapping[str, Any]]],
    replayed: Mapping[str, Sequence[Mapping[str, Any]]],
) -> str | None:
    for table in sorted(set(committed) | set(replayed)):
        if table not in replayed:
            return f"its table {table} exists, but no committed turn created it"
        if table not in committed:
            return f"its committed turns create table {table}, which it does not have"
        have, want = list(committed[table]), list(replayed[table])
        for index, (row, expected) in enumerate(zip(have, want, strict=False)):
            if dict(row) != dict(expected):
                return (
                    f"row {index + 1} of its table {table} is {_show(row)}, but its committed "
                    f"turns give {_show(expected)}"
                )
        if len(have) != len(want):
            extra = have[len(want)] if len(have) > len(want) else want[len(have)]
            which = "has" if len(have) > len(want) else "lacks"
            return (
                f"its table {table} has {len(have)} row(s) where its committed turns give "
                f"{len(want)}: it {which} {_show(extra)}"
            )
    return None


def _show(row: Mapping[str, Any], limit: int = 160) -> str:
    text = json.dumps(dict(row), sort_keys=True, default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@invariant("turns_atomic")
def turns_atomic(context: CheckContext) -> list[Violation]:
    """Platform rule "storage survives, memory does not" — the writes of one turn all land or
    none do: a crash rolls back its own turn and never an earlier one.

    For every agent with a journal in the context, replaying its committed turns (each turn's
    writes in order, the turns in commit order) into an empty in-memory SQLite that starts with
    the KV table (`KV_DDL`) gives exactly its final committed storage: the same tables, and in
    each table the same rows in rowid order. A statement that does not replay, a table or row
    that is only on one side, or a row that differs is a violation naming the first difference.
    A partial turn that landed, a committed turn that was lost, or a write made outside any turn
    all show up here.
    """
    out = []
    for agent in sorted(context.journals):
        if agent not in context.storage:
            continue
        turns = context.journals[agent]
        db, failed = replay_journal(turns)
        try:
            difference = failed or _first_difference(context.storage[agent], _snapshot(db))
        finally:
            db.close()
        if difference is None:
            continue
        out.append(
            Violation(
                "turns_atomic",
                agent,
                "",
                f"the committed storage of {agent} is not what its {len(turns)} committed turns "
                f"give: {difference}",
            )
        )
    return out


# -- readers of the journal, for other checkers ---------------------------------------------------
def inserted_rows(turns: Sequence[Sequence[Write]], table: str) -> Iterator[dict[str, Any]]:
    """Every row the journal inserts into `table` (INSERT with a column list and VALUES of `?`
    placeholders or plain literals), as {column: value}, in commit order."""
    for turn in turns:
        for statement, params in turn:
            match = _INSERT.match(statement)
            if match is None or match.group(1).lower() != table.lower():
                continue
            columns = [c.strip().strip('"') for c in match.group(2).split(",")]
            values = [v.strip() for v in match.group(3).split(",")]
            if len(columns) != len(values):
                continue
            row, given = {}, iter(params)
            for column, value in zip(columns, values, strict=True):
                row[column] = next(given, None) if value == "?" else _literal(value)
            yield row


def _literal(text: str) -> Any:
    if text.upper() == "NULL":
        return None
    try:
        return int(text)
    except ValueError:
        return text.strip("'")


@dataclass(frozen=True)
class KvWrite:
    """One committed write of a KV key: its new value (None for a delete), and its place in the
    journal (turn number, from 1)."""

    key: str
    value: Any
    turn: int


def kv_writes(turns: Sequence[Sequence[Write]], prefix: str) -> Iterator[KvWrite]:
    """The committed puts and deletes of KV keys that start with `prefix`, in commit order. A
    delete of the whole table (a destroy's wipe) deletes every key written before it."""
    known: dict[str, None] = {}
    for number, turn in enumerate(turns, start=1):
        for statement, params in turn:
            if _KV_PUT.match(statement) and len(params) >= 2 and str(params[0]).startswith(prefix):
                try:
                    value = json.loads(params[1])
                except (TypeError, ValueError):
                    value = params[1]
                known[str(params[0])] = None
                yield KvWrite(str(params[0]), value, number)
            elif _KV_DELETE.match(statement) and params and str(params[0]).startswith(prefix):
                known.pop(str(params[0]), None)
                yield KvWrite(str(params[0]), None, number)
            elif _KV_CLEAR.match(statement) and not params:
                for key in list(known):
                    yield KvWrite(key, None, number)
                known.clear()


@dataclass(frozen=True)
class RowChange:
    """One committed write that changed one row of a table: the row's key, the write's place in
    the journal (turn number, from 1) and the row before and after it (None: absent)."""

    key: Any
    turn: int
    statement: str
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None

    def value(self, column: str, when: str = "after") -> Any:
        row = self.before if when == "before" else self.after
        return None if row is None else row.get(column)


def timed_row_changes(
    context: CheckContext, path: str, table: str, key: str | tuple[str, ...]
) -> Iterator[tuple[int, RowChange]]:
    """`row_changes` of `path`'s journal, each with the instant (sim ms) its turn committed, as
    lazily; none when the journal's instants are not known turn by turn."""
    journal = context.journals.get(path, ())
    instants = context.journal_ms.get(path, ())
    if len(instants) != len(journal):
        return
    for change in row_changes(journal, table, key):
        yield instants[change.turn - 1], change


class RowTimeline:
    """One table of an agent as committed turn by turn (`timed_row_changes`), read forward in
    time: ask `at` with instants that never decrease."""

    def __init__(
        self, context: CheckContext, path: str, table: str, key: str | tuple[str, ...]
    ) -> None:
        self.changes = [
            (when, change.key, change.after)
            for when, change in timed_row_changes(context, path, table, key)
        ]
        self._applied = 0
        self._rows: dict[Any, Mapping[str, Any]] = {}

    def at(self, t_ms: int) -> tuple[dict[Any, Mapping[str, Any]], list[tuple[Any, Any]]]:
        """The rows committed before instant `t_ms` (key -> row; the timeline's own, not to be
        changed), and the changes committed in it, in order: (key, row after, None for gone)."""
        changes = self.changes
        while self._applied < len(changes) and changes[self._applied][0] < t_ms:
            _when, key, after = changes[self._applied]
            if after is None:
                self._rows.pop(key, None)
            else:
                self._rows[key] = after
            self._applied += 1
        now = []
        for when, key, after in changes[self._applied :]:
            if when != t_ms:
                break
            now.append((key, after))
        return self._rows, now


def row_changes(
    turns: Sequence[Sequence[Write]], table: str, key: str | tuple[str, ...]
) -> Iterator[RowChange]:
    """Every change the journal's committed writes make to the rows of `table` (keyed by column
    `key`, or by a tuple of the columns a tuple names), in commit order: the journal replayed
    statement by statement, the table read again after each write that names it. Stops at a
    statement that does not replay (`turns_atomic` reports that)."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.row_factory = sqlite3.Row
    db.execute(KV_DDL)
    wanted = table.lower()

    def rows() -> dict[Any, dict[str, Any]]:
        try:
            found = db.execute(select_in_key_order(db, table))
        except sqlite3.Error:
            return {}
        if isinstance(key, tuple):
            return {tuple(row[k] for k in key): dict(row) for row in found}
        return {row[key]: dict(row) for row in found}

    current: dict[Any, dict[str, Any]] = {}
    try:
        for number, turn in enumerate(turns, start=1):
            for statement, params in turn:
                try:
                    db.execute(statement, tuple(params))
                except sqlite3.Error:
                    return
                if wanted not in statement.lower():
                    continue
                after = rows()
                for name in sorted({*current, *after}, key=repr):
                    old, new = current.get(name), after.get(name)
                    if old != new:
                        yield RowChange(name, number, statement, old, new)
                current = after
    finally:
        db.close()
