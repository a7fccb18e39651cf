"""The managed-fiber ledger (`cf_agents_fibers`): inspection, listing, deletion, resolution.

Rows are kept after completion; statuses are `pending`, `running` and the terminal `completed`,
`aborted`, `interrupted` (terminal too, though recovery or `resolve_fiber` may still settle
it) and `error`. Every status change is a guarded UPDATE, so a late writer never moves a row out
of a state it has already left (spec fibers §5.7, §5.8). `FiberLedger` is the component that owns
the table and the waiters for a row to turn terminal; the FiberRunner (`fibers.py`) writes a row's
execution states through it. The SDK's counterpart is the managed-fiber half of the Agent's
fiber API (`startFiber`'s ledger, `inspectFiber`, `listFibers`, `deleteFibers`, `resolveFiber`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agents_core.errors import InvalidArgument
from agents_core.jsontext import parse_json_text, to_json_text

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.host import Deferred

__all__ = [
    "FIBER_STATUSES",
    "TERMINAL_STATUSES",
    "FiberInspection",
    "FiberLedger",
    "FiberRecoveryResult",
    "StartFiberResult",
]

FIBER_STATUSES = ("pending", "running", "completed", "aborted", "interrupted", "error")
TERMINAL_STATUSES = frozenset({"completed", "aborted", "interrupted", "error"})
RESULT_STATUSES = ("completed", "error", "aborted", "interrupted")
_ABSENT: Any = object()


@dataclass(frozen=True)
class FiberInspection:
    """A ledger row as the SDK's `FiberInspection` (absent fields are None)."""

    fiber_id: str
    name: str
    status: str
    created_at: int
    idempotency_key: str | None = None
    snapshot: Any = None
    has_snapshot: bool = False
    error: str | None = None
    metadata: dict[str, Any] | None = None
    started_at: int | None = None
    settled_at: int | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> FiberInspection:
        parsed, snapshot = parse_json_text(row["snapshot"])
        has_snapshot = parsed and row["snapshot"] is not None
        ok, metadata = parse_json_text(row["metadata_json"])
        return cls(
            fiber_id=row["fiber_id"],
            name=row["name"],
            status=row["status"],
            created_at=row["created_at"],
            idempotency_key=row["idempotency_key"],
            snapshot=snapshot if has_snapshot else None,
            has_snapshot=has_snapshot,
            error=row["error_message"],
            metadata=metadata if ok and isinstance(metadata, dict) else None,
            started_at=row["started_at"],
            settled_at=row["completed_at"],
        )

    def to_dict(self) -> dict[str, Any]:
        """The SDK's shape: camelCase keys, optional keys only when present."""
        out: dict[str, Any] = {
            "fiberId": self.fiber_id,
            "name": self.name,
            "status": self.status,
            "createdAt": self.created_at,
        }
        optional = {
            "idempotencyKey": self.idempotency_key,
            "error": self.error,
            "metadata": self.metadata,
            "startedAt": self.started_at,
            "settledAt": self.settled_at,
        }
        if self.has_snapshot:
            out["snapshot"] = self.snapshot
        out.update({k: v for k, v in optional.items() if v is not None})
        return out


@dataclass(frozen=True)
class StartFiberResult(FiberInspection):
    accepted: bool = False

    @classmethod
    def of(cls, inspection: FiberInspection, *, accepted: bool) -> StartFiberResult:
        return cls(**{**inspection.__dict__, "accepted": accepted})

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "accepted": self.accepted}


@dataclass(frozen=True)
class FiberRecoveryResult:
    """What `on_fiber_recovered` may return for a managed fiber (or pass to `resolve_fiber`)."""

    status: str
    snapshot: Any = field(default=_ABSENT)
    metadata: dict[str, Any] | None = None
    error: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.status not in RESULT_STATUSES:
            raise InvalidArgument(
                f"a fiber recovery result status must be one of {list(RESULT_STATUSES)}, "
                f"got {self.status!r}"
            )

    @property
    def has_snapshot(self) -> bool:
        return self.snapshot is not _ABSENT

    @classmethod
    def coerce(cls, value: Any) -> FiberRecoveryResult:
        if isinstance(value, FiberRecoveryResult):
            return value
        if isinstance(value, Mapping):
            known = {"status", "snapshot", "metadata", "error", "reason"}
            unknown = sorted(set(value) - known)
            if unknown:
                raise InvalidArgument(
                    f"unknown fiber recovery result key(s) {unknown}; known: {sorted(known)}"
                )
            return cls(**dict(value))
        raise InvalidArgument(
            f"a fiber recovery result is a FiberRecoveryResult or a mapping, got {value!r}"
        )


def _statuses(status: str | Iterable[str] | None, default: Iterable[str]) -> list[str]:
    if status is None:
        return list(default)
    wanted = [status] if isinstance(status, str) else list(status)
    unknown = [s for s in wanted if s not in FIBER_STATUSES]
    if unknown:
        raise InvalidArgument(f"unknown fiber status {unknown}; known: {list(FIBER_STATUSES)}")
    return list(dict.fromkeys(wanted))


def _clamp(value: int | None, default: int, low: int, high: int) -> int:
    if value is None:
        return default
    return max(low, min(high, int(value)))


