"""Where the alarm's constants were first defined, kept for the code that imports them here.

The alarm slot is owned by the Lifecycle (`agents_core.lifecycle`); the recovery backoff's
bounds belong to fiber recovery (`agents_core.recovery`) and the destroy flag's key to the
durable memo (`agents_core.durable_memo`).
"""

from __future__ import annotations

from agents_core.durable_memo import DESTROY_PENDING_KEY
from agents_core.recovery import FIBER_RECOVERY_BACKOFF_MAX_EXP, FIBER_RECOVERY_MAX_BACKOFF_MS

__all__ = [
    "DESTROY_PENDING_KEY",
    "FIBER_RECOVERY_BACKOFF_MAX_EXP",
    "FIBER_RECOVERY_MAX_BACKOFF_MS",
]
