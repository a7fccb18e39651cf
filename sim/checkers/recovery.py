"""Invariants of fiber recovery (spec fibers §6, seed decision S1): `recovery_once` (the recovery
hook is called once per orphan, and again only after it failed), `recovery_error_kept` (a
managed fiber whose recovery hook threw stays `interrupted` with the hook's error recorded),
`recovery_max_age` (an orphan whose hook keeps failing is dropped for its age exactly when it is
older than the maximum age) and `recovery_backoff` (the follow-up recovery alarm backs off while
passes make no progress).

They read the recovery records the runtime emits as the SDK does — `fiber:recovery:detected
{elapsedMs}` (an orphan found, that old), `fiber:recovery:attempt` (the hook is about to be
called), then `fiber:recovery:handled` or `fiber:recovery:failed {error}`, and
`fiber:recovery:skipped {reason, elapsedMs}` — with `fiberId` and `managed`, the fibers'
`fiber:run:started|completed|failed`, storage faults (`fault:storage_error`), the final
`cf_agents_fibers` ledger rows, and two records the runtime writes for the harness alone:
`fiber:recovery:pass {progress, scans}` at the end of every recovery pass that made progress or
left its no-progress count above zero (`scans`: that count after the pass), and
`fiber:recovery:backoff {at, delayMs}` each time the alarm multiplexer computes the recovery
candidate (the slot shows it only when no earlier candidate wins).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.models.spec_constants import recovery_backoff_ms
from sim.checkers.registry import invariant
from sim.trace import TraceRecord, format_sim_time

__all__ = ["recovery_backoff", "recovery_error_kept", "recovery_max_age", "recovery_once"]

FIBER_HOLDER = "fiber:"
"""The keepAlive holder of a fiber's own lease: `fiber:<id>`."""
OUTCOMES = ("fiber:recovery:handled", "fiber:recovery:failed", "fiber:recovery:skipped")
FIBER_EVENTS = (
    "fiber:recovery:attempt",
    *OUTCOMES,
    "fiber:run:started",
    "fiber:run:completed",
    "fiber:run:failed",
    "fiber:setup_failed",
)


def _at(record: TraceRecord) -> str:
    return format_sim_time(record.t_ms)


def _settled(context: CheckContext, record: TraceRecord, agent: str) -> bool:
    """`record` closes its fiber's recovery for good: the fiber's own end (its run row is deleted
    as it completes or fails), a handled hook or an unmanaged row dropped for its age (the row is
    deleted in that turn), or any outcome of a managed fiber (its run row is deleted and its
    ledger row left `interrupted` or settled) — unless that turn may have rolled back, or a
    storage fault on the agent in that instant may have failed the delete."""
    if record.event == "fiber:recovery:skipped" and record.get("reason") != "max_age_exceeded":
        return False
    if record.event == "fiber:recovery:attempt":
        return False
    if record.event == "fiber:recovery:failed" and not record.get("managed"):
        return False
    if context.may_have_rolled_back(record):
        return False
    return not any(
        fault.seq > record.seq and fault.t_ms == record.t_ms
        for fault in context.events("fault:storage_error", agent)
    )


