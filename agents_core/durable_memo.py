"""What the runtime keeps in memory, within one incarnation, of durable state only it writes.

Every heartbeat asks whether a fiber needs recovery (is there a run row in `cf_agents_runs` that
no fiber of this incarnation is executing, or a managed fiber in `cf_agents_fibers` left pending
or running without one?), whether a sub-agent holds a fiber lease (`cf_agents_facet_runs`),
whether a schedule is stored (`cf_agents_schedules`) and whether a deferred destroy is pending
(a flag in the key-value store); every clean alarm whether memory-limit strikes are counted. The
answers change only when this agent writes, so `DurableMemo` reads each once per incarnation and
then follows the writes: the ids of the run rows, which of the other tables are known to be
empty, the destroy-pending flag and whether the strike count is known to be clear. It belongs to
the agent instance, so it dies with its incarnation, and a turn that rolls back (a crash) takes
the incarnation, and the memo, with it.

Every statement through `Agent.sql` that writes one of those tables tells the memo
(`statement_effects`): a run-row write the runtime does not track makes it read the ids again,
an insert marks a table not empty, and any other write but an update makes its emptiness unknown.
Code that writes the runtime's tables or keys around `Agent.sql` (straight through the host), or
deletes all storage other than by `destroy()`, is not seen: it is documented in
docs/divergences.md (row P1), with what the memo changes for storage faults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents_core.host import Host

__all__ = [
    "DESTROY_PENDING_KEY",
    "DurableMemo",
    "FACET_RUNS",
    "LEDGER",
    "RUN_ROW_DELETE",
    "RUN_ROW_INSERT",
    "RUN_ROW_SNAPSHOT",
    "SCHEDULES",
    "statement_effects",
]

DESTROY_PENDING_KEY = "cf_agents_destroy_pending"
RUN_ROW_INSERT = (
    "INSERT INTO cf_agents_runs (id, name, snapshot, created_at) VALUES (?, ?, NULL, ?)"
)
RUN_ROW_DELETE = "DELETE FROM cf_agents_runs WHERE id = ?"
RUN_ROW_SNAPSHOT = "UPDATE cf_agents_runs SET snapshot = ? WHERE id = ?"
_RUN_IDS = "SELECT id FROM cf_agents_runs"

_TRACKED = frozenset({RUN_ROW_INSERT, RUN_ROW_DELETE, RUN_ROW_SNAPSHOT})
"""The runtime's own writes of run rows: each keeps the memo right itself (a snapshot update
changes no id)."""

RUNS = "cf_agents_runs"
LEDGER = "cf_agents_fibers"
FACET_RUNS = "cf_agents_facet_runs"
SCHEDULES = "cf_agents_schedules"
_WATCHED = (RUNS, LEDGER, FACET_RUNS, SCHEDULES)

Effect = tuple[str, str]
"""(table, kind): kind is `insert`, `update` or `other` (a delete, a drop, anything else)."""

_EFFECTS: dict[str, tuple[Effect, ...]] = {}
"""`statement_effects` by statement text: agent code runs the same statements over and over."""
_EFFECTS_MAX = 4096


def statement_effects(statement: str) -> tuple[Effect, ...]:
    """What running `statement` through `Agent.sql` may change of what the memo holds: one
    (table, kind) per watched table a statement that is not a plain read names. The runtime's
    own run-row writes have none (they keep the memo themselves)."""
    found = _EFFECTS.get(statement)
    if found is None:
        head = statement.lstrip()[:7].upper()
        if statement in _TRACKED or head.startswith("SELECT"):
            found = ()
        else:
            kind = (
                "insert"
                if head.startswith(("INSERT", "REPLACE"))
                else "update"
                if head.startswith("UPDATE")
                else "other"
            )
            lowered = statement.lower()
            found = tuple((table, kind) for table in _WATCHED if table in lowered)
        if len(_EFFECTS) >= _EFFECTS_MAX:
            _EFFECTS.clear()
        _EFFECTS[statement] = found
    return found


class DurableMemo:
    """One incarnation's memory of its run rows, destroy flag and memory-limit strikes."""

    __slots__ = ("_host", "_run_ids", "_empty", "_destroy_pending", "strikes_clear")

    def __init__(self, host: Host) -> None:
        self._host = host
        self._run_ids: dict[str, None] | None = None
        self._empty: dict[str, bool] = {}
        """Table -> known empty (True) or known not empty (False); absent when unknown."""
        self._destroy_pending: bool | None = None
        self.strikes_clear = False
        """The memory-limit strike count is known to be absent (read, or deleted, since the
        last strike was written)."""

    # -- run rows -------------------------------------------------------------------------------
    def run_row_ids(self) -> dict[str, None]:
        """The ids of the committed and pending run rows, read once per incarnation (a storage
        fault on that read propagates, as the read itself would)."""
        ids = self._run_ids
        if ids is None:
            rows = self._host.sql.query(_RUN_IDS, ())
            ids = self._run_ids = {row["id"]: None for row in rows}
        return ids

    def known_run_row_ids(self) -> dict[str, None] | None:
        """The ids if known without a read, else None."""
        return self._run_ids

    def saw_run_rows(self, rows: list[dict[str, Any]]) -> None:
        """A full read of the table (the recovery scan): its ids are the ids now."""
        self._run_ids = {row["id"]: None for row in rows}

    def run_row_inserted(self, fiber_id: str) -> None:
        if self._run_ids is not None:
            self._run_ids[fiber_id] = None

    def run_row_deleted(self, fiber_id: str) -> None:
        if self._run_ids is not None:
            self._run_ids.pop(fiber_id, None)

    def wrote(self, effects: tuple[Effect, ...]) -> None:
        """A statement with these effects ran (or was about to: forgetting is always safe)."""
        for table, kind in effects:
            if table == RUNS:
                self._run_ids = None
            elif kind == "insert":
                self._empty[table] = False
            elif kind != "update":
                self._empty.pop(table, None)

    # -- tables known to be empty ---------------------------------------------------------------
    def empty(self, table: str) -> bool:
        """Whether `table` (a watched table but the run rows) has no row: known, or read once with
        `SELECT 1 AS x FROM <table> LIMIT 1` (a storage fault on that read propagates)."""
        known = self._empty.get(table)
        if known is None:
            known = self._empty[table] = not self._host.sql.query(
                f"SELECT 1 AS x FROM {table} LIMIT 1", ()
            )
        return known

    def known_empty(self, table: str) -> bool:
        """Whether `table` is known to have no row, without a read."""
        return self._empty.get(table) is True

    def saw_table(self, table: str, rows: list[dict[str, Any]]) -> None:
        """A full read of `table`: whether it has rows is known now."""
        self._empty[table] = not rows

    # -- the destroy-pending flag ---------------------------------------------------------------
    def destroy_pending(self) -> bool:
        flag = self._destroy_pending
        if flag is None:
            flag = self._destroy_pending = bool(self._host.kv.get(DESTROY_PENDING_KEY))
        return flag

    def set_destroy_pending(self) -> None:
        self._host.kv.put(DESTROY_PENDING_KEY, True)
        self._destroy_pending = True

    def storage_wiped(self) -> None:
        """Everything was deleted: read again (from empty storage) when next asked."""
        self._run_ids = None
        self._empty.clear()
        self._destroy_pending = None
        self.strikes_clear = False
