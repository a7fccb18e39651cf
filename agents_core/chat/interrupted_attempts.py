"""0.32.0's chat recovery: always on, judged by 0.32.0's budget at each wake, and telling
clients what it does (spec sdk-0.32 §8.1, §8.2).

Recovery runs whatever `chat_recovery` says (`recovery_config.py`). An incident is the turn
first interrupted and the latest user message it answers (`recovery_incidents.py`).

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

**Interrupted attempts** (`attempts_in_flight.py`): the original turn, when first detected, and
every later attempt whose isolate died before it finished. A wake drops its own entry once it
has scheduled the recovery; a callback drops its own when its turn settles. Once
`max_interrupted_attempts` (5) are counted the turn is given up with
`interrupted_attempts_exceeded`, by the wake or by the callback, and nothing runs again.

**The callback.** It first waits for the host to be stable, at most `stable_timeout_ms` (10 s):
no turn running or queued. When the time runs out: a turn waiting on a client interaction is
parked (incident `skipped`, `awaiting_client_interaction`); else, while `attempt` is below
`max_attempts`, the recovery is tried again 3 s later with `attempt` one higher (`reason:
stable_timeout_retry`); else the turn is given up with `stable_timeout`, as above. A turn
waiting on a client interaction (a part in `approval-requested`) is budget-free: no bound gives
it up and its no-progress clock stays fresh. The callback returns once the recovered turn is
about to start (`recovery_handoff.py`): a failure before is the callback's (its step is
retried), a platform failure of the turn after it re-enqueues the callback 3 s later. The
turn's end settles the incident: completed (deleted), failed or skipped
(`RecoveryIncidents.settle`).

**A stalled stream** (§8.2; the host's `chat_stream_stall_timeout_ms`, 0 = no watchdog): the
turn engine offers the stalled turn to `route_stall`, which judges its incident as a wake does
but counts no interrupted attempt and bumps `transientRetries`; a spent budget gives the turn
up, `on_chat_recovery`'s `skip` declines (the stall then fails the request), and otherwise the
continuation is scheduled at once and the request ends with the outcome `recovering`.

**The memory-limit breaker** (§2.5): when it seals, every live incident is given up with
`out_of_memory` (`seal_memory_limited`, from the host's `on_alarm_memory_limit`); a
continuation hands its recovered turn to the breaker at the hand-off (`recovery_handoff.py`).

**Clients.** Each turn's end sets the last terminal outcome (`chat_terminal.py`): an error
records it, a completion or an abort clears it, as do a new chat request and a clear; a client
that reconnects learns it over the resume handshake. A client that connects while no turn
streams is told that a recovery is in progress.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents_core.chat.attempts_in_flight import AttemptsInFlight
from agents_core.chat.chat_recovery import (
    INCIDENT_PREFIX,
    PARTIAL_PERSISTED,
    ChatRecovery,
    ChatRecoveryContext,
)
from agents_core.chat.chat_terminal import ChatStatus
from agents_core.chat.recovery_budget import (
    CHAT_RECOVERY_STABLE_RETRY_DELAY_SECONDS,
    IncidentVerdict,
    ask_caller,
    evaluate_incident,
)
from agents_core.chat.recovery_config import ChatRecoveryConfig, resolve_chat_recovery_config
from agents_core.chat.recovery_handoff import (
    dispatch_to_handoff,
    is_platform_failure,
    wait_until_stable,
)
from agents_core.chat.recovery_incidents import RecoveryIncidents, incident_id, incident_key
from agents_core.chat.turns import CHAT_TURN_FIBER_PREFIX, TurnResult
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
_ACTIVE_STATUSES = frozenset({"detected", "scheduled", "attempting"})
"""Statuses of an incident whose recovery is still live (a seal gives these up)."""
_SETTLED_STATUSES = frozenset({"recovered", "failed", "skipped"})
"""Statuses that end a recovery: the recovering flag goes."""


class InterruptedAttemptsRecovery(ChatRecovery):
    """The ChatRecovery of 0.32.0: its options always on, its budget, its client status."""

    __slots__ = ("attempts", "status", "incidents", "_handoffs")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.attempts = AttemptsInFlight(self._ctx)
        self._handoffs: dict[Any, Callable[[], None]] = {}
        """The hand-off signal of each recovery attempt this isolate runs, by its token."""
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

    def _over_budget(self, incident: dict[str, Any]) -> bool:
        limit = self.config.max_interrupted_attempts
        return bool((incident.get("interruptedAttempts") or 0) >= limit)

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
            await self._schedule_continuation(request_id, origin, found, snapshot, idempotent=True)
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
        self, request_id: str, snapshot: dict[str, Any], partial: dict[str, Any]
    ) -> str | None:
        """Judge the stalled turn's incident as a wake does, but counting no interrupted
        attempt and leaving the attempts in flight alone; then ask `on_chat_recovery` (its
        `skip` declines: the stall fails the turn), count a transient retry and schedule the
        continuation with no delay, under the same incident (the decision travels with it, so
        the continuation does not ask again)."""
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
            request_id, origin, found, snapshot, idempotent=not chained, decision=decision
        )
        probe(host, "chat.stalled_turn_recovering")
        return "scheduled"

    # -- a recovery callback ----------------------------------------------------------------------
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
                await super()._run(payload, attempt)
                return
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
        """The host stayed busy: park, try again in 3 s, or give the turn up."""
        key = self.incident_key_of(payload)
        incident = self._ctx.host.kv.get(key)
        if not isinstance(incident, dict):
            return
        if self.awaiting_client_interaction():
            self.incidents.settle(key, "skipped", "awaiting_client_interaction")
            return
        self._ctx.log("warn", "chat recovery timed out waiting for a stable state")
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
        )

    # -- the memory-limit breaker sealed (§2.5) ----------------------------------------------------
    async def seal_memory_limited(self) -> None:
        """Give every live incident (`detected`, `scheduled`, `attempting`) up with
        `out_of_memory`, in key order, as any give-up does (`RecoveryIncidents.give_up`): the
        alarms that carried its recovery kept hitting the memory limit, and the breaker purged
        them (the SDK's `_cf_sealMemoryLimitedRecovery`). It runs at the alarm's outermost
        frame, where these writes can land. The interrupted answer is not rebuilt: the incident
        keeps no snapshot of its turn (the SDK reads the partial text off the stream; the port
        tells `on_exhausted` none: docs/divergences.md T20)."""
        kv = self._ctx.host.kv
        for key, stored in sorted(kv.list(INCIDENT_PREFIX).items()):
            if not isinstance(stored, dict) or stored.get("status") not in _ACTIVE_STATUSES:
                continue
            probe(self._ctx.host, "chat.recovery_sealed_out_of_memory")
            request_id = str(stored.get("requestId") or stored.get("originRequestId") or "")
            await self.incidents.give_up(
                key,
                dict(stored),
                OUT_OF_MEMORY,
                request_id,
                partial=None,
                stream_id=self._stream.for_request(request_id),
            )

    async def _schedule_continuation(
        self,
        request_id: str,
        origin: str,
        found: str,
        snapshot: dict[str, Any],
        *,
        idempotent: bool,
        decision: str | None = None,
    ) -> None:
        """Report the incident `found` scheduled and schedule its continuation, at once (a
        stall's carries the `decision` already taken, so the continuation does not ask again)."""
        host = self._ctx.host
        host.trace.emit("chat:recovery:scheduled", requestId=request_id, originRequestId=origin)
        payload: dict[str, Any] = {
            "requestId": request_id,
            "originRequestId": origin,
            "incidentId": found,
            "snapshot": snapshot,
        }
        if decision is not None:
            payload["decision"] = decision
        await self._hooks.schedule(0, CHAT_RECOVERY_CALLBACK, payload, idempotent=idempotent)

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

    def _recovery_ended(self, key: str, outcome: str, reason: str | None = None) -> None:
        self.incidents.settle(key, outcome, reason)

    def set_incident(self, key: str, incident: dict[str, Any], status: str) -> None:
        super().set_incident(key, incident, status)
        if status in _SETTLED_STATUSES:
            self.status.set_recovering(False)

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
        return self.status.on_message(connection, message, streaming)
