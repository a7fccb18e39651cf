"""The child side of agents as tools: run rows, the headless turn, cancel, inspect, chunks, and
the self-heal of rows whose isolate died (spec agent-tools §1.2, §2.5, §6, §7.7).

A parent reaches a chat host through four RPC methods: `start_agent_tool_run(input, run_id,
event_delivery)` (idempotent by run id; inserts the row and starts the headless turn in the
background under keepAlive, answering at once; a 0.32.0 parent's `"terminal"` is written on the
row and keeps the run's chunks from the host's own clients, `terminal_runs.py`),
`cancel_agent_tool_run`, `inspect_agent_tool_run` (None iff the child has no row) and
`get_agent_tool_chunks`; the live tail is in `agents_core.chat.tails`.
What differs between the two hosts (tables, row birth status, input message, output and
summary defaults, inspection fields, terminal guard; spec §11 E25) is in `think.py` and
`ai_chat.py`; this module holds what they share.

Memory (gone with the isolate): the run's abort controller (its presence means "live in this
isolate"), requestId -> runId attribution (with negative entries from the snoop), the last
captured stream error, the pre-turn assistant ids, the runs whose chunks are kept from the
host's clients (learnt again from their rows), live sequences and tails. A row left active
without a controller is *stale*: when a recovered turn settles, and lazily on inspect, it is
finalized `completed` if recovery produced a new answer, else `error`, unless recovery is still
in progress or a turn is streaming.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from agents_core.chat.chunk_limit import StoreEveryChunk
from agents_core.chat.tails import AgentToolTails, TailHooks
from agents_core.chat.terminal_runs import EveryRunShown
from agents_core.errors import InvalidArgument
from agents_core.probes import probe
from agents_core.signals import AbortController

if TYPE_CHECKING:
    from agents_core.chat.chat_recovery import ChatRecovery
    from agents_core.chat.progress import AgentToolProgress
    from agents_core.chat.stream_store import ResumableStream
    from agents_core.chat.turns import ChatTurns
    from agents_core.context import AgentContext

__all__ = [
    "AgentToolChild",
    "ChildRunHooks",
    "INTERRUPTED_BEFORE_FINISH",
    "abort_reason",
    "maybe_await",
]

INTERRUPTED_BEFORE_FINISH = "Agent tool run was interrupted before the child could finish."


def abort_reason(controller: AbortController) -> str | None:
    """The reason a run was aborted with, when it is a string."""
    reason = controller.signal.reason
    return reason if isinstance(reason, str) else None


async def maybe_await(value: Any) -> Any:
    """Hooks may be plain or async functions."""
    return await value if inspect.isawaitable(value) else value


class ChildRunHooks(TailHooks, Protocol):
    """What the child adapter runs of its host: what each of the two hosts does its own way
    (tables, rows, the headless turn, terminal writes, inspection; spec agent-tools §11 E25),
    the seam a tail drains its backlog through, and the host's keepAlive. The host passes
    itself; a subclass's override is what runs."""

    async def keep_alive_while(self, fn: Callable[[], Awaitable[Any]]) -> Any: ...
    def _ensure_agent_tool_tables(self) -> None: ...
    def _insert_agent_tool_row(self, run_id: str, input: Any, now: int) -> None: ...
    async def _drive_agent_tool_run(
        self, run_id: str, input: Any, controller: AbortController
    ) -> dict[str, Any]: ...
    def _agent_tool_exception_terminal(
        self, error: Exception, controller: AbortController
    ) -> dict[str, Any]: ...
    def _write_agent_tool_terminal(self, run_id: str, terminal: dict[str, Any]) -> None: ...
    def _seal_agent_tool_aborted(self, run_id: str, reason: str | None) -> None: ...
    async def _inspection_from_row(self, row: dict[str, Any]) -> dict[str, Any]: ...
    async def _messages_after_run_start(self, row: dict[str, Any]) -> list[dict[str, Any]]: ...
    async def _stale_completion(self, row: dict[str, Any]) -> dict[str, Any]: ...


