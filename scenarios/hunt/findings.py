"""Which failures of a hunted run are findings: one rule for fuzz, explore and the reproducers.

A hunt changes the story (a crash, an eviction, a deploy, a storage fault, timers reordered) and
then asks whether the runtime kept its promises. Some failures of such a run only say that the
story changed:
- a step's call refused with the platform's own error (`PLATFORM_ERRORS`: what the caller is
  told when a fault kills or fails what it called), however the step reports it (its call
  failed, its agent's constructor raised, the step raised);
- a step whose time had already passed, or a client step whose client the fault disconnected;
- a failure of a step the hunt inserted itself.

Those are never findings. An invariant, the liveness rule (a budget too), an expectation of the
file and a step that raised an error of its own (a constructor's, the step's) always are. The
rest is a step's own check of the story (what a call returned, a status, a call that never
finished, an error other than the one expected): a finding only when the hunt judges the story
(`story=True`: `fuzz` without `--invariants-only`, `explore --with-expect`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from scenarios.run.failure import LATE_STEP, NO_CONNECTION, STEP, STEP_ERROR, Failure

__all__ = ["PLATFORM_ERRORS", "findings", "is_finding", "refused_by_platform"]

PLATFORM_ERRORS = ("AgentEvicted", "StorageError", "IncarnationKilled")
"""What a call gets when a fault kills or fails what it called: the platform's truth, not a bug."""


def refused_by_platform(failure: Failure) -> bool:
    """Whether the failure's error is one the platform raises for a fault (`PLATFORM_ERRORS`)."""
    return failure.error is not None and failure.error.type in PLATFORM_ERRORS


def is_finding(failure: Failure, *, story: bool, inserted: Collection[int] = ()) -> bool:
    """Whether `failure`, of a run a hunt changed, is a finding (see the module docstring).
    `story`: a step's own checks count too; `inserted`: the numbers of the steps the hunt
    inserted (`step.index`), whose failures never count."""
    if failure.kind not in (STEP, STEP_ERROR, LATE_STEP, NO_CONNECTION):
        return True
    if failure.number in inserted or failure.kind in (LATE_STEP, NO_CONNECTION):
        return False
    if refused_by_platform(failure):
        return False
    return failure.kind == STEP_ERROR or story


def findings(
    failures: Iterable[Failure], *, story: bool, inserted: Collection[int] = ()
) -> list[Failure]:
    """The failures that are findings (`is_finding`), in order."""
    return [f for f in failures if is_finding(f, story=story, inserted=inserted)]
