"""`deferred_job_kept`: a job whose dispatch ends in a platform failure is kept, its time unchanged
and its dispatch marker cleared, so the alarm's retry runs it again (sdk-0.32 §2.4 step 6, J-29).

The rows come from the journal of the root's committed turns (`cf_agents_jobs`, replayed by
`sim.checkers.storage.row_changes`), never from the runtime. A platform failure rejects the
alarm (`alarm:failed`): the job the run was driving when it failed is the last one whose
dispatch marker the run set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.checkers.storage import timed_row_changes
from sim.trace import TraceRecord, format_sim_time

__all__ = ["deferred_job_kept"]

JOBS = "cf_agents_jobs"
FAULTS = ("fault:storage_error", "fault:crash")


@invariant("deferred_job_kept")
def deferred_job_kept(context: CheckContext) -> list[Violation]:
    """Sdk-0.32 §2.4, J-29 — for every alarm run of a root that ended `alarm:failed` with no
    storage fault on the root from its firing to its end: the job whose dispatch marker
    (`running`) the run set last, if its row is still there once the run's instant is over,
    has `running` 0 and the time it had when the run set the marker. Releases before 0.32.0
    keep no jobs: nothing is judged there.
    """
    out: list[Violation] = []
    for agent in sorted(context.alarms):
        changes = _changes(context, agent)
        if not changes:
            continue
        fired: TraceRecord | None = None
        faulted = False
        events = ("alarm:fired", "alarm:done", "alarm:failed", "alarm:interrupted", *FAULTS)
        records = context.records_of(agent, *events)
        for index, record in enumerate(records):
            if record.event == "alarm:fired":
                fired, faulted = record, False
            elif record.event in FAULTS:
                faulted = True
            elif record.event == "alarm:failed" and fired is not None and not faulted:
                # The journal knows turns by instant only: another run (or a fault) in the
                # failure's instant would mix its writes with this run's, so it is not judged.
                alone = index + 1 == len(records) or records[index + 1].t_ms != record.t_ms
                found = _judge(agent, changes, fired, record) if alone else None
                if found is not None:
                    out.append(found)
                fired = None
            else:
                fired = None
    return out


def _changes(
    context: CheckContext, agent: str
) -> list[tuple[int, str, Mapping[str, Any] | None, Mapping[str, Any] | None]]:
    return [
        (when, str(change.key), change.before, change.after)
        for when, change in timed_row_changes(context, agent, JOBS, "id")
    ]


def _judge(
    agent: str,
    changes: Sequence[tuple[int, str, Mapping[str, Any] | None, Mapping[str, Any] | None]],
    fired: TraceRecord,
    failed: TraceRecord,
) -> Violation | None:
    marked: tuple[str, Any] | None = None  # (job id, its time when marked)
    for when, key, before, after in changes:
        if when < fired.t_ms or when > failed.t_ms:
            continue
        newly = before is None or before.get("running") != 1
        if after is not None and after.get("running") == 1 and newly:
            marked = (key, after.get("time"))
    if marked is None:
        return None
    job, time = marked
    last: Mapping[str, Any] | None = None
    seen = False
    for when, key, _before, after in changes:
        if when > failed.t_ms:
            break
        if key == job:
            last, seen = after, True
    if not seen or last is None:
        return None
    if last.get("running") == 0 and last.get("time") == time:
        return None
    return Violation(
        "deferred_job_kept",
        agent,
        job,
        f"{agent}'s alarm run fired at {format_sim_time(fired.t_ms)} failed at "
        f"{format_sim_time(failed.t_ms)} while driving job {job} (due {time} ms), which it "
        f"left with running {last.get('running')} and time {last.get('time')} ms: a job whose "
        "dispatch ends in a platform failure is kept with its time and its marker cleared",
        (fired.seq, failed.seq),
    )
