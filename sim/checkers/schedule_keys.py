"""`schedule_dedupe_keys` (fibers §4.1, §4.2, F-19-F-21, F-24; sdk-0.32 §3.2): an idempotent
`schedule()` or `scheduleEvery()` answers with the row of its own dedupe key — type, callback,
payload, the cron expression or the interval, within its owner — and never stores a second one.

It reads the schedules workload (`scenarios/workloads/schedules.py`): every schedule it creates
calls `workload_tick` with the payload `{"name": <its name>}`, and after each `schedule()` it
writes `workload:scheduled {name, scheduleId, kind}` with the id it was answered and the kind it
asked for. Its creates are idempotent (an `every` always; a cron by the runtime's default; a
one-shot by the workload's own), except those of a plan that says `idempotent: false`, which
writes `workload:duplicates_allowed {name, kind}` before each: such a name's one-shot and cron
keys may be stored twice. The rows come from each holder's journal of committed turns and its
final storage, as each release keeps them (`cf_agents_schedules`, or the `scheduler` jobs of
`cf_agents_jobs`, whose payload is a timing envelope with the user's payload inside).
"""

from __future__ import annotations

import json
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.models.spec_constants import schedule_dedupe_key
from sim.checkers.registry import invariant
from sim.checkers.schedule_store import (
    JOBS_TABLE,
    SCHEDULES_ON_JOBS,
    SCHEDULES_TABLE,
    schedule_of_job,
)
from sim.checkers.storage import inserted_rows, row_changes
from sim.trace import format_sim_time

__all__ = ["schedule_dedupe_keys"]

CALLBACK = "workload_tick"
"""The schedules workload's one callback."""


def _row(stored: dict[str, Any], on_jobs: bool) -> dict[str, Any] | None:
    """A stored schedule in 0.21.0's row shape, its `payload` the user's payload as JSON text;
    None for a job that is not a schedule."""
    if not on_jobs:
        return stored
    row = schedule_of_job(stored)
    if row is None:
        return None
    try:
        envelope = json.loads(stored.get("payload") or "null")
    except ValueError:
        envelope = None
    given = envelope.get("payload") if isinstance(envelope, dict) else None
    return {**row, "payload": None if given is None else json.dumps(given)}


def _payload(row: dict[str, Any]) -> Any:
    try:
        return json.loads(row["payload"]) if isinstance(row.get("payload"), str) else None
    except ValueError:
        return None


def _interval(row: dict[str, Any]) -> int | None:
    seconds = row.get("intervalSeconds")
    return None if seconds is None else int(seconds)


def _rows_by_id(context: CheckContext, on_jobs: bool) -> dict[str, dict[str, Any]]:
    """Schedule id -> its row as last known: stored at the end, else inserted by a journal."""
    table = JOBS_TABLE if on_jobs else SCHEDULES_TABLE
    rows: dict[str, dict[str, Any]] = {}
    for path in sorted(context.journals):
        for stored in inserted_rows(context.journals[path], table):
            row = _row(stored, on_jobs)
            if row is not None:
                rows[str(row.get("id"))] = row
    for path in context.paths():
        for kept in context.table(path, table):
            found = _row(dict(kept), on_jobs)
            if found is not None:
                rows[str(found.get("id"))] = found
    return rows


