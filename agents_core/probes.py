"""Probes: named marks on the rare paths that the runtime's recovery promises rest on.

A probe is not an event and not a check: `probe(host, name)` tells the host "this run reached
that path", and the host counts it. A hunt that never reached a path proves nothing about it, so
`agentsim fuzz`, `explore` and `run --seeds` report how often each probe was hit and which never
were, the fuzzer keeps examples that reach a probe it had not seen, and a scenario can require
probes (`expect: - probes: [...]`) so that a story that stops reaching its rare path fails
instead of passing vacuously. Probes never go into the trace: adding one changes no run's digest.

`RUNTIME_PROBES` is the catalogue of the runtime's own probes (the platform's are in
`sim.probes`); a test keeps it and the call sites in step. User code may hit probes of its own
through `host.trace.probe(name)`; they are counted the same way.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["PROBE_NAME", "RUNTIME_PROBES", "probe"]

PROBE_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
"""`area.what_happened`: lower case words, dot-separated, at least two parts."""

RUNTIME_PROBES: dict[str, str] = {
    "agent_tool.detached_finish_redelivered": (
        "a detached run's finish was delivered again after its claim's 60 s lease expired: the "
        "incarnation that claimed it died before marking it delivered"
    ),
    "chat.recovery_found_complete_answer": (
        "chat recovery found an interrupted turn whose stream already held the answer's finish "
        "chunk (it died in its last step) and persisted that answer instead of continuing it"
    ),
    "ledger.dead_claim_reclaimed": (
        "a delivery claimed a slot whose earlier claim had outlived its lease and was left by "
        "an incarnation that died between its claim and its delivered mark (at least once)"
    ),
    "ledger.failed_handler_reclaimed": (
        "a delivery claimed a slot whose handler had thrown in this incarnation, once that "
        "claim's lease expired (the throwing handler is run again)"
    ),
    "ledger.live_claim_outlived_lease": (
        "a delivery found its slot claimed more than 60 s ago by a delivery of this same "
        "incarnation still pending (a startup sweep's deferred hooks), and stood back"
    ),
    "fiber.cleanup_delete_failed": (
        "run_fiber's cleanup could not delete the run row (a storage fault in a fiber's "
        "cleanup); the lease is released and the row is left for recovery"
    ),
    "alarm.reschedule_failed": (
        "computing the next alarm failed on a storage fault, and a check-back alarm was armed "
        "so that a later alarm computes it again"
    ),
    "keep_alive.acquire_failed": (
        "taking a keepAlive lease failed while arming the heartbeat (a storage fault), and the "
        "ref it had counted was given back"
    ),
    "facet.dead_incarnation_leases_released": (
        "a sub-agent started again after dying on its own (its root lived on) and the root "
        "dropped the keepAlive leases its dead incarnation still held"
    ),
}
"""Name -> what reaching it means, for every probe the runtime's code can hit."""


def probe(host: Any, name: str) -> None:
    """Mark that this run reached the rare path `name` (a key of `RUNTIME_PROBES`)."""
    if name not in RUNTIME_PROBES:
        raise ValueError(f"unknown runtime probe {name!r}; add it to RUNTIME_PROBES first")
    host.trace.probe(name)