class FiberLedger:
    """One agent's managed-fiber ledger: `cf_agents_fibers` and the waiters on its rows."""

    __slots__ = ("_ctx", "_terminal_waiters")

    def __init__(self, ctx: AgentContext) -> None:
        self._ctx = ctx
        self._terminal_waiters: dict[str, list[Deferred[Any]]] = {}
        """Fiber id -> the waits for its row to turn terminal (or go), in the order they came."""

    def row(self, fiber_id: str) -> dict[str, Any] | None:
        rows = self._ctx.sql("SELECT * FROM cf_agents_fibers WHERE fiber_id = ?", fiber_id)
        return rows[0] if rows else None

    def row_by_key(self, key: str) -> dict[str, Any] | None:
        rows = self._ctx.sql("SELECT * FROM cf_agents_fibers WHERE idempotency_key = ?", key)
        return rows[0] if rows else None

    def inspect(self, fiber_id: str) -> FiberInspection | None:
        row = self.row(fiber_id)
        return FiberInspection.from_row(row) if row else None

    def inspect_by_key(self, idempotency_key: str) -> FiberInspection | None:
        row = self.row_by_key(idempotency_key)
        return FiberInspection.from_row(row) if row else None

    def list(
        self,
        *,
        status: str | Iterable[str] | None = None,
        name: str | None = None,
        limit: int | None = None,
    ) -> list[FiberInspection]:
        """Newest first (created_at, then fiber_id, descending); limit 50 by default, 1–100."""
        limit = _clamp(limit, 50, 1, 100)
        where, params = [], []
        if name:
            where.append("name = ?")
            params.append(name)
        order = " ORDER BY created_at DESC, fiber_id DESC LIMIT ?"
        if status is None:
            clause = f" WHERE {' AND '.join(where)}" if where else ""
            rows = self._ctx.sql(f"SELECT * FROM cf_agents_fibers{clause}{order}", *params, limit)
        else:
            rows = []
            for one in _statuses(status, ()):
                clause = " WHERE " + " AND ".join([*where, "status = ?"])
                rows += self._ctx.sql(
                    f"SELECT * FROM cf_agents_fibers{clause}{order}", *params, one, limit
                )
            rows.sort(key=lambda r: (r["created_at"], r["fiber_id"]), reverse=True)
            rows = rows[:limit]
        return [FiberInspection.from_row(row) for row in rows]

    def delete(
        self,
        *,
        status: str | Iterable[str] | None = None,
        settled_before: datetime | int | None = None,
        limit: int | None = None,
    ) -> int:
        """Delete terminal rows, oldest settled first; `interrupted` only when asked for."""
        wanted = [
            s
            for s in _statuses(status, ("completed", "aborted", "error"))
            if s in TERMINAL_STATUSES
        ]
        if not wanted:
            return 0
        limit = _clamp(limit, 100, 1, 500)
        before_ms = _to_ms(settled_before) if settled_before is not None else None
        rows: list[dict[str, Any]] = []
        for one in wanted:
            if before_ms is None:
                rows += self._ctx.sql(
                    "SELECT fiber_id, completed_at, created_at FROM cf_agents_fibers "
                    "WHERE status = ? ORDER BY completed_at ASC, created_at ASC LIMIT ?",
                    one,
                    limit,
                )
            else:
                rows += self._ctx.sql(
                    "SELECT fiber_id, completed_at, created_at FROM cf_agents_fibers "
                    "WHERE status = ? AND completed_at IS NOT NULL AND completed_at < ? "
                    "ORDER BY completed_at ASC, created_at ASC LIMIT ?",
                    one,
                    before_ms,
                    limit,
                )
        rows.sort(
            key=lambda r: (r["completed_at"] is not None, r["completed_at"] or 0, r["created_at"])
        )
        rows = rows[:limit]
        for row in rows:
            self._ctx.sql(
                "DELETE FROM cf_agents_fibers WHERE fiber_id = ? AND status IN "
                "('completed', 'aborted', 'interrupted', 'error')",
                row["fiber_id"],
            )
        return len(rows)

    def resolve(self, fiber_id: str, result: FiberRecoveryResult | Mapping[str, Any]) -> bool:
        """Settle an `interrupted` fiber by hand; False for any other status or a missing row."""
        resolved = FiberRecoveryResult.coerce(result)
        row = self.row(fiber_id)
        if row is None or row["status"] != "interrupted":
            return False
        self.apply_recovery_result(fiber_id, resolved)
        return True

    def apply_recovery_result(self, fiber_id: str, result: FiberRecoveryResult) -> None:
        sets = ["status = ?", "completed_at = ?", "error_message = ?"]
        message = {"completed": None, "error": result.error}.get(result.status, result.reason)
        params: list[Any] = [result.status, self._ctx.host.clock.now_ms(), message]
        if result.has_snapshot:
            sets.append("snapshot = ?")
            params.append(to_json_text(result.snapshot))
        if result.status == "completed" and result.metadata is not None:
            sets.append("metadata_json = ?")
            params.append(to_json_text(result.metadata, "metadata"))
        self._ctx.sql(
            f"UPDATE cf_agents_fibers SET {', '.join(sets)} "
            "WHERE fiber_id = ? AND status = 'interrupted'",
            *params,
            fiber_id,
        )
        self.notify_terminal(fiber_id)

    # -- waiting for a row to settle ------------------------------------------------------------
    def wait_terminal(self, fiber_id: str) -> Deferred[Any]:
        """A wait that `notify_terminal` resolves once the row is terminal or gone."""
        waiter: Deferred[Any] = self._ctx.host.tasks.deferred()
        self._terminal_waiters.setdefault(fiber_id, []).append(waiter)
        return waiter

    def notify_terminal(self, fiber_id: str) -> None:
        """The row may have turned terminal: wake its waiters if it has (or has gone)."""
        row = self.row(fiber_id)
        if row is not None and row["status"] not in TERMINAL_STATUSES:
            return
        for waiter in self._terminal_waiters.pop(fiber_id, []):
            waiter.resolve(None)


def _to_ms(value: datetime | int) -> int:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidArgument(f"settled_before must be timezone-aware, got {value!r}")
        return int(value.timestamp() * 1000)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise InvalidArgument(f"settled_before is a datetime or epoch ms, got {value!r}")
