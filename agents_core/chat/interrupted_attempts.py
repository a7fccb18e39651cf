"""0.32.0's chat recovery: always on, and bounded by the attempts whose isolate died (spec
sdk-0.32 §8.1).

Recovery runs whatever `chat_recovery` says (`recovery_config.py`). Besides 0.21.0's bounds
(the no-progress window and `max_attempts`), an incident counts its *interrupted attempts*:
the original turn (when the incident is first detected) and every later attempt whose isolate
died before it finished. The isolate that died cannot write that down, so the next one does:
each attempt (the replay of an interrupted turn at wake, and each recovery callback) records
itself under `attemptsInFlight` with its isolate, and whoever looks next counts each other
isolate found there once and drops its entries. A callback removes its own entry when its turn
settles. Once `max_interrupted_attempts` (5) are counted, the incident is exhausted with
`interrupted_attempts_exceeded`, ahead of the other reasons (`no_progress_timeout`, then
`max_attempts_exceeded`), and nothing runs again. A new incident also reports
`chat:recovery:detected`.

The isolate here is the incarnation: a number the platform gives each one, so counting needs no
random draw.
"""

from __future__ import annotations

from typing import Any

from agents_core.chat.chat_recovery import INCIDENT_PREFIX, ChatRecovery
from agents_core.chat.recovery_config import ChatRecoveryConfig, resolve_chat_recovery_config
from agents_core.chat.turns import CHAT_TURN_FIBER_PREFIX
from agents_core.probes import probe

__all__ = ["INTERRUPTED_ATTEMPTS_EXCEEDED", "InterruptedAttemptsRecovery"]

INTERRUPTED_ATTEMPTS_EXCEEDED = "interrupted_attempts_exceeded"


class InterruptedAttemptsRecovery(ChatRecovery):
    """The ChatRecovery of 0.32.0: its options always on, and the interrupted-attempts bound."""

    __slots__ = ("_attempt_tokens",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._attempt_tokens = 0

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

    def _count_dead_isolates(self, incident: dict[str, Any], attempt: dict[str, Any]) -> None:
        """Count each other isolate that left attempts, drop their entries, add `attempt`."""
        recorded = incident.get("attemptsInFlight") or []
        mine = [a for a in recorded if a.get("isolate") == attempt["isolate"]]
        dead = {a.get("isolate") for a in recorded if a.get("isolate") != attempt["isolate"]}
        interrupted = (incident.get("interruptedAttempts") or 0) + len(dead)
        if interrupted:
            incident["interruptedAttempts"] = interrupted
        incident["attemptsInFlight"] = [*mine, attempt]

    def _over_budget(self, incident: dict[str, Any]) -> bool:
        limit = self.config.max_interrupted_attempts
        return bool((incident.get("interruptedAttempts") or 0) >= limit)

    # -- the wake: an interrupted turn's fiber -----------------------------------------------------
    async def claim(self, ctx: Any) -> bool:
        snapshot = ctx.snapshot if isinstance(ctx.snapshot, dict) else {}
        request_id = snapshot.get("requestId") or ctx.name[len(CHAT_TURN_FIBER_PREFIX) :]
        origin = snapshot.get("originRequestId") or request_id
        host = self._ctx.host
        key = INCIDENT_PREFIX + origin
        existing = host.kv.get(key)
        attempt = self._new_attempt()
        if isinstance(existing, dict):
            incident = dict(existing)
            self._count_dead_isolates(incident, attempt)
        else:
            incident = {"interruptedAttempts": 1, "attemptsInFlight": [attempt]}
            host.trace.emit("chat:recovery:detected", requestId=request_id, originRequestId=origin)
        if existing is None:
            now = host.clock.now_ms()
            incident.update(
                originRequestId=origin,
                attempts=0,
                detectedAt=now,
                progress=self._credit.count(),
                lastProgressAt=now,
            )
        host.kv.put(key, incident)
        return await super().claim(ctx)

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
        if self._over_budget(incident):
            incident["attemptsInFlight"] = incident["attemptsInFlight"][:-1]
            self._ctx.host.kv.put(key, incident)
            self._exhaust(key, incident, INTERRUPTED_ATTEMPTS_EXCEEDED, payload["requestId"])
            await self._hooks._after_chat_recovery(None)
            return
        self._ctx.host.kv.put(key, incident)
        await super().continue_turn(payload)

    def _exhausted_reason(self, incident: dict[str, Any]) -> str | None:
        if self._over_budget(incident):
            return INTERRUPTED_ATTEMPTS_EXCEEDED
        return super()._exhausted_reason(incident)

    def _exhaust(self, key: str, incident: dict[str, Any], reason: str, request_id: str) -> None:
        if reason != INTERRUPTED_ATTEMPTS_EXCEEDED:
            super()._exhaust(key, incident, reason, request_id)
            return
        probe(self._ctx.host, "chat.recovery_interrupted_attempts_exceeded")
        incident["reason"] = reason
        self.set_incident(key, incident, "exhausted")
        self._ctx.host.trace.emit(
            "chat:recovery:exhausted",
            requestId=request_id,
            originRequestId=incident.get("originRequestId"),
            attempt=incident.get("attempts", 0),
            reason=reason,
        )
        self._ctx.log(
            "warn",
            f"chat recovery of turn {incident.get('originRequestId')} gave up: "
            f"{incident.get('interruptedAttempts')} attempts were interrupted",
        )

    async def _run(self, payload: dict[str, Any], attempt: int) -> None:
        try:
            await super()._run(payload, attempt)
        finally:
            self._finish_attempt(payload)

    def _finish_attempt(self, payload: dict[str, Any]) -> None:
        """The callback's turn settled in this isolate: its entry goes."""
        token = (payload.get("attempt") or {}).get("token")
        key = INCIDENT_PREFIX + payload["originRequestId"]
        incident = self._ctx.host.kv.get(key)
        if not isinstance(incident, dict) or token is None:
            return
        recorded = incident.get("attemptsInFlight") or []
        remaining = [a for a in recorded if a.get("token") != token]
        if len(remaining) != len(recorded):
            self._ctx.host.kv.put(key, {**incident, "attemptsInFlight": remaining})
