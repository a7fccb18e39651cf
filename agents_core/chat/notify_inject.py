"""The chat hosts' notify and milestone hooks: how a detached run's news becomes chat messages
(spec agent-tools §4.9, §4.10, §11 E29).

Both hosts implement `_cf_detached_notify_finish(run, lifecycle)` and
`_cf_detached_notify_milestone(run, milestone, mode)` with the texts of
`format_detached_completion` / `format_detached_milestone` (an empty text injects nothing; the
finish still counts as delivered) and the metadata `{source, runId, agentType, status |
milestone}`. They differ as the SDK's hosts do:

- **Think** submits a user message (random id) durably, in `cf_think_submissions`, deduped by
  the idempotency key `detached-finish:<runId>:<status>` / `detached-ms:<runId>:<name>`; the
  submission's turn runs FIFO behind any active turn, from a drain task of this isolate (kicked
  on submit, and at startup for submissions a dead isolate left pending). A narrated milestone
  is an assistant message with the id `detached-ms:<runId>:<name>` added to history, no turn.
- **AIChatAgent** injects a message whose id is that key (metadata on the message) and, for a
  finish or a react milestone, runs a reply turn: inline when the hook runs in the serialized
  delivery slot (so the ledger marks the finish delivered only after the reply), as a
  fire-and-forget turn when the queue is busy, else as an exclusive turn it awaits. Deduped by
  the id being in the transcript or being injected in this isolate.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from agents_core.agent_tools.notify import (
    detached_finish_key,
    detached_milestone_key,
    detached_notify_metadata,
)
from agents_core.agent_tools.registry import AgentToolRunInfo
from agents_core.chat.child_runs import maybe_await
from agents_core.chat.messages import user_message
from agents_core.chat.parent import (
    in_delivery_slot,
    outside_delivery_slot,
    spawn_outside_delivery_slot,
)
from agents_core.chat.turns import TurnPlan
from agents_core.jsontext import to_json_text
from agents_core.probes import probe

if TYPE_CHECKING:
    from agents_core.chat.messages import ChatMessages
    from agents_core.chat.turns import ChatTurns
    from agents_core.context import AgentContext

__all__ = [
    "DetachedInjections",
    "NotifyHooks",
    "THINK_SUBMISSIONS_DDL",
    "ThinkSubmissions",
    "detached_notice",
]

THINK_SUBMISSIONS_DDL = (
    "CREATE TABLE IF NOT EXISTS cf_think_submissions ("
    "submission_id TEXT PRIMARY KEY, idempotency_key TEXT UNIQUE, request_id TEXT, "
    "stream_id TEXT, status TEXT NOT NULL, messages_json TEXT NOT NULL, metadata_json TEXT, "
    "error_message TEXT, created_at INTEGER NOT NULL, messages_applied_at INTEGER, "
    "started_at INTEGER, completed_at INTEGER)",
    "CREATE INDEX IF NOT EXISTS cf_think_submissions_status_created_idx "
    "ON cf_think_submissions (status, created_at, submission_id)",
)
INTERRUPTED_SUBMISSION = (
    "the isolate died while this submission's turn ran; chat recovery resumes the turn"
)
NOTIFY_TRIGGER = "detached-notify"
DRAIN_RETRIES = 5
DRAIN_RETRY_MS = 1_000
"""A drain whose read of the pending submissions fails (a storage fault) reads again after a
second, up to five times, holding its keepAlive lease; past that the submissions wait for the
next startup (`resume`)."""


def detached_notice(
    message_id: str, role: str, text: str, metadata: dict[str, Any]
) -> dict[str, Any]:
    """A one-text-part UI message carrying the notification's metadata."""
    return {
        "id": message_id,
        "role": role,
        "parts": [{"type": "text", "text": text}],
        "metadata": metadata,
    }


class NotifyHooks(Protocol):
    """What the notify components run of their chat host: the user's formatters of a detached
    run's news and the keepAlive a drain or a reply takes. The host passes itself; a
    subclass's override is what runs."""

    def format_detached_completion(self, run: AgentToolRunInfo, result: Any) -> Any: ...
    def format_detached_milestone(self, run: AgentToolRunInfo, milestone: Any) -> Any: ...
    async def keep_alive(self) -> Callable[[], None]: ...
    async def keep_alive_while(self, fn: Callable[[], Awaitable[Any]]) -> Any: ...


async def _finish_notice(
    hooks: NotifyHooks, run: AgentToolRunInfo, lifecycle: Any
) -> tuple[str, str, str]:
    """(key, text, status) of a finish notification; an empty text means none."""
    status = lifecycle.get("status") if isinstance(lifecycle, dict) else lifecycle.status
    text = await maybe_await(hooks.format_detached_completion(run, lifecycle))
    return detached_finish_key(run.run_id, str(status)), text or "", str(status)


