"""Two promises of fibers read from the trace alone: `cancel_aborts_signal` (fibers §5.8, the
seed: `cancelFiber` aborts the signal of a fiber that runs in this isolate, and a callback that
watches its signal stops there) and `recovery_scan_deadline` (fibers §6.7, F-83: a recovery pass
stops at its soft deadline, checked before each row, and only past it).

`cancel_aborts_signal` reads the fibers workload's records (`scenarios/workloads/fibers.py`):
`workload:cancel {name, fiberId, cancelled}` where the workload called `cancel_fiber` on the
current execution `fiberId` of its managed fiber `name`, with the answer; then, from the fiber's
body, which races each step's sleep against its abort signal, `workload:stashed {fiberId, step}`
after each stash, and its end: `workload:fiber_cancelled {name, step}` (it saw the abort and
returned without doing `step`), `workload:fiber_done {name}` or `workload:fiber_failed {name,
step}`. `recovery_scan_deadline` reads the runtime's recovery records: `fiber:recovery:detected`
as a pass takes a row, `fiber:recovery:skipped {reason: scan_deadline_exceeded, elapsedMs}` where
it stops, and the harness's `fiber:recovery:pass` that ends a pass which made progress or left a
no-progress count (every pass that took a row does one or the other).

`stash_replaces_whole` lives in `sim.checkers.stash_snapshots` and `schedule_dedupe_keys` in
`sim.checkers.schedule_keys`, both imported here so that they are registered with these.
"""

from __future__ import annotations

from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.trace import TraceRecord, format_sim_time

__all__ = ["cancel_aborts_signal", "recovery_scan_deadline"]


BODY_ENDS = ("workload:fiber_done", "workload:fiber_failed", "workload:fiber_cancelled")
RUN_ENDS = ("fiber:run:completed", "fiber:run:failed", "fiber:setup_failed")


def _body_record(record: TraceRecord, fiber: Any, name: Any) -> bool:
    """A record of the cancelled execution's body: a stash of `fiber`, or an end of `name`."""
    if record.event == "workload:stashed":
        return bool(record.get("fiberId") == fiber)
    return record.event in BODY_ENDS and record.get("name") == name


def _run_of(context: CheckContext, cancel: TraceRecord) -> tuple[TraceRecord, Any] | None:
    """The `fiber:run:started` of the cancelled fiber in the cancel's incarnation, still running
    at the cancel, and its end record (or None); None when it was not running there."""
    fiber = cancel.get("fiberId")
    runs = context.records_of(cancel.agent, "fiber:run:started", *RUN_ENDS)
    start = None
    for record in runs:
        if record.seq > cancel.seq:
            break
        if record.inc != cancel.inc or record.get("fiberId") != fiber:
            continue
        start = record if record.event == "fiber:run:started" else None
    if start is None:
        return None
    end = next(
        (
            r
            for r in runs
            if r.seq > cancel.seq and r.inc == cancel.inc and r.get("fiberId") == fiber
        ),
        None,
    )
    return start, end


def _shared_name(
    context: CheckContext, cancel: TraceRecord, start: TraceRecord, until: int
) -> bool:
    """Another execution of the fiber's name ran in the incarnation between `start` and `until`
    (seq): the records of the name's ends cannot be told apart then."""
    name, fiber = cancel.get("name"), cancel.get("fiberId")
    others = [
        r
        for r in context.records_of(cancel.agent, "fiber:run:started", *RUN_ENDS)
        if r.inc == cancel.inc and r.get("fiberId") != fiber
    ]
    for other in others:
        if other.event != "fiber:run:started" or other.get("fiberName") != name:
            continue
        if other.seq >= until:
            continue
        ended = any(
            r.seq > other.seq and r.get("fiberId") == other.get("fiberId") and r.seq < start.seq
            for r in others
            if r.event != "fiber:run:started"
        )
        if not ended:
            return True
    return False


def _waiting_since(context: CheckContext, cancel: TraceRecord, start: TraceRecord) -> bool:
    """The body was waiting on its signal at the cancel: its keepAlive lease was taken (the
    last step before the function runs, fibers §5.2) at an earlier instant. A sub-agent's
    fiber leases its root's keepAlive under another holder: its body is not known to wait."""
    holder = f"fiber:{cancel.get('fiberId')}"
    return any(
        start.seq < r.seq < cancel.seq and r.t_ms < cancel.t_ms
        for r in context.events("keep_alive:acquire", cancel.agent, holder=holder)
    )


