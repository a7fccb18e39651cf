"""`legacy_schedules_moved`: an upgrade to 0.32.0 moves every legacy schedule into the job queue
(sdk-0.32 §6.3, J-71, J-73, J-74): the Scheduler's first start on an older release's storage
pushes each row of `cf_agents_schedules` as a job and drops the table, and only then stores its
schema version (`cf_agents:schedules_schema_version`), so that a start the move does not finish
moves the rest next time. A row left in the legacy table after a start that finished is a
schedule 0.32.0 never fires again and never lists.

Read from the trace (the deploy that brought 0.32.0, each agent's `startup:done`, how its
incarnations ended) and the final storage, never from the runtime.
"""

from __future__ import annotations

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.trace import format_sim_time

__all__ = ["legacy_schedules_moved"]

NEWER = "0.32.0"
LEGACY = "cf_agents_schedules"


@invariant("legacy_schedules_moved")
def legacy_schedules_moved(context: CheckContext) -> list[Violation]:
    """Sdk-0.32 §6.3, J-71 — once an agent's startup finished (`startup:done`) after the deploy
    that brought 0.32.0, its storage keeps no row of the legacy `cf_agents_schedules` table.
    Not judged: an agent whose incarnation crashed after that startup (a crash may roll back the
    turn the move was in, and its next startup moves the rows again), and a run that never
    upgraded to 0.32.0."""
    upgrades = [r for r in context.events("platform:deploy") if r.get("sdk") == NEWER]
    if not upgrades:
        return []
    since = upgrades[-1].seq
    out: list[Violation] = []
    for agent in context.agents():
        left = context.table(agent, LEGACY)
        if not left:
            continue
        records = [
            r for r in context.records_of(agent, "startup:done", "incarnation:end") if r.seq > since
        ]
        done = [r for r in records if r.event == "startup:done"]
        if not done:
            continue
        last = done[-1]
        if any(
            r.event == "incarnation:end" and r.get("reason") == "crash" and r.seq > last.seq
            for r in records
        ):
            continue
        ids = sorted(str(row.get("id")) for row in left)
        out.append(
            Violation(
                "legacy_schedules_moved",
                agent,
                ids[0],
                f"{agent}'s startup on {NEWER} finished at {format_sim_time(last.t_ms)}, yet "
                f"{len(ids)} legacy schedule(s) are left in {LEGACY} ({', '.join(ids[:5])}): "
                "the first start after the upgrade moves every row into the job queue and drops "
                "the table before it stores its schema version",
                (upgrades[-1].seq, last.seq),
            )
        )
    return out
