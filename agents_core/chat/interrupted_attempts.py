"""0.32.0's chat recovery: always on, judged by 0.32.0's budget at each wake, and telling
clients what it does (spec sdk-0.32 §8.1, §8.2).

Recovery runs whatever `chat_recovery` says (`recovery_config.py`).

**The wake.** When the fiber scan offers an interrupted turn, the incident is judged by
`recovery_budget.evaluate_incident`: the no-progress window, the work budget (the progress
marker counts stream segments, `segment_progress.py`), the interrupted attempts, the attempt
counter with its 30 s debounce; then, on a wake after the first that no bound gave up, the
caller's `should_keep_recovering` (a `chat_recovery` option), whose `False` gives the turn up
with `recovery_aborted`. Incidents with no attempt for an hour are deleted first (the TTL
sweep). A new incident reports `chat:recovery:detected`; every wake then reports
`chat:recovery:attempt` (`attempt`, `maxAttempts`, `recoveryKind`: `continue` when the
interrupted answer has content, else `retry`). A spent budget gives the turn up at once:
`chat:recovery:exhausted` with the reason, and the clients get the terminal message as the
turn's error frame (the `terminal_message` option, by default "The assistant was interrupted
and could not recover. Please try again."), which is also kept as the last terminal outcome.
Otherwise the recovery is scheduled and the `cf:chat:recovering` flag set (`chat_terminal.py`).

**Interrupted attempts.** An incident counts the attempts whose isolate died: the original
turn (when it is first detected) and every later attempt that died before it finished. The
isolate that died cannot write that down, so the next one does: each attempt (the wake of an
interrupted turn, and each recovery callback) records itself under `attemptsInFlight` with its
isolate, and whoever looks next counts each other isolate found there once and drops its
entries. A wake drops its own entry once it has scheduled the recovery; a callback drops its
own when its turn settles. Once `max_interrupted_attempts` (5) are counted the turn is given up
with `interrupted_attempts_exceeded`, by the wake or by the callback, and nothing runs again.

**The callback.** It first waits for the host to be stable, at most `stable_timeout_ms` (10 s):
no turn running or queued. When the time runs out: a turn waiting on a client interaction is
parked (incident `skipped`, `awaiting_client_interaction`); else, while `attempt` is below
`max_attempts`, the recovery is tried again 3 s later with `attempt` one higher (`reason:
stable_timeout_retry`); else the turn is given up with `stable_timeout`, as above. A turn
waiting on a client interaction (a part in `approval-requested`) is budget-free: no bound gives
it up and its no-progress clock stays fresh.

**A stalled stream** (§8.2; the host's `chat_stream_stall_timeout_ms`, 0 = no watchdog): the
turn engine offers the stalled turn to `route_stall`, which judges its incident as a wake does
but counts no interrupted attempt and bumps `transientRetries`; a spent budget gives the turn
up, `on_chat_recovery`'s `skip` declines (the stall then fails the request), and otherwise the
continuation is scheduled at once and the request ends with the outcome `recovering`.

**Clients.** Each turn's end sets the last terminal outcome (`chat_terminal.py`): an error
records it, a completion or an abort clears it, as do a new chat request and a clear; a client
that reconnects learns it over the resume handshake. A client that connects while no turn
streams is told that a recovery is in progress.

The isolate here is the incarnation: a number the platform gives each one, so counting needs no
random draw.
"""

from __future__ import annotations

from typing import Any

from agents_core.chat.chat_recovery import INCIDENT_PREFIX, ChatRecovery, ChatRecoveryContext
from agents_core.chat.chat_terminal import DEFAULT_TURN_ERROR, ChatStatus
from agents_core.chat.recovery_budget import (
    CHAT_RECOVERY_STABLE_RETRY_DELAY_SECONDS,
    RECOVERY_ABORTED,
    ask_caller,
    evaluate_incident,
    stale_incident,
)
from agents_core.chat.recovery_config import ChatRecoveryConfig, resolve_chat_recovery_config
from agents_core.chat.turns import CHAT_TURN_FIBER_PREFIX, TurnResult
from agents_core.probes import probe
from agents_core.stored_names import CHAT_RECOVERY_CALLBACK

__all__ = ["INTERRUPTED_ATTEMPTS_EXCEEDED", "STABLE_TIMEOUT", "InterruptedAttemptsRecovery"]

INTERRUPTED_ATTEMPTS_EXCEEDED = "interrupted_attempts_exceeded"
STABLE_TIMEOUT = "stable_timeout"
_SETTLED_STATUSES = frozenset({"recovered", "failed", "skipped"})
"""Statuses that end a recovery: the recovering flag goes."""