@invariant("cancel_aborts_signal")
def cancel_aborts_signal(context: CheckContext) -> list[Violation]:
    """Fibers §5.8, the seed — `cancelFiber` of a managed fiber that runs in this isolate
    aborts its `ctx.signal` at once; a callback that watches its signal stops there.

    For every `workload:cancel {name: N, fiberId: F, cancelled: true}` at t, where F runs in the
    cancel's incarnation (its `fiber:run:started` there, with no `fiber:run:completed|failed` or
    `fiber:setup_failed` before the cancel), its body has not ended yet (no
    `workload:fiber_done|fiber_failed|fiber_cancelled` of N since F started) and no other
    execution of N runs beside it: the first record of F's body after the cancel in that
    incarnation (a `workload:stashed` of F, or an end of N), or else the end of F's run (a body
    that raised as it stopped, its record lost to a storage fault), is `workload:fiber_cancelled`
    or that end, at t when the body was already waiting on its signal (its keepAlive lease taken
    at an earlier instant). With neither, the incarnation ended at t, or the run did (no later
    instant, no liveness phase).
    """
    out: list[Violation] = []
    for cancel in context.events("workload:cancel", cancelled=True):
        found = _run_of(context, cancel)
        if found is None:
            continue
        start, end = found
        fiber, name = cancel.get("fiberId"), cancel.get("name")
        body = [
            r
            for r in context.records_of(cancel.agent, "workload:stashed", *BODY_ENDS)
            if r.inc == cancel.inc and r.seq > start.seq and _body_record(r, fiber, name)
        ]
        if any(r.seq < cancel.seq and r.event in BODY_ENDS for r in body):
            continue
        first = next((r for r in body if r.seq > cancel.seq), None)
        until = first.seq if first is not None else end.seq if end is not None else 1 << 62
        if _shared_name(context, cancel, start, until):
            continue
        what = f"managed fiber {fiber} ({name}) of {cancel.agent}"
        said = f"was cancelled at {format_sim_time(cancel.t_ms)} while it ran"
        sign = first if first is not None else end
        if sign is None:
            death = next(
                (e for e in context.incarnation_ends(cancel.agent) if e.inc == cancel.inc), None
            )
            if death is not None and death.t_ms == cancel.t_ms:
                continue
            if death is None and context.end <= cancel.t_ms and not context.liveness_ran:
                continue
            by = (
                f"its incarnation's end ({format_sim_time(death.t_ms)})"
                if death is not None
                else context.end_words()
            )
            problem = f"and its body never stopped on its signal by {by}"
        elif sign.event in ("workload:stashed", "workload:fiber_done", "workload:fiber_failed"):
            did = (
                f"stashed step {sign.get('step')!r}"
                if sign.event == "workload:stashed"
                else "finished"
                if sign.event == "workload:fiber_done"
                else f"failed at step {sign.get('step')!r}"
            )
            problem = (
                f"yet it went on and {did} at {format_sim_time(sign.t_ms)}: its ctx.signal "
                f"was not aborted"
            )
        elif sign.t_ms != cancel.t_ms and _waiting_since(context, cancel, start):
            stopped = (
                f"saw the abort only at {format_sim_time(sign.t_ms)} (step {sign.get('step')!r})"
                if sign.event == "workload:fiber_cancelled"
                else f"ran on until its run ended at {format_sim_time(sign.t_ms)}"
            )
            problem = f"yet its body, waiting on its signal, {stopped}"
        else:
            continue
        seqs = tuple(r.seq for r in (cancel, sign) if r is not None)
        out.append(
            Violation(
                "cancel_aborts_signal", cancel.agent, str(fiber), f"{what} {said}, {problem}", seqs
            )
        )
    return out


DEADLINE_SKIP = "scan_deadline_exceeded"
PASS_EVENTS = (
    "fiber:recovery:detected",
    "fiber:recovery:skipped",
    "fiber:recovery:pass",
    "incarnation:end",
)


