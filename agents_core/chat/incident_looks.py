"""0.32.0's chat recovery looks at an incident: the wake that claims an interrupted turn and the
stalled stream the turn engine routes, each judged by 0.32.0's budget, vetted by the caller and
scheduled as a continuation (spec sdk-0.32 §8.1, §8.2). `IncidentLooks` is the base of
`InterruptedAttemptsRecovery` (`interrupted_attempts.py`, which adds the callback, the seal and
what clients learn); it owns the recovery's components and its resolved `chat_recovery`.

**The wake.** When the fiber scan offers an interrupted turn, the incident is judged by
`recovery_budget.evaluate_incident`: the no-progress window, the work budget (the progress
marker counts stream segments, `segment_progress.py`), the interrupted attempts, the attempt
counter with its 30 s debounce; then, on a wake after the first that no bound gave up, the
caller's `should_keep_recovering` (a `chat_recovery` option), whose `False` gives the turn up
with `recovery_aborted`. Incidents with no attempt for an hour are deleted first (the TTL
sweep). A new incident reports `chat:recovery:detected`; every wake then reports
`chat:recovery:attempt` (`attempt`, `maxAttempts`, `recoveryKind`: `continue` when the
interrupted answer has content, else `retry`). A spent budget gives the turn up at once
(`RecoveryIncidents.give_up`: the partial answer saved, `chat:recovery:exhausted`, the
`on_exhausted` hook, the terminal message to clients). Otherwise the recovery is scheduled and
the `cf:chat:recovering` flag set (`chat_terminal.py`).

**A turn with no snapshot.** A platform failure that ends a turn's body (a memory-limit or
code-update reset) leaves its Task run claimed, but the turn's step deletes its snapshot as the
body unwinds, and the breaker syncs storage before the reset (`turn_runners.py`). The next
incarnation then recovers the run with nothing naming its recovery root or the user message it
answered: a new incident `<requestId>:`, of kind `continue`, whose continuation extends the
transcript's last assistant message, or is skipped when there is none (the SDK continues the
last turn or skips it). So a struck recovered turn is two incidents, as in the SDK: the
continuation enqueued again after the strike answers the user message, and the snapshot-less one
adds no answer of its own when the interrupted turn had none.

**A stalled stream** (§8.2; the host's `chat_stream_stall_timeout_ms`, 0 = no watchdog): the
turn engine offers the stalled turn to `route_stall`, which judges its incident as a wake does
but counts no interrupted attempt and bumps `transientRetries`; a spent budget gives the turn
up, `on_chat_recovery`'s `skip` declines (the stall then fails the request), and otherwise the
continuation is scheduled at once and the request ends with the outcome `recovering`.
"""

from __future__ import annotations

from typing import Any

from agents_core.chat.attempts_in_flight import AttemptsInFlight
from agents_core.chat.chat_recovery import ChatRecovery, ChatRecoveryContext
from agents_core.chat.chat_terminal import ChatStatus
from agents_core.chat.recovery_budget import IncidentVerdict, ask_caller, evaluate_incident
from agents_core.chat.recovery_config import ChatRecoveryConfig, resolve_chat_recovery_config
from agents_core.chat.recovery_incidents import RecoveryIncidents, incident_id, incident_key
from agents_core.chat.recovery_targets import continuation_targets
from agents_core.chat.stream_watchdog import transient_backoff_seconds
from agents_core.chat.turns import CHAT_TURN_FIBER_PREFIX
from agents_core.probes import probe
from agents_core.stored_names import CHAT_RECOVERY_CALLBACK

__all__ = ["IncidentLooks"]

_SETTLED_STATUSES = frozenset({"recovered", "failed", "skipped"})
"""Statuses that end a recovery: the recovering flag goes."""


