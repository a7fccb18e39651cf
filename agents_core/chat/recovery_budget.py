"""0.32.0's recovery budget: how an interrupted chat turn's incident is judged at each wake
(spec sdk-0.32 §8.1; the SDK's `evaluateChatRecoveryIncident`).

`evaluate_incident` is pure: given the stored incident (None the first time), the progress
marker now (`segment_progress.py`), whether the turn waits on a client interaction, the options
and the clock, it returns the incident to store and, when the budget is spent, why. The bounds,
each catching its own failure:

- **no progress**: `lastProgressAt` moves to now whenever the marker rose since the last look;
  a turn whose marker has not risen for more than `no_progress_timeout_ms` is given up
  (`no_progress_timeout`);
- **work**: `workBaseline` is the marker when the incident opened; once the marker has risen
  more than `max_recovery_work` segments above it (`inf`: never) the turn is given up
  (`work_budget_exceeded`): a turn that keeps streaming but never finishes;
- **interrupted attempts**: each other isolate that left an attempt in `attemptsInFlight` died
  during it (`interrupted_attempts.py`); `max_interrupted_attempts` of them, the original turn
  counted, give it up (`interrupted_attempts_exceeded`);
- **attempts**: `attempt` starts at 1, goes back to 1 when the marker rose, stays put when the
  last attempt was less than 30 s ago (the debounce: one deploy's bunched wakes are one
  attempt), and otherwise grows by one; past `max_attempts` the turn is given up
  (`max_attempts_exceeded`);
- **transient retries**: each stalled stream routed back into recovery bumps
  `transientRetries` (`incident_looks.py`); once they reach `max_attempts` the next look
  gives the turn up with `max_attempts_exceeded` too;
- **the caller**: `should_keep_recovering` (`ask_caller`) is asked on a look that is not the
  first and that no bound above gave up, with the attempt within `max_attempts`; `False` gives
  the turn up with `recovery_aborted`. A hook that raises is logged and counts as "go on".

The reasons rank in that order: interrupted attempts, work, no progress, the caller's veto, then
attempts. The first look never gives up on work, progress or attempts. A turn waiting on a
client interaction is budget-free: nothing gives it up, the caller is not asked, and its
no-progress clock is kept at now.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from agents_core.chat.recovery_config import ChatRecoveryConfig

__all__ = [
    "CHAT_RECOVERY_ALARM_DEBOUNCE_MS",
    "CHAT_RECOVERY_INCIDENT_TTL_MS",
    "CHAT_RECOVERY_STABLE_RETRY_DELAY_SECONDS",
    "RECOVERY_ABORTED",
    "ChatRecoveryProgressContext",
    "IncidentVerdict",
    "ask_caller",
    "evaluate_incident",
    "stale_incident",
]

CHAT_RECOVERY_ALARM_DEBOUNCE_MS = 30_000
"""Wakes within this long of the last attempt, with no progress between, are one attempt."""
CHAT_RECOVERY_INCIDENT_TTL_MS = 3_600_000
"""An incident with no attempt for longer than this is abandoned: the next wake deletes it."""
CHAT_RECOVERY_STABLE_RETRY_DELAY_SECONDS = 3
"""A recovery that found the host busy for `stable_timeout_ms` tries again this much later."""
RECOVERY_ABORTED = "recovery_aborted"
"""The reason of a turn the caller's `should_keep_recovering` gave up."""


@dataclass(frozen=True)
class IncidentVerdict:
    incident: dict[str, Any]
    """The incident to store (a new dict; `status` is `attempting` or `exhausted`)."""
    reason: str | None
    """Why the budget is spent; None to go on."""
    caller_may_veto: bool = False
    """Not the first look, not waiting on the client, no bound spent and the attempt within
    `max_attempts`: `should_keep_recovering` is asked (`ask_caller`)."""


@dataclass(frozen=True)
class ChatRecoveryProgressContext:
    """What `should_keep_recovering` decides on (the SDK's `ChatRecoveryProgressContext`)."""

    incident_id: str
    """The incident's id: `<recovery root request id>:<latest user message id>`
    (`recovery_incidents.incident_id`)."""
    request_id: str
    recovery_root_request_id: str
    attempt: int
    max_attempts: int
    recovery_kind: str
    """`continue` (the interrupted answer has content) or `retry`."""
    work: float
    """Stream segments the progress marker rose since the incident opened."""
    age_ms: int
    """Since the incident was first detected."""


