"""Invariants of the parent registry's rows: `interrupted_reason_kept` (what a run's row says
about why it was interrupted) and `agent_tools_under_cap` (`maxConcurrentAgentTools`).

The parent registry's `interrupted_reason` and `child_still_running` columns are written on every
terminal update, NULL for a status other than `interrupted` (agent-tools §1.1), and an
interrupted run's reason and `childStillRunning` pair as §7.2's table says (`no-progress` with
the child left running or torn down, `window-exceeded` likewise, the recovery pass's
`inspect-timeout`, `inspect-failed` and `recovery-deadline` with no `childStillRunning`, a re-issue
whose child could not be resolved with none and the child still running). S6's reset child is
`interrupted` with `childStillRunning: true` (docs/divergences.md S6).

A cap counts the rows in `starting` or `running` (agent-tools §2.6); it is checked before the
first await of a dispatch, so no committed turn can leave more such rows than the cap, and a run
is rejected (born `error`, "maxConcurrentAgentTools (N) exceeded") only while the cap is full.
"""

from __future__ import annotations

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.checkers.storage import row_changes

__all__ = ["INTERRUPTED_REASONS", "agent_tools_under_cap", "interrupted_reason_kept"]

LIVE = ("starting", "running")
"""agent-tools §1.5, §2.6: the statuses that hold a concurrency slot."""

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


@invariant("agent_tools_under_cap")
def agent_tools_under_cap(context: CheckContext) -> list[Violation]:
    """agent-tools §2.6 — each agent keeps at most `maxConcurrentAgentTools` runs starting or
    running, and rejects a run only while that many are.

    For each agent whose `max_concurrent_agent_tools` option is a number N: replaying its journal
    of `cf_agent_tool_runs` (`row_changes`), no committed turn ends with more than N rows in
    `starting`/`running`, and a row inserted as `error` with "maxConcurrentAgentTools (N)
    exceeded" is inserted while N rows are. A cap set on the instance (the SDK's field) is not in
    the context and goes unchecked.
    """
    out = []
    for path in context.paths():
        cap = context.option(path, "max_concurrent_agent_tools")
        if not isinstance(cap, int) or isinstance(cap, bool):
            continue
        rejected = f"maxConcurrentAgentTools ({cap}) exceeded"
        live: set[str] = set()
        turn, flagged = 0, False
        for change in row_changes(context.journals.get(path, []), RUNS, "run_id"):
            if change.turn != turn:
                if len(live) > cap and not flagged:
                    out.append(_over_cap(path, cap, live, turn))
                    flagged = True
                turn = change.turn
            born = change.before is None and change.after is not None
            if born and change.value("error_message") == rejected and len(live) < cap:
                out.append(
                    Violation(
                        "agent_tools_under_cap",
                        path,
                        str(change.key),
                        f"run {change.key} of {path} was rejected for its cap of {cap} while "
                        f"only {len(live)} run(s) were starting or running",
                    )
                )
            if change.value("status") in LIVE:
                live.add(str(change.key))
            else:
                live.discard(str(change.key))
        if len(live) > cap and not flagged:
            out.append(_over_cap(path, cap, live, turn))
    return out


def _over_cap(path: str, cap: int, live: set[str], turn: int) -> Violation:
    return Violation(
        "agent_tools_under_cap",
        path,
        "",
        f"{path} kept {len(live)} agent-tool runs starting or running ({', '.join(sorted(live))}) "
        f"after its committed turn {turn}, over its cap of {cap}",
    )
