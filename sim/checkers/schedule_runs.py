"""Invariants of what follows one schedule run: `interval_runs_on_time` (an interval whose run
completed is run again as soon as its next occurrence is due), `facet_interval_redispatched`
(a sub-agent's interval whose dispatch failed is tried again by the next alarm run) and
`one_shot_retried_when_cut` (a one-shot whose callback an alarm run cut short is run again).

Both place each `schedule:execute` in the alarm run of its top-level agent that contains it
(`sim.checkers.alarm_slot.alarm_runs`; a facet's callbacks run, and record their execution, on
the facet while its root's alarm runs). The trace has no record of a callback returning, so a
run "completed" when the alarm run that executed it ended `alarm:done`; and a one-shot's callback
"may have been cut short" when its alarm run ended otherwise with nothing after its execution
that shows the loop over due rows moved on (another row's execution) or that the handler was
past its rows (fiber recovery housekeeping, a storage fault) — a conservative reading: a run
the trace cannot place is never judged. A schedule's kind and interval come from its final row
or its journal INSERT (`sim.checkers.schedules.schedule_rows`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from sim.checkers.alarm_slot import AlarmRun, alarm_runs
from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.checkers.schedule_store import JOBS_TABLE, SCHEDULES_ON_JOBS, SCHEDULES_TABLE
from sim.checkers.schedules import ONE_SHOT, schedule_rows
from sim.checkers.storage import timed_row_changes
from sim.trace import TraceRecord, format_sim_time

__all__ = ["facet_interval_redispatched", "interval_runs_on_time", "one_shot_retried_when_cut"]

HOUSEKEEPING_RPC = "_cf_check_run_fibers_for_facet"
"""The facet scan an alarm runs after its due rows."""


def _at(t_ms: int) -> str:
    return format_sim_time(t_ms)


def _in_tree(agent: str, root: str) -> bool:
    return agent == root or agent.startswith(root + "/")


class _Runs:
    """Each top-level agent's alarm runs, indexed by the seq of their `alarm:fired`."""

    def __init__(self, context: CheckContext) -> None:
        self._context = context
        self._cache: dict[str, tuple[list[AlarmRun], list[int]]] = {}
        self._seqs = [r.seq for r in context.records]
        self._times = [r.t_ms for r in context.records]

    def last_seq_by(self, t_ms: int) -> int:
        """The seq of the last record written at or before `t_ms` (-1 when none)."""
        at = bisect_right(self._times, t_ms)
        return self._seqs[at - 1] if at else -1

    def between(self, low: int, high: int | None) -> tuple[TraceRecord, ...]:
        """The records with low < seq < high (high None: to the end), in trace order."""
        start = bisect_left(self._seqs, low + 1)
        stop = len(self._seqs) if high is None else bisect_left(self._seqs, high)
        return tuple(self._context.records[start:stop])

    def of(self, root: str) -> list[AlarmRun]:
        return self._index(root)[0]

    def _index(self, root: str) -> tuple[list[AlarmRun], list[int]]:
        if root not in self._cache:
            runs = alarm_runs(self._context, root)
            self._cache[root] = (runs, [run.fired.seq for run in runs])
        return self._cache[root]

    def containing(self, root: str, record: TraceRecord) -> AlarmRun | None:
        """The alarm run of `root` the record was written in (None outside any)."""
        runs, fired = self._index(root)
        at = bisect_left(fired, record.seq) - 1
        if at < 0:
            return None
        run = runs[at]
        return run if run.end is None or run.end.seq > record.seq else None


def _executions(context: CheckContext) -> dict[str, list[TraceRecord]]:
    out: dict[str, list[TraceRecord]] = defaultdict(list)
    for record in context.events("schedule:execute"):
        out[str(record.get("id"))].append(record)
    return out


def _excused(
    context: CheckContext,
    runs: _Runs,
    root: str,
    schedule_id: str,
    first: TraceRecord,
    last_seq: int | None,
) -> bool:
    """Something after `first` and before `last_seq` (the end of the trace when None) lets the
    schedule skip its next run or run it late: a death in the root's tree, an alarm run that did
    not end `done`, a cancel of the schedule (one that may have rolled back does not count), a
    failed dispatch of it to its facet, a memory-limit reset, or a wiped storage."""
    return any(
        _excuse(context, root, schedule_id, record) for record in runs.between(first.seq, last_seq)
    )


