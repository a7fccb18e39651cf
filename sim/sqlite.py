"""Per-agent SQLite that survives incarnations, commits by turn and injects faults.

Injector contract (what it may do, what it preserves):
- may make one statement raise `StorageError` (the statement does not run; the turn goes on);
- may kill the incarnation between two statements of a turn: the turn's earlier writes roll
  back, the statement does not run, and `IncarnationKilled` is thrown into the dying turn;
- may kill the incarnation at the instant after a turn commits (`crash-after-commit`): the
  turn's writes stay, and nothing else runs in that incarnation;
- preserves every committed turn: no fault touches a turn that has ended.

A turn is the storage use of one step of agent code (see `sim.kernel`). Outside a step (a test
reading state) statements run in autocommit mode and no fault is injected. Every committed turn's
writes are kept, in order, in `journal`: replaying it into an empty database must give the
committed state (the `turns_atomic` invariant checks exactly that).

Matching is linear-time: a fault's `match` is an RE2 pattern (`compile_match`), so no pattern
can make a statement's match backtrack for ever. The injector only matches: the statement
shapes a hunt aims its faults at, and the groups it spreads them over, are the hunt's
(`scenarios.hunt.statement_shapes`). Reads from outside a run's code (a scenario's `query`
expectation) go through `read`, which an SQLite authorizer keeps read-only: no write,
no ATTACH, no PRAGMA that changes anything.

Idle agents go cold: when an agent's incarnation ends the platform parks its storage (`park`),
and a storage parked long enough ago keeps its database as bytes instead of an open connection
(`sim.cold_storage`); its next use restores it, rows and values exactly as they were.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import re2

from sim import cold_storage
from sim.kernel import IncarnationKilled, Kernel

__all__ = [
    "FAULT_KINDS",
    "MATCH_MAX_LENGTH",
    "FaultyStorage",
    "ReadOnlyViolation",
    "StorageError",
    "StorageFault",
    "compile_match",
    "select_in_key_order",
]

KV_TABLE = "_cf_KV"
KV_DDL = f"CREATE TABLE IF NOT EXISTS {KV_TABLE} (key TEXT PRIMARY KEY, value TEXT)"
FAULT_KINDS = ("error", "crash", "crash-after-commit")
"""What an armed storage fault does: the statement fails; the process dies just before it; the
process dies at the instant after the statement's turn commits."""

Write = tuple[str, tuple[Any, ...]]
"""One statement that changed (or may have changed) the database, with its parameters."""

_READS = ("SELECT", "PRAGMA", "EXPLAIN")

MATCH_MAX_LENGTH = 1000
"""The longest `match` pattern accepted (a statement shape is a few dozen characters)."""
_MATCH_MAX_MEM = 8 << 20
"""RE2's memory for one compiled pattern: a pattern that needs more is refused, not run."""


@functools.lru_cache(maxsize=512)
def compile_match(pattern: str) -> Any:
    """`pattern` compiled by RE2, whose matching time is linear in the statement: no pattern
    hangs a run. RE2 has no backreferences and no lookaround (`(?=...)`, `\\1`); a pattern it
    cannot compile, or one longer than `MATCH_MAX_LENGTH`, is a ValueError saying why."""
    if not isinstance(pattern, str):
        raise ValueError(f"a match pattern is a string, got {pattern!r}")
    if len(pattern) > MATCH_MAX_LENGTH:
        raise ValueError(
            f"the pattern is {len(pattern)} characters long; at most {MATCH_MAX_LENGTH}"
        )
    options = re2.Options()
    options.log_errors = False  # RE2 would print its own copy of the error on stderr
    options.max_mem = _MATCH_MAX_MEM
    try:
        return re2.compile(pattern, options=options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(
            f"{reason} (match patterns are RE2: no backreferences, no lookaround)"
        ) from None


def is_write(statement: str) -> bool:
    """Whether a statement may change the database (anything but a plain read)."""
    found = _WRITES.get(statement)
    if found is None:
        found = not statement.lstrip()[:8].upper().startswith(_READS)
        if len(_WRITES) >= _WRITES_MAX:
            _WRITES.clear()
        _WRITES[statement] = found
    return found


_WRITES: dict[str, bool] = {}
"""`is_write` by statement text: agent code runs the same few dozen statements over and over."""
_WRITES_MAX = 4096


class StorageError(Exception):
    """A statement failed in storage (injected, or SQLite's own error with the statement named)."""


class ReadOnlyViolation(StorageError):
    """A read-only query (`FaultyStorage.read`) tried to write, attach or change a setting."""


_SQLITE_READ_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
_READ_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo"}
    | {"foreign_key_list"}
)
"""PRAGMAs that only describe the schema (`PRAGMA table_info(counts)`)."""