@invariant("recovery_once")
def recovery_once(context: CheckContext) -> list[Violation]:
    """Fibers §6.2 — `on_fiber_recovered` is called once for each orphaned fiber: at most once
    per orphan per incarnation, again only after it failed, and never for a fiber still running.

    For every `fiber:recovery:attempt` of fiber F on an agent, in incarnation I:
    1. F is not running in I (no `fiber:run:started` of F in I without a later
       `fiber:run:completed|failed` of F, `fiber:setup_failed` (it stopped before its
       function ran, leaving its row to recovery) or the release of its own keepAlive lease
       (`keep_alive:release {holder: fiber:F}`: its run ended), before the attempt);
    2. an earlier attempt of F in I is followed by a `fiber:recovery:failed` of F (the hook
       threw and the row was kept for the next scan) or a storage fault on the agent (a failed
       delete keeps the row) before this attempt;
    3. nothing earlier settled F for good (see `_settled`: the fiber completed or failed, a
       handled hook, an unmanaged row dropped for its age, or any outcome of a managed fiber), in
       any incarnation.
    """
    out: list[Violation] = []
    for agent in context.agents():
        seen: dict[Any, list[TraceRecord]] = defaultdict(list)
        for record in context.records_of(agent, *FIBER_EVENTS, "keep_alive:release"):
            if record.event != "keep_alive:release":
                seen[record.get("fiberId")].append(record)
            elif str(record.get("holder")).startswith(FIBER_HOLDER):
                seen[str(record.get("holder"))[len(FIBER_HOLDER) :]].append(record)
        faults = context.events("fault:storage_error", agent)
        for fiber, records in seen.items():
            out += _one_fiber(context, agent, fiber, records, faults)
    return out


def _one_fiber(
    context: CheckContext,
    agent: str,
    fiber: Any,
    records: list[TraceRecord],
    faults: list[TraceRecord],
) -> list[Violation]:
    running: dict[int, TraceRecord] = {}
    last_attempt: dict[int, TraceRecord] = {}
    failed_since: set[int] = set()
    settled: TraceRecord | None = None
    for record in records:
        if record.event == "fiber:run:started":
            running[record.inc] = record
            settled = None  # an id started again (a managed fiber's explicit id) is a new life
        elif record.event in ("fiber:setup_failed", "keep_alive:release"):
            # It stopped before its function ran, or its run's `finally` gave its lease back
            # (fibers §2.1, sdk-0.32 §5.2): it runs no more in this incarnation, whatever end
            # it could not record (a ledger settle a storage fault failed leaves its row to
            # recovery).
            running.pop(record.inc, None)
        elif record.event in ("fiber:run:completed", "fiber:run:failed"):
            running.pop(record.inc, None)
            if settled is None and _settled(context, record, agent):
                settled = record  # its run row was deleted as it ended: no orphan is left
        elif record.event == "fiber:recovery:failed":
            failed_since.add(record.inc)
        if record.event in OUTCOMES and settled is None and _settled(context, record, agent):
            settled = record
        if record.event != "fiber:recovery:attempt":
            continue
        what = f"the recovery hook of fiber {fiber} ({record.get('fiberName')}) of {agent}"
        why: str | None = None
        seqs: tuple[int, ...] = (record.seq,)
        earlier = last_attempt.get(record.inc)
        if record.inc in running:
            started = running[record.inc]
            why = f"while the fiber, started at {_at(started)}, was still running in it"
            seqs = (started.seq, record.seq)
        elif settled is not None:
            why = f"after its recovery was settled ({settled.event}) at {_at(settled)}"
            seqs = (settled.seq, record.seq)
        elif (
            earlier is not None
            and record.inc not in failed_since
            and not any(earlier.seq < f.seq < record.seq for f in faults)
        ):
            why = f"a second time in it (first at {_at(earlier)}) with no failure between"
            seqs = (earlier.seq, record.seq)
        last_attempt[record.inc] = record
        failed_since.discard(record.inc)
        if why is None:
            continue
        message = f"{what} was called at {_at(record)} in incarnation {record.inc} {why}"
        return [Violation("recovery_once", agent, str(fiber), message, seqs)]
    return []


