"""Crash points: where a base run can die or fail, each as one `arm_storage_fault` step, in strata.

A base run records every statement agent code ran (`run_scenario(record_statements=True)`).
Each statement is a point where the process can die just before it (`kind: crash`: the turn's
earlier writes roll back) and where the statement itself can fail (`kind: error`: a storage
error raised into the code that ran it, whose error path is as much a recovery path as a
death), and each turn that wrote on an agent's storage is a point where it can die at the
instant after its commit (`kind: crash-after-commit` on the turn's last write).
A point is written as one step put just before the base step the statement ran in, with no `at:`
so the timeline stays the base run's (after the last step for the liveness phase): the agent
(`alias/name/...` for a sub-agent), the statement's shape as an anchored pattern
(`statement_shapes.shape_pattern`) and `skip`, how many statements of that agent matching it
ran between that step's start and the target. Points that die the same way at the same instant
(agent, shape, kind, place in the turn) are one point. A budget is spent in strata: points are
grouped by (agent role, kind, shape, the code that issued it; an incarnation's schema statements
are one group, see `statement_shapes.fault_group`) and taken round-robin, writes before reads
and the rarest first, each group's in spread order (first, last, middle, ...), so every table and
statement kind is crashed on before any is crashed on twice. Whether a point lands where it
should is checked on its run (`landed`): a point whose fault fired elsewhere, or never, is set
aside rather than reported.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scenarios.hunt.emit import InsertedStep
from scenarios.hunt.fault_draws import CodeSite, fault_place
from scenarios.hunt.statement_shapes import shape_pattern, statement_shape
from scenarios.run.runner import ExecutedStatement, ScenarioResult
from sim.sqlite import StorageFault, is_write
from sim.trace import format_sim_time

__all__ = ["NOTE", "CrashPoint", "all_points", "choose", "fault_records", "landed", "spread"]

NOTE = "inserted by agentsim explore"
CRASH_EVENTS = {
    "crash": "fault:crash",
    "crash-after-commit": "fault:crash_after_commit",
    "error": "fault:storage_error",
}
"""The trace record a crash point's fault leaves when it fires."""
_FAULTS = ("fault:crash", "fault:crash_after_commit", "fault:storage_error")
_KIND_ORDER = {"crash": 0, "error": 1, "crash-after-commit": 2}


@dataclass(frozen=True)
class CrashPoint:
    """One place to die: `kind` at base statement number `index` (`statement`), armed by a step
    before base step `before` on `agent` (the target as a step writes it) with `match` and
    `skip`."""

    kind: str
    index: int
    statement: ExecutedStatement
    before: int
    agent: str
    match: str
    skip: int
    position: int
    """The statement's place among its agent's statements in its turn (0: the first)."""

    @property
    def shape(self) -> tuple[str, str]:
        return statement_shape(self.statement.statement)

    @property
    def role(self) -> str:
        """The agent's classes, outermost first (`Parent/ScriptedToolChild`): what strata use,
        so ten children of one class are one stratum."""
        return "/".join(self.statement.agent.split("/")[0::2])

    def step(self, number: int | None = None) -> InsertedStep:
        args = {"agent": self.agent, "kind": self.kind, "match": self.match, "skip": self.skip}
        note = NOTE if number is None else f"{NOTE}: crash point {number}"
        return InsertedStep(self.before, None, "arm_storage_fault", args, note)

    def describe(self) -> str:
        """`crash just before UPDATE cf_agents_runs SET ... on Worker/w at 00:01:00.000 (turn
        12, statement 2 of the turn)`."""
        text = " ".join(self.statement.statement.split())
        text = text if len(text) <= 90 else text[:87] + "..."
        where = (
            f"on {self.statement.agent} at {format_sim_time(self.statement.t_ms)} "
            f"(turn {self.statement.turn}, statement {self.position + 1} of the turn)"
        )
        if self.kind == "crash":
            return f"crash just before `{text}` {where}"
        if self.kind == "error":
            return f"storage error on `{text}` {where}"
        return f"crash right after the commit of the turn whose last write is `{text}` {where}"


def _target(path: str) -> str | None:
    """`Parent/parent/Child/r1` -> `parent/r1`: how a step names the agent at `path`."""
    parts = path.split("/")
    if len(parts) % 2:
        return None
    return "/".join(parts[1::2])


