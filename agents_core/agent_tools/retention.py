"""Replay on connect, retention and access control of agent-tool runs (spec agent-tools §3.4,
§8).

Replay: every new connection gets, for each run in start order, its `started` frame, the child's
stored chunks (as the release's `StoredChunkReplay` sends them) and, when the run is terminal
(soft or hard), its terminal frame — all marked `replay` and sent to that connection only.
Clearing cancels children that still run, deletes their facets (and so their storage) and the
parent rows, silently: no frame, no hook. An awaited run whose call is still in flight in this
incarnation is the exception (E22, as in the SDK): the call ends `aborted` (unless its child had
completed), broadcasts its terminal frame and calls `on_agent_tool_finish` once, with no row
(`DeliveryLedger.finish_run`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agents_core.agent_tools.backbone import TEARDOWN_MARKER_PREFIX
from agents_core.agent_tools.frames import frame, started_event, terminal_event
from agents_core.agent_tools.notify import MILESTONE_DEDUPE_PREFIX
from agents_core.agent_tools.registry import TERMINAL
from agents_core.agent_tools.run_store import CLEAR_REASON
from agents_core.jsontext import parse_json_text
from agents_core.probes import probe

if TYPE_CHECKING:
    from agents_core.agent_tools.hooks import AgentToolHooks
    from agents_core.agent_tools.run_store import RunStore
    from agents_core.agent_tools.stored_replay import StoredChunkReplay
    from agents_core.context import AgentContext

__all__ = ["Retention"]


class Retention:
    """Replay on connect, `has_agent_tool_run` and `clear_agent_tool_runs`."""

    __slots__ = ("_ctx", "_agent", "_store", "_replay")

    def __init__(
        self,
        ctx: AgentContext,
        agent: AgentToolHooks,
        store: RunStore,
        replay: StoredChunkReplay,
    ) -> None:
        self._ctx = ctx
        self._agent = agent
        self._store = store
        self._replay = replay

    async def replay(self, connection: Any) -> None:
        for row in self._ctx.sql("SELECT * FROM cf_agent_tool_runs ORDER BY started_at, rowid"):
            run_id, parent = row["run_id"], row["parent_tool_call_id"]
            _, preview = parse_json_text(row["input_preview"])
            _, display = parse_json_text(row["display_metadata"])
            connection.send(
                frame(
                    parent,
                    0,
                    started_event(
                        run_id, row["agent_type"], preview, row["display_order"], display
                    ),
                    replay=True,
                )
            )
            sequence = await self._replay.to_connection(row, connection)
            if row["status"] in TERMINAL:
                result = self._store.result_from_row(row)
                connection.send(frame(parent, sequence, terminal_event(result), replay=True))

    def has_run(self, cls_or_name: type | str, run_id: str) -> bool:
        """True iff a run with this id and child class exists (cap-rejected ones too)."""
        name = cls_or_name if isinstance(cls_or_name, str) else cls_or_name.__name__
        rows = self._ctx.sql(
            "SELECT 1 AS x FROM cf_agent_tool_runs WHERE run_id = ? AND agent_type = ?",
            run_id,
            name,
        )
        return bool(rows)

    async def clear(
        self,
        *,
        status: str | Iterable[str] | None = None,
        older_than: datetime | int | None = None,
    ) -> int:
        """Delete runs (all, or those with these statuses / started before `older_than`),
        cancelling children that still run and deleting their facets. Returns how many."""
        statuses = (
            None if status is None else ({status} if isinstance(status, str) else set(status))
        )
        before = _to_ms(older_than) if older_than is not None else None
        cleared = 0
        for row in self._ctx.sql("SELECT * FROM cf_agent_tool_runs ORDER BY started_at, rowid"):
            if statuses is not None and row["status"] not in statuses:
                continue
            if before is not None and not row["started_at"] < before:
                continue
            await self._clear_one_agent_tool_run(row)
            cleared += 1
        return cleared

    async def _clear_one_agent_tool_run(self, row: dict[str, Any]) -> None:
        run_id = row["run_id"]
        try:
            child = await self._store.child(row["agent_type"], run_id)
        except Exception as exc:  # noqa: BLE001 - every error is swallowed; the row goes anyway
            self._ctx.log("warn", f"clearing agent tool run {run_id}: {exc}")
            child = None
        if child is not None and row["status"] in ("starting", "running"):
            probe(self._ctx.host, "agent_tool.clear_cancelled_live_run")
            if not row["detached"]:
                # Its awaited call may still be in flight here: it ends without a row (E22).
                self._store.cleared_in_flight.add(run_id)
            try:
                await child.call("cancel_agent_tool_run", run_id, CLEAR_REASON)
            except Exception as exc:  # noqa: BLE001 - the facet is deleted all the same
                # A18: the SDK skips the delete here and leaves an orphan facet, still running,
                # that no later clear can reach (its row is gone); deleting it aborts the run.
                self._ctx.log("warn", f"clearing agent tool run {run_id}: {exc}")
        record = getattr(child, "record", None)
        if record is not None:
            try:
                await self._agent.delete_sub_agent(record.cls, run_id)
            except Exception as exc:  # noqa: BLE001 - every error is swallowed
                self._ctx.log("warn", f"clearing agent tool run {run_id}: {exc}")
        self._ctx.sql("DELETE FROM cf_agent_tool_runs WHERE run_id = ?", run_id)
        # The run's durable notes go with it, so a reused run id starts clean.
        kv = self._ctx.host.kv
        for key in kv.list(f"{MILESTONE_DEDUPE_PREFIX}{run_id}:"):
            kv.delete(key)
        kv.delete(f"{TEARDOWN_MARKER_PREFIX}{run_id}")


def _to_ms(value: datetime | int) -> int:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(value)