@invariant("schedule_dedupe_keys")
def schedule_dedupe_keys(context: CheckContext) -> list[Violation]:
    """Fibers §4.1, §4.2 (F-19-F-21, F-24) — an idempotent schedule answers with the row of its
    own dedupe key, and one key of one owner is stored once.

    1. Every `workload:scheduled {name: N, scheduleId: S, kind: K}` names a row (stored, or
       inserted by a committed turn) of type K, callback `workload_tick` and payload
       `{"name": N}`, and, when the record says `every: E` (an `every_again`), of interval E
       seconds: a dedupe never answers with a row of another key.
    2. Replaying each holder's journal of schedule rows: no committed write leaves two rows
       calling `workload_tick` with one dedupe key (`schedule_dedupe_key`: type, callback,
       payload, the interval or cron expression, owner) — the workload's creates are idempotent,
       so a second one is a dedupe missed — but for the one-shot and cron keys of a name some
       agent allowed duplicates of (`workload:duplicates_allowed`). A deleted row frees its key.
    """
    on_jobs = context.release in SCHEDULES_ON_JOBS
    out: list[Violation] = []
    rows = _rows_by_id(context, on_jobs)
    seen: set[tuple[str, str, Any, Any, Any]] = set()
    for record in context.events("workload:scheduled"):
        schedule_id, name, kind = (
            str(record.get("scheduleId")),
            record.get("name"),
            record.get("kind"),
        )
        row = rows.get(schedule_id)
        said = (record.agent, schedule_id, name, kind, record.get("every"))
        if row is None or said in seen:
            continue
        seen.add(said)
        got = (row.get("type"), row.get("callback"), _payload(row))
        every = record.get("every")
        interval = _interval(row)
        if got == (kind, CALLBACK, {"name": name}) and every in (None, interval):
            continue
        asked = "" if every is None else f", every {every} s"
        answered = "" if every is None else f", interval {interval} s"
        out.append(
            Violation(
                "schedule_dedupe_keys",
                record.agent,
                schedule_id,
                f"{record.agent} asked at {format_sim_time(record.t_ms)} for its {kind} schedule "
                f"{name!r} (callback {CALLBACK}, payload {{'name': {name!r}}}{asked}) and was "
                f"answered schedule {schedule_id}, a row of type {got[0]}, callback {got[1]} "
                f"and payload {got[2]!r}{answered}: a dedupe answered with a row of another key",
                (record.seq,),
            )
        )
    allowed = {r.get("name") for r in context.events("workload:duplicates_allowed")}
    for path in sorted(context.journals):
        out += _keys_once(context.journals[path], path, on_jobs, allowed)
    return out


def _keys_once(journal: Any, path: str, on_jobs: bool, allowed: set[Any]) -> list[Violation]:
    table = JOBS_TABLE if on_jobs else SCHEDULES_TABLE
    holder: dict[Any, Any] = {}
    for change in row_changes(journal, table, "id"):
        before = None if change.before is None else _row(dict(change.before), on_jobs)
        after = None if change.after is None else _row(dict(change.after), on_jobs)
        if before is not None:
            key = _key(before, allowed)
            if key is not None and holder.get(key) == change.key:
                del holder[key]
        if after is None:
            continue
        key = _key(after, allowed)
        if key is None:
            continue
        other = holder.get(key)
        if other is not None and other != change.key:
            owner = after.get("owner_path_key") or "its holder"
            kind = after.get("type")
            timing = (
                f"every {after.get('intervalSeconds')} s"
                if kind == "interval"
                else f"on {after.get('cron')!r}"
                if kind == "cron"
                else "once"
            )
            call = "scheduleEvery" if kind == "interval" else "schedule"
            return [
                Violation(
                    "schedule_dedupe_keys",
                    path,
                    str(change.key),
                    f"{kind} schedule {change.key} of {owner} (stored by {path}) was written "
                    f"{timing} with payload {after.get('payload')} while schedule {other} of the "
                    f"same owner held that key (committed turn {change.turn}): an idempotent "
                    f"{call} stored its key twice",
                )
            ]
        holder[key] = change.key
    return []


def _key(row: dict[str, Any], allowed: set[Any]) -> tuple[Any, ...] | None:
    """The row's dedupe key when its create was idempotent; None for a row of another callback,
    or a one-shot or cron of a name whose duplicates a plan allowed."""
    if row.get("callback") != CALLBACK:
        return None
    if row.get("type") != "interval":
        payload = _payload(row)
        if not isinstance(payload, dict) or payload.get("name") in allowed:
            return None
    return schedule_dedupe_key(row)