@invariant("recovery_error_kept")
def recovery_error_kept(context: CheckContext) -> list[Violation]:
    """S1 — a managed fiber whose `on_fiber_recovered` throws stays `interrupted`, with the
    recovery error recorded for later analysis; `resolve_fiber` can still settle it.

    For every managed fiber whose last recovery outcome on its agent is
    `fiber:recovery:failed {error: E}` at t (one that could not have been rolled back), its
    final `cf_agents_fibers` row, if it still exists, is either `interrupted` with
    `error_message` E, or was settled later: `completed_at` after t (a resolution writes it;
    the failed hook does not), or at t by a resolution in that same instant — unless the row is
    exactly what the SDK writes instead (`error` with the hook's error E). A row `interrupted`
    with another error, or settled with no later `completed_at`, breaks the promise.
    """
    out: list[Violation] = []
    for agent in context.paths():
        ledger = {str(row.get("fiber_id")): row for row in context.table(agent, "cf_agents_fibers")}
        last: dict[str, TraceRecord] = {}
        for record in context.records_of(agent, *OUTCOMES):
            last[str(record.get("fiberId"))] = record
        for fiber, outcome in sorted(last.items()):
            row = ledger.get(fiber)
            if (
                row is None
                or outcome.event != "fiber:recovery:failed"
                or not outcome.get("managed")
                or context.may_have_rolled_back(outcome)
            ):
                continue
            error = outcome.get("error")
            status, recorded = row.get("status"), row.get("error_message")
            completed = row.get("completed_at")
            settled_at = int(completed) if completed is not None else None
            if (status == "interrupted" and recorded == error) or (
                settled_at is not None and settled_at > outcome.t_ms
            ):
                continue
            if (
                settled_at == outcome.t_ms
                and status != "interrupted"
                and not (status == "error" and recorded == error)
            ):
                continue  # resolved in the very instant the hook failed (the same request)
            out.append(
                Violation(
                    "recovery_error_kept",
                    agent,
                    fiber,
                    f"managed fiber {fiber} ({row.get('name')}) of {agent} ended {status!r} with "
                    f"error {recorded!r} after its recovery hook threw {error!r} at "
                    f"{_at(outcome)}; it should have stayed 'interrupted' with that error",
                    (outcome.seq,),
                )
            )
    return out


@invariant("recovery_max_age")
def recovery_max_age(context: CheckContext) -> list[Violation]:
    """Fibers §6 — an unmanaged orphan whose recovery hook keeps failing is retried until it is
    older than the agent's `fiber_recovery_max_age_ms`, then dropped: never sooner, and not
    retried forever.

    With M the agent's `fiber_recovery_max_age_ms` (`context.option`):
    1. every `fiber:recovery:skipped {reason: max_age_exceeded, elapsedMs: a}` has M > 0 and
       a > M;
    2. every unmanaged `fiber:recovery:failed` of fiber F at t, in incarnation I, where M > 0 and
       F's age at t is more than M (its creation time is that of F's last
       `fiber:recovery:detected {elapsedMs}` before it in I, minus `elapsedMs`), is followed in
       that instant in I by a `fiber:recovery:skipped {reason: max_age_exceeded}` of F (nothing
       lies between the two: the row is dropped in the turn its hook failed). The first such
       failure of each fiber is reported.
    """
    out: list[Violation] = []
    for agent in context.agents():
        max_age = int(context.option(agent, "fiber_recovery_max_age_ms"))
        limit = f"its fiber_recovery_max_age_ms is {max_age} ms"
        for skip in context.events("fiber:recovery:skipped", agent, reason="max_age_exceeded"):
            age = skip.get("elapsedMs")
            if max_age > 0 and isinstance(age, int | float) and age > max_age:
                continue
            out.append(
                Violation(
                    "recovery_max_age",
                    agent,
                    str(skip.get("fiberId")),
                    f"fiber {skip.get('fiberId')} ({skip.get('fiberName')}) of {agent} was "
                    f"dropped for its age at {_at(skip)} when it was {age} ms old, but {limit}",
                    (skip.seq,),
                )
            )
        if max_age > 0:
            out += _kept_past_max_age(context, agent, max_age)
    return out


