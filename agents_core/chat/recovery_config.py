"""Chat recovery's options as 0.32.0 resolves them (`resolveChatRecoveryConfig`, spec sdk-0.32
§8.1): always enabled, whatever the host's `chat_recovery` says.

`chat_recovery` is the SDK's `chatRecovery` class field: a mapping of options, or anything else
(`True`, `False`, None) for the defaults. `False` no longer turns recovery off: a value compiled
for 0.21.0 simply gets the defaults. The options, in snake case: `max_attempts` (10; at least
1), `stable_timeout_ms` (10 000), `no_progress_timeout_ms` (300 000), `max_recovery_work`
(10 000 stream segments; `inf` allowed), `max_interrupted_attempts` (5, the original attempt
counted; a number >= 0 becomes `max(1, floor)`, `inf` disables the bound; else the deprecated
`max_oom_retries` + 1), `terminal_message`, `should_keep_recovering` (the caller's veto,
consulted by `recovery_budget.ask_caller`) and `on_exhausted` (told each give-up,
`recovery_incidents.py`); the two hooks are kept only when set to something truthy, as the SDK
copies `shouldKeepRecovering` and `onExhausted` only when given). Where the mapping gives no
`max_attempts` or `no_progress_timeout_ms`, the host's own `max_chat_recovery_attempts` and
`chat_recovery_no_progress_timeout_ms` stand (the port's knobs for those two).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_MAX_INTERRUPTED_ATTEMPTS",
    "DEFAULT_MAX_RECOVERY_WORK",
    "DEFAULT_TERMINAL_MESSAGE",
    "ChatRecoveryConfig",
    "resolve_chat_recovery_config",
]

DEFAULT_MAX_INTERRUPTED_ATTEMPTS = 5
DEFAULT_MAX_RECOVERY_WORK = 10_000
DEFAULT_STABLE_TIMEOUT_MS = 10_000
DEFAULT_TERMINAL_MESSAGE = "The assistant was interrupted and could not recover. Please try again."


@dataclass(frozen=True, slots=True)
class ChatRecoveryConfig:
    """The fully defaulted options chat recovery reasons about (0.32.0)."""

    max_attempts: int
    stable_timeout_ms: int
    no_progress_timeout_ms: int
    max_recovery_work: float
    max_interrupted_attempts: float
    terminal_message: str
    should_keep_recovering: Callable[..., Any] | None = None
    """Called with a `ChatRecoveryProgressContext` on a wake no hard bound gave up; `False`
    (or an awaitable of it) gives the turn up with `recovery_aborted`."""
    on_exhausted: Callable[..., Any] | None = None
    """Called (and awaited when it returns an awaitable) with a `ChatRecoveryExhaustedContext`
    each time recovery gives a turn up, before the clients get the terminal message."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def resolve_chat_recovery_config(
    raw: Any, *, max_attempts: int = 10, no_progress_timeout_ms: int = 300_000
) -> ChatRecoveryConfig:
    """`raw` (the host's `chat_recovery`) with every option defaulted; `max_attempts` and
    `no_progress_timeout_ms` are the host's own defaults for those two."""
    custom: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    attempts: Any = custom.get("max_attempts", max_attempts)
    stable: Any = custom.get("stable_timeout_ms", DEFAULT_STABLE_TIMEOUT_MS)
    window: Any = custom.get("no_progress_timeout_ms", no_progress_timeout_ms)
    work: Any = custom.get("max_recovery_work")
    message = custom.get("terminal_message")
    veto = custom.get("should_keep_recovering")
    on_exhausted = custom.get("on_exhausted")
    return ChatRecoveryConfig(
        max_attempts=max(1, math.floor(attempts)),
        stable_timeout_ms=max(0, math.floor(stable)),
        no_progress_timeout_ms=max(0, math.floor(window)),
        max_recovery_work=work if _number(work) and work >= 0 else DEFAULT_MAX_RECOVERY_WORK,
        max_interrupted_attempts=_max_interrupted_attempts(custom),
        terminal_message=message if isinstance(message, str) else DEFAULT_TERMINAL_MESSAGE,
        should_keep_recovering=veto if veto else None,
        on_exhausted=on_exhausted if on_exhausted else None,
    )


def _max_interrupted_attempts(custom: Mapping[str, Any]) -> float:
    attempts: Any = custom.get("max_interrupted_attempts")
    if _number(attempts) and attempts >= 0:
        return float(attempts) if math.isinf(attempts) else max(1, math.floor(attempts))
    legacy: Any = custom.get("max_oom_retries")
    if _number(legacy) and legacy >= 0:
        return float(legacy) if math.isinf(legacy) else math.floor(legacy) + 1
    return DEFAULT_MAX_INTERRUPTED_ATTEMPTS
