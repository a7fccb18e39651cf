"""The constants, option defaults and key shapes the checkers need, restated from the spec with
a citation each, so that no checker reads them from the runtime (or the simulated platform) it
checks.

`tests/checkers/test_spec_constants.py` compares every value here with the runtime's own: a
disagreement is then a failing test, not a value both sides share. Option defaults follow the
SDK's rule (fibers §8): each field falls back to its default on its own, with `??`, so an
explicit 0 is kept and only a missing or null value takes the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ALARM_HANDLER_LIMIT_MS",
    "ALARM_RETRY_BASE_MS",
    "ALARM_RETRY_LIMIT",
    "CHAT_TURN_FIBER_PREFIX",
    "DEADMAN_ALARM_DELAY_MS",
    "DETACHED_BACKBONE_CADENCE_S",
    "DETACHED_DELIVERY_LEASE_MS",
    "DETACHED_NOTIFY_CALLBACK",
    "DETACHED_RECONCILE_CALLBACK",
    "FIBER_RECOVERY_BACKOFF_MAX_EXP",
    "FIBER_RECOVERY_MAX_BACKOFF_MS",
    "FINISH_SLOTS",
    "MILESTONE_CLAIM_LEASE_MS",
    "MILESTONE_DEDUPE_PREFIX",
    "MEMORY_LIMIT_BACKOFF_MAX_S",
    "MEMORY_LIMIT_BACKOFF_STEP_S",
    "OOM_ALARM_STRIKES_KEY",
    "OPTION_DEFAULTS",
    "PROGRESS_COALESCE_MS",
    "RETRY_DEFAULTS",
    "memory_limit_backoff_s",
    "milestone_dedupe_key",
    "option_value",
    "recovery_backoff_ms",
    "schedule_dedupe_key",
]

ALARM_HANDLER_LIMIT_MS = 15 * 60 * 1000
"""fibers §9, platform: an alarm handler is killed after 15 minutes (Cloudflare DO docs)."""
ALARM_RETRY_BASE_MS = 2_000
"""fibers §9, platform: a failed alarm is retried from 2 s, doubling."""
ALARM_RETRY_LIMIT = 6
"""fibers §9, platform: at most 6 retries, then the alarm is given up."""
DEADMAN_ALARM_DELAY_MS = 30_000
"""sdk-0.32 §1.4, §2.4 (LC:445): the startup fallback arms at least this far ahead, and the
deadman this far ahead before the first due job is driven."""

FIBER_RECOVERY_MAX_BACKOFF_MS = 300_000
"""fibers §9 (index.ts line 1055) and §3.3 step 4: the recovery backoff's cap, 5 minutes."""
FIBER_RECOVERY_BACKOFF_MAX_EXP = 20
"""fibers §9 (line 1058): the exponent of the recovery backoff stops growing at 20."""
DETACHED_DELIVERY_LEASE_MS = 60_000
"""agent-tools §10 and §4.4 step 1: a delivery claim is leased for 60 s (`now - 60_000`)."""
FINISH_SLOTS = ("finish", "give_up")
"""agent-tools §1.1: the ledger's two slots, `finish_*` and `give_up_*` columns."""
DETACHED_BACKBONE_CADENCE_S = (5, 15, 30, 120)
"""agent-tools §4.5 and §10: the reconcile tick runs again 5, 15, 30, then every 120 s; a run
still open is looked at at least every 120 s once the cadence has slowed down."""
DETACHED_RECONCILE_CALLBACK = "_cfDetachedReconcileTick"
"""agent-tools §4.5 and §10: the schedule callback of the detached backbone's tick."""
DETACHED_NOTIFY_CALLBACK = "_cfDetachedNotifyFinish"
"""agent-tools §4.2 and §10: the per-run callback a chat host stores for `notify` (kept as the
SDK spells it: `detached_on_finish` holds it)."""
MILESTONE_CLAIM_LEASE_MS = 60_000
"""Seed decision S3 (milestones at most once, live or reconciled): the port claims a milestone
for the same 60 s lease as a delivery slot (agent-tools §4.4), the SDK having no such claim."""
MILESTONE_DEDUPE_PREFIX = "cf_agents:agent_tool_milestone:"
"""Seed decision S3: the port's KV claim key of a milestone, `<prefix><runId>:<name>` — one claim
per (runId, name), the scope S3 names. The SDK keys only its injected message
(`detached-ms:<runId>:<name>`, agent-tools §10)."""
PROGRESS_COALESCE_MS = 200
"""agent-tools §5.2 step 3 and §10 (`AGENT_TOOL_PROGRESS_COALESCE_MS`): progress within 200 ms of
the run's last emit is coalesced; under seed decision S4 the latest coalesced value is sent when
that window ends (T-90)."""
CHAT_TURN_FIBER_PREFIX = "__cf_internal_chat_turn:"
"""fibers §6.3 ("chat hosts claim names starting `__cf_internal_chat_turn:`") and sdk-0.32 §8.3:
a chat turn is the fiber `__cf_internal_chat_turn:<requestId>`."""

