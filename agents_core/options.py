"""Static agent options (the SDK's `static options`) and their defaults.

A subclass sets `options = {"keep_alive_interval_ms": 2_000, ...}`; each field falls back to its
default on its own, and an explicit 0 is kept (the SDK uses `??`). Unknown names are an error
that lists the known ones, so a typo never silently means "default". Every value is checked
against its range (`OPTION_RANGES`: the SDK's own bounds where it has them, such as retry's; a
positive interval where zero would arm the alarm at `now` for ever, such as keepAlive's; at most
366 days for any time), so a bad value is a `ValueError` naming the option when the class is
first used, never a run that spins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents_core.host import Entropy

__all__ = [
    "OPTION_RANGES",
    "AgentOptions",
    "RetryOptions",
    "jitter_backoff_ms",
    "resolve_options",
    "resolve_retry",
]

DEFAULT_KEEP_ALIVE_INTERVAL_MS = 30_000
MAX_OPTION_MS = 366 * 86_400_000
"""No option is a time longer than this (a larger value is a typo: seconds written as ms...)."""


@dataclass(frozen=True)
class RetryOptions:
    """Schedule callback retries: attempts and the full-jitter backoff bounds."""

    max_attempts: int = 3
    base_delay_ms: int | float = 100
    max_delay_ms: int | float = 3_000


def jitter_backoff_ms(
    entropy: Entropy, attempt: int, base_ms: int | float, max_ms: int | float
) -> int:
    """The wait before the retry after failed attempt `attempt` (the SDK's `jitterBackoff`,
    full jitter): `floor(random × min(2^attempt × base, max))` ms, one draw of `entropy`."""
    return int(entropy.random() * min(2**attempt * base_ms, max_ms))


@dataclass(frozen=True)
class AgentOptions:
    keep_alive_interval_ms: int = DEFAULT_KEEP_ALIVE_INTERVAL_MS
    hung_schedule_timeout_seconds: int = 30
    retry: RetryOptions = RetryOptions()
    fiber_recovery_hook_timeout_ms: int = 10_000
    fiber_recovery_scan_deadline_ms: int = 10_000
    fiber_recovery_max_age_ms: int = 86_400_000
    max_alarm_memory_limit_strikes: int = 3
    send_identity_on_connect: bool = True
    """Send `cf_agent_identity` (the instance name and class) first on every connection."""
    # agent-tool options (used by agents_core.agent_tools)
    max_concurrent_agent_tools: int | None = None
    agent_tool_reattach_no_progress_timeout_ms: int = 120_000
    agent_tool_reattach_max_window_ms: float = float("inf")
    detached_max_budget_ms: float = 86_400_000
    detached_no_progress_budget_ms: float = 3_600_000


_NAMES = tuple(f.name for f in fields(AgentOptions))
_BOOLEAN_OPTIONS = ("send_identity_on_connect",)
_INF = float("inf")

OPTION_RANGES: dict[str, tuple[int, int, bool, str]] = {
    # name: (lowest, highest, whether float('inf') is allowed, what the value means)
    "keep_alive_interval_ms": (1, MAX_OPTION_MS, False, "the heartbeat; 0 would spin the alarm"),
    "hung_schedule_timeout_seconds": (1, MAX_OPTION_MS // 1000, False, "seconds"),
    "fiber_recovery_hook_timeout_ms": (-MAX_OPTION_MS, MAX_OPTION_MS, False, "<= 0 disables"),
    "fiber_recovery_scan_deadline_ms": (-MAX_OPTION_MS, MAX_OPTION_MS, False, "<= 0 disables"),
    "fiber_recovery_max_age_ms": (-MAX_OPTION_MS, MAX_OPTION_MS, False, "<= 0 keeps forever"),
    "max_alarm_memory_limit_strikes": (1, 1_000, False, "strikes"),
    "max_concurrent_agent_tools": (0, 1_000_000, False, "None: no cap"),
    # The agent-tool budgets keep the values spec agent-tools gives a meaning: a re-attach
    # budget <= 0 collects an already-terminal child without waiting, inf never seals on
    # silence (§7.4); a max window <= 0 or inf is no ceiling; a detached budget of 0 gives up
    # at the first tick (§4.6); a no-progress window <= 0 or inf is off.
    "agent_tool_reattach_no_progress_timeout_ms": (
        -MAX_OPTION_MS,
        MAX_OPTION_MS,
        True,
        "ms; <= 0 collects without waiting, inf never seals",
    ),
    "agent_tool_reattach_max_window_ms": (
        -MAX_OPTION_MS,
        MAX_OPTION_MS,
        True,
        "ms; <= 0 or inf: no ceiling",
    ),
    "detached_max_budget_ms": (0, MAX_OPTION_MS, True, "ms, or inf; 0 gives up at once"),
    "detached_no_progress_budget_ms": (
        -MAX_OPTION_MS,
        MAX_OPTION_MS,
        True,
        "ms; <= 0 or inf: off",
    ),
}
"""The range of each numeric option, both ends included (docs/scenario-language.md lists them)."""
RETRY_RANGES: dict[str, tuple[int, int]] = {
    "max_attempts": (1, 1_000),
    "base_delay_ms": (1, MAX_OPTION_MS),
    "max_delay_ms": (1, MAX_OPTION_MS),
}
"""retries.ts wants max_attempts >= 1 and both delays > 0; the upper ends are ours."""


def check_range(name: str, value: Any, low: float, high: float, infinite: bool = False) -> None:
    """A ValueError naming `name` unless `value` is a whole number from `low` to `high` (or,
    when `infinite`, float('inf'))."""
    if infinite and isinstance(value, float) and value == _INF:
        return
    whole = isinstance(value, int) and not isinstance(value, bool)
    if not whole and infinite and isinstance(value, float) and value.is_integer():
        whole = True  # a float option (it may be inf) given as 3600000.0
    if not whole or not low <= value <= high:
        extra = ", or inf" if infinite else ""
        raise ValueError(
            f"{name} must be a whole number from {low} to {high}{extra}, got {value!r}"
        )


_RETRY_NAMES = tuple(f.name for f in fields(RetryOptions))


def resolve_retry(
    given: Mapping[str, Any] | RetryOptions | None, base: RetryOptions
) -> RetryOptions:
    """Per-field fallback over `base`, validated as the SDK's `retries.ts` does."""
    if given is None:
        return base
    if isinstance(given, RetryOptions):
        given = {f: getattr(given, f) for f in _RETRY_NAMES}
    unknown = sorted(set(given) - set(_RETRY_NAMES))
    if unknown:
        raise ValueError(f"unknown retry option(s) {unknown}; known: {list(_RETRY_NAMES)}")
    merged = {name: given.get(name, getattr(base, name)) for name in _RETRY_NAMES}
    if merged.get("max_attempts") is None:
        merged["max_attempts"] = base.max_attempts
    attempts, low, high = merged["max_attempts"], merged["base_delay_ms"], merged["max_delay_ms"]
    if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
        raise ValueError(f"retry.max_attempts must be an integer >= 1, got {attempts!r}")
    if not isinstance(low, int | float) or isinstance(low, bool) or low <= 0:
        raise ValueError(f"retry.base_delay_ms must be > 0, got {low!r}")
    if not isinstance(high, int | float) or isinstance(high, bool) or high <= 0:
        raise ValueError(f"retry.max_delay_ms must be > 0, got {high!r}")
    for name, (lowest, highest) in RETRY_RANGES.items():
        check_range(f"retry.{name}", merged[name], lowest, highest)
    if low > high:
        raise ValueError(f"retry.base_delay_ms ({low}) must be <= retry.max_delay_ms ({high})")
    return RetryOptions(attempts, low, high)


def resolve_options(given: Mapping[str, Any] | None) -> AgentOptions:
    """The class's `options` mapping over the defaults, field by field."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(_NAMES))
    if unknown:
        raise ValueError(f"unknown agent option(s) {unknown}; known options: {list(_NAMES)}")
    values = {name: given[name] for name in _NAMES if given.get(name) is not None}
    for name, value in values.items():
        if name in OPTION_RANGES:
            low, high, infinite, _ = OPTION_RANGES[name]
            check_range(name, value, low, high, infinite)
    for name in _BOOLEAN_OPTIONS:
        if name in values and not isinstance(values[name], bool):
            raise ValueError(f"{name} must be True or False, got {values[name]!r}")
    if "retry" in values:
        values["retry"] = resolve_retry(values["retry"], RetryOptions())
    return AgentOptions(**values)