class ThinkSubmissions:
    """Think's notify hooks: durable submissions (`cf_think_submissions`), each one turn, run
    FIFO by a drain task of this isolate; a narrated milestone is added to history."""

    __slots__ = ("_ctx", "_messages", "_turns", "_hooks", "_drain_live", "_live")

    def __init__(
        self, ctx: AgentContext, messages: ChatMessages, turns: ChatTurns, hooks: NotifyHooks
    ) -> None:
        self._ctx = ctx
        self._messages = messages
        self._turns = turns
        self._hooks = hooks
        self._drain_live = False
        self._live: set[str] = set()
        """The submissions whose turn this isolate runs."""

    # -- the hooks ---------------------------------------------------------------------------------
    async def notify_finish(self, run: AgentToolRunInfo, lifecycle: Any) -> None:
        key, text, status = await _finish_notice(self._hooks, run, lifecycle)
        if text:
            metadata = detached_notify_metadata(run, status=status)
            await self.submit([user_message(text, self._nanoid())], key, metadata)

    async def notify_milestone(self, run: AgentToolRunInfo, milestone: Any, mode: str) -> None:
        text = await maybe_await(self._hooks.format_detached_milestone(run, milestone))
        if not text:
            return
        key = detached_milestone_key(run.run_id, milestone["name"])
        metadata = detached_notify_metadata(run, milestone=milestone["name"])
        if mode == "narrate":
            if self._messages.by_id(key) is None:  # adding an existing id is a no-op
                self._messages.persist(detached_notice(key, "assistant", text, metadata))
                self._turns.broadcast_messages()
            return
        await self.submit([user_message(text, self._nanoid())], key, metadata)

    def _nanoid(self) -> str:
        return self._ctx.host.entropy.nanoid()

    # -- durable submissions -----------------------------------------------------------------------
    async def submit(
        self, messages: list[dict[str, Any]], idempotency_key: str, metadata: Any
    ) -> bool:
        """Accept `messages` for one turn, durably; False (nothing new) when a submission with
        `idempotency_key` exists already."""
        self._ensure_table()
        host = self._ctx.host
        accepted = host.sql.execute(
            "INSERT OR IGNORE INTO cf_think_submissions (submission_id, idempotency_key, status, "
            "messages_json, metadata_json, created_at) VALUES (?, ?, 'pending', ?, ?, ?)",
            (
                self._nanoid(),
                idempotency_key,
                to_json_text(messages, "submitted messages"),
                None if metadata is None else to_json_text(metadata, "submission metadata"),
                host.clock.now_ms(),
            ),
        )
        # Also for a duplicate: it may be one a dead isolate accepted and never ran.
        self._kick()
        return bool(accepted)

    def _ensure_table(self) -> None:
        for statement in THINK_SUBMISSIONS_DDL:
            self._ctx.host.sql.execute(statement)

    def _table_exists(self) -> bool:
        rows = self._ctx.sql(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'cf_think_submissions'"
        )
        return bool(rows)

    def _kick(self) -> None:
        if self._drain_live:
            return
        self._drain_live = True
        spawn_outside_delivery_slot(self._ctx.host.tasks, self._drain())

    async def _drain(self) -> None:
        """Run pending submissions oldest first, one turn each, until none is left."""
        try:
            try:
                dispose = await self._hooks.keep_alive()
            except Exception as exc:  # noqa: BLE001 - the lease only keeps the isolate awake
                # The submissions are stored: draining them without the lease loses nothing an
                # eviction would not hand to the next startup anyway, whereas giving up leaves
                # them pending until some later restart (a notice nobody sees meanwhile).
                self._ctx.log("warn", f"keepAlive for the submission drain failed ({exc})")
                probe(self._ctx.host, "chat.submission_drain_unleased")

                def dispose() -> None:
                    return None

            try:
                failures = 0
                while True:
                    try:
                        rows = self._ctx.sql(
                            "SELECT * FROM cf_think_submissions WHERE status = 'pending' "
                            "ORDER BY created_at, rowid LIMIT 1"
                        )
                    except Exception as exc:
                        failures += 1
                        if failures > DRAIN_RETRIES:
                            raise
                        self._ctx.log(
                            "warn", f"reading pending submissions failed ({exc}); reading again"
                        )
                        await self._ctx.host.clock.sleep(DRAIN_RETRY_MS)
                        continue
                    if not rows:
                        return
                    await self._run(rows[0])
            finally:
                dispose()
        finally:
            self._drain_live = False

    async def _run(self, row: dict[str, Any]) -> None:
        ctx = self._ctx
        submission_id = row["submission_id"]
        messages = json.loads(row["messages_json"])

        def admit(request_id: str) -> None:
            now = ctx.host.clock.now_ms()
            ctx.sql(
                "UPDATE cf_think_submissions SET status = 'running', request_id = ?, "
                "started_at = ?, messages_applied_at = ? WHERE submission_id = ?",
                request_id,
                now,
                now,
                submission_id,
            )
            self._turns.persist_messages(self._messages.check(messages))

        plan = TurnPlan(self._nanoid(), trigger="submission", prepare=admit)
        self._live.add(submission_id)
        try:
            result = await self._turns.submit(plan)
            status, error, stream_id = result.status, result.error, result.stream_id
        except Exception as exc:  # noqa: BLE001 - one failed submission never stops the drain
            status, error, stream_id = "error", str(exc) or type(exc).__name__, None
        finally:
            self._live.discard(submission_id)
        ctx.sql(
            "UPDATE cf_think_submissions SET status = ?, error_message = ?, "
            "stream_id = COALESCE(?, stream_id), completed_at = ? "
            "WHERE submission_id = ? AND status IN ('pending', 'running')",
            status,
            error,
            stream_id,
            ctx.host.clock.now_ms(),
            submission_id,
        )

    def resume(self) -> None:
        """After a restart (the host's startup): a submission whose turn was admitted is chat
        recovery's now; pending ones (accepted, never admitted) are drained."""
        if not self._table_exists():
            return
        host = self._ctx.host
        interrupted = host.sql.execute(
            "UPDATE cf_think_submissions SET status = 'error', error_message = ?, "
            "completed_at = ? WHERE status = 'running'",
            (INTERRUPTED_SUBMISSION, host.clock.now_ms()),
        )
        if interrupted:
            probe(host, "chat.submission_interrupted")
        if self._ctx.sql(
            "SELECT 1 AS x FROM cf_think_submissions WHERE status = 'pending' LIMIT 1"
        ):
            self._kick()


