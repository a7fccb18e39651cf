"""`stash_replaces_whole` (fibers §5.4, §6.2, the seed): each stash replaces the last snapshot
whole, in the fiber's run row and in a managed fiber's ledger row, and recovery hands the hook
the last snapshot that committed.

It reads the stash convention of `sim.checkers.fibers` — `workload:stashed {fiberId, step}` right
after a stash returned, the snapshot it stashed holding that `step`; `workload:resumed {fiberId,
step}` and `workload:dropped {fiberId, step}` from the recovery hook, with the `step` of the
snapshot it was handed (None for none) — beside the journal of committed turns, each with the
instant it committed (`CheckContext.journal_ms`), replayed statement by statement.

A merge of two snapshots of one shape gives the later one, so with the workloads' stashes, which
keep one shape, a merge shows only as a wrong step; a `workload:stashed` that carried the
stashed keys would let the rule see a merge that kept an old key.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.sqlite import KV_DDL, Write
from sim.trace import TraceRecord, format_sim_time

__all__ = ["stash_replaces_whole"]

RUNS = "cf_agents_runs"
LEDGER = "cf_agents_fibers"
_READS = {
    RUNS: f"SELECT id AS k, snapshot, NULL AS status FROM {RUNS}",
    LEDGER: f"SELECT fiber_id AS k, snapshot, status FROM {LEDGER}",
}
HOOK_RECORDS = ("workload:resumed", "workload:dropped")


@dataclass(frozen=True)
class _Write:
    """One committed statement's change to one row of the run table or the ledger: the row's
    snapshot and status before and after (None: no row), the turn and its commit instant."""

    table: str
    fiber: Any
    turn: int
    ms: int
    before: tuple[Any, Any] | None
    after: tuple[Any, Any] | None

    @property
    def snapshot(self) -> Any:
        return None if self.after is None else self.after[0]

    @property
    def stash(self) -> bool:
        """A write that changed the snapshot of a row that was there before and after."""
        return (
            self.before is not None and self.after is not None and self.before[0] != self.after[0]
        )


def _fiber_writes(turns: Sequence[Sequence[Write]], instants: Sequence[int]) -> Iterator[_Write]:
    """Every change the journal's committed statements make to the run table and the ledger, in
    commit order, statement by statement (both tables read again after each write naming one)."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.execute(KV_DDL)

    def read(table: str) -> dict[Any, tuple[Any, Any]]:
        try:
            return {k: (snapshot, status) for k, snapshot, status in db.execute(_READS[table])}
        except sqlite3.Error:
            return {}

    state: dict[str, dict[Any, tuple[Any, Any]]] = {RUNS: {}, LEDGER: {}}
    try:
        for number, (turn, ms) in enumerate(zip(turns, instants, strict=True), start=1):
            for statement, params in turn:
                try:
                    db.execute(statement, tuple(params))
                except sqlite3.Error:
                    return  # `turns_atomic` reports a journal that does not replay
                text = statement.lower()
                for table in (RUNS, LEDGER):
                    if table not in text:
                        continue
                    now = read(table)
                    for key in sorted({*state[table], *now}, key=repr):
                        old, new = state[table].get(key), now.get(key)
                        if old != new:
                            yield _Write(table, key, number, ms, old, new)
                    state[table] = now
    finally:
        db.close()