def _kept_past_max_age(context: CheckContext, agent: str, max_age: int) -> list[Violation]:
    detected: dict[tuple[int, Any], TraceRecord] = {}
    reported: set[Any] = set()
    out = []
    for record in context.records_of(
        agent, "fiber:recovery:detected", "fiber:recovery:failed", "fiber:recovery:skipped"
    ):
        fiber = record.get("fiberId")
        if record.event == "fiber:recovery:detected":
            detected[(record.inc, fiber)] = record
            continue
        found = detected.get((record.inc, fiber))
        if (
            record.event != "fiber:recovery:failed"
            or record.get("managed")
            or found is None
            or fiber in reported
        ):
            continue
        created = found.t_ms - int(found.get("elapsedMs") or 0)
        if record.t_ms - created <= max_age:
            continue
        dropped = context.events(
            "fiber:recovery:skipped", agent, fiberId=fiber, reason="max_age_exceeded"
        )
        same = (record.t_ms, record.inc)
        if any(d.seq > record.seq and (d.t_ms, d.inc) == same for d in dropped):
            continue
        if context.may_have_rolled_back(record):
            continue
        reported.add(fiber)
        out.append(
            Violation(
                "recovery_max_age",
                agent,
                str(fiber),
                f"the recovery hook of fiber {fiber} ({record.get('fiberName')}) of {agent} "
                f"failed at {_at(record)} when the fiber was {record.t_ms - created} ms old, "
                f"past its fiber_recovery_max_age_ms of {max_age} ms, and the row was kept to be "
                "retried instead of dropped",
                (found.seq, record.seq),
            )
        )
    return out


def _backoff_ms(interval: int, scans: int) -> int:
    return recovery_backoff_ms(interval, scans)


@invariant("recovery_backoff")
def recovery_backoff(context: CheckContext) -> list[Violation]:
    """Fibers §6 — the follow-up recovery alarm backs off only while passes make no progress:
    it is armed `keep_alive_interval_ms` × 2^k after it is computed, capped at 300 s, where k
    counts the recovery passes without progress since the last pass that made progress (or
    found nothing left to recover) in this incarnation.

    Following each agent's `fiber:recovery:pass {progress, scans}` and `fiber:recovery:backoff
    {delayMs}` records, incarnation by incarnation, with k = 0 when it starts:
    1. a pass with progress reports scans 0; a pass without progress reports scans k + 1 (an
       orphan is still pending) or 0 (none is); then k = scans;
    2. every backoff record has delayMs = min(300 s, interval × 2^min(k, 20)).
    The first break in an incarnation is reported; what follows it there is not checked.
    """
    out: list[Violation] = []
    events = ("fiber:recovery:pass", "fiber:recovery:backoff", "incarnation:start")
    for agent in context.agents():
        interval = int(context.option(agent, "keep_alive_interval_ms"))
        scans: dict[int, int] = {}
        broken: set[int] = set()
        for record in context.records_of(agent, *events):
            if record.event == "incarnation:start":
                scans[record.inc] = 0
                broken.discard(record.inc)
                continue
            if record.inc in broken:
                continue
            k = scans.get(record.inc, 0)
            if record.event == "fiber:recovery:pass":
                reported = int(record.get("scans") or 0)
                progress = bool(record.get("progress"))
                if reported == 0 or (not progress and reported == k + 1):
                    scans[record.inc] = reported
                    continue
                what = (
                    f"made progress, but its count of passes without progress went to "
                    f"{reported} instead of back to 0"
                    if progress
                    else f"made no progress after {k} such passes, but counted {reported}"
                )
            else:
                want = _backoff_ms(interval, k)
                if record.get("delayMs") == want:
                    continue
                what = (
                    f"armed its recovery alarm {record.get('delayMs')} ms ahead, where {k} "
                    f"passes without progress make it {want} ms (interval {interval} ms x 2^{k}, "
                    "capped at 300 s)"
                )
            broken.add(record.inc)
            out.append(
                Violation(
                    "recovery_backoff",
                    agent,
                    "",
                    f"a recovery pass of {agent} at {_at(record)} (incarnation {record.inc}) {what}"
                    if record.event == "fiber:recovery:pass"
                    else f"{agent} at {_at(record)} (incarnation {record.inc}) {what}",
                    (record.seq,),
                )
            )
    return out