class DetachedInjections:
    """AIChatAgent's notify hooks: a message whose id is the idempotency key, injected into the
    transcript, and for a finish or a react milestone a reply turn."""

    __slots__ = ("_ctx", "_messages", "_turns", "_hooks", "_injecting")

    def __init__(
        self,
        ctx: AgentContext,
        messages: ChatMessages,
        turns: ChatTurns,
        hooks: NotifyHooks,
    ) -> None:
        self._ctx = ctx
        self._messages = messages
        self._turns = turns
        self._hooks = hooks
        """The host (whose serialized deliveries hold the slot)."""
        self._injecting: set[str] = set()
        """The ids this isolate is injecting (with their reply turn)."""

    async def notify_finish(self, run: AgentToolRunInfo, lifecycle: Any) -> None:
        key, text, status = await _finish_notice(self._hooks, run, lifecycle)
        if text:
            metadata = detached_notify_metadata(run, status=status)
            await self._inject(key, "user", text, metadata, reply=True)

    async def notify_milestone(self, run: AgentToolRunInfo, milestone: Any, mode: str) -> None:
        text = await maybe_await(self._hooks.format_detached_milestone(run, milestone))
        if not text:
            return
        key = detached_milestone_key(run.run_id, milestone["name"])
        metadata = detached_notify_metadata(run, milestone=milestone["name"])
        narrate = mode == "narrate"
        role = "assistant" if narrate else "user"
        await self._inject(key, role, text, metadata, reply=not narrate)

    async def _inject(
        self, message_id: str, role: str, text: str, metadata: Any, *, reply: bool
    ) -> None:
        # E29: idempotency is the transcript's (plus this isolate's in-flight injections).
        if message_id in self._injecting or self._messages.by_id(message_id) is not None:
            return
        message = detached_notice(message_id, role, text, metadata)
        if not reply:
            self._messages.persist(message)
            self._turns.broadcast_messages()
            return

        def admit(_request_id: str) -> None:
            self._messages.persist(message)
            self._turns.broadcast_messages()

        plan = TurnPlan(self._ctx.host.entropy.nanoid(), trigger=NOTIFY_TRIGGER)
        self._injecting.add(message_id)
        if in_delivery_slot(self._hooks):
            # The slot holds the turn queue: the reply runs here, before the ledger's mark.
            try:
                admit(plan.request_id)
                generation = self._turns.generation
                await outside_delivery_slot(lambda: self._turns.run_fiber(plan, generation))
            finally:
                self._injecting.discard(message_id)
            return
        plan.prepare = admit
        if self._turns.queue_busy():
            spawn_outside_delivery_slot(self._ctx.host.tasks, self._reply_later(plan, message_id))
            return
        try:
            await self._turns.submit(plan)
        finally:
            self._injecting.discard(message_id)

    async def _reply_later(self, plan: TurnPlan, message_id: str) -> None:
        try:
            await self._hooks.keep_alive_while(lambda: self._turns.submit(plan))
        finally:
            self._injecting.discard(message_id)
