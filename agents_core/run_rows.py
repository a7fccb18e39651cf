"""What the runtime keeps in memory, within one incarnation, of durable state only it writes.

Every heartbeat asks whether a fiber needs recovery (is there a run row in `cf_agents_runs` that
no fiber of this incarnation is executing?) and whether a deferred destroy is pending (a flag in
the key-value store), and every clean alarm whether memory-limit strikes are counted. The answers
change only when this agent writes them, so `DurableMemo` reads each once per incarnation and then
follows the runtime's own writes: the ids of the run rows, the destroy-pending flag and whether
the strike count is known to be clear. It belongs to the agent instance, so it dies with its
incarnation, and a turn that rolls back (a crash) takes the incarnation, and the memo, with it.

A write to `cf_agents_runs` that the runtime does not track (user code's own SQL through
`Agent.sql`) forgets the ids, and the next question reads them again. Code that writes the
runtime's tables or keys around `Agent.sql` (straight through the host) is not seen: it is
documented in docs/divergences.md (row P1), with what the memo changes for storage faults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents_core.host import Host

__all__ = [
    "DESTROY_PENDING_KEY",
    "DurableMemo",
    "RUN_ROW_DELETE",
    "RUN_ROW_INSERT",
    "RUN_ROW_SNAPSHOT",
    "forgets_run_rows",
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

_FORGETS: dict[str, bool] = {}
"""`forgets_run_rows` by statement text: agent code runs the same statements over and over."""
_FORGETS_MAX = 4096


def forgets_run_rows(statement: str) -> bool:
    """Whether running `statement` through `Agent.sql` may change the set of run rows behind
    the memo's back: anything but a plain read that names `cf_agents_runs`, except the runtime's
    own tracked writes."""
    found = _FORGETS.get(statement)
    if found is None:
        found = (
            statement not in _TRACKED
            and "cf_agents_runs" in statement.lower()
            and not statement.lstrip()[:6].upper().startswith("SELECT")
        )
        if len(_FORGETS) >= _FORGETS_MAX:
            _FORGETS.clear()
        _FORGETS[statement] = found
    return found


class DurableMemo:
    """One incarnation's memory of its run rows, destroy flag and memory-limit strikes."""

    __slots__ = ("_host", "_run_ids", "_destroy_pending", "strikes_clear")

    def __init__(self, host: Host) -> None:
        self._host = host
        self._run_ids: dict[str, None] | None = None
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

    def forget_run_rows(self) -> None:
        self._run_ids = None

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
        self._destroy_pending = None
        self.strikes_clear = False
