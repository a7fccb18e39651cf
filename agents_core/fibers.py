"""Fibers: durable executions that survive eviction through their last `stash()`.

`run_fiber` (unmanaged) keeps a row in `cf_agents_runs` from start to end, holds a keepAlive
lease while it runs, and leaves the row behind only when the incarnation dies under it: that
orphan is what recovery finds. `start_fiber` (managed) adds a ledger row in `cf_agents_fibers`
with a status machine, idempotency by id or key, waiting, cancellation and management calls
(spec fibers §5). The ledger's management API lives in `fiber_ledger.py`.

`FiberRunner` is the component that runs them: it owns the fibers executing in this incarnation,
the managed executions and their abort controllers, and the run rows (`cf_agents_runs`) it
writes; it takes its keepAlive leases from KeepAlive, its ledger rows through the FiberLedger,
and reaches the sub-agent leases and the recovery scan through `FiberParts`, its port of the
agent. The SDK's counterpart is the Agent's fiber API (`runFiber`, `stash`, `startFiber`,
`cancelFiber`, `_runFiberInternal`).

The current fiber is found through a context variable, so `self.stash()` is right with
concurrent fibers and inside nested helpers, and fails outside any fiber.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from agents_core.durable_memo import RUN_ROW_DELETE, RUN_ROW_INSERT, RUN_ROW_SNAPSHOT
from agents_core.errors import InvalidArgument, NotInFiber
from agents_core.fiber_ledger import TERMINAL_STATUSES, FiberInspection, StartFiberResult
from agents_core.jsontext import to_json_text
from agents_core.probes import probe
from agents_core.signals import AbortController, AbortSignal

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.fiber_ledger import FiberLedger
    from agents_core.host import Task
    from agents_core.keep_alive import KeepAlive
    from agents_core.lifecycle import Lifecycle

__all__ = [
    "FiberContext",
    "FiberParts",
    "FiberRunner",
    "stash_current_fiber",
    "with_fiber_stash",
]

T = TypeVar("T")


@dataclass
class FiberContext:
    """What a fiber callback receives: its id, its cancel signal and `stash`."""

    id: str
    signal: AbortSignal
    stash: Callable[[Any], None]
    snapshot: None = None


@dataclass(frozen=True)
class _Frame:
    fiber_id: str
    stash: Callable[[Any], None]


_current_fiber: contextvars.ContextVar[_Frame | None] = contextvars.ContextVar(
    "agents_core_current_fiber", default=None
)


def stash_current_fiber(data: Any) -> None:
    """Checkpoint the current fiber (found through the context); full replacement."""
    frame = _current_fiber.get()
    if frame is None:
        raise NotInFiber("stash() called outside a fiber")
    frame.stash(data)


async def with_fiber_stash(
    fiber_id: str, stash: Callable[[Any], None], fn: Callable[[], Awaitable[T]]
) -> T:
    """Run `fn()` with `stash` as the current fiber's checkpoint (0.32.0's `_withFiberStash`,
    for a chat turn that runs as a Task instead of a fiber)."""
    outer = _current_fiber.get()
    frame = _Frame(fiber_id, stash)
    _current_fiber.set(frame)
    try:
        return await fn()
    finally:
        if _current_fiber.get() is frame:
            _current_fiber.set(outer)


class FiberParts(Protocol):
    """What the FiberRunner uses of the agent's parts that are not components yet: a
    sub-agent's fiber lease on its root, and the recovery scan (a wait for an orphaned managed
    fiber runs it)."""

    async def _facet_register_run(self, fiber_id: str) -> None: ...
    async def _facet_unregister_run_logged(self, fiber_id: str) -> None: ...
    async def _check_run_fibers(self) -> None: ...


class FiberRunner:
    """One agent's fibers: those executing in this incarnation, and the managed executions."""

    __slots__ = (
        "_ctx",
        "_ledger",
        "_keep_alive",
        "_lifecycle",
        "_parts",
        "host",
        "sql",
        "_memo",
        "_emit",
        "_log",
        "active",
        "_managed_fiber_executions",
        "_managed_fiber_abort_controllers",
    )

    def __init__(
        self,
        ctx: AgentContext,
        ledger: FiberLedger,
        keep_alive: KeepAlive,
        lifecycle: Lifecycle,
        parts: FiberParts,
    ) -> None:
        self._ctx = ctx
        self._ledger = ledger
        self._keep_alive = keep_alive
        self._lifecycle = lifecycle
        self._parts = parts
        self.host = ctx.host
        self.sql = ctx.sql
        self._memo = ctx.memo
        self._emit = ctx.emit
        self._log = ctx.log
        self.active: dict[str, None] = {}
        """The fibers executing in this incarnation (a run row of another is an orphan)."""
        self._managed_fiber_executions: dict[str, Task[None]] = {}
        self._managed_fiber_abort_controllers: dict[str, AbortController] = {}

    # -- unmanaged ----------------------------------------------------------------------------
    async def run_fiber(self, name: str, fn: Callable[[FiberContext], Awaitable[Any]]) -> Any:
        """Run `fn(ctx)` as a durable fiber; its value, or its error (no retries)."""
        return await self._run_fiber_internal(self.host.entropy.nanoid(), name, fn)

    async def _run_fiber_internal(
        self,
        fiber_id: str,
        name: str,
        fn: Callable[[FiberContext], Awaitable[Any]],
        *,
        managed: bool = False,
        signal: AbortSignal | None = None,
        initial_snapshot: Any = None,
        has_initial_snapshot: bool = False,
        wrap_stash: Callable[[Any], Any] | None = None,
    ) -> Any:
        if not isinstance(name, str):
            raise InvalidArgument(f"fiber name must be a string, got {name!r}")
        now = self.host.clock.now_ms()
        # Synchronous prefix: the row exists before the caller's first await returns.
        self.sql(RUN_ROW_INSERT, fiber_id, name, now)
        self._memo.run_row_inserted(fiber_id)
        self._emit("fiber:run:started", fiberId=fiber_id, fiberName=name, managed=managed)
        self.active[fiber_id] = None
        dispose: Callable[[], None] | None = None
        registered = False
        outcome: tuple[str, str | None] | None = None

        def stash(data: Any) -> None:
            self._write_stash(fiber_id, wrap_stash(data) if wrap_stash else data, managed)

        try:
            try:
                if has_initial_snapshot:
                    self._write_stash(fiber_id, initial_snapshot, managed)
                if self._ctx.is_facet:
                    await self._parts._facet_register_run(fiber_id)
                    registered = True
                dispose = await self._keep_alive.lease(f"fiber:{fiber_id}")
            except Exception as exc:
                # The SDK emits nothing when a fiber's set-up throws before its function runs
                # (its run:failed is for the function's own error); the harness's record says the
                # fiber stopped here, so a checker does not take it for one still running.
                self.host.trace.emit(
                    "fiber:setup_failed", fiberId=fiber_id, fiberName=name, error=_message(exc)
                )
                raise
            context = FiberContext(id=fiber_id, signal=signal or AbortSignal(), stash=stash)
            # set/restore rather than reset(token): a coroutine closed outside its task's context
            # (by the garbage collector, after its incarnation died) must not raise here, and
            # must not leak its outer frame into that context either: restore only where this
            # frame is the current one.
            outer = _current_fiber.get()
            frame = _Frame(fiber_id, stash)
            _current_fiber.set(frame)
            try:
                value = await fn(context)
            except BaseException as exc:
                if isinstance(exc, Exception):
                    outcome = _body_outcome(exc, signal)
                if managed:
                    self._settle_managed_fiber(fiber_id, ok=False, error=exc, signal=signal)
                if isinstance(exc, Exception):
                    self._emit(
                        "fiber:run:failed",
                        fiberId=fiber_id,
                        fiberName=name,
                        managed=managed,
                        error=_message(exc),
                        elapsedMs=self.host.clock.now_ms() - now,
                    )
                raise
            finally:
                if _current_fiber.get() is frame:
                    _current_fiber.set(outer)
            outcome = ("completed", None)
            if managed:
                self._settle_managed_fiber(fiber_id, ok=True, error=None, signal=signal)
            self._emit(
                "fiber:run:completed",
                fiberId=fiber_id,
                fiberName=name,
                managed=managed,
                elapsedMs=self.host.clock.now_ms() - now,
            )
            return value
        finally:
            self.active.pop(fiber_id, None)
            await self._finalize_run_row(fiber_id, name, outcome, dispose, registered)

    async def _finalize_run_row(
        self,
        fiber_id: str,
        name: str,
        outcome: tuple[str, str | None] | None,
        dispose: Callable[[], None] | None,
        registered: bool,
    ) -> None:
        """The end of every fiber, however its body ended (`outcome`: `(status, error)` when
        the body ran, None when its set-up failed): delete the run row, give back the
        keepAlive lease and the sub-agent's lease on its root. A failed DELETE propagates
        (0.21.0 lets it escape from `finally`) and keeps the root lease."""
        try:
            self.sql(RUN_ROW_DELETE, fiber_id)
            self._memo.run_row_deleted(fiber_id)
        except Exception:
            probe(self.host, "fiber.cleanup_delete_failed")
            raise
        finally:
            # A failed DELETE must not leak the lease (the SDK's order would: divergence
            # F2): the row it leaves is an orphan that recovery picks up.
            if dispose is not None:
                dispose()
        if registered:
            await self._parts._facet_unregister_run_logged(fiber_id)

    async def _run_fiber_with_stash_wrapper(
        self,
        name: str,
        fn: Callable[[FiberContext], Awaitable[Any]],
        *,
        initial_snapshot: Any,
        wrap: Callable[[Any], Any],
    ) -> Any:
        """Framework use (chat turns): write an initial snapshot and wrap every user stash."""
        return await self._run_fiber_internal(
            self.host.entropy.nanoid(),
            name,
            fn,
            initial_snapshot=initial_snapshot,
            has_initial_snapshot=True,
            wrap_stash=wrap,
        )

    def _write_stash(self, fiber_id: str, data: Any, managed: bool) -> None:
        text = to_json_text(data)
        self.sql(RUN_ROW_SNAPSHOT, text, fiber_id)
        if managed:
            # No status condition: a stash after cancel still overwrites the snapshot (SDK).
            self.sql("UPDATE cf_agents_fibers SET snapshot = ? WHERE fiber_id = ?", text, fiber_id)

    # -- managed --------------------------------------------------------------------------------
    async def start_fiber(
        self,
        name: str,
        fn: Callable[[FiberContext], Awaitable[Any]],
        *,
        fiber_id: str | None = None,
        idempotency_key: str | None = None,
        metadata: dict[str, Any] | None = None,
        wait_for_completion: bool = False,
    ) -> StartFiberResult:
        """Accept managed work once per id or key; returns status, never the callback's value."""
        if fiber_id is not None and (not isinstance(fiber_id, str) or not fiber_id.strip()):
            raise InvalidArgument(f"fiberId must not be blank (got {fiber_id!r})")
        if idempotency_key is not None and (
            not isinstance(idempotency_key, str) or not idempotency_key.strip()
        ):
            raise InvalidArgument(f"idempotencyKey must not be blank (got {idempotency_key!r})")
        explicit_id = fiber_id is not None
        fiber_id = fiber_id if fiber_id is not None else self.host.entropy.nanoid()
        by_id = self._ledger.row(fiber_id)
        by_key = self._ledger.row_by_key(idempotency_key) if idempotency_key is not None else None
        if by_key is not None and (
            (by_id is not None and by_id["fiber_id"] != by_key["fiber_id"])
            or (explicit_id and by_key["fiber_id"] != fiber_id)
        ):
            raise InvalidArgument(
                f"fiberId and idempotencyKey refer to different fibers "
                f"(fiberId {fiber_id!r} -> {by_id['fiber_id'] if by_id else None!r}, "
                f"idempotencyKey {idempotency_key!r} -> {by_key['fiber_id']!r})"
            )
        existing = by_id or by_key
        if existing is not None:
            if wait_for_completion and existing["status"] not in TERMINAL_STATUSES:
                if existing["fiber_id"] in self._managed_fiber_executions:
                    probe(self.host, "fiber.duplicate_joined_running_execution")
                else:  # its execution died with an incarnation: the wait runs recovery
                    probe(self.host, "fiber.duplicate_wait_triggered_recovery")
                waited = await self._wait_for_managed_fiber(existing["fiber_id"])
                if waited is None:
                    raise InvalidArgument(f"Fiber {existing['fiber_id']} no longer exists")
                return StartFiberResult.of(waited, accepted=False)
            return StartFiberResult.of(FiberInspection.from_row(existing), accepted=False)
        metadata_json = to_json_text(metadata, "metadata") if metadata else None
        self.sql(
            "INSERT INTO cf_agents_fibers (fiber_id, idempotency_key, name, status, snapshot, "
            "metadata_json, error_message, created_at, started_at, completed_at) "
            "VALUES (?, ?, ?, 'pending', NULL, ?, NULL, ?, NULL, NULL)",
            fiber_id,
            idempotency_key,
            name,
            metadata_json,
            self.host.clock.now_ms(),
        )
        try:
            # The row this turn just wrote (a read that fails raises, a storage fault).
            accepted = FiberInspection.from_row(cast("dict[str, Any]", self._ledger.row(fiber_id)))
        except Exception:
            # The row is written, so the work is accepted: run it even though its answer
            # cannot be read (a storage fault). The SDK throws before starting the execution,
            # leaving a `pending` row nothing ever runs or recovers (divergence F8).
            probe(self.host, "fiber.managed_accept_read_failed")
            self._begin_managed_execution(fiber_id, name, fn)
            raise
        self._begin_managed_execution(fiber_id, name, fn)
        if wait_for_completion:
            waited = await self._wait_for_managed_fiber(fiber_id)
            if waited is None:
                raise InvalidArgument(f"Fiber {fiber_id} no longer exists")
            return StartFiberResult.of(waited, accepted=True)
        return StartFiberResult.of(accepted, accepted=True)

    def _begin_managed_execution(
        self, fiber_id: str, name: str, fn: Callable[[FiberContext], Awaitable[Any]]
    ) -> None:
        execution = self.host.tasks.wait_until(self._execute_managed_fiber(fiber_id, name, fn))
        if not execution.done():
            self._managed_fiber_executions[fiber_id] = execution

    async def _execute_managed_fiber(
        self, fiber_id: str, name: str, fn: Callable[[FiberContext], Awaitable[Any]]
    ) -> None:
        try:
            controller = AbortController()
            try:
                row = self._ledger.row(fiber_id)
                if row is None or row["status"] != "pending":
                    return
                self._managed_fiber_abort_controllers[fiber_id] = controller
                changed = self.host.sql.execute(
                    "UPDATE cf_agents_fibers SET status = 'running', started_at = ? "
                    "WHERE fiber_id = ? AND status = 'pending'",
                    (self.host.clock.now_ms(), fiber_id),
                )
            except Exception as exc:  # noqa: BLE001 - recovery takes the accepted row over
                # The execution could not begin (a storage fault): the accepted row stays
                # `pending` with no run row. Arm the alarm so that a recovery pass hands it to
                # on_fiber_recovered; without it nothing ever would (divergence F7).
                probe(self.host, "fiber.managed_start_failed")
                self._log("error", f'managed fiber "{name}" ({fiber_id}) could not start: {exc}')
                await self._lifecycle.host_work_changed_logged()
                return
            if not changed:
                return
            try:
                await self._run_fiber_internal(
                    fiber_id, name, fn, managed=True, signal=controller.signal
                )
            except Exception as exc:  # noqa: BLE001 - settled in the ledger, logged, not rethrown
                # A failure before the callback could run (a run-row id collision, keepAlive)
                # reaches here with the row still `running`; a callback failure is already settled.
                self._settle_managed_fiber(fiber_id, ok=False, error=exc, signal=controller.signal)
                self._log("error", f'managed fiber "{name}" ({fiber_id}) failed: {_message(exc)}')
        finally:
            self._managed_fiber_abort_controllers.pop(fiber_id, None)
            self._managed_fiber_executions.pop(fiber_id, None)

    def _settle_managed_fiber(
        self, fiber_id: str, *, ok: bool, error: BaseException | None, signal: Any
    ) -> None:
        now = self.host.clock.now_ms()
        if ok:
            self.sql(
                "UPDATE cf_agents_fibers SET status = 'completed', completed_at = ? "
                "WHERE fiber_id = ? AND status = 'running'",
                now,
                fiber_id,
            )
        else:
            status = "aborted" if signal is not None and signal.aborted else "error"
            self.sql(
                "UPDATE cf_agents_fibers SET status = ?, error_message = ?, completed_at = ? "
                "WHERE fiber_id = ? AND status = 'running'",
                status,
                _message(error),
                now,
                fiber_id,
            )
        self._ledger.notify_terminal(fiber_id)

    async def _wait_for_managed_fiber(self, fiber_id: str) -> FiberInspection | None:
        row = self._ledger.row(fiber_id)
        if row is None or row["status"] in TERMINAL_STATUSES:
            return FiberInspection.from_row(row) if row else None
        if fiber_id not in self._managed_fiber_executions:
            await self._parts._check_run_fibers()  # the third recovery trigger (spec fibers §6.1)
        row = self._ledger.row(fiber_id)
        if row is None or row["status"] in TERMINAL_STATUSES:
            return FiberInspection.from_row(row) if row else None
        await self._ledger.wait_terminal(fiber_id)
        row = self._ledger.row(fiber_id)
        return FiberInspection.from_row(row) if row else None

    def cancel_fiber(self, fiber_id: str, reason: str | None = None) -> bool:
        """Abort a pending or running managed fiber (cooperatively); False if missing/terminal."""
        row = self._ledger.row(fiber_id)
        if row is None or row["status"] in TERMINAL_STATUSES:
            return False
        self.sql(
            "UPDATE cf_agents_fibers SET status = 'aborted', error_message = ?, completed_at = ? "
            "WHERE fiber_id = ? AND status IN ('pending', 'running')",
            reason,
            self.host.clock.now_ms(),
            fiber_id,
        )
        controller = self._managed_fiber_abort_controllers.get(fiber_id)
        if controller is not None:
            controller.abort(reason)
        self._ledger.notify_terminal(fiber_id)
        return True

    def cancel_fiber_by_key(self, idempotency_key: str, reason: str | None = None) -> bool:
        row = self._ledger.row_by_key(idempotency_key)
        return False if row is None else self.cancel_fiber(row["fiber_id"], reason)


def _body_outcome(error: Exception, signal: AbortSignal | None) -> tuple[str, str | None]:
    """How a fiber's body ended when it threw: `aborted` when its signal was, else `error`."""
    return ("aborted" if signal is not None and signal.aborted else "error", _message(error))


def _message(error: BaseException | None) -> str:
    if error is None:
        return ""
    text = str(error)
    return text if text else type(error).__name__
