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
from typing import TYPE_CHECKING, Any, Protocol, cast

from agents_core.agent_tools.notify import (
    detached_finish_key,
    detached_milestone_key,
    detached_notify_metadata,
)
from agents_core.agent_tools.registry import AgentToolRunInfo
from agents_core.chat.child_runs import maybe_await
from agents_core.chat.messages import user_message
from agents_core.chat.parent import in_delivery_slot
from agents_core.chat.self_type import ChatSelf
from agents_core.chat.turns import TurnPlan
from agents_core.jsontext import to_json_text
from agents_core.probes import probe

__all__ = [
    "AiChatNotifyMixin",
    "THINK_SUBMISSIONS_DDL",
    "ThinkNotifyMixin",
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


async def _finish_notice(agent: Any, run: AgentToolRunInfo, lifecycle: Any) -> tuple[str, str, str]:
    """(key, text, status) of a finish notification; an empty text means none."""
    status = lifecycle.get("status") if isinstance(lifecycle, dict) else lifecycle.status
    text = await maybe_await(agent.format_detached_completion(run, lifecycle))
    return detached_finish_key(run.run_id, str(status)), text or "", str(status)


if TYPE_CHECKING:
    from agents_core.agent import Agent

    # Mixed in before Agent (ChatHost's bases): its `super()` calls reach Agent's methods.
    _NotifyBase = Agent
else:
    _NotifyBase = object


class ThinkNotifySelf(ChatSelf, Protocol):
    """What ThinkNotifyMixin uses beyond `ChatSelf`: its own methods, called through self."""

    def _ensure_think_submissions(self) -> None: ...
    def _kick_think_submissions(self) -> None: ...
    def _resume_think_submissions(self) -> None: ...
    async def _submit_think_messages(
        self, messages: list[dict[str, Any]], idempotency_key: str, metadata: Any
    ) -> bool: ...
    async def _drain_think_submissions(self) -> None: ...
    def _nanoid(self) -> str: ...
    def _think_submissions_exist(self) -> bool: ...
    async def _run_think_submission(self, row: dict[str, Any]) -> None: ...


class ThinkNotifyMixin(_NotifyBase):
    # -- the hooks ---------------------------------------------------------------------------------
    async def _cf_detached_notify_finish(
        self: ThinkNotifySelf, run: AgentToolRunInfo, lifecycle: Any
    ) -> None:
        key, text, status = await _finish_notice(self, run, lifecycle)
        if text:
            metadata = detached_notify_metadata(run, status=status)
            await self._submit_think_messages([user_message(text, self._nanoid())], key, metadata)

    async def _cf_detached_notify_milestone(
        self: ThinkNotifySelf, run: AgentToolRunInfo, milestone: Any, mode: str
    ) -> None:
        text = await maybe_await(self.format_detached_milestone(run, milestone))
        if not text:
            return
        key = detached_milestone_key(run.run_id, milestone["name"])
        metadata = detached_notify_metadata(run, milestone=milestone["name"])
        if mode == "narrate":
            if self._messages.by_id(key) is None:  # adding an existing id is a no-op
                self._messages.persist(detached_notice(key, "assistant", text, metadata))
                self._turns.broadcast_messages()
            return
        await self._submit_think_messages([user_message(text, self._nanoid())], key, metadata)

    def _nanoid(self: ThinkNotifySelf) -> str:
        return self.host.entropy.nanoid()

    # -- durable submissions -----------------------------------------------------------------------
    async def _submit_think_messages(
        self: ThinkNotifySelf, messages: list[dict[str, Any]], idempotency_key: str, metadata: Any
    ) -> bool:
        """Accept `messages` for one turn, durably; False (nothing new) when a submission with
        `idempotency_key` exists already."""
        self._ensure_think_submissions()
        accepted = self.host.sql.execute(
            "INSERT OR IGNORE INTO cf_think_submissions (submission_id, idempotency_key, status, "
            "messages_json, metadata_json, created_at) VALUES (?, ?, 'pending', ?, ?, ?)",
            (
                self._nanoid(),
                idempotency_key,
                to_json_text(messages, "submitted messages"),
                None if metadata is None else to_json_text(metadata, "submission metadata"),
                self.host.clock.now_ms(),
            ),
        )
        # Also for a duplicate: it may be one a dead isolate accepted and never ran.
        self._kick_think_submissions()
        return bool(accepted)

    def _ensure_think_submissions(self: ThinkNotifySelf) -> None:
        for statement in THINK_SUBMISSIONS_DDL:
            self.host.sql.execute(statement)

    def _think_submissions_exist(self: ThinkNotifySelf) -> bool:
        rows = self.sql(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'cf_think_submissions'"
        )
        return bool(rows)

    def _kick_think_submissions(self: ThinkNotifySelf) -> None:
        if self._think_drain_live:
            return
        self._think_drain_live = True
        self._spawn_outside_delivery_slot(self._drain_think_submissions())

    async def _drain_think_submissions(self: ThinkNotifySelf) -> None:
        """Run pending submissions oldest first, one turn each, until none is left."""
        try:
            dispose = await self.keep_alive()
            try:
                while True:
                    rows = self.sql(
                        "SELECT * FROM cf_think_submissions WHERE status = 'pending' "
                        "ORDER BY created_at, rowid LIMIT 1"
                    )
                    if not rows:
                        return
                    await self._run_think_submission(rows[0])
            finally:
                dispose()
        finally:
            self._think_drain_live = False

    async def _run_think_submission(self: ThinkNotifySelf, row: dict[str, Any]) -> None:
        submission_id = row["submission_id"]
        messages = json.loads(row["messages_json"])

        def admit(request_id: str) -> None:
            now = self.host.clock.now_ms()
            self.sql(
                "UPDATE cf_think_submissions SET status = 'running', request_id = ?, "
                "started_at = ?, messages_applied_at = ? WHERE submission_id = ?",
                request_id,
                now,
                now,
                submission_id,
            )
            self._turns.persist_messages(self._messages.check(messages))

        plan = TurnPlan(self._nanoid(), trigger="submission", prepare=admit)
        self._think_submissions_live.add(submission_id)
        try:
            result = await self._turns.submit(plan)
            status, error, stream_id = result.status, result.error, result.stream_id
        except Exception as exc:  # noqa: BLE001 - one failed submission never stops the drain
            status, error, stream_id = "error", str(exc) or type(exc).__name__, None
        finally:
            self._think_submissions_live.discard(submission_id)
        self.sql(
            "UPDATE cf_think_submissions SET status = ?, error_message = ?, "
            "stream_id = COALESCE(?, stream_id), completed_at = ? "
            "WHERE submission_id = ? AND status IN ('pending', 'running')",
            status,
            error,
            stream_id,
            self.host.clock.now_ms(),
            submission_id,
        )

    # self is left unannotated here, so that super() resolves through the class (its
    # type-checking base is Agent; a Protocol self type would put the Protocol's own bases
    # there); the agent is read through the Protocol it is mixed into.
    async def _cf_start(self) -> None:
        await super()._cf_start()
        cast("ThinkNotifySelf", self)._resume_think_submissions()

    def _resume_think_submissions(self: ThinkNotifySelf) -> None:
        """After a restart: a submission whose turn was admitted is chat recovery's now; pending
        ones (accepted, never admitted) are drained."""
        if not self._think_submissions_exist():
            return
        interrupted = self.host.sql.execute(
            "UPDATE cf_think_submissions SET status = 'error', error_message = ?, "
            "completed_at = ? WHERE status = 'running'",
            (INTERRUPTED_SUBMISSION, self.host.clock.now_ms()),
        )
        if interrupted:
            probe(self.host, "chat.submission_interrupted")
        if self.sql("SELECT 1 AS x FROM cf_think_submissions WHERE status = 'pending' LIMIT 1"):
            self._kick_think_submissions()


class AiChatNotifySelf(ChatSelf, Protocol):
    """What AiChatNotifyMixin uses beyond `ChatSelf`: its own methods, called through self."""

    async def _inject_detached_notice(
        self, message_id: str, role: str, text: str, metadata: Any, *, reply: bool
    ) -> None: ...
    async def _reply_later(self, plan: TurnPlan, message_id: str) -> None: ...


class AiChatNotifyMixin:
    async def _cf_detached_notify_finish(
        self: AiChatNotifySelf, run: AgentToolRunInfo, lifecycle: Any
    ) -> None:
        key, text, status = await _finish_notice(self, run, lifecycle)
        if text:
            metadata = detached_notify_metadata(run, status=status)
            await self._inject_detached_notice(key, "user", text, metadata, reply=True)

    async def _cf_detached_notify_milestone(
        self: AiChatNotifySelf, run: AgentToolRunInfo, milestone: Any, mode: str
    ) -> None:
        text = await maybe_await(self.format_detached_milestone(run, milestone))
        if not text:
            return
        key = detached_milestone_key(run.run_id, milestone["name"])
        metadata = detached_notify_metadata(run, milestone=milestone["name"])
        narrate = mode == "narrate"
        role = "assistant" if narrate else "user"
        await self._inject_detached_notice(key, role, text, metadata, reply=not narrate)

    async def _inject_detached_notice(
        self: AiChatNotifySelf, message_id: str, role: str, text: str, metadata: Any, *, reply: bool
    ) -> None:
        # E29: idempotency is the transcript's (plus this isolate's in-flight injections).
        if message_id in self._detached_injecting or self._messages.by_id(message_id) is not None:
            return
        message = detached_notice(message_id, role, text, metadata)
        if not reply:
            self._messages.persist(message)
            self._turns.broadcast_messages()
            return

        def admit(_request_id: str) -> None:
            self._messages.persist(message)
            self._turns.broadcast_messages()

        plan = TurnPlan(self.host.entropy.nanoid(), trigger=NOTIFY_TRIGGER)
        self._detached_injecting.add(message_id)
        if in_delivery_slot(self):
            # The slot holds the turn queue: the reply runs here, before the ledger's mark.
            try:
                admit(plan.request_id)
                generation = self._turns.generation
                await self._outside_delivery_slot(lambda: self._turns.run_fiber(plan, generation))
            finally:
                self._detached_injecting.discard(message_id)
            return
        plan.prepare = admit
        if self._turn_queue_busy():
            self._spawn_outside_delivery_slot(self._reply_later(plan, message_id))
            return
        try:
            await self._turns.submit(plan)
        finally:
            self._detached_injecting.discard(message_id)

    async def _reply_later(self: AiChatNotifySelf, plan: TurnPlan, message_id: str) -> None:
        try:
            await self.keep_alive_while(lambda: self._turns.submit(plan))
        finally:
            self._detached_injecting.discard(message_id)
