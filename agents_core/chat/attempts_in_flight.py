"""The attempts a 0.32.0 recovery incident records as running, and the count of those that died
(spec sdk-0.32 §8.1; the SDK's `deadIsolateCount`, `admitChatRecoveryAttempt` and
`finishChatRecoveryAttempt`).

An isolate that dies cannot write that down, so each attempt (the wake of an interrupted turn,
and each recovery callback) records itself under the incident's `attemptsInFlight` with its
isolate and a token, and whoever looks next counts each *other* isolate found there once, as one
interrupted attempt, and drops its entries. An attempt that finishes drops its own entry. The
isolate here is the incarnation: a number the platform gives each one, so counting needs no
random draw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents_core.context import AgentContext

__all__ = ["AttemptsInFlight"]


class AttemptsInFlight:
    """One chat host's attempt tokens, and the bookkeeping of an incident's running attempts."""

    __slots__ = ("_ctx", "_tokens")

    def __init__(self, ctx: AgentContext) -> None:
        self._ctx = ctx
        self._tokens = 0

    def new(self) -> dict[str, Any]:
        """A new attempt of this isolate: `{isolate, token}`."""
        self._tokens += 1
        isolate = self._ctx.host.incarnation_number
        return {"isolate": isolate, "token": f"{isolate}:{self._tokens}"}

    @staticmethod
    def count_dead(incident: dict[str, Any], attempt: dict[str, Any]) -> int:
        """Count each other isolate that left attempts in `incident`, drop their entries, add
        `attempt` (all in `incident`); how many were counted."""
        recorded = incident.get("attemptsInFlight") or []
        mine = [a for a in recorded if a.get("isolate") == attempt["isolate"]]
        dead = {a.get("isolate") for a in recorded if a.get("isolate") != attempt["isolate"]}
        interrupted = (incident.get("interruptedAttempts") or 0) + len(dead)
        if interrupted:
            incident["interruptedAttempts"] = interrupted
        incident["attemptsInFlight"] = [*mine, attempt]
        return len(dead)

    def drop(self, key: str, token: str) -> None:
        """The attempt `token` finished in this isolate: its entry in the incident at `key`
        goes (nothing when the incident or the entry is gone)."""
        kv = self._ctx.host.kv
        incident = kv.get(key)
        if not isinstance(incident, dict):
            return
        recorded = incident.get("attemptsInFlight") or []
        remaining = [a for a in recorded if a.get("token") != token]
        if len(remaining) != len(recorded):
            kv.put(key, {**incident, "attemptsInFlight": remaining})
