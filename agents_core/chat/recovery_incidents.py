"""0.32.0's recovery incidents: which turn an incident is, how each look at it is reported, how
it ends, and how a turn is given up (spec sdk-0.32 §8.1; the SDK's `chatRecoveryIncidentId`,
`updateIncident` and `runChatRecoveryExhaustion`).

**Identity.** An incident is the turn first interrupted *and* the latest user message it
answers: its id is `<recovery root request id>:<latest user message id>` (the message id empty
when the transcript has no user message), its KV key `cf:chat-recovery:incident:` followed by
the id URI-encoded (the `:` becomes `%3A`). The root is the request first interrupted, so an
attempt that is interrupted again keeps the incident and its budget; the message is read from
the interrupted turn's snapshot (where the turn wrote it when it began), or from the transcript
for a stalled stream, as the SDK reads it.

**How it ends** (`RecoveryIncidents.settle`): a recovery whose turn completed deletes the
incident and reports `chat:recovery:completed`; a turn that failed leaves it `failed` with the
error as its reason and reports `chat:recovery:failed`; a skip leaves it `skipped`. Each clears
the recovering flag. An incident already gone is left alone: nothing is written or reported.

**A give-up** (`RecoveryIncidents.give_up`): the incident is stored `exhausted` with the reason
(by a continuation's give-up only once the clients are told: the dist terminalizes before it
seals, so that a failed terminal write re-runs the whole give-up); when the interrupted turn's
stream is still open (its isolate died mid-answer) and holds part of an answer, that partial
answer is persisted, so a tool result already settled is not lost;
`chat:recovery:exhausted` reports the whole `ChatRecoveryExhaustedContext` (the dist's event
payload, with the port's `originRequestId` besides), then the `on_exhausted` hook of
`chat_recovery` is awaited with it (a hook that raises is logged, and the give-up goes on: it
never keeps the clients from learning the outcome); then the clients get the terminal message as
the turn's error frame, it is kept as the last terminal outcome, and the recovering flag is
cleared.

**A cancel** (`RecoveryIncidents.cancel_scheduled_recovery`, the SDK's
`cancelScheduledRecovery`): the user cancelled a request whose recovery is scheduled but not
running; every `scheduled` incident whose recovery root or latest request is that request is
settled `skipped` with the reason `user_cancelled`, so its continuation finds it settled when it
fires and leaves it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from agents_core.chat.recovery_budget import stale_incident
from agents_core.probes import probe

if TYPE_CHECKING:
    from agents_core.chat.chat_terminal import ChatStatus
    from agents_core.chat.messages import ChatMessages
    from agents_core.chat.recovery_config import ChatRecoveryConfig
    from agents_core.chat.stream_store import ResumableStream
    from agents_core.context import AgentContext

__all__ = [
    "CHAT_RECOVERY_CANCELLED_REASON",
    "ChatRecoveryExhaustedContext",
    "RecoveryIncidents",
    "incident_id",
    "incident_key",
    "partial_text",
]

CHAT_RECOVERY_CANCELLED_REASON = "user_cancelled"
"""The reason of an incident whose scheduled recovery the user cancelled."""
_URI_COMPONENT_SAFE = "!~*'()"
"""What `encodeURIComponent` leaves as it is, beyond letters, digits and `-_.`."""


def incident_id(root_request_id: str, latest_user_message_id: str | None) -> str:
    """The id of the incident of the turn first interrupted as `root_request_id`, answering
    the user message `latest_user_message_id` (None: the transcript had none)."""
    return f"{root_request_id}:{latest_user_message_id or ''}"


def incident_key(incident: str) -> str:
    """The KV key of the incident `incident` (an `incident_id`)."""
    return INCIDENT_PREFIX + quote(incident, safe=_URI_COMPONENT_SAFE)


def partial_text(partial: dict[str, Any] | None) -> str:
    """The text parts of a partial answer, joined."""
    parts = partial.get("parts") if isinstance(partial, dict) else None
    return "".join(
        str(part.get("text") or "")
        for part in parts or []
        if isinstance(part, dict) and part.get("type") == "text"
    )


@dataclass(frozen=True)
class ChatRecoveryExhaustedContext:
    """What `on_exhausted` is told of a turn recovery gave up (the SDK's
    `ChatRecoveryExhaustedContext`)."""

    incident_id: str
    request_id: str
    recovery_root_request_id: str
    attempt: int
    max_attempts: int
    recovery_kind: str
    stream_id: str
    """The interrupted turn's stream ("" when it has none)."""
    created_at: int
    """When the interrupted turn began (its run's creation), else when the incident opened."""
    partial_text: str
    partial_parts: list[dict[str, Any]]
    reason: str
    terminal_message: str