def all_points(statements: Sequence[ExecutedStatement]) -> list[CrashPoint]:
    """Every crash point of a base run whose `statements` were recorded, one per (kind,
    instant, agent, shape, place in the turn), in base-run order."""
    points: list[CrashPoint] = []
    seen: set[tuple[object, ...]] = set()
    position: dict[tuple[int, str], int] = {}
    last_write: dict[tuple[int, str], int] = {}
    for index, statement in enumerate(statements):
        key = (statement.turn, statement.agent)
        position[key] = position.get(key, -1) + 1
        if is_write(statement.statement):
            last_write[key] = index
        points.append(_point("crash", index, statement, position[key], statements))
        points.append(_point("error", index, statement, position[key], statements))
    for key, index in sorted(last_write.items(), key=lambda item: item[1]):
        statement = statements[index]
        turn_position = sum(1 for s in statements[:index] if (s.turn, s.agent) == key)
        points.append(_point("crash-after-commit", index, statement, turn_position, statements))
    out = []
    for point in sorted(points, key=lambda p: (p.index, _KIND_ORDER[p.kind])):
        if not point.agent:
            continue
        dedupe = (
            point.kind,
            point.statement.t_ms,
            point.statement.agent,
            point.shape,
            point.position,
        )
        if dedupe in seen:
            continue
        seen.add(dedupe)
        out.append(point)
    return out


def _point(
    kind: str,
    index: int,
    statement: ExecutedStatement,
    position: int,
    statements: Sequence[ExecutedStatement],
) -> CrashPoint:
    match = shape_pattern(statement.statement)
    fault = StorageFault("error", match=match)
    skip = sum(
        1
        for earlier in statements[:index]
        if earlier.step == statement.step
        and earlier.agent == statement.agent
        and fault.matches(earlier.statement)
    )
    return CrashPoint(
        kind=kind,
        index=index,
        statement=statement,
        before=statement.step,
        agent=_target(statement.agent) or "",
        match=match,
        skip=skip,
        position=position,
    )


def spread(count: int) -> list[int]:
    """0..count-1 in spread order: first, last, then midpoints, coarse to fine."""
    if count <= 0:
        return []
    order = [0] + ([count - 1] if count > 1 else [])
    spans = deque([(0, count - 1)])
    while spans:
        low, high = spans.popleft()
        if high - low < 2:
            continue
        middle = (low + high) // 2
        order.append(middle)
        spans.extend(((low, middle), (middle, high)))
    return order


Stratum = tuple[str, str, tuple[str, str], CodeSite]


def strata(points: Iterable[CrashPoint]) -> dict[Stratum, list[CrashPoint]]:
    """Points by (agent role, kind, fault group, code site: `fault_draws.fault_place`, as
    fuzz groups its sites), in the order each stratum first occurs. The code site tells apart
    one shape issued by different code, such as the DELETE of a recovered run row and the
    DELETE of a finished fiber's."""
    groups: dict[Stratum, list[CrashPoint]] = {}
    for point in points:
        place = fault_place(point.statement.statement, point.statement.site)
        groups.setdefault((point.role, point.kind, *place), []).append(point)
    return groups


def choose(points: Sequence[CrashPoint], budget: int) -> list[CrashPoint]:
    """At most `budget` points: round-robin over the strata, each stratum's points in spread
    order; returned in base-run order. The strata of writes go first (a death before a write,
    or after its commit, is where what was durable and what was lost part ways; one before a
    read dies as one before the turn's next write would), then those of reads; within each,
    the rarest first (fewest points, then first to occur: a statement that ran once, such as a
    finished fiber's cleanup, is a rare path a small budget must still reach)."""

    def order(group: list[CrashPoint]) -> tuple[bool, int]:
        return not is_write(group[0].statement.statement), len(group)

    groups = sorted(strata(points).values(), key=order)  # stable: first occurrence breaks ties
    queues = [deque(group[i] for i in spread(len(group))) for group in groups]
    chosen: list[CrashPoint] = []
    while len(chosen) < budget and any(queues):
        for queue in queues:
            if queue and len(chosen) < budget:
                chosen.append(queue.popleft())
    return sorted(chosen, key=lambda p: (p.index, _KIND_ORDER[p.kind]))


# -- did it land? ------------------------------------------------------------------------------
def fault_records(result: ScenarioResult) -> list[tuple[int, str, str, str]]:
    """(time, agent, event, statement) of every storage fault that fired in a run."""
    return [
        (record.t_ms, record.agent, record.event, str(record.get("statement")))
        for record in result.trace
        if record.event in _FAULTS
    ]


def landed(point: CrashPoint, base: ScenarioResult, run: ScenarioResult) -> bool:
    """Whether the first fault that fired in `run` and not in `base` is the point's: its kind,
    on its agent, at its time, on its statement."""
    before, after = fault_records(base), fault_records(run)
    first = next(
        (mine for i, mine in enumerate(after) if i >= len(before) or mine != before[i]), None
    )
    expected = (
        point.statement.t_ms,
        point.statement.agent,
        CRASH_EVENTS[point.kind],
        " ".join(point.statement.statement.split())[:200],
    )
    return first == expected