def _excuse(context: CheckContext, root: str, schedule_id: str, record: TraceRecord) -> bool:
    event = record.event
    if not _in_tree(record.agent, root):
        return False
    if event in (
        "incarnation:end",
        "alarm:failed",
        "alarm:interrupted",
        "storage:wiped",
        "facet:deleted",
        "alarm:memory_limit_reset",
    ):
        return True
    if str(record.get("id")) != schedule_id:
        return False
    if event == "schedule:cancel":
        return not context.may_have_rolled_back(record)
    return event == "schedule:error" and record.get("attempts") == 0


@invariant("interval_runs_on_time")
def interval_runs_on_time(context: CheckContext) -> list[Violation]:
    """Fibers §4.4 — an interval runs again one interval after each run completes: a completed
    run clears the row's running flag, so the next run is never held back until the hung
    timeout.

    For every `schedule:execute` E of an interval row (interval I) in an alarm run of its
    top-level agent that ended `alarm:done` at T (so E's run completed at some c <= T and its row
    came due at floor(c / 1 s) + I <= D = (floor(T / 1 s) + I) s; on 0.32.0, which re-times in
    milliseconds, at c + I <= D = T + I): let B be D, or, when an alarm
    run of that agent started before D and was still running at D, 1 ms after the end of that
    run (the re-arm at the end of a run asks for no time before the next millisecond). Then the
    schedule's next `schedule:execute` after T lies in an alarm run that started after T and no
    later than B — unless, after E and by B (or by the end of an alarm run that started by B),
    the tree of the top-level agent saw a death, an alarm run that ended `failed` or
    `interrupted`, a cancel of the schedule (one that may have rolled back does not count), a
    failed dispatch of it to its facet, a memory-limit reset or a wiped storage, or a committed
    turn deleted its row by B (a cancel whose record a storage fault lost); and unless the trace
    ends before B or while a run started by B still runs.
    """
    rows = schedule_rows(context)
    runs = _Runs(context)
    out: list[Violation] = []
    for schedule_id, executions in sorted(_executions(context).items()):
        row = rows.get(schedule_id)
        if row is None or row.get("type") != "interval":
            continue
        interval_ms = int(row.get("intervalSeconds") or 0) * 1000
        root = context.root_of(executions[0].agent)
        for index, execution in enumerate(executions):
            found = _late_interval(
                context, runs, root, row, execution, executions[index + 1 :], interval_ms
            )
            if found is not None:
                out.append(found)
                break
    return out