def stale_incident(incident: Any, now: int) -> bool:
    """An incident with no attempt within the TTL (the first sighting when it never had one)."""
    if not isinstance(incident, dict):
        return False
    last = incident.get("lastAttemptAt", incident.get("detectedAt", 0))
    since = last if isinstance(last, (int, float)) else 0
    return bool(now - since > CHAT_RECOVERY_INCIDENT_TTL_MS)


def evaluate_incident(
    existing: dict[str, Any] | None,
    *,
    newly_interrupted: int,
    progress_now: int,
    awaiting_client: bool,
    config: ChatRecoveryConfig,
    now: int,
) -> IncidentVerdict:
    """Judge one wake of an interrupted turn; `newly_interrupted` is how many attempts died
    since the last look (1 the first time: the original turn)."""
    seen = existing is not None
    old: dict[str, Any] = dict(existing) if existing is not None else {}
    old.pop("reason", None)  # a stored reason (a stable-timeout retry's) is not this look's
    previous = old.get("progress") or 0
    progressed = seen and progress_now > previous
    if progressed or awaiting_client:
        last_progress = now
    else:
        last_progress = old.get("lastProgressAt", old.get("detectedAt", now))
    no_progress = seen and not awaiting_client
    no_progress = no_progress and now - last_progress > config.no_progress_timeout_ms
    baseline = old.get("workBaseline", progress_now)
    progress = max(previous, progress_now)
    limit = config.max_recovery_work
    over_work = seen and not math.isinf(limit) and progress - baseline > limit
    interrupted = (old.get("interruptedAttempts") or 0) + newly_interrupted
    over_interrupted = not awaiting_client and interrupted >= config.max_interrupted_attempts
    transient = old.get("transientRetries") or 0
    over_transient = seen and not awaiting_client and transient >= config.max_attempts
    last_attempt = old.get("lastAttemptAt")
    debounced = (
        seen
        and not progressed
        and isinstance(last_attempt, (int, float))
        and now - last_attempt < CHAT_RECOVERY_ALARM_DEBOUNCE_MS
    )
    if progressed:
        attempt = 1
    elif debounced:
        attempt = old.get("attempt") or 1
    else:
        attempt = (old.get("attempt") or 0) + 1
    reason: str | None = None
    if not awaiting_client:
        if over_interrupted:
            reason = "interrupted_attempts_exceeded"
        elif over_work:
            reason = "work_budget_exceeded"
        elif no_progress:
            reason = "no_progress_timeout"
        elif over_transient or attempt > config.max_attempts:
            reason = "max_attempts_exceeded"
    incident = {
        **old,
        "attempt": attempt,
        "maxAttempts": config.max_attempts,
        "status": "attempting" if reason is None else "exhausted",
        "detectedAt": old.get("detectedAt", now),
        "lastAttemptAt": now,
        "lastProgressAt": last_progress,
        "progress": progress,
        "workBaseline": baseline,
    }
    if interrupted:
        incident["interruptedAttempts"] = interrupted
    if reason is not None:
        incident["reason"] = reason
    caller_may_veto = seen and not awaiting_client and reason is None
    return IncidentVerdict(incident, reason, caller_may_veto)


async def ask_caller(
    verdict: IncidentVerdict,
    config: ChatRecoveryConfig,
    *,
    incident_id: str,
    request_id: str,
    recovery_kind: str,
    now: int,
    on_error: Callable[[Exception], None],
    recovery_root_request_id: str | None = None,
) -> IncidentVerdict:
    """`verdict`, or the same incident given up with `recovery_aborted` when the caller's
    `should_keep_recovering` answers `False` (only `False`: any other answer goes on). Not
    asked when `verdict.caller_may_veto` is False or no hook is set; a hook that raises is
    reported to `on_error` and the verdict stands."""
    hook = config.should_keep_recovering
    if hook is None or not verdict.caller_may_veto:
        return verdict
    incident = verdict.incident
    detected = incident.get("detectedAt", now)
    ctx = ChatRecoveryProgressContext(
        incident_id=incident_id,
        request_id=request_id,
        recovery_root_request_id=recovery_root_request_id or request_id,
        attempt=incident["attempt"],
        max_attempts=config.max_attempts,
        recovery_kind=recovery_kind,
        work=incident["progress"] - incident["workBaseline"],
        age_ms=now - (detected if isinstance(detected, int) else now),
    )
    try:
        answer = hook(ctx)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:  # noqa: BLE001 - a broken hook must not wedge the turn
        on_error(exc)
        return verdict
    if answer is not False:
        return verdict
    given_up = {**incident, "status": "exhausted", "reason": RECOVERY_ABORTED}
    return replace(verdict, incident=given_up, reason=RECOVERY_ABORTED, caller_may_veto=False)
