"""What a chat turn runs in: a fiber (0.21.0, and a sub-agent on 0.32.0) or a Task run
(0.32.0 at the top level; spec sdk-0.32 §8.3).

`ChatTurns` hands each turn's body to its host's runner (`TurnHooks._run_chat_turn`); the chat
release picks the runner (`chat_releases.py`).

- `FiberTurns` (0.21.0): the fiber `__cf_internal_chat_turn:<requestId>`, with the turn's
  snapshot written first and every stash wrapped (`_run_fiber_with_stash_wrapper`). Chat
  recovery finds its row after a death (`cf_agents_runs`).
- `TaskTurns` (0.32.0): a sub-agent runs the fiber as 0.21.0 does. A top-level agent runs the
  turn as an attached run of the Tasks capability (`releases/v0_32/tasks.py`): definition
  `__cf_internal_chat_turn`, run id `chat_<nonce>`, not retained, metadata `{requestId}`, input
  `{requestId, continuation, nonce}`, one step `model-turn` (one attempt, a one-day timeout). The
  turn's body is kept in memory by nonce (its live closure); the step writes the snapshot to KV
  `__cf_chat_turn_snapshot:chat_<nonce>`, runs the body under `keep_alive_while` with the stash
  writing that key, and deletes it when the body ends. No fiber row is written. After an
  eviction the Tasks capability drives the run again; its step then finds no live closure and
  hands the turn to chat recovery as an interrupted fiber (`_handle_internal_fiber_recovery`
  with the name `__cf_internal_chat_turn:<requestId>`, the stored snapshot, the run's
  `createdAt`), then deletes the key.

The SDK's counterparts: ai-chat's `_runWrappedChatRecoveryFiber` and
`_registerChatTurnTaskDefinition`, and agents/chat's `createChatTurnTaskDefinition`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from agents_core.chat.turns import CHAT_TURN_FIBER_PREFIX
from agents_core.fibers import FiberContext, with_fiber_stash
from agents_core.recovery import FiberRecoveryContext

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.releases.v0_32.tasks import StepContext, Tasks

__all__ = [
    "CHAT_TURN_DEFINITION",
    "CHAT_TURN_STEP",
    "CHAT_TURN_SNAPSHOT_PREFIX",
    "ChatTurnRunEnded",
    "FiberTurns",
    "TaskTurns",
    "TurnRunnerHooks",
]

T = TypeVar("T")

CHAT_TURN_DEFINITION = "__cf_internal_chat_turn"
"""The SDK's `CHAT_FIBER_NAME`: the Task definition (and, with `:<requestId>`, the fiber name)."""
CHAT_TURN_STEP = "model-turn"
CHAT_TURN_STEP_CONFIG = {"retries": {"limit": 1}, "timeout": "1 day"}
CHAT_TURN_SNAPSHOT_PREFIX = "__cf_chat_turn_snapshot:"
TASKS_CAPABILITY = "tasks"

TurnBody = Callable[[Any], Awaitable[Any]]


class TurnRunnerHooks(Protocol):
    """What a runner uses of its chat host: the fiber runner, `keep_alive_while`, and the
    recovery entry a fiber scan calls."""

    async def _run_fiber_with_stash_wrapper(
        self,
        name: str,
        fn: Callable[[Any], Awaitable[Any]],
        *,
        initial_snapshot: Any,
        wrap: Callable[[Any], Any],
    ) -> Any: ...
    async def keep_alive_while(self, fn: Callable[[], Awaitable[T]]) -> T: ...
    async def _handle_internal_fiber_recovery(self, ctx: FiberRecoveryContext) -> bool: ...


class FiberTurns:
    """0.21.0: every chat turn a fiber named for it."""

    __slots__ = ("_ctx", "_hooks")

    def __init__(self, ctx: AgentContext, hooks: TurnRunnerHooks, lifecycle: Any) -> None:
        self._ctx = ctx
        self._hooks = hooks

    async def run(
        self,
        request_id: str,
        continuation: bool,
        body: TurnBody,
        initial_snapshot: Any,
        wrap: Callable[[Any], Any],
    ) -> Any:
        return await self._hooks._run_fiber_with_stash_wrapper(
            CHAT_TURN_FIBER_PREFIX + request_id,
            body,
            initial_snapshot=initial_snapshot,
            wrap=wrap,
        )

    def has_orphaned_turn(self) -> bool:
        """A turn's Task run no turn of this incarnation runs (a fiber's row is read by chat
        recovery itself)."""
        return False


@dataclass
class _LiveTurn:
    """A turn this isolate is running, by nonce (the SDK's live closure)."""

    initial: Any
    wrap: Callable[[Any], Any]
    body: TurnBody
    outcome: Any
    """A Deferred settled with the body's value or error, which the caller awaits only when the
    attempt it drove did not run the body to its end (awaiting it is a step of its own)."""
    settled: bool = False
    value: Any = None
    error: BaseException | None = None

    def resolve(self, value: Any) -> None:
        self.settled, self.value = True, value
        self.outcome.resolve(value)

    def reject(self, error: BaseException) -> None:
        self.settled, self.error = True, error
        self.outcome.reject(error)


