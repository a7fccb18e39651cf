"""Invariants of fibers: `no_lost_stash` (a stash that returned survives the incarnation's death)
and `fibers_settled` (after the liveness phase every fiber has settled or is recorded).

**The stash convention.** The SDK emits no event for a stash, and the runtime gets none added
for the harness. Workloads that want `no_lost_stash` checked follow this contract instead:

- right after `ctx.stash(...)` (or `self.stash(...)`) returns, the workload emits the trace
  record `workload:stashed {fiberId, step}` (`host.trace.emit`), where `fiberId` is the running
  fiber's id and `step` an integer that grows along the fiber (e.g. steps completed so far);
- when a recovery hook (`on_fiber_recovered`) resumes work from the snapshot it was given, it
  emits `workload:resumed {fiberId, step}`, where `fiberId` is the *recovered* fiber's id
  (`ctx.id`, not the id of any continuation fiber it starts) and `step` the step stored in the
  snapshot it resumes from (None when it had no snapshot and starts over).

A continuation fiber has a new id and stashes under it, so a chain of deaths and resumes is
checked link by link.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sim.checkers.core import LIVENESS_GRACE_MS, CheckContext, Violation
from sim.checkers.registry import invariant
from sim.checkers.sub_agent_registry import REGISTRY, registry_entry
from sim.trace import TraceRecord, format_sim_time

__all__ = ["fiber_leases_released", "fiber_runs_once", "fibers_settled", "no_lost_stash"]

RECOVERY_OUTCOMES = ("fiber:recovery:handled", "fiber:recovery:failed", "fiber:recovery:skipped")


def _not_before(got: Any, required: Any) -> bool:
    if got is None:
        return required is None
    if isinstance(got, int | float) and isinstance(required, int | float):
        return got >= required
    return got == required


@invariant("no_lost_stash")
def no_lost_stash(context: CheckContext) -> list[Violation]:
    """Fibers §5.4 / the seed's durable-execution promise — a stash that returned is not lost.

    For every `workload:resumed {fiberId: F, step: s}` record on an agent: take the stashes of F
    (`workload:stashed` on that agent before the resume) and the `incarnation:end` of the
    incarnation they ran in. The last of those stashes that could not have been rolled back
    (not in the same instant as a crash of that incarnation) has step k; the resume must start
    from a step at least k (`s >= k`; for non-numeric steps, `s == k`). A resume of a fiber that
    never stashed may start anywhere. The workload convention is in this module's docstring.
    """
    stashes: dict[tuple[str, Any], list[TraceRecord]] = defaultdict(list)
    for record in context.events("workload:stashed"):
        stashes[(record.agent, record.get("fiberId"))].append(record)
    out: list[Violation] = []
    for resume in context.events("workload:resumed"):
        fiber = resume.get("fiberId")
        before = [s for s in stashes.get((resume.agent, fiber), ()) if s.seq < resume.seq]
        if not before:
            continue
        inc = before[-1].inc
        death = next((e for e in context.incarnation_ends(resume.agent) if e.inc == inc), None)
        kept = [s for s in before if not context.may_have_rolled_back(s)]
        if not kept:
            continue
        last = kept[-1]
        required, got = last.get("step"), resume.get("step")
        if _not_before(got, required):
            continue
        died = (
            f", its incarnation {inc} ended ({death.get('reason')}) at "
            f"{format_sim_time(death.t_ms)}"
            if death is not None
            else f" (its incarnation {inc} had not ended)"
        )
        out.append(
            Violation(
                "no_lost_stash",
                resume.agent,
                str(fiber),
                f"fiber {fiber} of {resume.agent} stashed step {required!r} at "
                f"{format_sim_time(last.t_ms)}{died}, and its recovery resumed it from step "
                f"{got!r} at {format_sim_time(resume.t_ms)}: the stash was lost",
                tuple(x.seq for x in (last, death, resume) if x is not None),
            )
        )
    return out


def _running_at_end(context: CheckContext, agent: str, fiber_id: str) -> TraceRecord | None:
    """The `fiber:run:started` of a fiber still executing in the agent's live incarnation."""
    alive = context.alive_at_end(agent)
    if alive is None:
        return None
    started = [r for r in context.events("fiber:run:started", agent, fiberId=fiber_id)]
    if not started or started[-1].inc != alive:
        return None
    for event in ("fiber:run:completed", "fiber:run:failed", "fiber:setup_failed"):
        if any(r.seq > started[-1].seq for r in context.events(event, agent, fiberId=fiber_id)):
            return None
    return started[-1]