class RecoveryIncidents:
    """One chat host's recovery incidents as 0.32.0 ends them: settled or given up."""

    __slots__ = ("_ctx", "_messages", "_stream", "_status", "_config")

    def __init__(
        self,
        ctx: AgentContext,
        messages: ChatMessages,
        stream: ResumableStream,
        status: ChatStatus,
        config: Callable[[], ChatRecoveryConfig],
    ) -> None:
        self._ctx = ctx
        self._messages = messages
        self._stream = stream
        self._status = status
        self._config = config

    def sweep(self, now: int) -> None:
        """Delete every incident with no attempt for longer than the TTL (an hour)."""
        kv = self._ctx.host.kv
        for key, incident in kv.list(INCIDENT_PREFIX).items():
            if stale_incident(incident, now):
                kv.delete(key)

    def report_look(self, first: bool, incident: dict[str, Any], kind: str, mode: str) -> None:
        """`chat:recovery:detected` for a new incident, then `chat:recovery:attempt` (`mode`
        is the port's word for what recovery will do)."""
        trace = self._ctx.host.trace
        request_id, origin = incident["requestId"], incident["originRequestId"]
        max_attempts = self._config().max_attempts
        if first:
            trace.emit(
                "chat:recovery:detected",
                requestId=request_id,
                originRequestId=origin,
                attempt=incident["attempt"],
                maxAttempts=max_attempts,
                recoveryKind=kind,
            )
        trace.emit(
            "chat:recovery:attempt",
            requestId=request_id,
            originRequestId=origin,
            attempt=incident["attempt"],
            maxAttempts=max_attempts,
            recoveryKind=kind,
            mode=mode,
        )

    def cancel_scheduled_recovery(self, request_id: str) -> bool:
        """Settle every `scheduled` incident of the request `request_id` (its recovery root
        or its latest request) `skipped` with `user_cancelled`; whether there was one."""
        cancelled = False
        for key, incident in sorted(self._ctx.host.kv.list(INCIDENT_PREFIX).items()):
            if not isinstance(incident, dict) or incident.get("status") != "scheduled":
                continue
            if request_id in (incident.get("originRequestId"), incident.get("requestId")):
                self.settle(key, "skipped", CHAT_RECOVERY_CANCELLED_REASON)
                cancelled = True
        return cancelled

    def settle(self, key: str, outcome: str, reason: str | None = None) -> None:
        """The recovery of the incident at `key` ended: `completed` (deleted), `failed` or
        `skipped` (kept with `reason`); reported, and the recovering flag cleared."""
        kv = self._ctx.host.kv
        incident = kv.get(key)
        if not isinstance(incident, dict):
            return
        if outcome == "completed":
            kv.delete(key)
        else:
            stored = {**incident, "status": outcome, "updatedAt": self._ctx.host.clock.now_ms()}
            if reason:
                stored["reason"] = reason
            kv.put(key, stored)
        trace = self._ctx.host.trace
        if outcome == "completed":
            probe(self._ctx.host, "chat.recovery_completed_incident_deleted")
            trace.emit(
                "chat:recovery:completed",
                requestId=incident.get("requestId"),
                originRequestId=incident.get("originRequestId"),
                incidentId=incident.get("incidentId"),
                attempt=incident.get("attempt", 0),
                maxAttempts=incident.get("maxAttempts"),
                recoveryKind=incident.get("recoveryKind"),
            )
        elif outcome == "failed":
            trace.emit(
                "chat:recovery:failed",
                requestId=incident.get("requestId"),
                originRequestId=incident.get("originRequestId"),
                incidentId=incident.get("incidentId"),
                attempt=incident.get("attempt", 0),
                maxAttempts=incident.get("maxAttempts"),
                recoveryKind=incident.get("recoveryKind"),
                reason=reason,
            )
        elif outcome == "skipped":
            trace.emit(
                "chat:recovery:skipped",
                requestId=incident.get("requestId"),
                originRequestId=incident.get("originRequestId"),
                attempt=incident.get("attempt", 0),
                reason=reason,
            )
        self._status.set_recovering(False)

    async def give_up(
        self,
        key: str,
        incident: dict[str, Any],
        reason: str,
        request_id: str,
        *,
        partial: dict[str, Any] | None,
        stream_id: str | None,
        created_at: int | None = None,
        save_partial: bool = True,
        seal_last: bool = False,
    ) -> None:
        """Give the turn of the incident at `key` up with `reason`: seal it, save its partial
        answer when its stream is still open (unless `save_partial` is False: a stalled turn
        saves its own), report it, tell `on_exhausted`, then the clients (module docstring).
        `seal_last`: the seal is written after the clients are told, as a continuation's
        give-up does (the dist's `exhaustRecoveryGiveUp`)."""
        host = self._ctx.host
        now = host.clock.now_ms()
        incident = {**incident, "reason": reason, "status": "exhausted", "updatedAt": now}
        if not seal_last:
            host.kv.put(key, incident)
        self._probe_reason(reason)
        parts = list(partial.get("parts") or []) if isinstance(partial, dict) else []
        open_stream = bool(stream_id) and self._stream.is_streaming(str(stream_id))
        if save_partial and partial is not None and parts and open_stream:
            probe(host, "chat.recovery_gave_up_partial_saved")
            self._messages.persist(partial)
        origin = incident.get("originRequestId")
        config = self._config()
        detected = incident.get("detectedAt")
        context = ChatRecoveryExhaustedContext(
            incident_id=str(incident.get("incidentId") or ""),
            request_id=request_id,
            recovery_root_request_id=str(origin or request_id),
            attempt=int(incident.get("attempt") or 0),
            max_attempts=int(incident.get("maxAttempts") or config.max_attempts),
            recovery_kind=str(incident.get("recoveryKind") or "continue"),
            stream_id=stream_id or "",
            created_at=created_at if created_at is not None else int(detected or now),
            partial_text=partial_text(partial),
            partial_parts=parts,
            reason=reason,
            terminal_message=config.terminal_message,
        )
        host.trace.emit(
            "chat:recovery:exhausted",
            requestId=context.request_id,
            originRequestId=origin,
            incidentId=context.incident_id,
            recoveryRootRequestId=context.recovery_root_request_id,
            attempt=context.attempt,
            maxAttempts=context.max_attempts,
            recoveryKind=context.recovery_kind,
            streamId=context.stream_id,
            createdAt=context.created_at,
            partialText=context.partial_text,
            partialParts=context.partial_parts,
            reason=context.reason,
            terminalMessage=context.terminal_message,
        )
        await self._tell_hook(config, context)
        message = config.terminal_message
        self._status.deliver_terminal(request_id, message)
        self._status.record_terminal(request_id, message)
        self._status.set_recovering(False)
        if seal_last:
            host.kv.put(key, incident)
        self._ctx.log("warn", f"chat recovery of turn {origin} gave up: {reason}")

    def _probe_reason(self, reason: str) -> None:
        host = self._ctx.host
        if reason == "interrupted_attempts_exceeded":
            probe(host, "chat.recovery_interrupted_attempts_exceeded")
        elif reason == "no_progress_timeout":
            probe(host, "chat.recovery_no_progress_timeout")
        elif reason == "recovery_aborted":
            probe(host, "chat.recovery_aborted_by_caller")
        elif reason == "stable_timeout":
            probe(host, "chat.recovery_stable_timeout")
        elif reason == "max_attempts_exceeded":
            probe(host, "chat.recovery_exhausted")
        elif reason == "out_of_memory":
            probe(host, "chat.recovery_out_of_memory")

    async def _tell_hook(
        self, config: ChatRecoveryConfig, context: ChatRecoveryExhaustedContext
    ) -> None:
        hook = config.on_exhausted
        if hook is None:
            return
        try:
            answer = hook(context)
            if inspect.isawaitable(answer):
                await answer
        except Exception as exc:  # noqa: BLE001 - a broken hook must not hide the outcome
            probe(self._ctx.host, "chat.recovery_on_exhausted_raised")
            self._ctx.log("error", f"chat_recovery's on_exhausted raised: {exc!r}")