class InterruptedAttemptsRecovery(ChatRecovery):
    """The ChatRecovery of 0.32.0: its options always on, its budget, its client status."""

    __slots__ = ("_attempt_tokens", "status")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._attempt_tokens = 0
        self.status = ChatStatus(self._ctx, self._hooks._broadcast_chat_frame)
        """The recovering flag and the last terminal outcome."""

    @property
    def config(self) -> ChatRecoveryConfig:
        """The host's `chat_recovery`, resolved (read each time: a class may change it)."""
        hooks = self._hooks
        return resolve_chat_recovery_config(
            getattr(hooks, "chat_recovery", None),
            max_attempts=hooks.max_chat_recovery_attempts,
            no_progress_timeout_ms=hooks.chat_recovery_no_progress_timeout_ms,
        )

    # -- the attempts in flight -------------------------------------------------------------------
    def _isolate(self) -> int:
        return self._ctx.host.incarnation_number

    def _new_attempt(self) -> dict[str, Any]:
        self._attempt_tokens += 1
        isolate = self._isolate()
        return {"isolate": isolate, "token": f"{isolate}:{self._attempt_tokens}"}

    def _count_dead_isolates(self, incident: dict[str, Any], attempt: dict[str, Any]) -> int:
        """Count each other isolate that left attempts, drop their entries, add `attempt`;
        how many were counted."""
        recorded = incident.get("attemptsInFlight") or []
        mine = [a for a in recorded if a.get("isolate") == attempt["isolate"]]
        dead = {a.get("isolate") for a in recorded if a.get("isolate") != attempt["isolate"]}
        interrupted = (incident.get("interruptedAttempts") or 0) + len(dead)
        if interrupted:
            incident["interruptedAttempts"] = interrupted
        incident["attemptsInFlight"] = [*mine, attempt]
        return len(dead)

    def _over_budget(self, incident: dict[str, Any]) -> bool:
        limit = self.config.max_interrupted_attempts
        return bool((incident.get("interruptedAttempts") or 0) >= limit)

    def awaiting_client_interaction(self) -> bool:
        """The transcript holds a part waiting on the client: a tool call asking for approval
        (the port's tools all run on the server, so no other part can wait on a client)."""
        return any(
            message.get("role") == "assistant"
            and any(
                isinstance(part, dict) and part.get("state") == "approval-requested"
                for part in message.get("parts") or []
            )
            for message in self._messages.all()
        )

    def _has_orphaned_turn(self) -> bool:
        """A chat turn's fiber row, or (a top-level agent's turns being Task runs) its Task run,
        that no turn of this incarnation runs."""
        return super()._has_orphaned_turn() or self._hooks._has_orphaned_task_turn()

    # -- the wake: an interrupted turn's fiber -----------------------------------------------------
    def _sweep_stale_incidents(self, now: int) -> None:
        kv = self._ctx.host.kv
        for key, incident in kv.list(INCIDENT_PREFIX).items():
            if stale_incident(incident, now):
                kv.delete(key)

    async def claim(self, ctx: Any) -> bool:
        snapshot = ctx.snapshot if isinstance(ctx.snapshot, dict) else {}
        request_id = snapshot.get("requestId") or ctx.name[len(CHAT_TURN_FIBER_PREFIX) :]
        origin = snapshot.get("originRequestId") or request_id
        host = self._ctx.host
        now = host.clock.now_ms()
        key = INCIDENT_PREFIX + origin
        self._sweep_stale_incidents(now)
        stored = host.kv.get(key)
        existing = dict(stored) if isinstance(stored, dict) else None
        attempt = self._new_attempt()
        if existing is None:
            newly_interrupted = 1
            existing_or_new: dict[str, Any] = {"attemptsInFlight": [attempt]}
        else:
            existing_or_new = dict(existing)
            interrupted_before = existing_or_new.get("interruptedAttempts") or 0
            newly_interrupted = self._count_dead_isolates(existing_or_new, attempt)
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
        kind = "continue" if partial is not None and partial["parts"] else "retry"
        verdict = await ask_caller(
            verdict,
            config,
            incident_id=origin,
            request_id=request_id,
            recovery_kind=kind,
            now=now,
            on_error=self._caller_hook_failed,
        )
        incident = {
            **verdict.incident,
            "originRequestId": origin,
            "requestId": request_id,
            "runId": snapshot.get("runId", verdict.incident.get("runId")),
            "recoveryKind": kind,
            "updatedAt": now,
        }
        in_flight = existing_or_new["attemptsInFlight"]
        incident["attemptsInFlight"] = in_flight if verdict.reason is None else in_flight[:-1]
        host.kv.put(key, incident)
        self._report_look(existing is None, incident, kind, "complete" if finished else kind)
        if verdict.reason is not None:
            self._exhaust(key, incident, verdict.reason, request_id)
            return True
        try:
            return await super().claim(ctx)
        finally:
            self.status.set_recovering(True, origin)
            self._drop_attempt(key, attempt["token"])

    def _report_look(self, first: bool, incident: dict[str, Any], kind: str, mode: str) -> None:
        """`chat:recovery:detected` for a new incident, then `chat:recovery:attempt` (`mode`
        is the port's word for what recovery will do)."""
        trace = self._ctx.host.trace
        request_id, origin = incident["requestId"], incident["originRequestId"]
        max_attempts = self.config.max_attempts
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
        key = INCIDENT_PREFIX + origin
        self._sweep_stale_incidents(now)
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
        verdict = await ask_caller(
            verdict,
            config,
            incident_id=origin,
            request_id=request_id,
            recovery_kind=kind,
            now=now,
            on_error=self._caller_hook_failed,
        )
        incident = {
            **verdict.incident,
            "originRequestId": origin,
            "requestId": request_id,
            "runId": snapshot.get("runId", verdict.incident.get("runId")),
            "recoveryKind": kind,
            "updatedAt": now,
        }
        host.kv.put(key, incident)
        self._report_look(existing is None, incident, kind, kind)
        if verdict.reason is not None:
            self._exhaust(key, incident, verdict.reason, request_id)
            return "exhausted"
        try:
            ctx = ChatRecoveryContext(request_id, origin, incident["attempt"], kind, partial)
            decision = await self._hooks.on_chat_recovery(ctx) or kind
        except Exception as exc:  # noqa: BLE001 - the stall then fails the turn
            self.set_incident(key, incident, "failed")
            self._ctx.log("error", f"on_chat_recovery raised for a stalled turn: {exc!r}")
            return None
        if decision == "skip":
            self._skip(key, incident, "continue_disabled")
            return None
        retries = (incident.get("transientRetries") or 0) + 1
        self.set_incident(key, {**incident, "transientRetries": retries}, "scheduled")
        self.status.set_recovering(True, origin)
        host.trace.emit("chat:recovery:scheduled", requestId=request_id, originRequestId=origin)
        payload = {
            "requestId": request_id,
            "originRequestId": origin,
            "snapshot": snapshot,
            "decision": decision,
        }
        # A recovered turn's stall chains a new continuation (the SDK's `chained_retry`): it
        # must not join one of the incident's earlier continuations.
        chained = snapshot.get("trigger") == "recovery"
        await self._hooks.schedule(0, CHAT_RECOVERY_CALLBACK, payload, idempotent=not chained)
        probe(host, "chat.stalled_turn_recovering")
        return "scheduled"

    # -- a recovery callback ----------------------------------------------------------------------
    async def continue_turn(self, payload: Any) -> None:
        origin = payload["originRequestId"]
        key = INCIDENT_PREFIX + origin
        incident = self._ctx.host.kv.get(key)
        if not isinstance(incident, dict) or incident.get("status") != "scheduled":
            return
        incident = dict(incident)
        attempt = self._new_attempt()
        self._count_dead_isolates(incident, attempt)
        payload = {**payload, "attempt": attempt}
        if not self.awaiting_client_interaction() and self._over_budget(incident):
            incident["attemptsInFlight"] = incident["attemptsInFlight"][:-1]
            self._ctx.host.kv.put(key, incident)
            self._exhaust(key, incident, INTERRUPTED_ATTEMPTS_EXCEEDED, payload["requestId"])
            await self._hooks._after_chat_recovery(None)
            return
        self.set_incident(key, incident, "attempting")
        self.live.add(origin)
        self._ctx.host.tasks.wait_until(self._run(payload, incident.get("attempt") or 1))

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
        came (a turn waiting on a client interaction never does: the port's client cannot
        answer one while the recovery waits)."""
        clock = self._ctx.host.clock
        tasks = self._ctx.host.tasks
        deadline = clock.now_ms() + self.config.stable_timeout_ms
        if not self._turns.queue_busy() and not self.awaiting_client_interaction():
            return True
        dispose = await self._hooks.keep_alive()
        try:
            while self._turns.queue_busy():
                remaining = deadline - clock.now_ms()
                if remaining <= 0:
                    return False
                await tasks.race(self._turns.tail, clock.sleep(remaining))
            if self.awaiting_client_interaction():
                remaining = deadline - clock.now_ms()
                if remaining > 0:
                    await clock.sleep(remaining)
                return False
            return True
        finally:
            dispose()

    async def _stable_timeout(self, payload: dict[str, Any]) -> None:
        """The host stayed busy: park, try again in 3 s, or give the turn up."""
        key = INCIDENT_PREFIX + payload["originRequestId"]
        incident = self._ctx.host.kv.get(key)
        if not isinstance(incident, dict):
            return
        if self.awaiting_client_interaction():
            self._skip(key, incident, "awaiting_client_interaction")
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
        self._exhaust(key, dict(incident), STABLE_TIMEOUT, incident.get("requestId") or "")

    def _caller_hook_failed(self, error: Exception) -> None:
        """`should_keep_recovering` raised: the recovery goes on (a broken hook must not
        wedge the turn), and the error is logged."""
        self._ctx.log("error", f"chat_recovery's should_keep_recovering raised: {error!r}")

    def _exhausted_reason(self, incident: dict[str, Any]) -> str | None:
        """The budget is judged at the wake (`claim`) and, for interrupted attempts, by the
        callback; the 0.21.0 check before each attempt is gone."""
        return None

    def _exhaust(self, key: str, incident: dict[str, Any], reason: str, request_id: str) -> None:
        """Give the turn up: the incident `exhausted`, `chat:recovery:exhausted`, the terminal
        message to clients and as the last terminal outcome, the recovering flag cleared."""
        if reason == INTERRUPTED_ATTEMPTS_EXCEEDED:
            probe(self._ctx.host, "chat.recovery_interrupted_attempts_exceeded")
        elif reason == "no_progress_timeout":
            probe(self._ctx.host, "chat.recovery_no_progress_timeout")
        elif reason == "max_attempts_exceeded":
            probe(self._ctx.host, "chat.recovery_exhausted")
        elif reason == RECOVERY_ABORTED:
            probe(self._ctx.host, "chat.recovery_aborted_by_caller")
        incident = {**incident, "reason": reason}
        super().set_incident(key, incident, "exhausted")
        origin = incident.get("originRequestId")
        self._ctx.host.trace.emit(
            "chat:recovery:exhausted",
            requestId=request_id,
            originRequestId=origin,
            attempt=incident.get("attempt", 0),
            reason=reason,
        )
        message = self.config.terminal_message
        self._hooks._broadcast_chat_frame(self.status.terminal_frame(request_id, message))
        self.status.record_terminal(request_id, message)
        self.status.set_recovering(False)
        self._ctx.log("warn", f"chat recovery of turn {origin} gave up: {reason}")

    def _skip(self, key: str, incident: dict[str, Any], reason: str) -> None:
        """Stop recovering without giving the turn up (the incident stays, `skipped`)."""
        self.set_incident(key, {**incident, "reason": reason}, "skipped")
        self._ctx.host.trace.emit(
            "chat:recovery:skipped",
            requestId=incident.get("requestId"),
            originRequestId=incident.get("originRequestId"),
            attempt=incident.get("attempt", 0),
            reason=reason,
        )

    def set_incident(self, key: str, incident: dict[str, Any], status: str) -> None:
        super().set_incident(key, incident, status)
        if status in _SETTLED_STATUSES:
            self.status.set_recovering(False)

    def _report_attempt(self, request_id: str, origin: str, mode: str, attempt: int) -> None:
        """`chat:recovery:attempt` is reported by the wake that judges the incident."""

    def _drop_attempt(self, key: str, token: str) -> None:
        incident = self._ctx.host.kv.get(key)
        if not isinstance(incident, dict):
            return
        recorded = incident.get("attemptsInFlight") or []
        remaining = [a for a in recorded if a.get("token") != token]
        if len(remaining) != len(recorded):
            self._ctx.host.kv.put(key, {**incident, "attemptsInFlight": remaining})

    def _finish_attempt(self, payload: dict[str, Any]) -> None:
        """The callback's turn settled in this isolate: its entry goes."""
        token = (payload.get("attempt") or {}).get("token")
        if token is not None:
            self._drop_attempt(INCIDENT_PREFIX + payload["originRequestId"], token)

    # -- what clients learn -----------------------------------------------------------------------
    def turn_ended(self, result: TurnResult) -> None:
        if result.status in ("completed", "aborted"):
            self.status.clear_terminal()
        elif result.status == "error":
            self.status.record_terminal(result.request_id, result.error or DEFAULT_TURN_ERROR)

    def chat_request(self) -> None:
        self.status.clear_terminal()

    def chat_cleared(self) -> None:
        self.status.clear_terminal()

    def on_connect(self, connection: Any, streaming: bool) -> None:
        frame = None if streaming else self.status.recovering_frame()
        if frame is not None:
            connection.send(frame)

    def on_message(self, connection: Any, message: Any, streaming: bool) -> bool:
        return self.status.on_message(connection, message, streaming)
