"""0.32.0's chat recovery: always on, judged by 0.32.0's budget at each wake, and telling
clients what it does (spec sdk-0.32 §8.1, §8.2).

Recovery runs whatever `chat_recovery` says (`recovery_config.py`). An incident is the turn
first interrupted and the latest user message it answers (`recovery_incidents.py`). The wake
that claims an interrupted turn, a turn recovered with no snapshot and a stalled stream are
judged in `incident_looks.py` (`IncidentLooks`, this class's base); this module holds the
callback that runs the continuation, the seal of the memory-limit breaker and what clients
learn.

**Interrupted attempts** (`attempts_in_flight.py`): the original turn, when first detected, and
every later attempt whose isolate died before it finished. A wake drops its own entry once it
has scheduled the recovery; a callback drops its own when its turn settles. Once
`max_interrupted_attempts` (5) are counted the turn is given up with
`interrupted_attempts_exceeded`, by the wake or by the callback, and nothing runs again.

**The callback.** It first waits for the host to be stable, at most `stable_timeout_ms` (10 s):
no turn running or queued. When the time runs out: a turn waiting on a client interaction is
parked (incident `skipped`, `awaiting_client_interaction`); else, while `attempt` is below
`max_attempts`, the recovery is tried again 3 s later with `attempt` one higher (`reason:
stable_timeout_retry`); else the turn is given up with `stable_timeout`, as above (an
incident gone meanwhile is made up to be given up). A continuation's give-up seals the
incident only once the clients are told (`RecoveryIncidents.give_up`'s `seal_last`). A turn
waiting on a client interaction (a part in `approval-requested`) is budget-free: no bound gives
it up and its no-progress clock stays fresh. Once the host is stable, a recovery whose
conversation moved on since the incident is skipped (`conversation_changed`, or
`no_unanswered_user_message` for a retry; `recovery_targets.py`). The callback returns once
the recovered turn is about to start (`recovery_handoff.py`): a failure before is the
callback's (its step is retried), a platform failure of the turn after it re-enqueues the
callback 3 s later. The turn's end settles the incident: completed (deleted), failed or
skipped (`RecoveryIncidents.settle`).

**The memory-limit breaker** (§2.5): when it seals, every live incident is given up with
`out_of_memory` (`seal_memory_limited`, from the host's `on_alarm_memory_limit`); a
continuation hands its recovered turn to the breaker at the hand-off (`recovery_handoff.py`).

**Clients.** A client's cancel of a request (`cf_agent_chat_request_cancel`) cancels its
scheduled recovery (`RecoveryIncidents.cancel_scheduled_recovery`: `skipped`,
`user_cancelled`); a continuation already running is not stopped. Each turn's end sets the
last terminal outcome (`chat_terminal.py`): an error records it, a completion or an abort
clears it, as do a new chat request and a clear; a client that reconnects learns it over the
resume handshake. A client that connects while no turn streams is told that a recovery is in
progress.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agents_core.agent_tools.chunk_kinds import random_uuid
from agents_core.chat.chat_recovery import INCIDENT_PREFIX, PARTIAL_PERSISTED
from agents_core.chat.incident_looks import IncidentLooks
from agents_core.chat.recovery_budget import CHAT_RECOVERY_STABLE_RETRY_DELAY_SECONDS
from agents_core.chat.recovery_handoff import (
    dispatch_to_handoff,
    is_platform_failure,
    wait_until_stable,
)
from agents_core.chat.recovery_targets import (
    TARGET_USER,
    conversation_skip_reason,
    stream_partial,
)
from agents_core.chat.turns import TurnResult
from agents_core.probes import probe
from agents_core.stored_names import CHAT_RECOVERY_CALLBACK

__all__ = [
    "INTERRUPTED_ATTEMPTS_EXCEEDED",
    "OUT_OF_MEMORY",
    "STABLE_TIMEOUT",
    "InterruptedAttemptsRecovery",
]

INTERRUPTED_ATTEMPTS_EXCEEDED = "interrupted_attempts_exceeded"
STABLE_TIMEOUT = "stable_timeout"
OUT_OF_MEMORY = "out_of_memory"
CHAT_REQUEST_CANCEL_TYPE = "cf_agent_chat_request_cancel"
"""A client's cancel of a request (`{type, id}`)."""
_ACTIVE_STATUSES = frozenset({"detected", "scheduled", "attempting"})
"""Statuses of an incident whose recovery is still live (a seal gives these up)."""


