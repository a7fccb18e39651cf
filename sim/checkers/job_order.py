"""`due_jobs_in_time_order`: one alarm drives the jobs it finds due earliest first (sdk-0.32 §2.2,
§2.4, J-19: the due-jobs query gained `ORDER BY time ASC` in 0.32.0).

Each job's time is read from the journal of the root's committed turns (`cf_agents_jobs`,
replayed by `sim.checkers.storage.row_changes`, `time` in epoch ms), never from the runtime. A
schedule's job id is its schedule id, and `schedule:execute {id}` (first attempt only) is what
the trace shows of a dispatch, on the root for every schedule of the tree (§3.5).
"""

from __future__ import annotations

from collections.abc import Mapping

from sim.checkers.alarm_slot import RUN_ENDS
from sim.checkers.core import CheckContext, Violation
from sim.checkers.job_rows import JobTimes
from sim.checkers.registry import invariant
from sim.trace import TraceRecord, format_sim_time

__all__ = ["due_jobs_in_time_order"]


@invariant("due_jobs_in_time_order")
def due_jobs_in_time_order(context: CheckContext) -> list[Violation]:
    """Sdk-0.32 §2.4, J-19 — within one alarm run of a root, the schedules it executes
    (`schedule:execute`, first attempt) that were due when the alarm fired run in ascending due
    time: no execution of a job due at d follows, in the same run, one of a job due later than
    d. A job's due time is its committed `cf_agents_jobs` row's `time` before the firing instant;
    a job whose row changed in that instant, or that no committed row shows due then, is not
    judged. Releases before 0.32.0 keep no `cf_agents_jobs` rows, so nothing is judged there.
    """
    out: list[Violation] = []
    for agent in sorted(context.alarms):
        times = JobTimes(context, agent)
        if not times.ever:
            continue
        found = _first_out_of_order(context, agent, times)
        if found is not None:
            out.append(found)
    return out


def _first_out_of_order(context: CheckContext, agent: str, times: JobTimes) -> Violation | None:
    fired: TraceRecord | None = None
    rows: Mapping[str, int] = {}
    last: tuple[int, str, TraceRecord] | None = None
    for record in context.records_of(agent, "alarm:fired", "schedule:execute", *RUN_ENDS):
        if record.event == "alarm:fired":
            fired, rows, last = record, times.due_before(record.t_ms), None
            continue
        if record.event in RUN_ENDS:
            fired, rows, last = None, {}, None
            continue
        if fired is None:
            continue
        job = str(record.get("id"))
        due = rows.get(job)
        if due is None:
            continue
        if last is not None and due < last[0]:
            earlier, later = last[1], job
            return Violation(
                "due_jobs_in_time_order",
                agent,
                later,
                f"{agent}'s alarm run fired at {format_sim_time(fired.t_ms)} executed schedule "
                f"{earlier} (due {format_sim_time(last[0])}) before schedule {later} (due "
                f"{format_sim_time(due)}): one alarm drives its due jobs earliest first",
                (last[2].seq, record.seq),
            )
        if last is None or due >= last[0]:
            last = (due, job, record)
    return None