class AgentToolChild:
    """One chat host's side of the agent-tool child contract: its runs' memory in this isolate
    (controllers, request attribution, captured errors, pre-turn ids) and its tails."""

    __slots__ = (
        "_ctx",
        "_stream",
        "_turns",
        "_recovery",
        "_progress",
        "_hooks",
        "_run_delivery",
        "controllers",
        "request_runs",
        "last_errors",
        "pre_turn_ids",
        "terminal_only",
        "tails",
    )

    def __init__(
        self,
        ctx: AgentContext,
        stream: ResumableStream,
        turns: ChatTurns,
        recovery: ChatRecovery,
        progress: AgentToolProgress,
        hooks: ChildRunHooks,
        *,
        chunk_limit: StoreEveryChunk | None = None,
        run_delivery: EveryRunShown | None = None,
    ) -> None:
        self._ctx = ctx
        self._stream = stream
        self._turns = turns
        self._recovery = recovery
        self._progress = progress
        self._hooks = hooks
        self._run_delivery = EveryRunShown() if run_delivery is None else run_delivery
        self.controllers: dict[str, AbortController] = {}
        """The runs live in this isolate, by run id."""
        self.request_runs: dict[str, str | None] = {}
        """requestId -> runId (None: the request serves no run), as the snoop learns them."""
        self.last_errors: dict[str, str] = {}
        self.pre_turn_ids: dict[str, set[str]] = {}
        self.terminal_only: set[str] = set()
        """The runs whose chunks this host keeps from its own clients (`terminal_runs.py`)."""
        self.tails = AgentToolTails(ctx, stream, self, hooks, chunk_limit)

    # -- the adapter (RPC) -------------------------------------------------------------------------
    async def start(self, input: Any, run_id: str, event_delivery: Any = None) -> dict[str, Any]:
        """Create the run and start its headless turn in the background; answers at once. A run
        the release keeps from this host's clients (`event_delivery`) is marked so on its row."""
        if not isinstance(run_id, str) or not run_id:
            raise InvalidArgument(f"start_agent_tool_run needs a non-empty run_id, got {run_id!r}")
        self._hooks._ensure_agent_tool_tables()
        if self.row(run_id) is not None:
            # The row exists, so inspecting it answers (None only for a run with no row).
            return cast("dict[str, Any]", await self.inspect(run_id))
        now = self._ctx.host.clock.now_ms()
        self._hooks._insert_agent_tool_row(run_id, input, now)
        if self._run_delivery.terminal(event_delivery):
            self._run_delivery.mark(self._ctx, self._hooks._agent_tool_runs_table, run_id)
            self.terminal_only.add(run_id)
        controller = AbortController()
        self.controllers[run_id] = controller
        self._ctx.host.tasks.wait_until(self._run_in_background(run_id, input, controller))
        return {"runId": run_id, "status": "running", "startedAt": now}

    async def cancel(self, run_id: str, reason: str | None = None) -> None:
        """Abort the run (and a recovery turn driving it), seal it `aborted`, close its tails.
        Nothing for an unknown or settled run."""
        row = self.row(run_id)
        if row is None or row["status"] not in self._hooks._agent_tool_active_statuses:
            return
        controller = self.controllers.get(run_id)
        if controller is not None:
            controller.abort(reason)
        for request_id, turn in list(self._turns.states.items()):
            if turn.plan.trigger == "recovery" or self.request_runs.get(request_id) == run_id:
                turn.controller.abort(reason)
        for key, incident in self._ctx.host.kv.list(INCIDENT_PREFIX).items():
            if incident.get("runId") == run_id and incident.get("status") == "scheduled":
                self._recovery.set_incident(key, incident, "failed")
        self._hooks._seal_agent_tool_aborted(run_id, reason)
        self.tails.close_run(run_id)
        if controller is None:
            self.release(run_id)

    async def inspect(self, run_id: str, reconcile: bool = True) -> dict[str, Any] | None:
        """The run's snapshot (SDK keys), None iff this child has no row for it. A stale row
        is reconciled first (§7.7), unless `reconcile` is False: then it is read as it is."""
        row = self.row(run_id)
        if row is None:
            return None
        if reconcile and self._is_stale(row):
            await self.reconcile_stale(only=run_id)
            # Reconciling seals a stale row; it never deletes one.
            row = cast("dict[str, Any]", self.row(run_id))
        inspection = await self._hooks._inspection_from_row(row)
        inspection.update(self._progress.projection(row))
        return inspection

    async def chunks(self, run_id: str, after_sequence: int = -1) -> list[dict[str, Any]]:
        """Stored chunks of the run with index > `after_sequence`, as {"sequence", "body"}."""
        row = self.row(run_id)
        if row is None:
            return []
        return self._stream.chunks(self._hooks._agent_tool_stream_id(row), after_sequence)

    # -- rows --------------------------------------------------------------------------------------
    def row(self, run_id: str) -> dict[str, Any] | None:
        if not self._hooks._agent_tool_tables_exist():
            return None
        rows = self._ctx.sql(
            f"SELECT * FROM {self._hooks._agent_tool_runs_table} WHERE run_id = ?", run_id
        )
        return rows[0] if rows else None

    def note_row(self, row: Mapping[str, Any]) -> None:
        """An active run's row read in this isolate: remember whether it is a terminal one."""
        if self._run_delivery.row_terminal(row):
            self.terminal_only.add(row["run_id"])

    def shown(self, run_id: str | None) -> bool:
        """Whether a frame the snoop attributed to `run_id` (None: to no run's chunks) goes out
        to this host's own clients."""
        return run_id is None or run_id not in self.terminal_only

    def _is_stale(self, row: dict[str, Any]) -> bool:
        return (
            row["status"] in self._hooks._agent_tool_active_statuses
            and row["run_id"] not in self.controllers
        )

    def bind_request(self, run_id: str, request_id: str) -> None:
        self.request_runs[request_id] = run_id
        self._ctx.sql(
            f"UPDATE {self._hooks._agent_tool_runs_table} SET request_id = ? WHERE run_id = ?",
            request_id,
            run_id,
        )

    def turn_snapshot_extra(self, request_id: str) -> dict[str, Any]:
        run_id = self.request_runs.get(request_id)
        return {"runId": run_id} if run_id is not None else {}

    def on_turn_settled(self, request_id: str) -> None:
        if request_id in self.request_runs and (self.request_runs[request_id] is None):
            del self.request_runs[request_id]

    # -- the headless turn -------------------------------------------------------------------------
    async def _run_in_background(
        self, run_id: str, input: Any, controller: AbortController
    ) -> None:
        def settle(terminal: dict[str, Any]) -> None:
            try:
                self._finalize(run_id, terminal)
            except Exception as exc:  # noqa: BLE001 - e.g. a storage error on the terminal write
                self._ctx.log("error", f"agent-tool run {run_id} could not be settled: {exc}")
                # Without its controller the row is stale: the next inspect reconciles it.
                self.release(run_id)

        async def body() -> None:
            try:
                terminal = await self._hooks._drive_agent_tool_run(run_id, input, controller)
            except Exception as exc:  # noqa: BLE001 - a failing run is settled, not raised
                terminal = self._hooks._agent_tool_exception_terminal(exc, controller)
            settle(terminal)

        try:
            await self._hooks.keep_alive_while(body)
        except Exception as exc:  # noqa: BLE001 - only taking the lease can throw here
            # The turn never started. Settled as failed, the run does not look live for the
            # rest of the incarnation with nothing driving it (its controller is held, so no
            # inspect reconciles it), while the parent waits on its tail (the SDK leaves it).
            probe(self._ctx.host, "chat.run_lease_failed_settled")
            settle(self._hooks._agent_tool_exception_terminal(exc, controller))

    def _finalize(self, run_id: str, terminal: dict[str, Any]) -> None:
        self._progress.forget(run_id)
        self._hooks._write_agent_tool_terminal(run_id, terminal)
        self.release(run_id)

    def release(self, run_id: str) -> None:
        """Drop every in-memory trace of the run; close its tails."""
        self.controllers.pop(run_id, None)
        self.last_errors.pop(run_id, None)
        self.pre_turn_ids.pop(run_id, None)
        self.terminal_only.discard(run_id)
        for request_id, mapped in list(self.request_runs.items()):
            if mapped == run_id or mapped is None:
                del self.request_runs[request_id]
        self.tails.close_run(run_id)

    # -- self-heal ---------------------------------------------------------------------------------
    def rebind_for_recovery(self, request_id: str, incident_key: str) -> None:
        """Bind the newest active run to the recovered turn, so its frames stay attributable
        (and note the run on the recovery's incident, at `incident_key`)."""
        if not self._hooks._agent_tool_tables_exist():
            return
        statuses = self._hooks._agent_tool_active_statuses
        rows = self._ctx.sql(
            f"SELECT * FROM {self._hooks._agent_tool_runs_table} WHERE status IN "
            f"({', '.join('?' for _ in statuses)}) ORDER BY started_at DESC, rowid DESC LIMIT 1",
            *statuses,
        )
        if not rows:
            return
        run_id = rows[0]["run_id"]
        self.note_row(rows[0])
        self.bind_request(run_id, request_id)
        incident = self._ctx.host.kv.get(incident_key)
        if incident is not None:
            self._ctx.host.kv.put(incident_key, {**incident, "runId": run_id})
        self._ctx.host.trace.emit("chat:recovery:rebind", runId=run_id, requestId=request_id)

    def stream_for_recovered_turn(self, request_id: str, payload: dict[str, Any]) -> Any:
        """A recovered turn bound to a run continues the interrupted turn's stream, so the
        run's stored chunks keep their indices and the next ones follow them: a client that
        holds chunks 0..k of the run never gets other chunks under those numbers (S5)."""
        if self.request_runs.get(request_id) is None:
            return None
        raw = payload.get("snapshot")
        snapshot = raw if isinstance(raw, dict) else {}
        stream_id, _ = self._recovery.interrupted_stream(payload["requestId"], snapshot)
        return stream_id

    async def after_recovery(self) -> None:
        await self.reconcile_stale()

    async def reconcile_stale(self, only: str | None = None) -> None:
        if not self._hooks._agent_tool_tables_exist():
            return
        statuses = self._hooks._agent_tool_active_statuses
        rows = self._ctx.sql(
            f"SELECT * FROM {self._hooks._agent_tool_runs_table} WHERE status IN "
            f"({', '.join('?' for _ in statuses)}) ORDER BY started_at, rowid",
            *statuses,
        )
        for row in rows:
            if (only is not None and row["run_id"] != only) or not self._is_stale(row):
                continue
            recovery = self._recovery.classify(row["run_id"])
            if recovery == "in-progress" or self._turns.states:
                continue
            answers = [
                m
                for m in await self._hooks._messages_after_run_start(row)
                if m.get("role") == "assistant" and m.get("parts")
            ]
            if recovery != "failed" and answers:
                terminal = await self._hooks._stale_completion(row)
            else:
                terminal = {"status": "error", "error": INTERRUPTED_BEFORE_FINISH}
            probe(self._ctx.host, "chat.stale_child_run_reconciled")
            self._progress.forget(row["run_id"])
            self._hooks._write_agent_tool_terminal(row["run_id"], terminal)
            self.release(row["run_id"])
            self._ctx.host.trace.emit(
                "chat:child_run:reconciled", runId=row["run_id"], status=terminal["status"]
            )
