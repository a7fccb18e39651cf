"""A reference model of the registries an agent keeps: what its schedule rows, its fiber run rows
and managed ledger, its sub-agent registry and its agent-tool runs should hold after each call
and each stretch of time. Written from the spec alone (fibers §2-§6, agent-tools §1.5, §2.4,
§4.5-§4.7, §8.1), never from the runtime's code; it imports nothing but the cron model.

The model is fed what a driver did (`schedule`, `cancel_schedule`, `start_fiber`, `evict`, ...)
and when time moved (`advance`), answers what each call should have answered, and `compare`s
itself with the committed tables read back from storage, giving one sentence per difference.

What the spec leaves to timing the model cannot see, it accepts either way until a bound:
- an orphaned fiber of a sub-agent is recovered at the sub-agent's next startup or its root's
  next alarm housekeeping (fibers §6.1); until `ORPHAN_WINDOW_MS` after the death the table may
  show it before or after recovery, and the model adopts the recovery once the table shows it;
- a detached agent-tool run is settled by its warm path or a reconcile tick (agent-tools §4.5);
  the model asks only that it is hard terminal `TOOL_SETTLE_MS` after its child finished and
  that a hard terminal status never changes (§1.5).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from sim.checkers.models.cron import next_cron_due_ms

__all__ = [
    "DEFAULT_DELETE_STATUSES",
    "HARD_TERMINAL",
    "ORPHAN_WINDOW_MS",
    "TERMINAL",
    "TOOL_SETTLE_MS",
    "ModelFiber",
    "ModelSchedule",
    "ModelToolRun",
    "RegistriesModel",
    "owner_key",
]

TERMINAL = frozenset({"completed", "aborted", "interrupted", "error"})
"""fibers §5.1: `interrupted` counts as terminal everywhere."""
HARD_TERMINAL = frozenset({"completed", "error", "aborted"})
"""agent-tools §1.5: immutable once written."""
DEFAULT_DELETE_STATUSES = ("completed", "aborted", "error")
"""fibers §5.8: `deleteFibers` deletes these by default, never `interrupted` unless asked."""
DEFAULT_IDEMPOTENT = {"delayed": False, "scheduled": False, "cron": True, "interval": True}
"""fibers §4.1-§4.2: cron and interval rows dedupe by default, one-shots do not."""
ONE_SHOTS = ("delayed", "scheduled")
ORPHAN_WINDOW_MS = 60_000
"""Two heartbeats (fibers §3.2, 30 s) past a death: by then the root's alarm housekeeping has
scanned every facet with a fiber lease (§3.3 step 5, §6.9)."""
TOOL_SETTLE_MS = 300_000
"""Past the backbone's longest cadence (agent-tools §4.5, 120 s) and a re-attach's no-progress
budget (§7.4, 120 s): a run whose child finished is hard terminal by then."""
DELETE_LIMIT = (1, 500, 100)
"""fibers §5.8: `deleteFibers` limit, clamped to [1, 500], 100 by default."""
RECONCILE_TICK = "_cfDetachedReconcileTick"
"""agent-tools §1.3, §4.5: the one schedule row the runtime writes itself (keepAlive writes
none, fibers §3.1, §4.5): every other row is one the model made."""
SETUP_COLLISION = "UNIQUE constraint failed"
"""fibers §5.5: a run-row collision before the callback settles the row `error` with this."""


def owner_key(steps: Sequence[tuple[str, str]]) -> str:
    """fibers §2.1: `encodeURIComponent(className):encodeURIComponent(name)` joined by `/`,
    root first."""
    return "/".join(f"{quote(cls, safe='')}:{quote(name, safe='')}" for cls, name in steps)


@dataclass
class ModelSchedule:
    """One row of `cf_agents_schedules` the model expects (fibers §2.1)."""

    id: str
    type: str
    owner: str | None
    payload: str | None
    value: Any
    """The delay, date (seconds), cron expression or interval the row was made with."""
    time_s: int
    due_ms: int
    """When the row runs next: `max(time·1000, created + 1)` (fibers §3.3 step 1)."""


@dataclass
class ModelFiber:
    """One fiber execution: its run row (fibers §2.2) and, if managed, its ledger row (§2.3)."""

    id: str | None
    """None for an unmanaged fiber: `runFiber` mints an id nobody is told (matched by name)."""
    name: str
    managed: bool
    key: str | None = None
    status: str | None = None
    error: str | None = None
    error_contains: str | None = None
    created_ms: int = 0
    settled_ms: int | None = None
    ends_ms: int | None = None
    fail: bool = False
    alive: bool = False
    run_row: bool = False
    orphaned_at: int | None = None
    in_ledger: bool = False


@dataclass
class ModelToolRun:
    """One agent-tool run of the parent registry `cf_agent_tool_runs` (agent-tools §1.1)."""

    run_id: str
    detached: bool
    settle_by_ms: int
    hard: str | None = None
    """The hard terminal status once seen or owed (agent-tools §1.5: it never changes)."""
    answer: Any = None
    """An awaited dispatch's pending answer: a callable giving (done, value)."""


