"""Checkers: named invariants over a finished run's trace and final storage.

A checker is a small function `CheckContext -> list[Violation]` that reads only the context —
trace records, the final storage snapshot and alarm slot of every agent, whether the liveness
phase went quiet — never the runtime's memory. `CHECKERS` maps each invariant's name (the names
scenario files use) to its checker; `check` runs some or all of them; `assert_invariants(sim)`
raises an `InvariantViolation` (seed, scenario, each violation in a sentence, the trace tail and
the replay command). How to write one: `docs/checkers.md`.

| invariant | promise |
| --- | --- |
| `exactly_once_finish` | S8: finish delivered exactly once, at least once across a crash |
| `budget_interrupts` | S7: a budget give-up is `interrupted` and never hides a completion |
| `reattach_terminal` | §7: awaited runs cut off by a parent restart end and are delivered |
| `no_lost_stash` | a stash that returned survives eviction (workload convention) |
| `no_leaked_keep_alive` | an alarm armed after quiesce is explained by durable work |
| `schedules_fire` | every due schedule fires; intervals keep their cadence |
| `fibers_settled` | after quiesce every fiber settled or is a failing row within max age |
"""

from sim.checkers import alarms, delivery, fibers  # noqa: F401 - importing registers them
from sim.checkers.core import (
    LIVENESS_GRACE_MS,
    CheckContext,
    Checker,
    InvariantViolation,
    Violation,
    context_from,
    render_record,
)
from sim.checkers.registry import CHECKERS, assert_invariants, check, invariant, register

__all__ = [
    "CHECKERS",
    "LIVENESS_GRACE_MS",
    "CheckContext",
    "Checker",
    "InvariantViolation",
    "Violation",
    "assert_invariants",
    "check",
    "context_from",
    "invariant",
    "register",
    "render_record",
]