@invariant("fibers_settled")
def fibers_settled(context: CheckContext) -> list[Violation]:
    """Fibers §6 — after the liveness phase every fiber has settled or is recorded.

    Only when a liveness phase ran. At the end, on every agent:
    1. each `cf_agents_runs` row is allowed only if the last recovery outcome recorded for it
       (`fiber:recovery:handled|failed|skipped`) is `failed` (a throwing hook keeps the row for
       later scans) and the row is still within the agent's `fiber_recovery_max_age_ms` (plus
       `LIVENESS_GRACE_MS`: age is only checked after a failed attempt, which the backoff may
       delay), or the max age is <= 0 (kept forever by design);
    2. no `cf_agents_fibers` (managed ledger) row is `pending` or `running`.
    Neither applies to an agent the platform left asleep (`CheckContext.left_asleep`: its alarm
    given up after its last completed startup, nothing armed): its recovery waits for the next
    event from outside, as on the platform. Nor to a sub-agent's fiber whose run the root does
    not index at the end (no `cf_agents_facet_runs` row of it: the registration of §6.9 step 5,
    made after the sub-agent wrote its run row, was cut short, or a delete of the sub-agent
    that stopped half-way dropped it) when the sub-agent was not started again after it: only
    the indexed runs are driven by the root's alarm, so its recovery waits for the sub-agent's
    next wake-up, as on the platform. Nor to a sub-agent its parent's
    registry no longer lists (a delete that stopped after removing the entry, its storage
    left): nothing reaches it again.
    """
    if not context.liveness_ran:
        return []
    out: list[Violation] = []
    for agent in context.paths():
        if context.left_asleep(agent) is not None or _unlisted(context, agent):
            continue
        unindexed = _unindexed_sleepers(context, agent)
        max_age = int(context.option(agent, "fiber_recovery_max_age_ms"))
        for row in context.table(agent, "cf_agents_runs"):
            fiber_id, name = str(row.get("id")), row.get("name")
            outcomes = [
                r
                for event in RECOVERY_OUTCOMES
                for r in context.events(event, agent, fiberId=fiber_id)
            ]
            last = max(outcomes, key=lambda r: r.seq) if outcomes else None
            created = int(row.get("created_at") or 0)
            within_age = max_age <= 0 or context.end - created <= max_age + LIVENESS_GRACE_MS
            if last is not None and last.event == "fiber:recovery:failed" and within_age:
                continue
            if fiber_id in unindexed:
                continue
            running = _running_at_end(context, agent, fiber_id)
            if running is not None:
                what = (
                    f"was still running at {context.end_words()} (started at "
                    f"{format_sim_time(running.t_ms)} in incarnation {running.inc})"
                )
                seqs: tuple[int, ...] = (running.seq,)
            elif last is not None and last.event == "fiber:recovery:failed":
                what = (
                    f"kept failing its recovery hook and outlived its max age "
                    f"({max_age} ms) with its row still there at {context.end_words()}"
                )
                seqs = (last.seq,)
            else:
                what = (
                    f"left an orphaned run row (created at {format_sim_time(created)}) that "
                    f"recovery never removed by {context.end_words()}"
                )
                seqs = tuple(
                    r.seq for r in context.events("fiber:run:started", agent, fiberId=fiber_id)
                )
            out.append(
                Violation(
                    "fibers_settled",
                    agent,
                    fiber_id,
                    f"fiber {fiber_id} ({name}) of {agent} {what}",
                    seqs,
                )
            )
        for ledger in context.table(agent, "cf_agents_fibers"):
            if ledger.get("status") not in ("pending", "running"):
                continue
            fiber_id = str(ledger.get("fiber_id"))
            if fiber_id in unindexed:
                continue
            started = context.events("fiber:run:started", agent, fiberId=fiber_id)
            out.append(
                Violation(
                    "fibers_settled",
                    agent,
                    fiber_id,
                    f"managed fiber {fiber_id} ({ledger.get('name')}) of {agent} was left "
                    f"{ledger.get('status')!r} in the ledger at {context.end_words()}",
                    tuple(r.seq for r in started),
                )
            )
    return out


def _unlisted(context: CheckContext, agent: str) -> bool:
    """Sub-agent `agent` is missing from its parent's final registry (`cf_agents_sub_agents`)."""
    entry = registry_entry(agent)
    if entry is None:
        return False
    parent, cls, name = entry
    registry = context.table(parent, REGISTRY)
    return not any(r.get("class") == cls and r.get("name") == name for r in registry)


def _unindexed_sleepers(context: CheckContext, agent: str) -> set[str]:
    """The fibers of sub-agent `agent` whose runs its root does not index at the end (no
    `cf_agents_facet_runs` row names them: never registered, or dropped with a delete of the
    sub-agent that stopped half-way) and that no startup of the sub-agent finished after (a
    startup runs the recovery scan; an incarnation whose startup failed before it scanned
    nothing): nothing drives their recovery until the sub-agent starts again."""
    root = context.root_of(agent)
    if root == agent or context.alive_at_end(agent) is not None:
        return set()
    indexed = {str(row.get("run_id")) for row in context.table(root, FACET_RUNS)}
    last_scan = _last_finished_startup(context, agent)
    started = {
        str(r.get("fiberId"))
        for r in context.events("fiber:run:started", agent)
        if str(r.get("fiberId")) not in indexed and (last_scan is None or r.seq > last_scan)
    }
    # A managed start whose execution never began leaves a `pending` row and no run: no run was
    # indexed, so only the sub-agent's own next startup finds it (F7 arms the alarm of a
    # top-level agent; a sub-agent's alarm is its root's, which walks indexed runs only).
    never_ran = {
        str(row.get("fiber_id"))
        for row in context.table(agent, "cf_agents_fibers")
        if row.get("status") == "pending" and str(row.get("fiber_id")) not in indexed
    }
    return started | never_ran