def _read_only(action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
    if action in _SQLITE_READ_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _READ_PRAGMAS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master":
        # What a table-valued function (json_each) asks for as it is set up; a statement of
        # the query's own that changes the schema table is refused by SQLite (and query_only).
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


@dataclass
class StorageFault:
    """One armed fault: the `skip`+1-th statement matching `match` (a regex; None = any) fails.

    kind `error`: that statement raises `StorageError`. kind `crash`: the process dies just before
    that statement, i.e. between it and the turn's earlier statements. kind `crash-after-commit`:
    the statement runs, its turn commits, and the process dies at that instant. `count` faults in
    a row."""

    kind: Literal["error", "crash", "crash-after-commit"]
    match: str | None = None
    skip: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(
                f"storage fault kind must be one of {list(FAULT_KINDS)}, got {self.kind!r}"
            )
        if self.skip < 0 or self.count < 1:
            raise ValueError(f"storage fault needs skip >= 0 and count >= 1, got {self}")
        if self.match is not None:
            compile_match(self.match)

    def matches(self, statement: str) -> bool:
        """Whether `statement`, its whitespace collapsed to single spaces, matches (RE2's
        search: linear in the statement, whatever the pattern)."""
        if self.match is None:
            return True
        return compile_match(self.match).search(" ".join(statement.split())) is not None


class FaultyStorage:
    """An in-memory database owned by the platform for one agent (it outlives incarnations)."""

    def __init__(
        self,
        kernel: Kernel,
        on_fault: Callable[[str, str], None],
        random_fault: Callable[[str], str | None] | None,
    ) -> None:
        self._kernel = kernel
        self._db, self._cursor = cold_storage.connect()
        self._image: bytes | None = None
        """The database while it is cold (`_db` is then None)."""
        self._parked = False
        self._in_turn = False
        self._armed: list[StorageFault] = []
        self._on_fault = on_fault
        self._random_fault = random_fault
        """The profile's random faults; None when its rates are all zero, so that a statement
        with no armed fault pays for no fault check at all (and draws nothing, as before)."""
        self._crash: Callable[[], None] | None = None
        self._crash_after_commit: str | None = None
        self.statements = 0
        self.journal: list[tuple[Write, ...]] = []
        """The writes of every committed turn, in commit order."""
        self.journal_ms: list[int] = []
        """The instant each turn of `journal` committed (simulated ms), index for index."""
        self._pending: list[Write] = []
        self._undo: dict[str, Callable[[], None]] = {}
        """What the open turn changed outside the database (the alarm slot), to be put back if
        the turn rolls back: one entry per thing, holding its state before the turn."""
        self.on_statement: Callable[[str], None] | None = None
        """Called with each statement agent code runs in a step, before any fault (the hunt's
        record of what a run executes)."""
        self._db.execute(KV_DDL)

    def inherit_history(self, wiped: FaultyStorage) -> None:
        """This storage replaces `wiped` (the agent destroyed itself): its journal starts with
        the wiped one's committed turns and one more, at this instant, that drops every table
        the wiped database held (the KV table is emptied: it is always there). Replayed, the
        journal still gives what is stored, and a checker still reads what was written before
        the wipe (a schedule's retry options, a fiber's rows)."""
        database = wiped._db
        if database is None:  # cold: a copy of its image, read for its table names
            assert wiped._image is not None
            database, _ = cold_storage.restore(wiped._image)
        live = {
            row[0]
            for row in database.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
        # A table the committed turns made may be gone from the live database only because the
        # turn the wipe ends dropped it, uncommitted: the wipe drops it too, so that the journal
        # replays to what is stored.
        names = sorted(live | _tables_created(wiped.journal))
        wipe = tuple(
            (f"DELETE FROM {name}" if name == KV_TABLE else f'DROP TABLE IF EXISTS "{name}"', ())
            for name in names
        )
        self.journal = [*wiped.journal, wipe]
        self.journal_ms = [*wiped.journal_ms, self._kernel.now_ms]

    def bind_crash(self, crash: Callable[[], None]) -> None:
        """What a crash fault does: kill the incarnation currently using this storage."""
        self._crash = crash

    def arm(self, fault: StorageFault) -> None:
        self._armed.append(fault)

    @property
    def armed(self) -> list[StorageFault]:
        return list(self._armed)

    # -- cold storage -----------------------------------------------------------------------
    def park(self) -> None:
        """The agent has no live incarnation now: its connection may be cooled (see the module
        docstring). Nothing changes for whoever uses the storage next."""
        if self._parked or self._in_turn:
            return
        self._parked = True
        cold_storage.park(self)

    @property
    def cold(self) -> bool:
        """Whether the database is kept as bytes, its connection closed."""
        return self._db is None

    def _cool(self) -> None:
        if self._db is None or self._in_turn:
            return
        self._image = cold_storage.image_of(self._db, self._cursor)
        self._db = self._cursor = None  # type: ignore[assignment]  # until `_unpark`

    def _unpark(self) -> None:
        """In use again: out of the parked set, and warm."""
        self._parked = False
        cold_storage.unpark(self)
        if self._db is None and self._image is not None:
            self._db, self._cursor = cold_storage.restore(self._image)
            self._image = None

    # -- the turn -------------------------------------------------------------------------
    def undo_on_rollback(self, key: str, undo: Callable[[], None]) -> None:
        """Call `undo` if the open turn rolls back (the first one given for `key` in the turn
        is kept: it puts back the state from before the turn). Outside a turn with writes,
        nothing: the change is durable at once."""
        if self._in_turn:
            self._undo.setdefault(key, undo)

    def commit_turn(self) -> None:
        self._undo = {}
        if self._in_turn:
            self._in_turn = False
            self._cursor.execute("COMMIT")
            if self._pending:
                self.journal.append(tuple(self._pending))
                self.journal_ms.append(self._kernel.now_ms)
                self._pending = []
        statement, self._crash_after_commit = self._crash_after_commit, None
        if statement is not None:
            self._kernel.after_turn(lambda: self._crash_now("crash_after_commit", statement))

    @property
    def in_turn_with_writes(self) -> bool:
        """A turn is open and has written something (what a crash now would roll back)."""
        return self._in_turn and bool(self._pending)

    def rollback_turn(self) -> None:
        """The incarnation died in this turn: its writes are gone."""
        self._crash_after_commit = None
        undo, self._undo = self._undo, {}
        if self._in_turn:
            self._in_turn = False
            self._db.execute("ROLLBACK")
            self._pending = []
            self._kernel.leave_turn(self)
            for step in undo.values():
                step()

    # -- statements -----------------------------------------------------------------------
    def execute(self, statement: str, params: Sequence[Any] = ()) -> int:
        cursor = self._run(statement, params)
        return max(cursor.rowcount, 0)

    def query(self, statement: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cursor = self._run(statement, params)
        if cursor.description is None:
            return []  # a write without RETURNING: no row to make
        return _rows(cursor)

    def _run(self, statement: str, params: Sequence[Any]) -> sqlite3.Cursor:
        if not isinstance(statement, str):
            raise TypeError(f"SQL statement must be a str, got {statement!r}")
        if self._parked:
            self._unpark()
        write = is_write(statement)
        if self._kernel.join_turn(self):
            if self.on_statement is not None:
                self.on_statement(statement)
            if self._armed or self._random_fault is not None:
                self._inject(statement)
            # The turn's transaction opens at its first write: a turn that only reads needs
            # none (one connection, so a read outside it sees exactly the committed state).
            if write and not self._in_turn:
                self._cursor.execute("BEGIN")
                self._in_turn = True
        self.statements += 1
        values = params if type(params) is tuple else tuple(params)
        try:
            cursor = self._cursor.execute(statement, values)
        except sqlite3.Error as exc:
            raise StorageError(f"{exc} (statement: {_short(statement)})") from exc
        if write:
            if self._in_turn:
                self._pending.append((statement, values))
            else:
                self.journal.append(((statement, values),))
                self.journal_ms.append(self._kernel.now_ms)
        return cursor

    def _inject(self, statement: str) -> None:
        kind: str | None = None
        for fault in self._armed:
            if not fault.matches(statement):
                continue
            if fault.skip > 0:
                fault.skip -= 1
                continue
            kind = fault.kind
            fault.count -= 1
            if fault.count == 0:
                self._armed.remove(fault)
            break
        if kind is None and self._random_fault is not None:
            kind = self._random_fault(statement)
        if kind == "error":
            self._on_fault("storage_error", statement)
            raise StorageError(f"injected storage fault (statement: {_short(statement)})")
        if kind == "crash":
            self._on_fault("crash", statement)
            self.rollback_turn()
            if self._crash is not None:
                self._crash()
            raise IncarnationKilled("process died between two statements of a turn")
        if kind == "crash-after-commit":
            self._crash_after_commit = statement

    def _crash_now(self, fault: str, statement: str) -> None:
        self._on_fault(fault, statement)
        if self._crash is not None:
            self._crash()

    def read(self, statement: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """The rows of a query from outside the run (a scenario's expectation), read-only: an
        authorizer lets SQLite only read tables and call functions, so a DELETE, an ATTACH (which
        would create a file) or a PRAGMA that changes a setting is refused with
        `ReadOnlyViolation` before it runs. No fault, no turn, nothing recorded."""
        if not isinstance(statement, str):
            raise TypeError(f"SQL statement must be a str, got {statement!r}")
        with self._inspection() as db:
            db.execute("PRAGMA query_only = ON")
            db.set_authorizer(_read_only)
            try:
                rows = db.execute(statement, tuple(params)).fetchall()
            except sqlite3.DatabaseError as exc:
                if "not authorized" in str(exc):
                    raise ReadOnlyViolation(
                        f"only reads are allowed here (SELECT, WITH ... SELECT, PRAGMA "
                        f"table_info); this statement would write, attach or change a setting: "
                        f"{_short(statement)}"
                    ) from None
                raise StorageError(f"{exc} (statement: {_short(statement)})") from None
            except sqlite3.Error as exc:
                raise StorageError(f"{exc} (statement: {_short(statement)})") from None
            finally:
                db.set_authorizer(None)
                db.execute("PRAGMA query_only = OFF")
        return [dict(row) for row in rows]

    # -- key-value (same database, so the same turn) ----------------------------------------
    def kv_get(self, key: str) -> Any | None:
        rows = self.query(f"SELECT value FROM {KV_TABLE} WHERE key = ?", (key,))
        return json.loads(rows[0]["value"]) if rows else None

    def kv_put(self, key: str, value: Any) -> None:
        encoded = json.dumps(value, sort_keys=True)
        self.execute(
            f"INSERT INTO {KV_TABLE} (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, encoded),
        )

    def kv_delete(self, key: str) -> bool:
        return self.execute(f"DELETE FROM {KV_TABLE} WHERE key = ?", (key,)) > 0

    def kv_list(self, prefix: str = "") -> dict[str, Any]:
        rows = self.query(
            f"SELECT key, value FROM {KV_TABLE} WHERE substr(key, 1, ?) = ? ORDER BY key",
            (len(prefix), prefix),
        )
        return {row["key"]: json.loads(row["value"]) for row in rows}

    # -- inspection (tests, checkers, reports) ----------------------------------------------
    @contextmanager
    def _inspection(self) -> Iterator[sqlite3.Connection]:
        """The connection to read from outside the run: the storage's own, or while it is cold a
        copy that is closed afterwards (reading every agent's rows at the end of a run does not
        warm thousands of idle agents)."""
        if self._db is not None:
            yield self._db
            return
        assert self._image is not None
        db, cursor = cold_storage.restore(self._image)
        try:
            yield db
        finally:
            cold_storage.close(db, cursor)

    def tables(self) -> list[str]:
        with self._inspection() as db:
            return _tables(db)

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """Every committed row of every table, in primary-key order (the KV table included)."""
        out = {}
        with self._inspection() as db:
            for table in _tables(db):
                rows = db.execute(select_in_key_order(db, table)).fetchall()
                out[table] = [dict(row) for row in rows]
        return out


def select_in_key_order(db: sqlite3.Connection, table: str) -> str:
    """`SELECT *` of `table` in rowid order, or in primary-key order for a table made `WITHOUT
    ROWID` (0.32.0's `cf_agents_jobs`), which has no rowid."""
    found = db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    order = "rowid"
    if found is not None and "WITHOUT ROWID" in str(found[0]).upper():
        columns = db.execute(f'PRAGMA table_info("{table}")').fetchall()
        keys = sorted((c[5], c[1]) for c in columns if c[5] > 0)
        order = ", ".join(f'"{name}"' for _, name in keys)
    return f'SELECT * FROM "{table}" ORDER BY {order}'


def _tables(db: sqlite3.Connection) -> list[str]:
    rows = db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name"
    ).fetchall()
    return [row["name"] for row in rows]


def _rows(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    """The cursor's rows as dicts, column name to value, as `dict(sqlite3.Row)` makes them."""
    names = [column[0] for column in cursor.description]
    rows = cursor.fetchall()
    if len(names) == 1:
        name = names[0]
        return [{name: row[0]} for row in rows]
    if len({name.lower() for name in names}) < len(names):
        # Two columns of one name (SQLite compares them without case): a Row gives the first
        # one's value for both, and so must this.
        return [dict(sqlite3.Row(cursor, row)) for row in rows]
    return [dict(zip(names, row, strict=True)) for row in rows]


def _short(statement: str, limit: int = 120) -> str:
    text = " ".join(statement.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_CREATE_TABLE = re.compile(
    r'^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"?(\w+)"?', re.IGNORECASE
)


def _tables_created(journal: Sequence[tuple[Write, ...]]) -> set[str]:
    """The tables the statements of `journal` create (their names)."""
    return {
        match.group(1)
        for turn in journal
        for statement, _values in turn
        if (match := _CREATE_TABLE.match(statement)) is not None
    }