class _TasksPort(Protocol):
    def register(self, name: str, definition: Callable[[Any, Any], Awaitable[Any]]) -> None: ...
    async def run_attached(
        self, definition: str, input: Any, *, run_id: str, retain: bool, metadata: Any
    ) -> dict[str, Any]: ...
    def created_at(self, run_id: str) -> int | None: ...
    async def get(self, run_id: str) -> dict[str, Any] | None: ...


class ChatTurnRunEnded(RuntimeError):
    """A chat turn's Task run settled before its turn body ran (its attempt failed at its
    start, or it was cancelled): the turn's caller is told so instead of waiting on a body
    that will never run."""


class TaskTurns(FiberTurns):
    """0.32.0: a top-level agent's turns as attached Task runs; a sub-agent's as fibers."""

    __slots__ = ("_tasks", "_live")

    def __init__(self, ctx: AgentContext, hooks: TurnRunnerHooks, lifecycle: Any) -> None:
        super().__init__(ctx, hooks, lifecycle)
        tasks = cast("Tasks | None", lifecycle.capability(TASKS_CAPABILITY))
        if tasks is None:
            raise RuntimeError("a 0.32.0 chat host needs the agent's Tasks capability")
        self._tasks: _TasksPort = tasks
        self._live: dict[str, _LiveTurn] = {}
        # Registered by every host's constructor, on every wake, so that a run left by a dead
        # isolate finds its definition again (the SDK registers it on a facet too).
        tasks.register(CHAT_TURN_DEFINITION, self._definition)

    async def run(
        self,
        request_id: str,
        continuation: bool,
        body: TurnBody,
        initial_snapshot: Any,
        wrap: Callable[[Any], Any],
    ) -> Any:
        if self._ctx.is_facet:
            return await super().run(request_id, continuation, body, initial_snapshot, wrap)
        host = self._ctx.host
        nonce = host.entropy.nanoid()
        outcome = host.tasks.deferred()
        entry = self._live[nonce] = _LiveTurn(initial_snapshot, wrap, body, outcome)
        try:
            await self._tasks.run_attached(
                CHAT_TURN_DEFINITION,
                {"requestId": request_id, "continuation": continuation, "nonce": nonce},
                run_id=f"chat_{nonce}",
                retain=False,
                metadata={"requestId": request_id},
            )
            if not entry.settled:
                run_id = f"chat_{nonce}"
                run = await self._tasks.get(run_id)
                if run is None or run.get("state") in ("completed", "failed", "cancelled"):
                    error = (run or {}).get("error") or {}
                    raise ChatTurnRunEnded(
                        f"chat turn {request_id}: its Task run {run_id} ended before the turn "
                        f"ran ({error.get('message') or (run or {}).get('state') or 'deleted'})"
                    )
                return await outcome
            if entry.error is not None:
                raise entry.error
            return entry.value
        finally:
            self._live.pop(nonce, None)

    def has_orphaned_turn(self) -> bool:
        sql = self._ctx.sql
        if not sql(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'cf_agents_task_runs'"
        ):
            return False  # an agent that never started has no Task runs
        rows = sql(
            "SELECT run_id FROM cf_agents_task_runs WHERE definition = ? "
            "AND state IN ('pending', 'waiting', 'running')",
            CHAT_TURN_DEFINITION,
        )
        return any(str(row["run_id"]).removeprefix("chat_") not in self._live for row in rows)

    # -- the definition ---------------------------------------------------------------------------
    async def _definition(self, input: Any, step: Any) -> None:
        request_id = input["requestId"]
        nonce = input["nonce"]

        async def model_turn(context: StepContext) -> None:
            await self._model_turn(request_id, nonce, context)

        await step.do(CHAT_TURN_STEP, CHAT_TURN_STEP_CONFIG, model_turn)

    async def _model_turn(self, request_id: str, nonce: str, context: StepContext) -> None:
        run_id = f"chat_{nonce}"
        key = CHAT_TURN_SNAPSHOT_PREFIX + run_id
        kv = self._ctx.host.kv
        entry = self._live.get(nonce)
        if entry is None:
            # Driven again after the isolate that ran it died: chat recovery takes it over.
            persisted = kv.get(key)
            created_at = self._tasks.created_at(run_id)
            await self._hooks._handle_internal_fiber_recovery(
                FiberRecoveryContext(
                    id=run_id,
                    name=f"{CHAT_TURN_DEFINITION}:{request_id}",
                    snapshot=persisted,
                    created_at=self._ctx.host.clock.now_ms() if created_at is None else created_at,
                    recovery_reason="interrupted",
                )
            )
            kv.delete(key)
            return
        kv.put(key, entry.initial)

        def stash(data: Any) -> None:
            with contextlib.suppress(Exception):  # the SDK's put is not awaited, its error dropped
                kv.put(key, entry.wrap(data))

        fiber = FiberContext(id=nonce, signal=context.signal, stash=stash)
        try:
            value = await self._hooks.keep_alive_while(
                lambda: with_fiber_stash(nonce, stash, lambda: entry.body(fiber))
            )
            entry.resolve(value)
        except Exception as error:
            entry.reject(error)
            raise
        finally:
            with contextlib.suppress(Exception):  # not awaited in the SDK either
                kv.delete(key)