OOM_ALARM_STRIKES_KEY = "cf_agents:oom_alarm_strikes"
"""fibers §2 (KV keys): the count of consecutive alarms that ended in a memory-limit reset."""
MEMORY_LIMIT_BACKOFF_STEP_S = 30
"""fibers §4.6: below the strike budget, the executing row is pushed `30 × strikes` seconds on,"""
MEMORY_LIMIT_BACKOFF_MAX_S = 300
"""fibers §4.6: ... at most 300 seconds."""

RETRY_DEFAULTS: Mapping[str, int] = {"max_attempts": 3, "base_delay_ms": 100, "max_delay_ms": 3_000}
"""fibers §8 and §4.3: schedule callback retries, 3 attempts, 100 ms base, 3 000 ms cap."""

OPTION_DEFAULTS: Mapping[str, Any] = {
    # fibers §8 (DEFAULT_AGENT_STATIC_OPTIONS) and §9
    "keep_alive_interval_ms": 30_000,
    "hung_schedule_timeout_seconds": 30,
    "fiber_recovery_hook_timeout_ms": 10_000,
    "fiber_recovery_scan_deadline_ms": 10_000,
    "fiber_recovery_max_age_ms": 86_400_000,
    "max_alarm_memory_limit_strikes": 3,
    # agent-tools §10 and §7.4
    "max_concurrent_agent_tools": None,  # Infinity: no cap
    "agent_tool_reattach_no_progress_timeout_ms": 120_000,
    "agent_tool_reattach_max_window_ms": float("inf"),
    "detached_max_budget_ms": 86_400_000,
    "detached_no_progress_budget_ms": 3_600_000,
}
"""The static options' defaults, in the port's snake_case names (spec README, "Names")."""


def option_value(given: Mapping[str, Any] | None, name: str) -> Any:
    """The option `name` of a class whose `options` mapping is `given`: its value unless missing
    or None (`??`, fibers §8), else the default. An unknown name is a KeyError."""
    default = OPTION_DEFAULTS[name]
    value = (given or {}).get(name)
    return default if value is None else value


def recovery_backoff_ms(keep_alive_interval_ms: int, no_progress_scans: int) -> int:
    """fibers §3.3 step 4: `min(300_000, keepAliveIntervalMs × 2^min(streak, 20))`."""
    exponent = min(no_progress_scans, FIBER_RECOVERY_BACKOFF_MAX_EXP)
    return int(min(FIBER_RECOVERY_MAX_BACKOFF_MS, keep_alive_interval_ms * 2**exponent))


def milestone_dedupe_key(run_id: str, name: str) -> str:
    """The S3 claim key of milestone `name` of run `run_id` (see `MILESTONE_DEDUPE_PREFIX`)."""
    return f"{MILESTONE_DEDUPE_PREFIX}{run_id}:{name}"


def schedule_dedupe_key(row: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What an idempotent `schedule()` / `scheduleEvery()` matches an existing row on (fibers
    §4.1, §4.2, §4.7; sdk-0.32 §3.2): type, callback, payload JSON text and owner key, plus the
    cron expression for a cron row and the interval for an interval row — never the time or the
    delay. Rows of sibling facets differ by owner key. None for a kind with no dedupe."""
    kind = row.get("type")
    base = (kind, row.get("callback"), row.get("payload"), row.get("owner_path_key"))
    if kind == "cron":
        return (*base, row.get("cron"))
    if kind == "interval":
        return (*base, row.get("intervalSeconds"))
    if kind in ("delayed", "scheduled"):
        return base
    return None


def memory_limit_backoff_s(strikes: int) -> int:
    """fibers §4.6: how far (s) the breaker pushes the executing row at strike `strikes`."""
    return min(MEMORY_LIMIT_BACKOFF_MAX_S, MEMORY_LIMIT_BACKOFF_STEP_S * strikes)