def _late_interval(
    context: CheckContext,
    runs: _Runs,
    root: str,
    row: Mapping[str, Any],
    execution: TraceRecord,
    later: list[TraceRecord],
    interval_ms: int,
) -> Violation | None:
    run = runs.containing(root, execution)
    if run is None or run.end is None or run.end.event != "alarm:done":
        return None
    done = run.end
    # 0.21.0 re-times an interval in whole seconds after it completes; 0.32.0 in milliseconds
    # (spec sdk-0.32 §3.3 step 5).
    completed = done.t_ms if context.release in SCHEDULES_ON_JOBS else (done.t_ms // 1000) * 1000
    due = completed + interval_ms
    bound = due
    for other in runs.of(root):
        if other.fired.t_ms < due and other.fired.seq > done.seq and other.running_at(due):
            if other.end is None:
                return None
            bound = max(bound, other.end.t_ms + 1)
    nxt = next((x for x in later if x.seq > done.seq), None)
    nxt_run = runs.containing(root, nxt) if nxt is not None else None
    if nxt_run is not None and nxt_run.fired.t_ms <= bound:
        return None
    if nxt is None:
        if context.end <= bound:
            return None
        if any(
            r.fired.seq > done.seq and r.fired.t_ms <= bound and r.end is None
            for r in runs.of(root)
        ):
            return None
    schedule_id = str(row.get("id"))
    upper = runs.last_seq_by(bound) + 1
    for other in runs.of(root):
        if other.fired.seq > done.seq and other.fired.t_ms <= bound and other.end is not None:
            upper = max(upper, other.end.seq + 1)
    if _excused(context, runs, root, schedule_id, execution, upper) or _deleted_by(
        context, _holder(row, root), schedule_id, bound
    ):
        return None
    then = f"ran again at {_at(nxt.t_ms)}" if nxt is not None else "did not run again"
    return Violation(
        "interval_runs_on_time",
        execution.agent,
        schedule_id,
        f"interval schedule {schedule_id} (every {interval_ms // 1000} s, callback "
        f"{row.get('callback')}) of {execution.agent} ran at {_at(execution.t_ms)} in an alarm "
        f"run that completed at {_at(done.t_ms)}, so it was due again by {_at(due)} and should "
        f"have run by {_at(bound)}, but it {then}",
        (execution.seq, done.seq, *((nxt.seq,) if nxt is not None else ())),
    )


def _moved_on(runs: _Runs, root: str, execution: TraceRecord, end: TraceRecord) -> bool:
    """Something between the execution and the end of its alarm run shows the callback had
    returned, or may have: another row's execution, fiber recovery housekeeping, the facet scan,
    or a storage fault (which may have hit a statement after the callback)."""
    for record in runs.between(execution.seq, end.seq):
        if not _in_tree(record.agent, root):
            continue
        event = record.event
        if (
            event == "schedule:execute"
            or event.startswith("fiber:recovery:")
            or event.startswith("fault:")
            or (event == "rpc" and record.get("method") == HOUSEKEEPING_RPC)
            or (event == "schedule:error" and record.get("id") == execution.get("id"))
        ):
            return True
    return False


@invariant("one_shot_retried_when_cut")
def one_shot_retried_when_cut(context: CheckContext) -> list[Violation]:
    """Fibers §4.3 — a one-shot schedule's callback runs at least once: its row is deleted only
    after the callback returns, so an alarm run that dies or fails mid-callback leaves the row
    for the platform's retry to run again.

    Only when a liveness phase ran. For every `schedule:execute` E of a one-shot row (`delayed`,
    `scheduled`) whose alarm run (on its top-level agent) ended `alarm:failed` or
    `alarm:interrupted` (killed, deployed, evicted, crashed) at t, where E's callback may have been
    cut short (nothing between E and t shows the loop over due rows moved on: no other row's
    execution, no fiber recovery record, no facet scan, no `schedule:error` of E's id, no storage
    fault, no turn committed by t that deleted the row: the loop deletes it once the callback
    returned, and a cancel may have deleted it before the run, which had selected it already):
    a later `schedule:execute` of the same id exists — once the run went quiet, or
    `LIVENESS_GRACE_MS` after t — unless, after E, the schedule was cancelled (a cancel
    that may have rolled back does not count), its agent's (or an ancestor's) storage was wiped
    or deleted, a memory-limit reset sealed it, or the platform gave the alarm up.
    """
    if not context.liveness_ran:
        return []
    rows = schedule_rows(context)
    runs = _Runs(context)
    out: list[Violation] = []
    for schedule_id, executions in sorted(_executions(context).items()):
        row = rows.get(schedule_id)
        if row is None or row.get("type") not in ONE_SHOT:
            continue
        root = context.root_of(executions[0].agent)
        for index, execution in enumerate(executions):
            run = runs.containing(root, execution)
            if run is None or run.end is None or run.end.event == "alarm:done":
                continue
            if index + 1 < len(executions) or not context.had_time_since(run.end.t_ms):
                continue
            if (
                _moved_on(runs, root, execution, run.end)
                or _gone(context, runs, root, schedule_id, execution)
                or _deleted_by(context, _holder(row, root), schedule_id, run.end.t_ms)
            ):
                continue
            how = run.end.get("reason") or run.end.get("error") or ""
            ended = run.end.event.removeprefix("alarm:") + (f" ({how})" if how else "")
            out.append(
                Violation(
                    "one_shot_retried_when_cut",
                    execution.agent,
                    schedule_id,
                    f"{row.get('type')} schedule {schedule_id} (callback {row.get('callback')}) "
                    f"of {execution.agent} ran at {_at(execution.t_ms)} in an alarm run that "
                    f"{ended} at {_at(run.end.t_ms)} before its callback returned, and never ran "
                    f"again by {context.end_words()}",
                    (execution.seq, run.end.seq),
                )
            )
    return out


def _holder(row: Mapping[str, Any], root: str) -> str:
    return str(row.get("holder") or root)


def _deleted_by(context: CheckContext, holder: str, schedule_id: str, by_ms: int) -> bool:
    """A turn committed by `by_ms` deleted the schedule's row (or job), so no row was left to
    run again: a one-shot's callback had returned (the loop deletes it only then), or a cancel
    deleted it, whether or not its `schedule:cancel` was written (a sub-agent writes it only
    once its root's answer came back, and a storage fault after the root's delete loses it; an
    alarm runs the due rows it selected at its start, a row cancelled since included)."""
    for table in (SCHEDULES_TABLE, JOBS_TABLE):
        for when, change in timed_row_changes(context, holder, table, "id"):
            if str(change.key) == schedule_id and change.after is None and when <= by_ms:
                return True
    return False


def _gone(
    context: CheckContext, runs: _Runs, root: str, schedule_id: str, execution: TraceRecord
) -> bool:
    """After `execution`, the row was cancelled (not in a turn that may have rolled back), its
    storage wiped or deleted, sealed by the memory-limit breaker, or the alarm given up."""
    for record in runs.between(execution.seq, None):
        if not _in_tree(record.agent, root):
            continue
        event = record.event
        if event in ("storage:wiped", "facet:deleted", "alarm:given_up"):
            return True
        if event == "alarm:memory_limit_reset" and record.get("sealed"):
            return True
        if (
            event == "schedule:cancel"
            and str(record.get("id")) == schedule_id
            and not context.may_have_rolled_back(record)
        ):
            return True
    return False


@invariant("facet_interval_redispatched")
def facet_interval_redispatched(context: CheckContext) -> list[Violation]:
    """Fibers §4.4, for a sub-agent's rows (0.21.0) — an interval whose dispatch to its
    sub-agent threw is not left marked running: the failed row is neither run nor advanced, so
    it stays due, and the root's next alarm run tries it again, not the hung-schedule timeout's.

    For every failed dispatch (`schedule:error` with `attempts` 0 of an interval row that has an
    owner path, on its top-level agent) in an alarm run R that ended: the first alarm run of
    that agent fired after R's end that ends `alarm:done` holds a `schedule:execute` of the
    schedule (in any agent of the tree) or another failed dispatch of it — unless, between the
    failure and that run's end, the tree saw a death, an alarm run that ended `failed` or
    `interrupted`, a cancel of the schedule, a deletion, a wiped storage, a memory-limit reset
    or a storage fault (the statement that clears the running flag may have failed), or a
    committed turn deleted the row; and unless no such run came before the trace ended. On
    0.32.0 a failed dispatch yields the job to the driver instead (sdk-0.32 §3.3): not judged.
    """
    if context.release in SCHEDULES_ON_JOBS:
        return []
    rows = schedule_rows(context)
    runs = _Runs(context)
    out: list[Violation] = []
    failures = [r for r in context.events("schedule:error") if r.get("attempts") == 0]
    for failure in failures:
        schedule_id = str(failure.get("id"))
        row = rows.get(schedule_id)
        if row is None or row.get("type") != "interval" or not row.get("owner_path"):
            continue
        found = _not_redispatched(context, runs, row, failure)
        if found is not None:
            out.append(found)
    return out


def _not_redispatched(
    context: CheckContext, runs: _Runs, row: Mapping[str, Any], failure: TraceRecord
) -> Violation | None:
    root = context.root_of(failure.agent)
    run = runs.containing(root, failure)
    if run is None or run.end is None:
        return None
    schedule_id = str(row.get("id"))
    later = [r for r in runs.of(root) if r.fired.seq > run.end.seq]
    done = next((r for r in later if r.end is not None and r.end.event == "alarm:done"), None)
    if done is None or done.end is None:
        return None
    window = runs.between(failure.seq, done.end.seq + 1)
    if _excused(context, runs, root, schedule_id, failure, done.end.seq + 1) or any(
        record.event.startswith("fault:") and _in_tree(record.agent, root) for record in window
    ):
        return None
    if _deleted_by(context, _holder(row, root), schedule_id, done.end.t_ms):
        return None
    tried = any(
        str(record.get("id")) == schedule_id
        and (
            record.event == "schedule:execute"
            or (record.event == "schedule:error" and record.get("attempts") == 0)
        )
        for record in runs.between(done.fired.seq, done.end.seq)
    )
    if tried:
        return None
    return Violation(
        "facet_interval_redispatched",
        failure.agent,
        schedule_id,
        f"interval schedule {schedule_id} (callback {row.get('callback')}) of the sub-agent at "
        f"{row.get('owner_path')} failed to dispatch at {_at(failure.t_ms)}, so it stayed due, "
        f"but the next completed alarm run of {root} ({_at(done.fired.t_ms)} to "
        f"{_at(done.end.t_ms)}) did not try it again (its row left marked running?)",
        (failure.seq, done.fired.seq, done.end.seq),
    )