class IncidentLooks(ChatRecovery):
    """The wake and the stall of 0.32.0's ChatRecovery, and the components they share."""

    __slots__ = ("attempts", "status", "incidents")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.attempts = AttemptsInFlight(self._ctx)
        """The attempts each incident records as running (`attempts_in_flight.py`)."""
        self.status = ChatStatus(self._ctx, self._hooks._broadcast_chat_frame)
        """The recovering flag and the last terminal outcome."""
        self.incidents = RecoveryIncidents(
            self._ctx, self._messages, self._stream, self.status, lambda: self.config
        )
        """How an incident ends: settled or given up (`recovery_incidents.py`)."""

    @property
    def config(self) -> ChatRecoveryConfig:
        """The host's `chat_recovery`, resolved (read each time: a class may change it)."""
        hooks = self._hooks
        return resolve_chat_recovery_config(
            getattr(hooks, "chat_recovery", None),
            max_attempts=hooks.max_chat_recovery_attempts,
            no_progress_timeout_ms=hooks.chat_recovery_no_progress_timeout_ms,
        )

    def awaiting_client_interaction(self) -> bool:
        """The transcript holds a part waiting on the client (`ChatMessages`)."""
        return self._messages.awaits_client_interaction()

    def _has_orphaned_turn(self) -> bool:
        """A chat turn's fiber row, or (a top-level agent's turns being Task runs) its Task run,
        that no turn of this incarnation runs."""
        return super()._has_orphaned_turn() or self._hooks._has_orphaned_task_turn()

    # -- which incident ------------------------------------------------------------------------
    def _latest_user_message_id(self) -> str | None:
        for message in reversed(self._messages.all()):
            if message.get("role") == "user" and isinstance(message.get("id"), str):
                return str(message["id"])
        return None

    def turn_snapshot_extra(self) -> dict[str, Any]:
        """A turn's snapshot names the latest user message it answers (its incident's)."""
        latest = self._latest_user_message_id()
        return {} if latest is None else {"latestUserMessageId": latest}

    def _incident_of(self, origin: str, snapshot: dict[str, Any] | None) -> tuple[str, str]:
        """The incident id and key of a turn first interrupted as `origin`, answering the user
        message its snapshot names (the transcript's latest when it names none)."""
        latest = (snapshot or {}).get("latestUserMessageId")
        if not isinstance(latest, str):
            latest = self._latest_user_message_id()
        found = incident_id(origin, latest)
        return found, incident_key(found)

    def incident_key_of(self, payload: Any) -> str:
        found = payload.get("incidentId")
        if isinstance(found, str):
            return incident_key(found)
        snapshot = payload.get("snapshot")
        return self._incident_of(payload["originRequestId"], snapshot)[1]

    # -- the wake: an interrupted turn's fiber -----------------------------------------------------
    def _snapshot_lost(self, snapshot: dict[str, Any]) -> bool:
        """The turn's Task run was driven again with no snapshot in KV: the turn's own step
        deleted it as a platform failure (a memory-limit or code-update reset) ended the body,
        and the run, left claimed, is the next incarnation's to recover."""
        return "requestId" not in snapshot

    async def claim(self, ctx: Any) -> bool:
        snapshot = ctx.snapshot if isinstance(ctx.snapshot, dict) else {}
        request_id = snapshot.get("requestId") or ctx.name[len(CHAT_TURN_FIBER_PREFIX) :]
        origin = snapshot.get("originRequestId") or request_id
        host = self._ctx.host
        now = host.clock.now_ms()
        lost = self._snapshot_lost(snapshot)
        if lost:
            # Nothing names the turn's recovery root or the user message it answered: a new
            # incident `<requestId>:`, which can only continue the transcript's last answer.
            found = incident_id(origin, None)
            key = incident_key(found)
        else:
            found, key = self._incident_of(origin, snapshot)
        self.incidents.sweep(now)
        stored = host.kv.get(key)
        existing = dict(stored) if isinstance(stored, dict) else None
        attempt = self.attempts.new()
        if existing is None:
            newly_interrupted = 1
            existing_or_new: dict[str, Any] = {"attemptsInFlight": [attempt]}
        else:
            existing_or_new = dict(existing)
            interrupted_before = existing_or_new.get("interruptedAttempts") or 0
            newly_interrupted = self.attempts.count_dead(existing_or_new, attempt)
            existing_or_new["interruptedAttempts"] = interrupted_before
        config = self.config
        verdict = evaluate_incident(
            existing,
            newly_interrupted=newly_interrupted,
            progress_now=self._credit.count(),
            awaiting_client=self.awaiting_client_interaction(),
            config=config,
            now=now,
        )
        partial, finished = self._rebuild_interrupted_answer(request_id, snapshot)
        kind = "continue" if lost or (partial is not None and partial["parts"]) else "retry"
        verdict, incident = await self._vetted_incident(
            verdict, config, found, request_id, origin, snapshot, kind, now
        )
        in_flight = existing_or_new["attemptsInFlight"]
        incident["attemptsInFlight"] = in_flight if verdict.reason is None else in_flight[:-1]
        host.kv.put(key, incident)
        self.incidents.report_look(
            existing is None, incident, kind, "complete" if finished else kind
        )
        if verdict.reason is not None:
            stream_id, _ = self.interrupted_stream(request_id, snapshot)
            await self.incidents.give_up(
                key,
                incident,
                verdict.reason,
                request_id,
                partial=partial,
                stream_id=stream_id,
                created_at=ctx.created_at,
            )
            return True
        try:
            incident.update(status="scheduled")
            host.kv.put(key, incident)
            targets = continuation_targets(
                self._messages,
                kind=kind,
                partial=partial,
                snapshot=snapshot,
                lost=lost,
                finished=finished,
            )
            await self._schedule_continuation(
                request_id, origin, found, snapshot, idempotent=True, targets=targets
            )
            return True
        finally:
            self.status.set_recovering(True, origin)
            self.attempts.drop(key, attempt["token"])

    # -- a stalled model stream (§8.2) ------------------------------------------------------------
    def stream_stall_timeout_ms(self) -> int:
        """The host's `chat_stream_stall_timeout_ms` (0, or anything but a positive integer:
        no watchdog)."""
        window = getattr(self._hooks, "chat_stream_stall_timeout_ms", 0)
        return window if isinstance(window, int) and window > 0 else 0

    async def route_stall(
        self,
        request_id: str,
        snapshot: dict[str, Any],
        partial: dict[str, Any],
        *,
        backoff: bool = False,
    ) -> str | None:
        """Judge the stalled turn's incident as a wake does, but counting no interrupted
        attempt and leaving the attempts in flight alone; then ask `on_chat_recovery` (its
        `skip` declines: the stall fails the turn), count a transient retry and schedule the
        continuation under the same incident (the decision travels with it, so the
        continuation does not ask again): at once after a stall, and after a transient read
        error (`backoff`) once `transient_backoff_seconds` of the retries counted so far."""
        host = self._ctx.host
        now = host.clock.now_ms()
        origin = snapshot.get("originRequestId") or request_id
        found, key = self._incident_of(origin, None)
        self.incidents.sweep(now)
        stored = host.kv.get(key)
        existing = dict(stored) if isinstance(stored, dict) else None
        config = self.config
        kind = "continue" if partial["parts"] else "retry"
        verdict = evaluate_incident(
            existing,
            newly_interrupted=0,
            progress_now=self._credit.count(),
            awaiting_client=self.awaiting_client_interaction(),
            config=config,
            now=now,
        )
        verdict, incident = await self._vetted_incident(
            verdict, config, found, request_id, origin, snapshot, kind, now
        )
        host.kv.put(key, incident)
        self.incidents.report_look(existing is None, incident, kind, kind)
        if verdict.reason is not None:
            # The stalled turn persists its own partial answer as it ends.
            await self.incidents.give_up(
                key,
                incident,
                verdict.reason,
                request_id,
                partial=partial,
                stream_id=snapshot.get("streamId"),
                save_partial=False,
            )
            return "exhausted"
        try:
            ctx = ChatRecoveryContext(request_id, origin, incident["attempt"], kind, partial)
            decision = await self._hooks.on_chat_recovery(ctx) or kind
        except Exception as exc:  # noqa: BLE001 - the stall then fails the turn
            self.incidents.settle(key, "failed", str(exc) or type(exc).__name__)
            self._ctx.log("error", f"on_chat_recovery raised for a stalled turn: {exc!r}")
            return None
        if decision == "skip":
            self.incidents.settle(key, "skipped", "continue_disabled")
            return None
        retries = (incident.get("transientRetries") or 0) + 1
        self.set_incident(key, {**incident, "transientRetries": retries}, "scheduled")
        self.status.set_recovering(True, origin)
        # A recovered turn's stall chains a new continuation (the SDK's `chained_retry`): it
        # must not join one of the incident's earlier continuations.
        chained = snapshot.get("trigger") == "recovery"
        await self._schedule_continuation(
            request_id,
            origin,
            found,
            snapshot,
            idempotent=not chained,
            decision=decision,
            delay_s=transient_backoff_seconds(retries) if backoff else 0,
            targets=continuation_targets(
                self._messages, kind=kind, partial=partial, snapshot=snapshot
            ),
        )
        probe(host, "chat.stalled_turn_recovering")
        return "scheduled"

    async def _schedule_continuation(
        self,
        request_id: str,
        origin: str,
        found: str,
        snapshot: dict[str, Any],
        *,
        idempotent: bool,
        decision: str | None = None,
        delay_s: int = 0,
        targets: dict[str, str] | None = None,
    ) -> None:
        """Report the incident `found` scheduled and schedule its continuation, at once (a
        stall's carries the `decision` already taken, so the continuation does not ask again),
        its payload naming what the turn builds on (`targets`, `recovery_targets.py`)."""
        host = self._ctx.host
        host.trace.emit("chat:recovery:scheduled", requestId=request_id, originRequestId=origin)
        payload: dict[str, Any] = {
            "requestId": request_id,
            "originRequestId": origin,
            "incidentId": found,
            "snapshot": snapshot,
        }
        payload.update(targets or {})
        if decision is not None:
            payload["decision"] = decision
        await self._hooks.schedule(delay_s, CHAT_RECOVERY_CALLBACK, payload, idempotent=idempotent)

    async def _vetted_incident(
        self,
        verdict: IncidentVerdict,
        config: ChatRecoveryConfig,
        found: str,
        request_id: str,
        origin: str,
        snapshot: dict[str, Any],
        kind: str,
        now: int,
    ) -> tuple[IncidentVerdict, dict[str, Any]]:
        """A look's budget verdict once `should_keep_recovering` had its say (`ask_caller`),
        and the incident it stores: the verdict's, named by this look's turn and kind (a wake
        and a stall judge alike, spec sdk-0.32 §8.1, §8.2)."""
        verdict = await ask_caller(
            verdict,
            config,
            incident_id=found,
            request_id=request_id,
            recovery_kind=kind,
            now=now,
            on_error=self._caller_hook_failed,
            recovery_root_request_id=origin,
        )
        incident = {
            **verdict.incident,
            "originRequestId": origin,
            "incidentId": found,
            "requestId": request_id,
            "runId": snapshot.get("runId", verdict.incident.get("runId")),
            "recoveryKind": kind,
            "updatedAt": now,
        }
        return verdict, incident

    def _caller_hook_failed(self, error: Exception) -> None:
        """`should_keep_recovering` raised: the recovery goes on (a broken hook must not
        wedge the turn), and the error is logged."""
        self._ctx.log("error", f"chat_recovery's should_keep_recovering raised: {error!r}")

    def set_incident(self, key: str, incident: dict[str, Any], status: str) -> None:
        super().set_incident(key, incident, status)
        if status in _SETTLED_STATUSES:
            self.status.set_recovering(False)
