"""The two wakes 0.32.0 arms around an alarm's work (sdk-0.32 §1.4, §2.4), so that an isolate
that dies in startup or in a job is woken again, never in a tight loop:

- `startup_fallback_armed` (J-10, J-04): when an alarm begins and the queue holds a job, the
  slot is set at least 30 s ahead (`max(next, now + 30 000)`) before the handler's delivery
  begins.
- `deadman_before_drive` (J-11): when the alarm drives due jobs, the slot was set `now +
  30 000` after the handler began and before the first one is dispatched (startup's own re-arm
  on a cold wake comes before the handler, and does not count).

The jobs come from the root's committed `cf_agents_jobs` rows (`sim.checkers.job_rows`), the
slot from the platform's `alarm:set` / `alarm:deleted` records, and a dispatch from
`schedule:execute` (first attempt). 0.21.0 keeps no jobs: nothing is judged there.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from sim.checkers.alarm_slot import RUN_ENDS
from sim.checkers.core import CheckContext, Violation
from sim.checkers.job_rows import JobTimes
from sim.checkers.models.spec_constants import DEADMAN_ALARM_DELAY_MS
from sim.checkers.registry import invariant
from sim.trace import TraceRecord, format_sim_time

__all__ = ["deadman_before_drive", "startup_fallback_armed"]

WRITES = ("alarm:set", "alarm:deleted")
FAULTS = ("fault:storage_error", "fault:crash", "fault:crash_after_commit")


@invariant("startup_fallback_armed")
def startup_fallback_armed(context: CheckContext) -> list[Violation]:
    """Sdk-0.32 §1.4 step 1, J-10, J-04 — when an alarm run of a root begins while its committed
    `cf_agents_jobs` rows are not empty, the slot is set at least 30 s past the firing instant
    before the handler's delivery begins (or the run ends, when startup throws): the fallback
    `max(next, now + 30 000)`, armed as the delivery arrives, before startup, so that a startup
    that throws is retried about every 30 s, never in a tight loop on an overdue job. Other
    deliveries under way may write the slot too (the trace does not say whose a write is), so
    the fallback is looked for among every write of that span. The queue is the rows committed
    before the firing instant that no change of that instant deletes (one may come before the
    delivery arrives). Not judged: a span with no write at all (a crash before it), a span in
    which a storage fault struck the agent (the fallback's own read of the queue may be the
    statement that failed), and a run in which the agent's storage is wiped (a pending destroy
    runs instead of the lifecycle)."""
    out: list[Violation] = []
    for agent, jobs, run in _job_runs(context):
        if out and out[-1].agent == agent:
            continue  # one per agent
        queued = jobs.queued_through(run.fired.t_ms)
        writes = [r for r in run.before_delivery if r.event in WRITES]
        if not queued or not writes or run.wiped or run.faulted_before_delivery:
            continue
        if any(_armed_ahead(w, run.fired.t_ms) for w in writes):
            continue
        floor = run.fired.t_ms + DEADMAN_ALARM_DELAY_MS
        out.append(
            Violation(
                "startup_fallback_armed",
                agent,
                "",
                f"{agent}'s alarm fired at {format_sim_time(run.fired.t_ms)} with "
                f"{len(queued)} job(s) queued, and no write of the slot before its handler "
                f"began armed it 30 s on (the first: {_shown(writes[0])}): the startup "
                "fallback arms max(next job, now + 30 s), no earlier than "
                f"{format_sim_time(floor)}",
                (run.fired.seq, writes[0].seq),
            )
        )
    return out


@invariant("deadman_before_drive")
def deadman_before_drive(context: CheckContext) -> list[Violation]:
    """Sdk-0.32 §2.4 step 3, J-11 — when an alarm run of a root dispatches (`schedule:execute`)
    a job that was due when the alarm fired, the slot was set at least 30 s past that set's
    instant somewhere between the handler's `delivery:begin` and that dispatch: the deadman,
    armed before the first due job is driven, so that an isolate dying in a job is woken 30 s
    later. Other writes of that span are a hidden job's re-arm (a task, a keepAlive) or another
    delivery's; with a job due and not yet run they arm no later than now + 1 ms, so they
    neither stand for the deadman nor are judged. A job whose row the firing instant's first
    change moved or removed is not counted due (`JobTimes.due_before`)."""
    out: list[Violation] = []
    for agent, jobs, run in _job_runs(context):
        if out and out[-1].agent == agent:
            continue  # one per agent
        due = jobs.due_before(run.fired.t_ms)
        found = None if not due or run.wiped else _undeadmanned(run, due)
        if found is not None:
            out.append(found)
    return out


def _undeadmanned(run: _Run, due: Mapping[str, int]) -> Violation | None:
    armed = False
    for record in run.after_delivery:
        if record.event in WRITES:
            armed = armed or _armed_ahead(record, record.t_ms)
            continue
        job = str(record.get("id"))
        if job not in due:
            continue
        if armed:
            return None
        agent, fired = run.fired.agent, run.fired.t_ms
        writes = [r for r in run.after_delivery if r.event in WRITES and r.seq < record.seq]
        return Violation(
            "deadman_before_drive",
            agent,
            job,
            f"{agent}'s alarm run fired at {format_sim_time(fired)} dispatched due job {job} "
            f"at {format_sim_time(record.t_ms)}, and no write of the slot since its handler "
            f"began armed it 30 s on (the last: {_shown(writes[-1] if writes else None)}): the "
            "deadman (now + 30 s) is armed before the first due job is driven",
            (run.fired.seq, record.seq),
        )
    return None


def _armed_ahead(write: TraceRecord | None, since_ms: int) -> bool:
    """Whether `write` is a set of the slot at least 30 s past `since_ms`."""
    return (
        write is not None
        and write.event == "alarm:set"
        and int(write.get("at")) >= since_ms + DEADMAN_ALARM_DELAY_MS
    )


def _shown(write: TraceRecord | None) -> str:
    if write is None:
        return "none"
    if write.event == "alarm:set":
        return f"a set for {format_sim_time(int(write.get('at')))}"
    return "a delete"


class _Run:
    """One alarm run of an agent: its `alarm:fired`, then its slot writes and dispatches until
    it ended, split at its handler's `delivery:begin`."""

    __slots__ = (
        "after_delivery",
        "before_delivery",
        "faulted_before_delivery",
        "fired",
        "handled",
        "wiped",
    )

    def __init__(self, fired: TraceRecord) -> None:
        self.fired = fired
        self.before_delivery: list[TraceRecord] = []
        self.after_delivery: list[TraceRecord] = []
        self.faulted_before_delivery = False
        self.handled = False
        self.wiped = False


def _job_runs(context: CheckContext) -> Iterator[tuple[str, JobTimes, _Run]]:
    """Each alarm run of each root that ever kept jobs, in order, with its jobs' reader."""
    for agent in sorted(context.alarms):
        jobs = JobTimes(context, agent)
        if jobs.ever:
            for run in _runs(context, agent):
                yield agent, jobs, run


def _runs(context: CheckContext, agent: str) -> list[_Run]:
    runs: list[_Run] = []
    run: _Run | None = None
    events = (
        "alarm:fired",
        *WRITES,
        "schedule:execute",
        "storage:wiped",
        "delivery:begin",
        *FAULTS,
    )
    for record in context.records_of(agent, *events, *RUN_ENDS):
        if record.event == "alarm:fired":
            run = _Run(record)
            runs.append(run)
        elif run is None:
            continue
        elif record.event in RUN_ENDS:
            run = None
        elif record.event == "storage:wiped":
            run.wiped = True
        elif record.event.startswith("fault:"):
            run.faulted_before_delivery = run.faulted_before_delivery or not run.handled
        elif record.event == "delivery:begin":
            run.handled = run.handled or record.get("trigger") == "alarm"
        else:
            (run.after_delivery if run.handled else run.before_delivery).append(record)
    return runs
