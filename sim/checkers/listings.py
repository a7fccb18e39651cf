"""`listings_match`: the management API lists and deletes what the spec says (fibers §5.8
`listFibers` / `deleteFibers`, §4.5 `listSchedules`).

The workloads' `listing` and `forget` calls read the tables themselves in the same synchronous
stretch as the runtime's call and write one record with both answers: `workload:listed {api,
args, got, expected}` (the spec model's answer, `sim.checkers.models.listings`; a `start_fiber`
under an explicit fiber id writes one too, its answer or `{"refused": true}`) and
`workload:deleted {api, args, got, gone, count, required, allowed}` (what the call returned, the
ids that went, and the model's count, the ids it must take and those it may take). This checker
holds the two answers against each other.
"""

from __future__ import annotations

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.trace import TraceRecord, format_sim_time

__all__ = ["listings_match"]


def _call(api: object, args: object) -> str:
    shown = ", ".join(
        f"{k}={v!r}" for k, v in (args.items() if isinstance(args, dict) else ()) if v is not None
    )
    return f"{api}({shown})"


def _wrong(record: TraceRecord, what: str) -> Violation:
    """The violation of one listing record: the call, where and when, then `what` went wrong."""
    return Violation(
        "listings_match",
        record.agent,
        "",
        f"{_call(record.get('api'), record.get('args'))} on {record.agent} at "
        f"{format_sim_time(record.t_ms)}{what}",
        (record.seq,),
    )


@invariant("listings_match")
def listings_match(context: CheckContext) -> list[Violation]:
    """Fibers §5.8, §5.5, §4.5 — listFibers, deleteFibers, listSchedules and startFiber under an
    explicit id answer as the spec's model does over the same rows (see the module docstring)."""
    out: list[Violation] = []
    for record in context.events("workload:listed"):
        got, expected = record.get("got"), record.get("expected")
        if got != expected:
            out.append(
                _wrong(
                    record, f" answered {got}; the spec's answer over the same rows is {expected}"
                )
            )
    for record in context.events("workload:deleted"):
        gone = set(record.get("gone") or ())
        required, allowed = set(record.get("required") or ()), set(record.get("allowed") or ())
        count, got = record.get("count"), record.get("got")
        wrong = []
        if got != count or len(gone) != count:
            wrong.append(f"it deleted {len(gone)} row(s) and answered {got}, where {count} go")
        if required - gone:
            wrong.append(f"it kept {sorted(required - gone)}")
        if gone - allowed:
            wrong.append(f"it deleted {sorted(gone - allowed)}")
        if wrong:
            out.append(_wrong(record, f": {'; '.join(wrong)} (by the spec, over the same rows)"))
    return out