def _passes(context: CheckContext, agent: str) -> list[list[TraceRecord]]:
    """The agent's recovery passes, each as its `fiber:recovery:detected` records and deadline
    skips in order: a pass ends with its `fiber:recovery:pass`, or with its incarnation."""
    passes: list[list[TraceRecord]] = []
    current: list[TraceRecord] = []
    for record in context.records_of(agent, *PASS_EVENTS):
        if record.event == "fiber:recovery:skipped" and record.get("reason") != DEADLINE_SKIP:
            continue
        life = (context.life_of(record), record.inc)
        if current and life != (context.life_of(current[0]), current[0].inc):
            passes.append(current)
            current = []
        if record.event in ("fiber:recovery:pass", "incarnation:end"):
            if current:
                passes.append(current)
            current = []
            continue
        current.append(record)
    if current:
        passes.append(current)
    return passes


@invariant("recovery_scan_deadline")
def recovery_scan_deadline(context: CheckContext) -> list[Violation]:
    """Fibers §6.7, F-83 — a recovery pass has a soft deadline, `fiber_recovery_scan_deadline_ms`
    (<= 0 disables it), checked with a strict `>` before each row: the first row is always
    taken, a row is taken only while the pass is within its deadline, and past it the pass stops
    at the next row with one `scan_deadline_exceeded` skip (the ledger-only loop may add one
    more, `managed: true`).

    Per agent and incarnation, each pass (its `fiber:recovery:detected` records and deadline
    skips, up to its `fiber:recovery:pass` or the end of the incarnation) began at its first
    record's instant T0. With the deadline D > 0: every `detected` comes at most D ms after T0 and
    before any deadline skip of the pass; every deadline skip has `elapsedMs` equal to its time
    minus T0, and greater than D; a pass has at most one skip without `managed` and one with
    `managed: true`, in that order. With D <= 0 there is no deadline skip at all.
    """
    out: list[Violation] = []
    for agent in context.agents():
        deadline = context.option(agent, "fiber_recovery_scan_deadline_ms")
        if not isinstance(deadline, int | float):
            continue
        for records in _passes(context, agent):
            found = _pass_problem(records, deadline)
            if found is not None:
                record, problem = found
                out.append(
                    Violation(
                        "recovery_scan_deadline",
                        agent,
                        str(record.get("fiberId")),
                        f"the recovery pass of {agent} that began at "
                        f"{format_sim_time(records[0].t_ms)} (incarnation {record.inc}) "
                        f"{problem}",
                        (records[0].seq, record.seq),
                    )
                )
    return out


def _pass_problem(records: list[TraceRecord], deadline: float) -> tuple[TraceRecord, str] | None:
    """The first record of one pass that breaks the deadline rule, with what it did."""
    start = records[0].t_ms
    skips: list[TraceRecord] = []
    for record in records:
        fiber = f"fiber {record.get('fiberId')} ({record.get('fiberName')})"
        at = format_sim_time(record.t_ms)
        if record.event == "fiber:recovery:detected":
            if skips:
                return record, f"took {fiber} at {at}, after it stopped at its deadline"
            if deadline > 0 and record.t_ms - start > deadline:
                return record, (
                    f"took {fiber} at {at}, {record.t_ms - start} ms in, past its "
                    f"{deadline} ms deadline: it should have stopped there"
                )
            continue
        elapsed = record.get("elapsedMs")
        if deadline <= 0:
            return record, (
                f"stopped at {fiber} at {at} for its deadline, which is disabled ({deadline})"
            )
        if elapsed != record.t_ms - start:
            return record, (
                f"stopped at {fiber} at {at} reporting elapsedMs {elapsed!r}, where "
                f"{record.t_ms - start} ms had passed"
            )
        if elapsed <= deadline:
            return record, (
                f"stopped at {fiber} at {at}, {elapsed} ms in, before its {deadline} ms "
                f"deadline had passed"
            )
        managed = [bool(s.get("managed")) for s in (*skips, record)]
        if managed not in ([False], [True], [False, True]):
            return record, f"stopped at {fiber} at {at} for its deadline a second time"
        skips.append(record)
    return None
