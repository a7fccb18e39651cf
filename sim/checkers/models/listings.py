"""What the management API's listings must answer, from the rows of the tables they read (fibers
§5.8 `listFibers` and `deleteFibers`, §4.5 `listSchedules`), written from the spec alone.

The workloads call these with the rows they read themselves in the same synchronous stretch as
the runtime's call, and write both answers into one record; `listings_match` compares them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DELETE_DEFAULT_STATUSES",
    "TERMINAL_STATUSES",
    "Deletion",
    "deleted_fibers",
    "listed_fibers",
    "listed_schedules",
    "start_answer",
]

TERMINAL_STATUSES = ("completed", "aborted", "error", "interrupted")
DELETE_DEFAULT_STATUSES = ("completed", "aborted", "error")
"""§5.8: `deleteFibers` leaves `interrupted` rows unless asked for them."""
LIST_LIMIT = (50, 1, 100)
DELETE_LIMIT = (100, 1, 500)
"""(default, lowest, highest) of each call's `limit`."""


def _limit(given: int | None, bounds: tuple[int, int, int]) -> int:
    default, low, high = bounds
    return default if given is None else min(high, max(low, int(given)))


def _statuses(status: str | Iterable[str] | None) -> list[str] | None:
    if status is None:
        return None
    return [status] if isinstance(status, str) else list(status)


def listed_fibers(
    rows: Sequence[Mapping[str, Any]],
    *,
    status: str | Iterable[str] | None = None,
    name: str | None = None,
    limit: int | None = None,
) -> list[str]:
    """§5.8 `listFibers`: the fiber ids, newest first (created_at, then fiber_id, descending),
    of the rows of the statuses asked (an empty list asks for none) and of the name asked (an
    empty name filters nothing), at most `limit` (50 by default, clamped to 1..100)."""
    statuses = _statuses(status)
    if statuses is not None and not statuses:
        return []
    kept = [
        row
        for row in rows
        if (statuses is None or row["status"] in statuses) and (not name or row["name"] == name)
    ]
    kept.sort(key=lambda row: (row["created_at"], row["fiber_id"]), reverse=True)
    return [str(row["fiber_id"]) for row in kept[: _limit(limit, LIST_LIMIT)]]


@dataclass(frozen=True)
class Deletion:
    """What a `deleteFibers` call may delete: its count, the rows it must take and the rows it
    may take (rows tied at the limit's edge on the sort key may go either way)."""

    count: int
    required: frozenset[str]
    allowed: frozenset[str]


def deleted_fibers(
    rows: Sequence[Mapping[str, Any]],
    *,
    status: str | Iterable[str] | None = None,
    settled_before_ms: int | None = None,
    limit: int | None = None,
) -> Deletion:
    """§5.8 `deleteFibers`: terminal rows of the statuses asked (`DELETE_DEFAULT_STATUSES` when
    none; non-terminal ones dropped), settled strictly before `settled_before_ms` when given,
    oldest settled first (completed_at, then created_at, ascending; no completed_at first, as
    SQLite orders NULL), at most `limit` (100 by default, clamped to 1..500)."""
    asked = _statuses(status)
    statuses = (
        DELETE_DEFAULT_STATUSES if asked is None else [s for s in asked if s in TERMINAL_STATUSES]
    )
    kept = [
        row
        for row in rows
        if row["status"] in statuses
        and (
            settled_before_ms is None
            or (row["completed_at"] is not None and row["completed_at"] < settled_before_ms)
        )
    ]

    def order(row: Mapping[str, Any]) -> tuple[int, int, int]:
        settled = row["completed_at"]
        return (settled is not None, settled or 0, row["created_at"])

    kept.sort(key=order)
    count = min(len(kept), _limit(limit, DELETE_LIMIT))
    if count == 0:
        return Deletion(0, frozenset(), frozenset())
    edge = order(kept[count - 1])
    below = [row for row in kept if order(row) < edge]
    tied = [row for row in kept if order(row) == edge]
    # The rows tied at the edge fill the slots left in any order: all are taken when they fit.
    required = below + (tied if len(below) + len(tied) == count else [])
    return Deletion(
        count,
        frozenset(str(row["fiber_id"]) for row in required),
        frozenset(str(row["fiber_id"]) for row in below + tied),
    )


def start_answer(
    rows: Sequence[Mapping[str, Any]], fiber_id: str | None, key: str | None
) -> dict[str, Any]:
    """§5.5 `startFiber` steps 2-4, for the ledger's `rows` (with `idempotency_key`): refused
    when the row holding the key is not the row of the id given (both rows exist and differ, or
    an id is given and the key's row has another); else a duplicate of the existing row (the row
    of the id, else of the key), not accepted; else the new fiber, accepted (None for its id when
    the caller gave none)."""
    by_id = next((r for r in rows if fiber_id is not None and r["fiber_id"] == fiber_id), None)
    by_key = next((r for r in rows if key is not None and r["idempotency_key"] == key), None)
    if by_key is not None and (
        (by_id is not None and by_id["fiber_id"] != by_key["fiber_id"])
        or (fiber_id is not None and by_key["fiber_id"] != fiber_id)
    ):
        return {"refused": True}
    existing = by_id or by_key
    if existing is not None:
        return {"id": str(existing["fiber_id"]), "accepted": False}
    return {"id": fiber_id, "accepted": True}


def listed_schedules(
    rows: Sequence[Mapping[str, Any]],
    *,
    type: str | None = None,
    start_ms: int | None = None,
    end_ms: int | None = None,
) -> list[str]:
    """§4.5 `listSchedules`: the ids of the caller's rows (`rows` are already its own) of the
    type asked, whose time (in whole seconds) lies in the range asked, both ends included and
    compared in whole seconds (a missing end is open), sorted (the order is not the spec's)."""
    low = 0 if start_ms is None else start_ms // 1000
    high = None if end_ms is None else end_ms // 1000
    return sorted(
        str(row["id"])
        for row in rows
        if (type is None or row["type"] == type)
        and row["time"] is not None
        and low <= int(row["time"])
        and (high is None or int(row["time"]) <= high)
    )