@dataclass
class _Agent:
    path: str
    steps: tuple[tuple[str, str], ...]
    fibers: list[ModelFiber] = field(default_factory=list)
    children: dict[str, _Agent] = field(default_factory=dict)
    """RegistryChild sub-agents by name."""


class RegistriesModel:
    """What the registries of one root agent and its sub-agents should hold."""

    def __init__(self, root_class: str, root_name: str, child_class: str, tool_class: str):
        self.root = _Agent(f"{root_class}/{root_name}", ((root_class, root_name),))
        self.child_class = child_class
        self.tool_class = tool_class
        self.schedules: dict[str, ModelSchedule] = {}
        self.tools: dict[str, ModelToolRun] = {}
        self.now_ms = 0

    # -- agents ---------------------------------------------------------------------------------
    def agent(self, child: str | None) -> _Agent:
        """The root (None) or its live sub-agent `child`."""
        return self.root if child is None else self.root.children[child]

    def owner_of(self, child: str | None) -> str | None:
        """fibers §4.7: the root's own rows have no owner key, a facet's carry its path's."""
        return None if child is None else owner_key(self.agent(child).steps)

    def sub_agents(self) -> set[tuple[str, str]]:
        """fibers §2.5: the root's registry `cf_agents_sub_agents` (class, name)."""
        made = {(self.child_class, name) for name in self.root.children}
        return made | {(self.tool_class, run_id) for run_id in self.tools}

    def make_child(self, name: str) -> None:
        if name not in self.root.children:
            steps = (*self.root.steps, (self.child_class, name))
            path = f"{self.root.path}/{self.child_class}/{name}"
            self.root.children[name] = _Agent(path, steps)
        self.recover(name)  # resolving a sub-agent runs its startup, and so its scan (§4.7)

    def drop_child(self, name: str) -> None:
        """fibers §4.7: deleting a sub-agent wipes its storage and prunes its schedules."""
        child = self.root.children.pop(name, None)
        if child is None:
            return
        key = owner_key(child.steps)
        for schedule_id in [i for i, s in self.schedules.items() if _under(s.owner, key)]:
            del self.schedules[schedule_id]

    # -- schedules ------------------------------------------------------------------------------
    def schedule(
        self, child: str | None, kind: str, value: Any, payload: Any, idempotent: bool | None
    ) -> tuple[str | None, int, str]:
        """A `schedule`/`scheduleEvery` call: (the id it must answer, or None for a new row;
        the row's time in seconds; its type). fibers §4.1-§4.2."""
        owner = self.owner_of(child)
        text = None if payload is None else json.dumps(payload, separators=(",", ":"))
        dedupe = DEFAULT_IDEMPOTENT[kind] if idempotent is None else idempotent
        if dedupe:
            for row in self.schedules.values():
                same_value = kind in ONE_SHOTS or row.value == value
                if (row.type, row.owner, row.payload) == (kind, owner, text) and same_value:
                    return row.id, row.time_s, kind
        now = self.now_ms
        if kind == "delayed":
            time_s = (now + int(value) * 1000) // 1000
        elif kind == "scheduled":
            time_s = int(value)
        elif kind == "cron":
            time_s = next_cron_due_ms(str(value), now) // 1000
        else:
            time_s = (now + int(value) * 1000) // 1000
        return None, time_s, kind

    def schedule_made(
        self, child: str | None, schedule_id: str, kind: str, value: Any, payload: Any, time_s: int
    ) -> None:
        text = None if payload is None else json.dumps(payload, separators=(",", ":"))
        due = max(time_s * 1000, self.now_ms + 1)
        self.schedules[schedule_id] = ModelSchedule(
            schedule_id, kind, self.owner_of(child), text, value, time_s, due
        )

    def cancel_schedule(self, child: str | None, schedule_id: str) -> bool:
        """fibers §4.5: only a row of the caller's own owner key is cancelled."""
        row = self.schedules.get(schedule_id)
        if row is None or row.owner != self.owner_of(child):
            return False
        del self.schedules[schedule_id]
        return True

    # -- fibers ---------------------------------------------------------------------------------
    def run_fiber(self, child: str | None, name: str, ms: int, fail: bool) -> None:
        fiber = ModelFiber(None, name, False, created_ms=self.now_ms, ends_ms=self.now_ms + ms)
        fiber.fail, fiber.alive, fiber.run_row = fail, True, True
        self.agent(child).fibers.append(fiber)

    def start_fiber(
        self,
        child: str | None,
        name: str,
        ms: int,
        fail: bool,
        fiber_id: str | None,
        key: str | None,
    ) -> dict[str, Any]:
        """fibers §5.5: what `startFiber` must answer; a new fiber with no id given is finished
        by `fiber_accepted` once its id is known."""
        ledger = [f for f in self.agent(child).fibers if f.in_ledger]
        by_id = next((f for f in ledger if fiber_id is not None and f.id == fiber_id), None)
        by_key = next((f for f in ledger if key is not None and f.key == key), None)
        clash = by_id is not None and by_key is not None and by_id is not by_key
        if clash or (by_key is not None and fiber_id is not None and by_key.id != fiber_id):
            return {"error": "fiberId and idempotencyKey refer to different fibers"}
        existing = by_id or by_key
        if existing is not None:
            return {"fiber_id": existing.id, "status": existing.status, "accepted": False}
        return {"fiber_id": fiber_id, "status": "pending", "accepted": True}

    def fiber_accepted(
        self, child: str | None, fiber_id: str, name: str, ms: int, fail: bool, key: str | None
    ) -> None:
        agent = self.agent(child)
        fiber = ModelFiber(fiber_id, name, True, key=key, created_ms=self.now_ms)
        fiber.in_ledger = True
        if any(f.run_row and f.id == fiber_id for f in agent.fibers):
            # A run row of that id is still there (a cancelled fiber's callback runs on after its
            # ledger row was deleted): setup fails before the callback (fibers §5.5).
            fiber.status, fiber.error_contains, fiber.settled_ms = (
                "error",
                SETUP_COLLISION,
                self.now_ms,
            )
        else:
            fiber.status, fiber.ends_ms, fiber.fail = "running", self.now_ms + ms, fail
            fiber.alive = fiber.run_row = True
        agent.fibers.append(fiber)

    def cancel_fiber(self, child: str | None, fiber_id: str, reason: str | None) -> bool:
        """fibers §5.8: only a pending or running row; it becomes `aborted` with the reason."""
        fiber = self._ledger_row(child, fiber_id)
        if fiber is None or fiber.status not in ("pending", "running"):
            return False
        fiber.status, fiber.error, fiber.settled_ms = "aborted", reason, self.now_ms
        return True

    def resolve_fiber(self, child: str | None, fiber_id: str, status: str) -> bool:
        """fibers §5.8: only an `interrupted` row is settled by hand."""
        fiber = self._ledger_row(child, fiber_id)
        if fiber is None or fiber.status != "interrupted":
            return False
        fiber.status, fiber.error, fiber.settled_ms = status, None, self.now_ms
        return True

    def delete_fibers(
        self, child: str | None, statuses: Sequence[str] | None, limit: int | None
    ) -> tuple[int, list[ModelFiber], list[ModelFiber]]:
        """fibers §5.8: (the count it must answer, the rows that must go, the rows of a tie at
        the limit of which any may go). Oldest settled first; non-terminal statuses dropped."""
        wanted = DEFAULT_DELETE_STATUSES if statuses is None else statuses
        wanted = [s for s in wanted if s in TERMINAL]
        low, high, default = DELETE_LIMIT
        cap = default if limit is None else min(max(limit, low), high)
        rows = [f for f in self.agent(child).fibers if f.in_ledger and f.status in wanted]
        rows.sort(key=lambda f: (f.settled_ms or 0, f.created_ms))
        if len(rows) <= cap:
            return len(rows), rows, []
        edge = (rows[cap - 1].settled_ms or 0, rows[cap - 1].created_ms)
        tie = [f for f in rows if (f.settled_ms or 0, f.created_ms) == edge]
        sure = [f for f in rows[:cap] if f not in tie]
        return cap, sure, tie

    def fibers_deleted(self, rows: Sequence[ModelFiber]) -> None:
        for fiber in rows:
            fiber.in_ledger = False

    def _ledger_row(self, child: str | None, fiber_id: str) -> ModelFiber | None:
        return next((f for f in self.agent(child).fibers if f.in_ledger and f.id == fiber_id), None)

    # -- time, deaths and recovery -------------------------------------------------------------
    def advance(self, now_ms: int) -> None:
        """Time ran to `now_ms`: fibers whose sleep ended returned (§5.2), due schedules ran
        (§4.4: a one-shot goes, a cron row moves to its next occurrence, an interval to
        `floor(completion / 1 s) + interval` seconds)."""
        self.now_ms = now_ms
        for agent in (self.root, *self.root.children.values()):
            for fiber in agent.fibers:
                if fiber.alive and fiber.ends_ms is not None and fiber.ends_ms <= now_ms:
                    fiber.alive = fiber.run_row = False
                    if fiber.managed and fiber.status == "running":
                        fiber.status = "error" if fiber.fail else "completed"
                        fiber.error = f"fiber {fiber.name} failed" if fiber.fail else None
                        fiber.settled_ms = fiber.ends_ms
        for schedule_id, row in list(self.schedules.items()):
            while row.due_ms <= now_ms:
                if row.type in ONE_SHOTS:
                    del self.schedules[schedule_id]
                    break
                if row.type == "cron":
                    row.time_s = next_cron_due_ms(str(row.value), row.due_ms) // 1000
                else:
                    row.time_s = row.due_ms // 1000 + int(row.value)
                row.due_ms = row.time_s * 1000

    def evict(self) -> None:
        """The root's incarnation ended, and every sub-agent's with it: each fiber still running
        is orphaned (fibers §1.3)."""
        for agent in (self.root, *self.root.children.values()):
            for fiber in agent.fibers:
                if fiber.alive:
                    fiber.alive, fiber.orphaned_at = False, self.now_ms

    def recover(self, child: str | None) -> None:
        """The agent's recovery scan ran (fibers §6.2, §6.4, with a hook that returns nothing
        unless the fiber's name asks for `completed`)."""
        for fiber in self.agent(child).fibers:
            if fiber.orphaned_at is not None and fiber.run_row:
                self._recovered(fiber, self.now_ms)

    def _recovered(self, fiber: ModelFiber, at_ms: int | None) -> None:
        fiber.run_row, fiber.orphaned_at = False, None
        if fiber.managed and fiber.in_ledger and fiber.status in ("pending", "running"):
            settle = fiber.name.endswith(":settle")
            fiber.status, fiber.error = ("completed" if settle else "interrupted"), None
            fiber.settled_ms = at_ms

    # -- agent tools ----------------------------------------------------------------------------
    def dispatch_tool(self, run_id: str, ms: int, detached: bool) -> dict[str, Any] | None:
        """agent-tools §2.3-§2.4: a new run (None: the answer comes later for an awaited one),
        or the answer of a re-issue: `running` for any detached re-issue, the stored status for
        an awaited re-issue of a hard terminal row."""
        run = self.tools.get(run_id)
        if run is None:
            self.tools[run_id] = ModelToolRun(run_id, detached, self.now_ms + ms + TOOL_SETTLE_MS)
            return {"status": "running", "run_id": run_id} if detached else None
        if detached:
            return {"status": "running", "run_id": run_id}
        return {"status": run.hard, "run_id": run_id}

    def cancel_tool(self, run_id: str) -> None:
        """agent-tools §4.7: a detached run not hard terminal is delivered `aborted` inline."""
        run = self.tools.get(run_id)
        if run is not None and run.detached and run.hard is None:
            run.hard = "aborted"

    def clear_tools(self, status: str | None, seen: Mapping[str, str]) -> int:
        """agent-tools §8.1: every run (of `status`, as the table showed it) goes, its child
        sub-agent deleted; the count it must answer."""
        gone = [r for r in self.tools if r in seen and (status is None or seen[r] == status)]
        for run_id in gone:
            del self.tools[run_id]
        return len(gone)

    def tools_died(self) -> None:
        """The parent died: an awaited dispatch in flight is answered by nobody (its row is
        re-attached by the parent's startup recovery, agent-tools §7.1)."""
        for run in self.tools.values():
            run.answer = None
            run.settle_by_ms = max(run.settle_by_ms, self.now_ms + TOOL_SETTLE_MS)

    # -- comparing ------------------------------------------------------------------------------
    def compare(self, tables: Callable[[str, str], list[dict[str, Any]] | None]) -> list[str]:
        """Each difference between the model and the committed tables, one sentence each.
        `tables(path, table)` gives a table's rows, None when the agent or table is absent."""
        out: list[str] = []
        out += self._compare_schedules(tables(self.root.path, "cf_agents_schedules") or [])
        registry = tables(self.root.path, "cf_agents_sub_agents") or []
        found = {(r["class"], r["name"]) for r in registry}
        if found != self.sub_agents():
            out.append(
                f"{self.root.path}'s sub-agent registry holds {sorted(found)}, the model "
                f"{sorted(self.sub_agents())}"
            )
        for agent in (self.root, *self.root.children.values()):
            out += self._compare_fibers(agent, tables)
        out += self._compare_tools(tables(self.root.path, "cf_agent_tool_runs") or [])
        return out

    def _compare_schedules(self, rows: list[dict[str, Any]]) -> list[str]:
        out = []
        user = {r["id"]: r for r in rows if r["callback"] != RECONCILE_TICK}
        for schedule_id in sorted(set(user) | set(self.schedules)):
            row, want = user.get(schedule_id), self.schedules.get(schedule_id)
            if row is None:
                kind = want.type if want is not None else "?"
                out.append(f"schedule {schedule_id} ({kind}) is missing from the table")
                continue
            if want is None:
                out.append(
                    f"schedule {schedule_id} ({row['type']}, time {row['time']} s) is in the "
                    f"table but the model has no such row"
                )
                continue
            got = (row["type"], row["owner_path_key"], row["payload"], row["time"])
            expected = (want.type, want.owner, want.payload, want.time_s)
            if got != expected:
                out.append(
                    f"schedule {schedule_id} holds (type, owner, payload, time) {got}, the model "
                    f"{expected}"
                )
        return out

    def _compare_fibers(
        self, agent: _Agent, tables: Callable[[str, str], list[dict[str, Any]] | None]
    ) -> list[str]:
        out = []
        runs = tables(agent.path, "cf_agents_runs") or []
        ledger = {r["fiber_id"]: r for r in tables(agent.path, "cf_agents_fibers") or []}
        run_ids = {r["id"] for r in runs}
        run_names = sorted(r["name"] for r in runs)
        for fiber in agent.fibers:
            if fiber.orphaned_at is None or not fiber.run_row:
                continue
            row = ledger.get(fiber.id) if fiber.id is not None else None
            gone = fiber.name not in run_names if fiber.id is None else fiber.id not in run_ids
            if gone:  # the scan ran: adopt it
                self._recovered(fiber, None if row is None else row["completed_at"])
                if row is not None and fiber.in_ledger:
                    fiber.settled_ms = row["completed_at"]
            elif self.now_ms >= fiber.orphaned_at + ORPHAN_WINDOW_MS:
                out.append(
                    f"fiber {fiber.name} of {agent.path}, orphaned at {fiber.orphaned_at} ms, is "
                    f"still not recovered at {self.now_ms} ms"
                )
        want_names = sorted(f.name for f in agent.fibers if f.run_row)
        if run_names != want_names:
            out.append(
                f"{agent.path}'s cf_agents_runs holds fibers {run_names}, the model {want_names}"
            )
        want = {f.id: f for f in agent.fibers if f.in_ledger}
        for fiber_id in sorted(set(ledger) | set(want), key=str):
            row, maybe = ledger.get(fiber_id), want.get(fiber_id)
            if row is None:
                out.append(f"managed fiber {fiber_id} of {agent.path} is missing from the ledger")
                continue
            if maybe is None:
                out.append(
                    f"managed fiber {fiber_id} of {agent.path} is in the ledger "
                    f"({row['status']}) but not in the model"
                )
                continue
            fiber = maybe
            if fiber.orphaned_at is not None and fiber.run_row:
                continue  # not recovered yet: the row may show either side
            got = (row["status"], row["idempotency_key"], row["name"])
            expected = (fiber.status, fiber.key, fiber.name)
            error = row["error_message"]
            error_ok = (
                fiber.error_contains in (error or "")
                if fiber.error_contains is not None
                else error == fiber.error
            )
            if got != expected or not error_ok:
                out.append(
                    f"managed fiber {fiber_id} of {agent.path} is {got} with error {error!r}, "
                    f"the model {expected} with error "
                    f"{fiber.error if fiber.error_contains is None else fiber.error_contains!r}"
                )
            elif fiber.settled_ms is None and row["completed_at"] is not None:
                fiber.settled_ms = row["completed_at"]
        return out

    def _compare_tools(self, rows: list[dict[str, Any]]) -> list[str]:
        out = []
        found = {r["run_id"]: r for r in rows}
        for run_id in sorted(set(found) | set(self.tools)):
            row, run = found.get(run_id), self.tools.get(run_id)
            if row is None:
                out.append(f"agent-tool run {run_id} is missing from the parent's registry")
                continue
            if run is None:
                out.append(f"agent-tool run {run_id} ({row['status']}) is kept after its clear")
                continue
            status = row["status"]
            if run.hard is not None and status != run.hard:
                out.append(
                    f"agent-tool run {run_id} is {status}, but it was {run.hard} (hard terminal)"
                )
            elif status in HARD_TERMINAL:
                run.hard = status
            if status in ("starting", "running") and self.now_ms >= run.settle_by_ms:
                out.append(
                    f"agent-tool run {run_id} is still {status} at {self.now_ms} ms, past "
                    f"{run.settle_by_ms} ms"
                )
            if run.answer is not None:
                done, value = run.answer()
                if done:
                    run.answer = None
                    answered = value.get("status") if isinstance(value, dict) else value
                    if answered != status:
                        out.append(
                            f"the awaited dispatch of agent-tool run {run_id} answered "
                            f"{answered!r}, its row is {status}"
                        )
        return out


def _under(owner: str | None, key: str) -> bool:
    return owner is not None and (owner == key or owner.startswith(key + "/"))
