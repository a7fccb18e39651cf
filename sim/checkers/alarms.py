"""Invariants of the alarm slot: `no_leaked_keep_alive` (an alarm still armed after the liveness
phase is explained by durable work) and `schedules_fire` (every due schedule fired).

Schedule due times are read from the final schedules (`cf_agents_schedules` rows, or 0.32.0's
scheduler jobs, read in one shape by `schedule_store`: `time` in Unix seconds, so due at
`time * 1000` ms); `schedule:create` / `schedule:execute` / `schedule:cancel` records
carry only `callback` and `id`, as the SDK's events do, so a row that no longer exists is known
by its records alone. Ids are matched across agents: a facet's rows live on its root, and the
records of their creation and execution are on the facet.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.checkers.schedule_store import (
    JOBS_TABLE,
    SCHEDULES_ON_JOBS,
    deletion_instants,
    insertion_instants,
    stored_schedules,
)
from sim.checkers.storage import timed_row_changes
from sim.trace import TraceRecord, format_sim_time

__all__ = ["SCHEDULE_LATENESS_MS", "durable_work", "no_leaked_keep_alive", "schedules_fire"]

SCHEDULE_LATENESS_MS = 60_000
"""How late a due row may run: an alarm runs the due rows one after another (and retries a
failing callback in-process), so a row may wait for the rows before it."""

DESTROY_PENDING_KEY = "cf_agents_destroy_pending"
KV_TABLE = "_cf_KV"


def durable_work(context: CheckContext, root: str) -> list[str]:
    """What in the storage of `root` and its sub-agents needs the root's alarm (spec fibers §3.3
    and agent-tools §4.5): one short description per kind found, empty when nothing does."""
    found = []
    schedules = stored_schedules(context, root)
    if schedules:
        found.append(f"{len(schedules)} schedule row(s)")
    leases = context.table(root, "cf_agents_facet_runs")
    if leases:
        found.append(f"{len(leases)} facet fiber lease(s)")
    if any(r.get("key") == DESTROY_PENDING_KEY for r in context.table(root, KV_TABLE)):
        found.append("a pending destroy")
    for path in context.tree(root):
        runs = context.table(path, "cf_agents_runs")
        if runs:
            found.append(f"{len(runs)} fiber run row(s) on {path}")
        pending = [
            r
            for r in context.table(path, "cf_agents_fibers")
            if r.get("status") in ("pending", "running")
        ]
        if pending:
            found.append(f"{len(pending)} pending managed fiber(s) on {path}")
        owed = [
            r
            for r in context.table(path, "cf_agent_tool_runs")
            if r.get("status") in ("starting", "running")
            or (r.get("detached") and r.get("finish_delivered_at") is None)
        ]
        if owed:
            found.append(f"{len(owed)} unfinished agent-tool run(s) on {path}")
        child = [
            r
            for name, rows in sorted((context.storage.get(path) or {}).items())
            if name != "cf_agent_tool_runs" and path != root
            for r in rows
            if "run_id" in r and r.get("status") in ("starting", "running")
        ]
        if child:
            found.append(f"{len(child)} agent-tool child run(s) still going on {path}")
    return found


@invariant("no_leaked_keep_alive")
def no_leaked_keep_alive(context: CheckContext) -> list[Violation]:
    """Fibers §3 — keepAlive is released: no heartbeat outlives the work that needed it.

    Only when a liveness phase ran. At the end, every top-level agent whose alarm slot is still
    armed must have durable work that explains it (see `durable_work`): a schedule row, a fiber
    run row (running or orphaned) or a `pending`/`running` managed ledger row, a facet fiber
    lease, an agent-tool run still `starting`/`running` or a detached run whose finish slot is
    undelivered, a sub-agent's own agent-tool child run still `starting`/`running` (a child
    working, or hung, under a facet keepAlive counted on the root), or a pending destroy — on
    the agent or any of its sub-agents. An armed alarm with none of these is a keepAlive (or
    heartbeat) that leaked.
    """
    if not context.liveness_ran:
        return []
    out = []
    for agent, at in sorted(context.alarms.items()):
        if at is None or durable_work(context, agent):
            continue
        sets = context.events("alarm:set", agent)
        out.append(
            Violation(
                "no_leaked_keep_alive",
                agent,
                "",
                f"{agent} still had its alarm armed for {format_sim_time(at)} at "
                f"{context.end_words()} with no durable work to explain it (no schedule, no "
                "fiber row, no facet lease, no unfinished agent-tool run): a keepAlive leaked",
                tuple(r.seq for r in sets[-1:]),
            )
        )
    return out


def _owner_of(context: CheckContext) -> dict[str, tuple[str, Mapping[str, Any]]]:
    rows: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for path in context.paths():
        for row in stored_schedules(context, path):
            rows[str(row.get("id"))] = (path, row)
    return rows


def _by_id(context: CheckContext, event: str) -> dict[str, list[TraceRecord]]:
    out: dict[str, list[TraceRecord]] = defaultdict(list)
    for record in context.events(event):
        out[str(record.get("id"))].append(record)
    return out


def _wiped_after(context: CheckContext, record: TraceRecord) -> bool:
    """The creating agent's storage, or an ancestor's (which holds its rows), was wiped or
    deleted after `record`."""
    for event in ("storage:wiped", "facet:deleted"):
        for wipe in context.events(event):
            owner = wipe.agent
            if wipe.seq > record.seq and (
                record.agent == owner or record.agent.startswith(owner + "/")
            ):
                return True
    return False


def _cancel_cut_by_a_fault(context: CheckContext, made: TraceRecord, schedule_id: str) -> bool:
    """0.32.0's `cancelSchedule` emits `schedule:cancel` only after the delete and the re-arm
    (sdk-0.32 §3.2): when a storage fault fails the re-arm, the row is gone and nothing was said.
    Such a row, deleted at an instant a storage fault hit the agent holding it, was cancelled."""
    if context.release not in SCHEDULES_ON_JOBS:
        return False  # 0.21.0 emits before it deletes
    holder = context.root_of(made.agent)  # a facet's schedules live on its root
    faults = {r.t_ms for r in context.events("fault:storage_error", agent=holder)}
    return any(t in faults for t in deletion_instants(context, holder, schedule_id))


def _left_by_a_failed_push(context: CheckContext, path: str, schedule_id: str) -> bool:
    """0.32.0's job push writes the row and then reads it back; when a storage fault fails the
    read, the call raises before it re-arms the alarm (the SDK's `rearmAfter` too) and before
    `schedule:create`. The row then waits, unarmed, for the holder's next re-arm (a later job
    mutation or alarm; a startup with no host job to change re-arms nothing, as the SDK's
    `_syncHostJobs`). Such a row, never announced and written at an instant a storage fault hit
    its holder, is not owed while no later `alarm:set` of the holder came."""
    if context.release not in SCHEDULES_ON_JOBS:
        return False
    faults = {r.t_ms for r in context.events("fault:storage_error", agent=path)}
    written = [t for t in insertion_instants(context, path, schedule_id) if t in faults]
    if not written:
        return False
    return not any(r.t_ms > written[-1] for r in context.events("alarm:set", agent=path))


def _describe(schedule_id: str, row: Mapping[str, Any] | None, callback: Any) -> str:
    kind = f"{row.get('type')}, " if row is not None else ""
    return f"schedule {schedule_id} ({kind}callback {callback})"


def _alarm_given_up_since(context: CheckContext, path: str, due_ms: int) -> bool:
    """The platform gave up the alarm of `path`'s root after its sixth retry, at or after
    `due_ms`, and nothing woke that root again before the end: its slot is empty until some
    request wakes it (the platform's rule, fibers §4.6), so the row waits with it."""
    root = "/".join(path.split("/")[:2])
    given_up = [r for r in context.events("alarm:given_up", root) if r.t_ms >= due_ms]
    if not given_up:
        return False
    last = given_up[-1]
    return not any(r.seq > last.seq for r in context.events("incarnation:start", root))


@invariant("schedules_fire")
def schedules_fire(context: CheckContext) -> list[Violation]:
    """Fibers §4 — every due schedule fires.

    1. Every row left in `cf_agents_schedules` whose due instant passed more than
       `SCHEDULE_LATENESS_MS` before the end has a `schedule:execute` at or after it. The due
       instant is `time * 1000`; for an interval row still marked `running`, it is when that
       execution turns hung (`execution_started_at + hung_schedule_timeout_seconds`), since a
       running interval is skipped until then. Not when the platform gave up the root's alarm
       after its sixth retry, after the due instant, and nothing woke the root again.
    2. Every schedule created (`schedule:create`) that was neither executed nor cancelled still
       has its row at the end, unless its agent's (or an ancestor's) storage was wiped or
       deleted, or the creating incarnation crashed in the same instant (the turn that wrote the
       row rolled back), or (0.32.0) it was a recovery-loop job that a memory-limit reset
       sealing the breaker purged with the executing one (sdk-0.32 §2.5).
    3. For every interval row left at the end (interval I, hung timeout H of the agent holding
       it): its first execution comes no earlier than its creation second plus I, and two
       consecutive executions are at most I + H + `SCHEDULE_LATENESS_MS` apart (the next run is
       due I after the previous one completes, and a run still going after H is force-reset).
    """
    rows = _owner_of(context)
    creates = _by_id(context, "schedule:create")
    executes = _by_id(context, "schedule:execute")
    cancels = _by_id(context, "schedule:cancel")
    out: list[Violation] = []
    for schedule_id, (path, row) in sorted(rows.items()):
        hung_s = int(context.option(path, "hung_schedule_timeout_seconds"))
        due_ms = int(row.get("time") or 0) * 1000
        if row.get("type") == "interval" and row.get("running") == 1:
            due_ms = (int(row.get("execution_started_at") or 0) + hung_s) * 1000
        created = creates.get(schedule_id, [])
        if (
            context.end - due_ms > SCHEDULE_LATENESS_MS
            and not any(e.t_ms >= due_ms for e in executes.get(schedule_id, ()))
            and not (not created and _left_by_a_failed_push(context, path, schedule_id))
            and not _alarm_given_up_since(context, path, due_ms)
        ):
            ran = executes.get(schedule_id, [])
            last = f" (last ran at {format_sim_time(ran[-1].t_ms)})" if ran else ""
            out.append(
                Violation(
                    "schedules_fire",
                    path,
                    schedule_id,
                    f"{_describe(schedule_id, row, row.get('callback'))} of {path} was due at "
                    f"{format_sim_time(due_ms)} and had not fired by {context.end_words()}{last}",
                    tuple(r.seq for r in created[:1] + ran[-1:]),
                )
            )
        if row.get("type") == "interval":
            out += _interval_cadence(context, path, row, created, executes.get(schedule_id, []))
    for schedule_id, made in sorted(creates.items()):
        if schedule_id in rows or executes.get(schedule_id) or cancels.get(schedule_id):
            continue
        if _wiped_after(context, made[0]) or context.may_have_rolled_back(made[0]):
            continue
        if _cancel_cut_by_a_fault(context, made[0], schedule_id):
            continue
        if _purged_with_a_sealed_breaker(context, made[0], schedule_id):
            continue
        out.append(
            Violation(
                "schedules_fire",
                made[0].agent,
                schedule_id,
                f"{_describe(schedule_id, None, made[0].get('callback'))} created by "
                f"{made[0].agent} at {format_sim_time(made[0].t_ms)} disappeared without "
                "firing or being cancelled",
                (made[0].seq,),
            )
        )
    return out


def _purged_with_a_sealed_breaker(
    context: CheckContext, made: TraceRecord, schedule_id: str
) -> bool:
    """Sdk-0.32 §2.5: a memory-limit reset that seals the breaker purges every `recovery_loop`
    job with the executing one. The schedule's job was deleted, while it had `recovery_loop`
    set, in an instant its top-level agent's alarm wrote a sealing `alarm:memory_limit_reset`
    after the schedule was created."""
    root = context.root_of(made.agent)
    seals = {
        record.t_ms
        for record in context.events("alarm:memory_limit_reset", root)
        if record.get("sealed") and record.seq > made.seq
    }
    if not seals:
        return False
    for when, change in timed_row_changes(context, root, JOBS_TABLE, "id"):
        if (
            str(change.key) == schedule_id
            and change.after is None
            and change.before is not None
            and change.before.get("recovery_loop") == 1
            and when in seals
        ):
            return True
    return False


def _interval_cadence(
    context: CheckContext,
    path: str,
    row: Mapping[str, Any],
    created: list[TraceRecord],
    runs: list[TraceRecord],
) -> list[Violation]:
    schedule_id = str(row.get("id"))
    interval_ms = int(row.get("intervalSeconds") or 0) * 1000
    hung_ms = int(context.option(path, "hung_schedule_timeout_seconds")) * 1000
    what = (
        f"interval schedule {schedule_id} (every {interval_ms // 1000} s, callback "
        f"{row.get('callback')}) of {path}"
    )
    out = []
    if created and runs:
        first_due = created[0].t_ms // 1000 * 1000 + interval_ms
        if runs[0].t_ms < first_due:
            out.append(
                Violation(
                    "schedules_fire",
                    path,
                    schedule_id,
                    f"{what} first fired at {format_sim_time(runs[0].t_ms)}, before it was due "
                    f"at {format_sim_time(first_due)}",
                    (created[0].seq, runs[0].seq),
                )
            )
    allowed = interval_ms + hung_ms + SCHEDULE_LATENESS_MS
    for before, after in zip(runs, runs[1:], strict=False):
        if after.t_ms - before.t_ms > allowed:
            out.append(
                Violation(
                    "schedules_fire",
                    path,
                    schedule_id,
                    f"{what} went {(after.t_ms - before.t_ms) // 1000} s without firing (ran at "
                    f"{format_sim_time(before.t_ms)}, then not until "
                    f"{format_sim_time(after.t_ms)}; at most {allowed // 1000} s allowed)",
                    (before.seq, after.seq),
                )
            )
    return out
