"""`memory_limit_breaker`: the alarm's memory-limit circuit breaker counts and backs off as
fibers §4.6 says.

When an alarm ends in a memory-limit reset (a one-shot callback whose last attempt failed with
one, §4.3 (c)), the breaker adds one to the durable strike count in KV
(`cf_agents:oom_alarm_strikes`). Below `maxAlarmMemoryLimitStrikes` it pushes the executing row
to `now_s + min(300, 30 × strikes)`; at the budget it deletes that row and the count instead. A
clean alarm clears the count.

Read from the journal of the agent's committed turns (with the instant each committed), three
rules hold for every committed write of the strike count:
1. it is one more than the count committed before it (none, or a delete, counts 0);
2. a count at the agent's strike budget is deleted in the turn that wrote it (the seal): no
   turn ends with a count at the budget;
3. a one-shot row (`delayed` or `scheduled`) whose time the same turn changes moves to exactly
   the turn's second plus `min(300, 30 × strikes)`.

A write that failed on storage is not in the journal, and the rules read only what committed, so
a storage fault excuses itself (a lost put leaves the old count, and the next strike counts from
it). The rules are 0.21.0's `cf_agents_schedules`; on 0.32.0 the rows are jobs and the breaker's
hand-back is not modelled yet (`docs/not-built-yet.md`), so a 0.32.0 run is not judged.
"""

from __future__ import annotations

from collections import defaultdict

from sim.checkers.core import CheckContext, Violation
from sim.checkers.models.spec_constants import OOM_ALARM_STRIKES_KEY, memory_limit_backoff_s
from sim.checkers.registry import invariant
from sim.checkers.storage import RowChange, kv_writes, row_changes
from sim.trace import format_sim_time

__all__ = ["memory_limit_breaker"]

SCHEDULES = "cf_agents_schedules"
ONE_SHOTS = ("delayed", "scheduled")
NAME = "memory_limit_breaker"


@invariant(NAME)
def memory_limit_breaker(context: CheckContext) -> list[Violation]:
    """Fibers §4.6 — the strike count grows by one per reset, stays below the budget, and
    each strike backs the executing one-shot off by `min(300, 30 × strikes)` seconds (see the
    module docstring)."""
    if context.release not in (None, "0.21.0"):
        return []
    found: list[Violation] = []
    for path in sorted(context.journals):
        turns = context.journals[path]
        writes = [
            w for w in kv_writes(turns, OOM_ALARM_STRIKES_KEY) if w.key == OOM_ALARM_STRIKES_KEY
        ]
        if not writes:
            continue
        instants = context.journal_ms.get(path, ())
        limit = int(context.option(path, "max_alarm_memory_limit_strikes"))
        moved: dict[int, list[RowChange]] = defaultdict(list)
        for change in row_changes(turns, SCHEDULES, "id"):
            if (
                change.before is not None
                and change.after is not None
                and change.value("type") in ONE_SHOTS
                and change.value("time", "before") != change.value("time")
            ):
                moved[change.turn].append(change)
        prior = 0
        for write in writes:
            if write.value is None:
                prior = 0
                continue
            strikes = write.value
            when = (
                format_sim_time(instants[write.turn - 1])
                if write.turn <= len(instants)
                else f"committed turn {write.turn}"
            )
            if not isinstance(strikes, int) or isinstance(strikes, bool):
                found.append(
                    _violation(
                        path, f"at {when} stored the strike count {strikes!r}, not a whole number"
                    )
                )
                continue
            if strikes != prior + 1:
                found.append(
                    _violation(
                        path,
                        f"at {when} stored the memory-limit strike count {strikes} when the count "
                        f"committed before it was {prior}: each reset adds one",
                    )
                )
            last_of_turn = [w for w in writes if w.turn == write.turn][-1]
            if strikes >= limit and last_of_turn.value is not None:
                found.append(
                    _violation(
                        path,
                        f"at {when} kept the memory-limit strike count {strikes} with a budget "
                        f"of {limit} strikes: at the budget the breaker deletes the executing row "
                        "and the count instead of backing off",
                    )
                )
            if write.turn <= len(instants):
                due = instants[write.turn - 1] // 1000 + memory_limit_backoff_s(strikes)
                for change in moved.get(write.turn, []):
                    if change.value("time") != due:
                        found.append(
                            _violation(
                                path,
                                f"at {when}, strike {strikes} moved {change.value('type')} "
                                f"schedule {change.key} from second "
                                f"{change.value('time', 'before')} to {change.value('time')}; "
                                f"the breaker backs it off to second {due} "
                                f"(now + {memory_limit_backoff_s(strikes)} s)",
                            )
                        )
            prior = strikes
    return found


def _violation(path: str, sentence: str) -> Violation:
    return Violation(NAME, path, "", f"agent {path} {sentence}")
