"""The child side of agents as tools: run rows, the headless turn, cancel, inspect, chunks, and
the self-heal of rows whose isolate died (spec agent-tools §1.2, §2.5, §6, §7.7).

A parent reaches a chat host through four RPC methods: `start_agent_tool_run(input, run_id)`
(idempotent by run id; inserts the row and starts the headless turn in the background under
keepAlive, answering at once), `cancel_agent_tool_run`, `inspect_agent_tool_run` (None iff the
child has no row) and `get_agent_tool_chunks`; the live tail is in `agents_core.chat.tails`.
What differs between the two hosts (tables, row birth status, input message, output and
summary defaults, inspection fields, terminal guard; spec §11 E25) is in `think.py` and
`ai_chat.py`; this module holds what they share.

Memory (gone with the isolate): the run's abort controller (its presence means "live in this
isolate"), requestId -> runId attribution (with negative entries from the snoop), the last
captured stream error, the pre-turn assistant ids, live sequences and tails. A row left active
without a controller is *stale*: when a recovered turn settles, and lazily on inspect, it is
finalized `completed` if recovery produced a new answer, else `error`, unless recovery is still
in progress or a turn is streaming.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar, cast

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from agents_core.chat.self_type import ChatSelf
from agents_core.errors import InvalidArgument
from agents_core.probes import probe
from agents_core.signals import AbortController

__all__ = ["AgentToolChildMixin", "INTERRUPTED_BEFORE_FINISH"]

INTERRUPTED_BEFORE_FINISH = "Agent tool run was interrupted before the child could finish."


async def maybe_await(value: Any) -> Any:
    """Hooks may be plain or async functions."""
    return await value if inspect.isawaitable(value) else value


class AgentToolChildMixin:
    _agent_tool_runs_table: ClassVar[str]
    _agent_tool_milestones_table: ClassVar[str]
    _agent_tool_active_statuses: ClassVar[tuple[str, ...]]

    def _init_agent_tool_child(self: ChatSelf) -> None:
        self._agent_tool_controllers: dict[str, AbortController] = {}
        self._agent_tool_request_runs: dict[str, str | None] = {}
        self._agent_tool_last_errors: dict[str, str] = {}
        self._agent_tool_pre_turn_ids: dict[str, set[str]] = {}
        self._agent_tool_live_seq: dict[str, int] = {}
        self._agent_tool_tails: dict[str, Any] = {}

    # -- the adapter (RPC) -------------------------------------------------------------------------
    async def start_agent_tool_run(self: ChatSelf, input: Any, run_id: str) -> dict[str, Any]:
        """Create the run and start its headless turn in the background; answers at once."""
        if not isinstance(run_id, str) or not run_id:
            raise InvalidArgument(f"start_agent_tool_run needs a non-empty run_id, got {run_id!r}")
        self._ensure_agent_tool_tables()
        if self._agent_tool_row(run_id) is not None:
            # The row exists, so inspecting it answers (None only for a run with no row).
            return cast("dict[str, Any]", await self.inspect_agent_tool_run(run_id))
        now = self.host.clock.now_ms()
        self._insert_agent_tool_row(run_id, input, now)
        controller = AbortController()
        self._agent_tool_controllers[run_id] = controller
        self.host.tasks.wait_until(self._run_agent_tool_in_background(run_id, input, controller))
        return {"runId": run_id, "status": "running", "startedAt": now}

    async def cancel_agent_tool_run(self: ChatSelf, run_id: str, reason: str | None = None) -> None:
        """Abort the run (and a recovery turn driving it), seal it `aborted`, close its tails.
        Nothing for an unknown or settled run."""
        row = self._agent_tool_row(run_id)
        if row is None or row["status"] not in self._agent_tool_active_statuses:
            return
        controller = self._agent_tool_controllers.get(run_id)
        if controller is not None:
            controller.abort(reason)
        for request_id, turn in list(self._turns.states.items()):
            if (
                turn.plan.trigger == "recovery"
                or self._agent_tool_request_runs.get(request_id) == run_id
            ):
                turn.controller.abort(reason)
        for key, incident in self.host.kv.list(INCIDENT_PREFIX).items():
            if incident.get("runId") == run_id and incident.get("status") == "scheduled":
                self._chat_recovery.set_incident(key, incident, "failed")
        self._seal_agent_tool_aborted(run_id, reason)
        self._close_agent_tool_tails(run_id)
        if controller is None:
            self._release_agent_tool_run(run_id)

    async def inspect_agent_tool_run(self: ChatSelf, run_id: str) -> dict[str, Any] | None:
        """The run's snapshot (SDK keys), None iff this child has no row for it. A stale row
        is reconciled first (§7.7)."""
        row = self._agent_tool_row(run_id)
        if row is None:
            return None
        if self._is_stale_agent_tool_row(row):
            await self._reconcile_stale_agent_tool_runs(only=run_id)
            # Reconciling seals a stale row; it never deletes one.
            row = cast("dict[str, Any]", self._agent_tool_row(run_id))
        inspection = await self._inspection_from_row(row)
        inspection.update(self._progress.projection(row))
        return inspection

    async def get_agent_tool_chunks(
        self: ChatSelf, run_id: str, after_sequence: int = -1
    ) -> list[dict[str, Any]]:
        """Stored chunks of the run with index > `after_sequence`, as {"sequence", "body"}."""
        row = self._agent_tool_row(run_id)
        if row is None:
            return []
        return self._stream.chunks(self._agent_tool_stream_id(row), after_sequence)

    # -- rows --------------------------------------------------------------------------------------
    def _agent_tool_row(self: ChatSelf, run_id: str) -> dict[str, Any] | None:
        if not self._agent_tool_tables_exist():
            return None
        rows = self.sql(f"SELECT * FROM {self._agent_tool_runs_table} WHERE run_id = ?", run_id)
        return rows[0] if rows else None

    def _is_stale_agent_tool_row(self: ChatSelf, row: dict[str, Any]) -> bool:
        return (
            row["status"] in self._agent_tool_active_statuses
            and row["run_id"] not in self._agent_tool_controllers
        )

    def _bind_agent_tool_request(self: ChatSelf, run_id: str, request_id: str) -> None:
        self._agent_tool_request_runs[request_id] = run_id
        self.sql(
            f"UPDATE {self._agent_tool_runs_table} SET request_id = ? WHERE run_id = ?",
            request_id,
            run_id,
        )

    def _turn_snapshot_extra(self: ChatSelf, request_id: str) -> dict[str, Any]:
        run_id = self._agent_tool_request_runs.get(request_id)
        return {"runId": run_id} if run_id is not None else {}

    def _on_turn_settled(self: ChatSelf, request_id: str) -> None:
        if request_id in self._agent_tool_request_runs and (
            self._agent_tool_request_runs[request_id] is None
        ):
            del self._agent_tool_request_runs[request_id]

    # -- the headless turn -------------------------------------------------------------------------
    async def _run_agent_tool_in_background(
        self: ChatSelf, run_id: str, input: Any, controller: AbortController
    ) -> None:
        def settle(terminal: dict[str, Any]) -> None:
            try:
                self._finalize_agent_tool_run(run_id, terminal)
            except Exception as exc:  # noqa: BLE001 - e.g. a storage error on the terminal write
                self._log("error", f"agent-tool run {run_id} could not be settled: {exc}")
                # Without its controller the row is stale: the next inspect reconciles it.
                self._release_agent_tool_run(run_id)

        async def body() -> None:
            try:
                terminal = await self._drive_agent_tool_run(run_id, input, controller)
            except Exception as exc:  # noqa: BLE001 - a failing run is settled, not raised
                terminal = self._agent_tool_exception_terminal(exc, controller)
            settle(terminal)

        try:
            await self.keep_alive_while(body)
        except Exception as exc:  # noqa: BLE001 - only taking the lease can throw here
            # The turn never started. Settled as failed, the run does not look live for the
            # rest of the incarnation with nothing driving it (its controller is held, so no
            # inspect reconciles it), while the parent waits on its tail (the SDK leaves it).
            probe(self.host, "chat.run_lease_failed_settled")
            settle(self._agent_tool_exception_terminal(exc, controller))

    def _finalize_agent_tool_run(self: ChatSelf, run_id: str, terminal: dict[str, Any]) -> None:
        self._progress.forget(run_id)
        self._write_agent_tool_terminal(run_id, terminal)
        self._release_agent_tool_run(run_id)

    def _release_agent_tool_run(self: ChatSelf, run_id: str) -> None:
        """Drop every in-memory trace of the run; close its tails."""
        self._agent_tool_controllers.pop(run_id, None)
        self._agent_tool_last_errors.pop(run_id, None)
        self._agent_tool_pre_turn_ids.pop(run_id, None)
        for request_id, mapped in list(self._agent_tool_request_runs.items()):
            if mapped == run_id or mapped is None:
                del self._agent_tool_request_runs[request_id]
        self._close_agent_tool_tails(run_id)

    def _agent_tool_abort_reason(self: ChatSelf, controller: AbortController) -> str | None:
        reason = controller.signal.reason
        return reason if isinstance(reason, str) else None

    # -- self-heal ---------------------------------------------------------------------------------
    def _rebind_agent_tool_run_for_recovery(self: ChatSelf, request_id: str, origin: str) -> None:
        """Bind the newest active run to the recovered turn, so its frames stay attributable."""
        if not self._agent_tool_tables_exist():
            return
        statuses = self._agent_tool_active_statuses
        rows = self.sql(
            f"SELECT run_id FROM {self._agent_tool_runs_table} WHERE status IN "
            f"({', '.join('?' for _ in statuses)}) ORDER BY started_at DESC, rowid DESC LIMIT 1",
            *statuses,
        )
        if not rows:
            return
        run_id = rows[0]["run_id"]
        self._bind_agent_tool_request(run_id, request_id)
        key = INCIDENT_PREFIX + origin
        incident = self.host.kv.get(key)
        if incident is not None:
            self.host.kv.put(key, {**incident, "runId": run_id})
        self.host.trace.emit("chat:recovery:rebind", runId=run_id, requestId=request_id)

    def _stream_for_recovered_turn(self: ChatSelf, request_id: str, payload: dict[str, Any]) -> Any:
        """A recovered turn bound to a run continues the interrupted turn's stream, so the
        run's stored chunks keep their indices and the next ones follow them: a client that
        holds chunks 0..k of the run never gets other chunks under those numbers (S5)."""
        if self._agent_tool_request_runs.get(request_id) is None:
            return None
        raw = payload.get("snapshot")
        snapshot = raw if isinstance(raw, dict) else {}
        stream_id, _ = self._chat_recovery.interrupted_stream(payload["requestId"], snapshot)
        return stream_id

    async def _after_chat_recovery(self: ChatSelf, request_id: str | None) -> None:
        await self._reconcile_stale_agent_tool_runs()

    async def _reconcile_stale_agent_tool_runs(self: ChatSelf, only: str | None = None) -> None:
        if not self._agent_tool_tables_exist():
            return
        statuses = self._agent_tool_active_statuses
        rows = self.sql(
            f"SELECT * FROM {self._agent_tool_runs_table} WHERE status IN "
            f"({', '.join('?' for _ in statuses)}) ORDER BY started_at, rowid",
            *statuses,
        )
        for row in rows:
            if (only is not None and row["run_id"] != only) or not self._is_stale_agent_tool_row(
                row
            ):
                continue
            recovery = self.classify_chat_recovery(row["run_id"])
            if recovery == "in-progress" or self._turns.states:
                continue
            answers = [
                m
                for m in await self._messages_after_run_start(row)
                if m.get("role") == "assistant" and m.get("parts")
            ]
            if recovery != "failed" and answers:
                terminal = await self._stale_completion(row)
            else:
                terminal = {"status": "error", "error": INTERRUPTED_BEFORE_FINISH}
            probe(self.host, "chat.stale_child_run_reconciled")
            self._progress.forget(row["run_id"])
            self._write_agent_tool_terminal(row["run_id"], terminal)
            self._release_agent_tool_run(row["run_id"])
            self.host.trace.emit(
                "chat:child_run:reconciled", runId=row["run_id"], status=terminal["status"]
            )

    # -- what each host provides -------------------------------------------------------------------
    def _ensure_agent_tool_tables(self: ChatSelf) -> None:
        raise NotImplementedError

    def _agent_tool_tables_exist(self: ChatSelf) -> bool:
        raise NotImplementedError

    def _insert_agent_tool_row(self: ChatSelf, run_id: str, input: Any, now: int) -> None:
        raise NotImplementedError

    async def _drive_agent_tool_run(
        self: ChatSelf, run_id: str, input: Any, controller: AbortController
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _agent_tool_exception_terminal(
        self: ChatSelf, error: Exception, controller: AbortController
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _write_agent_tool_terminal(self: ChatSelf, run_id: str, terminal: dict[str, Any]) -> None:
        raise NotImplementedError

    def _seal_agent_tool_aborted(self: ChatSelf, run_id: str, reason: str | None) -> None:
        raise NotImplementedError

    async def _inspection_from_row(self: ChatSelf, row: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _agent_tool_stream_id(self: ChatSelf, row: dict[str, Any]) -> str | None:
        raise NotImplementedError

    async def _messages_after_run_start(
        self: ChatSelf, row: dict[str, Any]
    ) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def _stale_completion(self: ChatSelf, row: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _active_agent_tool_run(self: ChatSelf) -> tuple[str | None, str | None]:
        raise NotImplementedError