def _last_finished_startup(context: CheckContext, agent: str) -> int | None:
    """The trace position of the start of `agent`'s last incarnation whose startup finished:
    the last start before its last `startup:done` (by trace order: a sub-agent deleted and
    created again under its name numbers its incarnations from 1 again)."""
    done = context.events("startup:done", agent)
    if not done:
        return None
    starts = context.events("incarnation:start", agent)
    return max((r.seq for r in starts if r.seq < done[-1].seq), default=None)


FACET_RUNS = "cf_agents_facet_runs"
FIBER_ENDS = ("fiber:run:completed", "fiber:run:failed")


@invariant("fiber_leases_released")
def fiber_leases_released(context: CheckContext) -> list[Violation]:
    """Fibers §3 / §5.1 — a fiber holds a keepAlive lease while it runs and gives it back when it
    ends, however it ends.

    For every agent and incarnation:
    1. every `fiber:run:completed|failed {fiberId: F}` is followed, in the same instant, by a
       `keep_alive:release {holder: fiber:F}` of that incarnation — unless the incarnation died
       in that instant (its `incarnation:end` follows at the same time);
    2. every `keep_alive:release {lease, holder}` answers an earlier `keep_alive:acquire` with
       that lease and holder in that incarnation, and a lease is released at most once (a
       deleted sub-agent's path used again is a new record, its leases numbered afresh).
    """
    out: list[Violation] = []
    for agent in context.agents():
        records = context.records_of(
            agent, *FIBER_ENDS, "keep_alive:acquire", "keep_alive:release", "incarnation:end"
        )
        held: dict[tuple[int, int, Any], TraceRecord] = {}
        released: dict[tuple[int, int, Any], TraceRecord] = {}
        for index, record in enumerate(records):
            key = (context.life_of(record), record.inc, record.get("lease"))
            if record.event == "keep_alive:acquire":
                held[key] = record
            elif record.event == "keep_alive:release":
                taken, before = held.get(key), released.get(key)
                if taken is not None and taken.get("holder") == record.get("holder"):
                    if before is None:
                        released[key] = record
                        continue
                    why = f"a second time (first at {format_sim_time(before.t_ms)})"
                else:
                    why = "though it was never acquired"
                out.append(
                    Violation(
                        "fiber_leases_released",
                        agent,
                        str(record.get("holder")),
                        f"keepAlive lease {record.get('lease')} ({record.get('holder')}) of "
                        f"{agent} was released at {format_sim_time(record.t_ms)} {why}, in "
                        f"incarnation {record.inc}",
                        (record.seq,),
                    )
                )
            elif record.event in FIBER_ENDS:
                out += _fiber_end_releases(agent, records, index)
    return out


def _fiber_end_releases(agent: str, records: list[TraceRecord], index: int) -> list[Violation]:
    end = records[index]
    fiber = end.get("fiberId")
    holder = f"fiber:{fiber}"
    for position in range(index + 1, len(records)):
        later = records[position]
        if later.t_ms != end.t_ms:
            break
        if later.inc != end.inc:
            continue
        if later.event == "incarnation:end" or (
            later.event == "keep_alive:release" and later.get("holder") == holder
        ):
            return []
    how = "completed" if end.event == "fiber:run:completed" else "failed"
    return [
        Violation(
            "fiber_leases_released",
            agent,
            str(fiber),
            f"fiber {fiber} ({end.get('fiberName')}) of {agent} {how} at "
            f"{format_sim_time(end.t_ms)} without releasing its keepAlive lease in that "
            f"instant (incarnation {end.inc} lived on)",
            (end.seq,),
        )
    ]


@invariant("fiber_runs_once")
def fiber_runs_once(context: CheckContext) -> list[Violation]:
    """Fibers §5 / the seed's "no automatic retries" — a fiber's function runs once: a failed
    or interrupted fiber is never run again by the runtime (recovery is the hook's job, and a
    continuation is a new fiber), and an accepted managed fiber is executed once.

    For every agent, each `fiberId` has at most one `fiber:run:started`, unless the earlier
    start's turn may have rolled back (its incarnation crashed in that instant).
    """
    out: list[Violation] = []
    for agent in context.agents():
        first: dict[Any, TraceRecord] = {}
        for record in context.records_of(agent, "fiber:run:started"):
            fiber = record.get("fiberId")
            earlier = first.get(fiber)
            if earlier is None or context.may_have_rolled_back(earlier):
                first[fiber] = record
                continue
            out.append(
                Violation(
                    "fiber_runs_once",
                    agent,
                    str(fiber),
                    f"fiber {fiber} ({record.get('fiberName')}) of {agent} started again at "
                    f"{format_sim_time(record.t_ms)} in incarnation {record.inc}, after it "
                    f"started at {format_sim_time(earlier.t_ms)} in incarnation {earlier.inc}",
                    (earlier.seq, record.seq),
                )
            )
    return out
