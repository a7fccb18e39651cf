"""Why a parent gave up on an awaited run, in the words the SDK uses (spec agent-tools §7.2).

The startup recovery sweep (`recovery_sweep.py`) and re-attach (`reattach.py`) both end a run
they could not see finish as a soft `interrupted` result, with one reason from this vocabulary
and its exact prose.
"""

from __future__ import annotations

from typing import Any

from agents_core.agent_tools.registry import RunAgentToolResult

__all__ = [
    "ACTIVE_CHILD_STATUSES",
    "ACTIVE_ROW_STATUSES",
    "REASON_PROSE",
    "STILL_RUNNING_PROSE",
    "interrupted_result",
]

REASON_PROSE = {
    "no-progress": "Agent tool run was still running but made no forward progress within the "
    "re-attach no-progress budget; the parent gave up.",
    "window-exceeded": "Agent tool run did not reach a terminal result within the maximum "
    "re-attach window; the parent gave up.",
    "not-tailable": "Agent tool run was still running, but live-tail reattachment is not "
    "supported in this runtime.",
    "inspect-timeout": "Agent tool run inspection timed out during parent recovery.",
    "inspect-failed": "Agent tool run could not be inspected during parent recovery.",
    "recovery-deadline": "Agent tool run recovery deadline exceeded.",
}
"""The error text of an `interrupted` result for each re-attach / recovery reason (§7.2)."""

STILL_RUNNING_PROSE = "Agent tool run was still running and did not reach a terminal result."
"""The error text when a re-issue could not even resolve the child (no typed reason)."""

ACTIVE_ROW_STATUSES = ("starting", "running")
ACTIVE_CHILD_STATUSES = ("running", "starting")


def interrupted_result(
    row: dict[str, Any], reason: str | None, child_still_running: bool | None = None
) -> RunAgentToolResult:
    """The soft `interrupted` result of a give-up, with the exact prose of its reason."""
    return RunAgentToolResult(
        row["run_id"],
        row["agent_type"],
        "interrupted",
        error=REASON_PROSE.get(reason or "", STILL_RUNNING_PROSE),
        reason=reason,
        child_still_running=child_still_running,
    )