def _step(snapshot: Any) -> int | None:
    """The `step` of a snapshot's JSON text (None: no snapshot, or none to read)."""
    try:
        value = json.loads(snapshot) if isinstance(snapshot, str) else None
    except ValueError:
        return None
    step = value.get("step") if isinstance(value, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _current(context: CheckContext, record: TraceRecord) -> bool:
    """The record belongs to the agent's current record, the one its journal describes."""
    return context.life_of(record) == len(context.record_resets(record.agent))


def _fault_at(context: CheckContext, agent: str, ms: int) -> bool:
    return any(f.t_ms == ms for f in context.events("fault:storage_error", agent))


def _lost_stash_reported(context: CheckContext, resume: TraceRecord, stashes: list[Any]) -> bool:
    """`no_lost_stash` reports this resume: it starts before the last stash of its fiber that
    returned and could not have rolled back."""
    kept = [s for s in stashes if s.seq < resume.seq and not context.may_have_rolled_back(s)]
    got, last = resume.get("step"), kept[-1].get("step") if kept else None
    return isinstance(got, int) and isinstance(last, int) and got < last


@invariant("stash_replaces_whole")
def stash_replaces_whole(context: CheckContext) -> list[Violation]:
    """Fibers §5.4, §6.2, the seed — each stash replaces the last snapshot whole, in the fiber's
    run row and, for a managed fiber, in its ledger row, and recovery hands the hook the last
    snapshot that committed.

    Replaying each agent's journal statement by statement (each turn with its commit instant),
    for the agent's current record:
    1. each `workload:stashed {fiberId: F, step: k}` at t that could not have rolled back is
       matched by a committed write at t of F's run row to a snapshot of step k (or the row
       already held one);
    2. each committed change of the snapshot of a run row F that has such records holds the step
       of one of them at that instant, unless a storage fault on the agent in that instant cut a
       stash short after its first write;
    3. a `workload:resumed|dropped {fiberId: F, step: s}` at t reports the step of the last
       snapshot F's run row committed by t (its ledger row's, when it never had a run row); a
       hook handed no snapshot may report any start, and a resume from before a stash
       `no_lost_stash` holds is left to it;
    4. when a committed turn changes the snapshot of a run row F whose ledger row is there at
       the end of the turn, the ledger row holds the same text then, and when a write turns a
       `pending`/`running` ledger row `interrupted` beside its run row, it copies the run row's
       snapshot — unless a storage fault on the agent in that instant failed the ledger's write.
    """
    stashes: dict[tuple[str, Any], list[TraceRecord]] = defaultdict(list)
    for record in context.events("workload:stashed"):
        if _current(context, record):
            stashes[(record.agent, record.get("fiberId"))].append(record)
    hooks = [r for e in HOOK_RECORDS for r in context.events(e) if _current(context, r)]
    out: list[Violation] = []
    for agent in sorted(context.journals):
        turns, instants = context.journals[agent], context.journal_ms.get(agent, ())
        if not turns or len(instants) != len(turns):
            continue
        mine = {f for (a, f) in stashes if a == agent}
        if not mine and not any(r.agent == agent for r in hooks) and not _has_ledger(turns):
            continue
        writes = list(_fiber_writes(turns, instants))
        out += _stashes_landed(context, agent, writes, stashes)
        out += _hooks_handed_last(context, agent, writes, hooks, stashes)
        out += _ledger_mirrors(context, agent, writes)
    return out


def _has_ledger(turns: Sequence[Sequence[Write]]) -> bool:
    return any(
        LEDGER in statement and statement.lstrip()[:6].upper() == "INSERT"
        for turn in turns
        for statement, _ in turn
    )


def _stashes_landed(
    context: CheckContext,
    agent: str,
    writes: list[_Write],
    stashes: dict[tuple[str, Any], list[TraceRecord]],
) -> list[Violation]:
    out: list[Violation] = []
    runs = [w for w in writes if w.table == RUNS]
    for (holder, fiber), records in sorted(stashes.items(), key=lambda item: repr(item[0])):
        if holder != agent:
            continue
        own = [w for w in runs if w.fiber == fiber]
        for record in records:
            step = record.get("step")
            there = [w for w in own if w.ms == record.t_ms and w.stash]
            held = [w for w in own if w.ms < record.t_ms and w.after is not None]
            if any(_step(w.snapshot) == step for w in there):
                continue
            if not there and held and _step(held[-1].snapshot) == step:
                continue
            if context.may_have_rolled_back(record):
                continue
            found = (
                f"the snapshots its run row committed in that instant hold step(s) "
                f"{[_step(w.snapshot) for w in there]}"
                if there
                else "its run row committed no snapshot in that instant"
            )
            out.append(
                Violation(
                    "stash_replaces_whole",
                    agent,
                    str(fiber),
                    f"fiber {fiber} of {agent} stashed step {step!r} at "
                    f"{format_sim_time(record.t_ms)}, but {found}: a stash that returned did "
                    f"not replace the snapshot before it",
                    (record.seq,),
                )
            )
        for write in own:
            if not write.stash:
                continue
            step = _step(write.snapshot)
            if any(r.t_ms == write.ms and r.get("step") == step for r in records):
                continue
            if _fault_at(context, agent, write.ms):
                continue
            out.append(
                Violation(
                    "stash_replaces_whole",
                    agent,
                    str(fiber),
                    f"the run row of fiber {fiber} of {agent} was committed at "
                    f"{format_sim_time(write.ms)} (turn {write.turn}) with a snapshot of step "
                    f"{step!r}, which no stash of the fiber returned in that instant",
                )
            )
    return out


def _last_snapshot(writes: list[_Write], fiber: Any, t_ms: int) -> tuple[bool, Any]:
    """Whether fiber `fiber` had a run row (else a ledger row) committed by `t_ms`, and the
    snapshot that row held last."""
    for table in (RUNS, LEDGER):
        held = [w for w in writes if w.table == table and w.fiber == fiber and w.ms <= t_ms]
        rows = [w for w in held if w.after is not None]
        if rows:
            return True, rows[-1].snapshot
    return False, None


def _hooks_handed_last(
    context: CheckContext,
    agent: str,
    writes: list[_Write],
    hooks: list[TraceRecord],
    stashes: dict[tuple[str, Any], list[TraceRecord]],
) -> list[Violation]:
    out: list[Violation] = []
    for hook in hooks:
        if hook.agent != agent:
            continue
        fiber, got = hook.get("fiberId"), hook.get("step")
        found, snapshot = _last_snapshot(writes, fiber, hook.t_ms)
        if not found or snapshot is None:
            continue
        expected = _step(snapshot)
        if got == expected:
            continue
        if hook.event == "workload:resumed" and _lost_stash_reported(
            context, hook, stashes.get((agent, fiber), [])
        ):
            continue
        out.append(
            Violation(
                "stash_replaces_whole",
                agent,
                str(fiber),
                f"the recovery hook of fiber {fiber} of {agent} reported step {got!r} at "
                f"{format_sim_time(hook.t_ms)} ({hook.event}), but the last snapshot the fiber "
                f"committed by then holds step {expected!r}: recovery did not hand the hook the "
                f"last committed snapshot",
                (hook.seq,),
            )
        )
    return out


def _ledger_mirrors(context: CheckContext, agent: str, writes: list[_Write]) -> list[Violation]:
    out: list[Violation] = []
    runs: dict[Any, tuple[Any, Any]] = {}
    ledger: dict[Any, tuple[Any, Any]] = {}
    stashed: dict[Any, _Write] = {}

    def settle_turn() -> None:
        for fiber, write in sorted(stashed.items(), key=lambda item: repr(item[0])):
            row = ledger.get(fiber)
            if row is None or row[0] == write.snapshot or _fault_at(context, agent, write.ms):
                continue
            out.append(
                _mirror_violation(agent, fiber, write, f"its ledger row holds {_short(row[0])}")
            )
        stashed.clear()

    turn = 0
    for write in writes:
        if write.turn != turn:
            settle_turn()
            turn = write.turn
        if write.table == RUNS:
            if write.stash:
                stashed[write.fiber] = write
            _apply(runs, write)
            continue
        _apply(ledger, write)
        run = runs.get(write.fiber)
        if run is None or not _marked_interrupted(write) or write.snapshot == run[0]:
            continue
        if not _fault_at(context, agent, write.ms):
            out.append(
                Violation(
                    "stash_replaces_whole",
                    agent,
                    str(write.fiber),
                    f"managed fiber {write.fiber} of {agent} was marked interrupted at "
                    f"{format_sim_time(write.ms)} (turn {write.turn}) with the snapshot "
                    f"{_short(write.snapshot)} in its ledger row, while its run row held "
                    f"{_short(run[0])}: recovery must copy the run row's snapshot",
                )
            )
    settle_turn()
    return out


def _marked_interrupted(write: _Write) -> bool:
    """A ledger write that turned a `pending`/`running` row `interrupted` (the scan's mark)."""
    return (
        write.before is not None
        and write.after is not None
        and write.before[1] in ("pending", "running")
        and write.after[1] == "interrupted"
    )


def _apply(rows: dict[Any, tuple[Any, Any]], write: _Write) -> None:
    if write.after is None:
        rows.pop(write.fiber, None)
    else:
        rows[write.fiber] = write.after


def _short(snapshot: Any, width: int = 60) -> str:
    text = "NULL" if snapshot is None else repr(snapshot)
    return text if len(text) <= width else text[: width - 3] + "..."


def _mirror_violation(agent: str, fiber: Any, write: _Write, found: str) -> Violation:
    return Violation(
        "stash_replaces_whole",
        agent,
        str(fiber),
        f"managed fiber {fiber} of {agent} stashed {_short(write.snapshot)} at "
        f"{format_sim_time(write.ms)} (turn {write.turn}), but at the end of that turn {found}: "
        f"a stash replaces the ledger's snapshot too",
    )
