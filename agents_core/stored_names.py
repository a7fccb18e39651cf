"""The names the runtime stores and emits for its own callbacks, and the methods behind them.

A schedule row's `callback` column and an agent-tool run's `detached_on_finish` column hold a
method name, and that name shows in `schedule:create` / `schedule:execute` / `hook:on_finish`.
Where the SDK has the callback, the stored string is the SDK's own spelling
(`_cfDetachedReconcileTick`), so that a row or a trace compares with one from the real SDK; the
Python method keeps the snake_case name the naming rule gives it (`_cf_detached_reconcile_tick`).
The callbacks this port adds (S8's awaited redelivery, A13's recovery retry) are spelled the same
way. Every place that turns a stored name back into a method goes through `callback_method`; a
user's own callback names are stored as given and resolve to themselves.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AWAITED_REDELIVERY_CALLBACK",
    "CHAT_RECOVERY_CALLBACK",
    "DETACHED_NOTIFY_CALLBACK",
    "DETACHED_RECONCILE_CALLBACK",
    "RECOVERY_RETRY_CALLBACK",
    "RUNTIME_CALLBACK_METHODS",
    "callback_method",
    "method_name_of",
]

DETACHED_RECONCILE_CALLBACK = "_cfDetachedReconcileTick"
"""The detached backbone tick (SDK constant, spec agent-tools §10)."""
DETACHED_NOTIFY_CALLBACK = "_cfDetachedNotifyFinish"
"""A chat host's finish hook, stored as a `notify` run's `detached_on_finish` (SDK constant)."""
CHAT_RECOVERY_CALLBACK = "_chatRecoveryContinue"
"""A chat host's recovered turn, scheduled by chat recovery (the SDK's chat hosts)."""
AWAITED_REDELIVERY_CALLBACK = "_cfRedeliverAgentToolHooks"
"""Ours (docs/divergences.md A6): an awaited run's hook claimed by a dead incarnation."""
RECOVERY_RETRY_CALLBACK = "_cfRetryAgentToolRecovery"
"""Ours (docs/divergences.md A13): runs a failed startup sweep could not finalize."""

RUNTIME_CALLBACK_METHODS: dict[str, str] = {
    DETACHED_RECONCILE_CALLBACK: "_cf_detached_reconcile_tick",
    DETACHED_NOTIFY_CALLBACK: "_cf_detached_notify_finish",
    CHAT_RECOVERY_CALLBACK: "_chat_recovery_continue",
    AWAITED_REDELIVERY_CALLBACK: "_cf_redeliver_agent_tool_hooks",
    RECOVERY_RETRY_CALLBACK: "_cf_retry_agent_tool_recovery",
}
"""Stored name -> the Python method that runs it."""


def method_name_of(stored: str) -> str:
    """The Python method a stored callback name runs (a user's name is its own method)."""
    return RUNTIME_CALLBACK_METHODS.get(stored, stored)


def callback_method(agent: Any, stored: Any) -> Any:
    """The bound method a stored callback name runs on `agent`, or None when it has none."""
    if not isinstance(stored, str) or not stored:
        return None
    method = getattr(agent, method_name_of(stored), None)
    return method if callable(method) else None
