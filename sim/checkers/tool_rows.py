"""`interrupted_reason_kept`: what an agent-tool run's row says about why it was interrupted.

The parent registry's `interrupted_reason` and `child_still_running` columns are written on every
terminal update, NULL for a status other than `interrupted` (agent-tools §1.1), and an
interrupted run's reason and `childStillRunning` pair as §7.2's table says (`no-progress` with
the child left running or torn down, `window-exceeded` likewise, the recovery pass's
`inspect-timeout`, `inspect-failed` and `recovery-deadline` with no `childStillRunning`, a re-issue
whose child could not be resolved with none and the child still running). S6's reset child is
`interrupted` with `childStillRunning: true` (docs/divergences.md S6).
"""

from __future__ import annotations

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant

__all__ = ["INTERRUPTED_REASONS", "interrupted_reason_kept"]

RUNS = "cf_agent_tool_runs"
INTERRUPTED_REASONS: dict[str | None, frozenset[int | None]] = {
    "no-progress": frozenset({0, 1}),
    "window-exceeded": frozenset({0, 1}),
    "budget-exceeded": frozenset({0, 1}),
    "not-tailable": frozenset({1}),
    "inspect-timeout": frozenset({None}),
    "inspect-failed": frozenset({None}),
    "recovery-deadline": frozenset({None}),
    None: frozenset({1}),
}
"""agent-tools §7.2: each reason, with the `child_still_running` values it may carry."""


@invariant("interrupted_reason_kept")
def interrupted_reason_kept(context: CheckContext) -> list[Violation]:
    """agent-tools §1.1, §7.2 — an interrupted run says why, and only an interrupted run does.

    In every agent's final `cf_agent_tool_runs`: a row whose status is not `interrupted` has a
    NULL `interrupted_reason` and a NULL `child_still_running`; an `interrupted` row's reason is
    one of §7.2's (`INTERRUPTED_REASONS`, or NULL), with a `child_still_running` that reason
    allows.
    """
    out = []
    for path in context.paths():
        for row in context.storage.get(path, {}).get(RUNS, []):
            run, status = row.get("run_id"), row.get("status")
            reason, still = row.get("interrupted_reason"), row.get("child_still_running")
            if status != "interrupted":
                if reason is None and still is None:
                    continue
                message = (
                    f"run {run} of {path} is {status} but keeps interrupted_reason {reason!r} and "
                    f"child_still_running {still!r}: a terminal write other than interrupted "
                    f"clears both"
                )
            elif reason not in INTERRUPTED_REASONS:
                message = (
                    f"run {run} of {path} is interrupted with the reason {reason!r}, which is "
                    f"none of {sorted(r for r in INTERRUPTED_REASONS if r)}"
                )
            elif still not in INTERRUPTED_REASONS[reason]:
                allowed = sorted(INTERRUPTED_REASONS[reason], key=str)
                message = (
                    f"run {run} of {path} is interrupted ({reason or 'no reason'}) with "
                    f"child_still_running {still!r}, where that reason carries {allowed}"
                )
            else:
                continue
            out.append(Violation("interrupted_reason_kept", path, str(run), message, ()))
    return out