class InterruptedAttemptsRecovery(IncidentLooks):
    """The ChatRecovery of 0.32.0: its options always on, its budget, its client status."""

    __slots__ = ("_handoffs",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._handoffs: dict[Any, Callable[[], None]] = {}
        """The hand-off signal of each recovery attempt this isolate runs, by its token."""

    # -- a recovery callback ----------------------------------------------------------------------
    def _over_budget(self, incident: dict[str, Any]) -> bool:
        limit = self.config.max_interrupted_attempts
        return bool((incident.get("interruptedAttempts") or 0) >= limit)

    async def continue_turn(self, payload: Any) -> None:
        origin = payload["originRequestId"]
        key = self.incident_key_of(payload)
        incident = self._ctx.host.kv.get(key)
        if not isinstance(incident, dict) or incident.get("status") != "scheduled":
            return
        incident = dict(incident)
        attempt = self.attempts.new()
        self.attempts.count_dead(incident, attempt)
        payload = {**payload, "attempt": attempt}
        if not self.awaiting_client_interaction() and self._over_budget(incident):
            incident["attemptsInFlight"] = incident["attemptsInFlight"][:-1]
            self._ctx.host.kv.put(key, incident)
            await self._give_up_callback(key, incident, INTERRUPTED_ATTEMPTS_EXCEEDED, payload)
            await self._hooks._after_chat_recovery(None)
            return
        self.set_incident(key, incident, "attempting")
        self.live.add(origin)
        number = incident.get("attempt") or 1

        async def attempt_run(started: Callable[[], None]) -> None:
            self._handoffs[attempt["token"]] = started
            try:
                await self._run(payload, number)
            except Exception as error:
                if is_platform_failure(error):
                    await self._hooks._after_chat_recovery(None)
                raise
            finally:
                self._handoffs.pop(attempt["token"], None)

        async def redefer(run_id: str) -> None:
            probe(self._ctx.host, "chat.recovery_redeferred")
            # Enqueued after the hand-off, so the partial answer, if continued, is persisted.
            retry = {k: v for k, v in payload.items() if k != "attempt"}
            retry[PARTIAL_PERSISTED] = True
            delay = CHAT_RECOVERY_STABLE_RETRY_DELAY_SECONDS
            schedule = self._hooks.schedule
            await schedule(delay, CHAT_RECOVERY_CALLBACK, retry, idempotent=False, run_id=run_id)

        def detached_error(error: BaseException) -> None:
            self._ctx.log("error", f"chat recovery continuation of turn {origin} failed: {error!r}")

        await dispatch_to_handoff(
            self._ctx.host,
            attempt_run,
            track=self._hooks.track_alarm_work,
            redefer=redefer,
            on_detached_error=detached_error,
        )

    def _turn_starting(self, payload: dict[str, Any]) -> None:
        """The hand-off: the continuation that started this attempt returns."""
        started = self._handoffs.get((payload.get("attempt") or {}).get("token"))
        if started is not None:
            started()

    def _hands_back(self, key: str, error: Exception) -> bool:
        """A platform failure goes back to the continuation (re-run or re-enqueued), with the
        incident `scheduled` again for it."""
        if not is_platform_failure(error):
            return False
        incident = self._ctx.host.kv.get(key)
        if isinstance(incident, dict):
            self.set_incident(key, incident, "scheduled")
        return True

    async def _run(self, payload: dict[str, Any], attempt: int) -> None:
        try:
            if await self._wait_until_stable():
                skip = conversation_skip_reason(self._messages, payload)
                if skip is None:
                    await super()._run(payload, attempt)
                    return
                self.live.discard(payload["originRequestId"])
                self.incidents.settle(self.incident_key_of(payload), "skipped", skip)
            else:
                self.live.discard(payload["originRequestId"])
                await self._stable_timeout(payload)
            await self._hooks._after_chat_recovery(None)
        finally:
            self._finish_attempt(payload)

    async def _wait_until_stable(self) -> bool:
        """Wait, at most `stable_timeout_ms`, for no turn to run or be queued; whether it
        came (`recovery_handoff.wait_until_stable`)."""
        return await wait_until_stable(
            self._ctx.host,
            self._turns,
            self._hooks.keep_alive,
            self.config.stable_timeout_ms,
            self.awaiting_client_interaction,
        )

    async def _stable_timeout(self, payload: dict[str, Any]) -> None:
        """The host stayed busy: park, try again in 3 s, or give the turn up (an incident
        gone meanwhile is made up to be given up: the dist's give-up never skips the
        terminal message)."""
        key = self.incident_key_of(payload)
        stored = self._ctx.host.kv.get(key)
        if self.awaiting_client_interaction():
            self.incidents.settle(key, "skipped", "awaiting_client_interaction")
            return
        self._ctx.log("warn", "chat recovery timed out waiting for a stable state")
        if not isinstance(stored, dict):
            await self._give_up_callback(
                key, self._made_up_incident(payload), STABLE_TIMEOUT, payload
            )
            return
        incident = stored
        attempt = incident.get("attempt") or 0
        if attempt < (incident.get("maxAttempts") or self.config.max_attempts):
            now = self._ctx.host.clock.now_ms()
            incident = {
                **incident,
                "attempt": attempt + 1,
                "status": "scheduled",
                "lastAttemptAt": now,
                "updatedAt": now,
                "reason": "stable_timeout_retry",
            }
            self._ctx.host.kv.put(key, incident)
            retry = {k: v for k, v in payload.items() if k != "attempt"}
            await self._hooks.schedule(
                CHAT_RECOVERY_STABLE_RETRY_DELAY_SECONDS,
                CHAT_RECOVERY_CALLBACK,
                retry,
                idempotent=False,
            )
            return
        if incident.get("status") == "exhausted":
            return
        await self._give_up_callback(key, dict(incident), STABLE_TIMEOUT, payload)

    def _made_up_incident(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The incident a continuation gives up when the stored one is gone (the dist's
        `exhaustRecoveryGiveUp`): the payload's id (else a random one), its recovery root,
        every attempt spent, `retry` when the payload names a user message to answer again
        (the dist's `_chatRecoveryRetry`), else `continue`."""
        config = self.config
        now = self._ctx.host.clock.now_ms()
        root = str(payload.get("originRequestId") or payload.get("requestId") or "")
        found = payload.get("incidentId")
        return {
            "incidentId": found if isinstance(found, str) else random_uuid(self._ctx.host.entropy),
            "requestId": root,
            "originRequestId": root,
            "recoveryKind": "retry" if TARGET_USER in payload else "continue",
            "attempt": config.max_attempts,
            "maxAttempts": config.max_attempts,
            "detectedAt": now,
            "lastAttemptAt": now,
        }

    async def _give_up_callback(
        self, key: str, incident: dict[str, Any], reason: str, payload: dict[str, Any]
    ) -> None:
        """A continuation gives its turn up: the partial answer is the interrupted turn's."""
        request_id = payload["requestId"]
        raw = payload.get("snapshot")
        snapshot = raw if isinstance(raw, dict) else {}
        partial, _ = self._rebuild_interrupted_answer(request_id, snapshot)
        stream_id, _ = self.interrupted_stream(request_id, snapshot)
        await self.incidents.give_up(
            key,
            incident,
            reason,
            incident.get("requestId") or request_id,
            partial=partial,
            stream_id=stream_id,
            seal_last=True,
        )

    # -- the memory-limit breaker sealed (§2.5) ----------------------------------------------------
    async def seal_memory_limited(self) -> None:
        """Give every live incident (`detected`, `scheduled`, `attempting`) up with
        `out_of_memory`, in key order, as any give-up does (`RecoveryIncidents.give_up`): the
        alarms that carried its recovery kept hitting the memory limit, and the breaker purged
        them (the SDK's `_cf_sealMemoryLimitedRecovery`). It runs at the alarm's outermost
        frame, where these writes can land. `on_exhausted` is told the answer rebuilt from the
        stream of the incident's recovery root request (else of its latest request), read off
        the stream as the dist reads it (`recovery_targets.stream_partial`); nothing is
        persisted."""
        kv = self._ctx.host.kv
        for key, stored in sorted(kv.list(INCIDENT_PREFIX).items()):
            if not isinstance(stored, dict) or stored.get("status") not in _ACTIVE_STATUSES:
                continue
            probe(self._ctx.host, "chat.recovery_sealed_out_of_memory")
            request_id = str(stored.get("requestId") or stored.get("originRequestId") or "")
            root = stored.get("originRequestId") or request_id
            stream_id = self._stream.for_request(root) or self._stream.for_request(request_id)
            await self.incidents.give_up(
                key,
                dict(stored),
                OUT_OF_MEMORY,
                request_id,
                partial=stream_partial(self._stream, stream_id),
                stream_id=stream_id,
                save_partial=False,
                seal_last=True,
            )

    def _recovery_ended(self, key: str, outcome: str, reason: str | None = None) -> None:
        self.incidents.settle(key, outcome, reason)

    def _report_attempt(self, request_id: str, origin: str, mode: str, attempt: int) -> None:
        """`chat:recovery:attempt` is reported by the wake that judges the incident."""

    def _finish_attempt(self, payload: dict[str, Any]) -> None:
        """The callback's turn settled in this isolate: its entry goes."""
        token = (payload.get("attempt") or {}).get("token")
        if token is not None:
            self.attempts.drop(self.incident_key_of(payload), token)

    # -- what clients learn -----------------------------------------------------------------------
    def turn_ended(self, result: TurnResult) -> None:
        self.status.turn_ended(result.request_id, result.status, result.error)

    def chat_request(self) -> None:
        self.status.clear_terminal()

    def chat_cleared(self) -> None:
        self.status.clear_terminal()

    def on_connect(self, connection: Any, streaming: bool) -> None:
        self.status.on_connect(connection, streaming)

    def on_message(self, connection: Any, message: Any, streaming: bool) -> bool:
        """The resume handshake's terminal replay (`chat_terminal.py`); a client's cancel of a
        request cancels its scheduled recovery, and goes on to the turns (it answers none)."""
        if isinstance(message, Mapping) and message.get("type") == CHAT_REQUEST_CANCEL_TYPE:
            request_id = message.get("id")
            if isinstance(request_id, str):
                self.incidents.cancel_scheduled_recovery(request_id)
            return False
        return self.status.on_message(connection, message, streaming)
