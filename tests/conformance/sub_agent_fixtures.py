"""Agents the sub-agent conformance tests drive, and the helpers that read what they did.

A `Root` reaches any descendant through `at(path, method, ...)`, each hop resolved with
`sub_agent` (created on first use, its startup run), so a test can act inside a child or a
grandchild the way agent code does. Every agent writes what happens to it (startups, schedule
callbacks, fiber steps, recovery hook calls) into its own `journal` table, which survives
eviction; tests read behaviour from committed storage through `sim.query`. The child has its
own, slower heartbeat option so that a test can tell which agent's interval the root uses.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agents_core import Agent
from agents_core.alarm import DESTROY_PENDING_KEY
from agents_core.facets import encode_owner_path
from agents_core.fiber_ledger import FiberRecoveryResult
from agents_core.recovery import FiberRecoveryContext
from sim import AgentRef, Simulation

__all__ = [
    "AGING_MAX_AGE_MS",
    "AgingChild",
    "CHILD_HEARTBEAT_MS",
    "Child",
    "DeadlineChild",
    "Grandchild",
    "InternalChild",
    "Node",
    "ROOT_HEARTBEAT_MS",
    "ResolvingChild",
    "Root",
    "facet_runs",
    "journal",
    "owner_key",
    "owner_path_json",
    "root_instance",
    "schedule_rows",
]

ROOT_HEARTBEAT_MS = 2_000
"""The root's keepAlive interval: every facet heartbeat and recovery check uses this one."""

CHILD_HEARTBEAT_MS = 60_000
"""The child's own interval, which must never show up on the root's alarm."""

AGING_MAX_AGE_MS = 20_000
"""`AgingChild`'s fiber recovery max age."""

Hop = tuple[type, str]


class Node(Agent):
    """What every agent of these tests can do; the classes below differ only in identity."""

    options = {"keep_alive_interval_ms": ROOT_HEARTBEAT_MS}

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        # Created at construction: recovery runs before on_start and must find the table.
        self.sql(
            "CREATE TABLE IF NOT EXISTS journal (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
            "t INTEGER, inc INTEGER, kind TEXT, data TEXT)"
        )
        self._leases: list[Any] = []

    def _note(self, kind: str, data: Any = None) -> None:
        self.sql(
            "INSERT INTO journal (t, inc, kind, data) VALUES (?, ?, ?, ?)",
            self.host.clock.now_ms(),
            self.host.incarnation_number,
            kind,
            json.dumps(data),
        )

    async def on_start(self) -> None:
        self._note("start")

    # -- routing --------------------------------------------------------------------------------
    async def at(self, path: Sequence[Hop], method: str, *args: Any, **kwargs: Any) -> Any:
        """Call `method` on the descendant `path` leads to ([] = this agent), resolving each hop
        with `sub_agent` as agent code does."""
        if not path:
            result = getattr(self, method)(*args, **kwargs)
            return await result if hasattr(result, "__await__") else result
        cls, name = path[0]
        child = await self.sub_agent(cls, name)
        return await child.at(list(path[1:]), method, *args, **kwargs)

    async def delete_child(self, cls: type, name: str) -> None:
        await self.delete_sub_agent(cls, name)

    async def has_child(self, class_name: str, name: str) -> bool:
        return self.has_sub_agent(class_name, name)

    async def forget_child(self, class_name: str, name: str) -> None:
        """Drop the registry entry only (no prefix cleanup), as a lost write would."""
        self.sql("DELETE FROM cf_agents_sub_agents WHERE class = ? AND name = ?", class_name, name)

    async def plant_facet_lease(self, owner_path: list[dict[str, str]], run_id: str) -> None:
        """A root-side lease for `owner_path`, registered as a facet fiber would register it."""
        await self._cf_register_facet_run(
            json.dumps(owner_path, separators=(",", ":")), encode_owner_path(owner_path), run_id
        )

    async def arm_alarm(self, at_ms: int) -> None:
        self.host.alarm.set_alarm(at_ms)

    # -- schedules --------------------------------------------------------------------------
    async def tick(self, payload: Any = None, row: Any = None) -> None:
        self._note("tick", payload)

    async def note_all(self, kind: str, items: Sequence[Any]) -> None:
        """One journal row per item, all in one turn (no await between them)."""
        for item in items:
            self._note(kind, item)

    async def continue_work(self, payload: Any = None, row: Any = None) -> None:
        self._note("continued", payload)

    # -- keepAlive ------------------------------------------------------------------------------
    async def hold(self) -> int:
        """Take a keepAlive lease and keep it; its number."""
        self._leases.append(await self.keep_alive())
        return len(self._leases) - 1

    async def release(self, number: int) -> None:
        self._leases[number]()

    async def while_failing(self, message: str, ms: int) -> None:
        """`keep_alive_while` around work that fails after `ms`."""

        async def work() -> None:
            await self.host.clock.sleep(ms)
            self._note("inside", {"message": message})
            raise RuntimeError(message)

        await self.keep_alive_while(work)

    # -- fibers ---------------------------------------------------------------------------------
    async def _work(self, ctx: Any, snapshot: Any, ms: int) -> str:
        self._note("fiber:start", {"id": ctx.id})
        ctx.stash(snapshot)
        await self.host.clock.sleep(ms)
        self._note("fiber:end", {"id": ctx.id})
        return "done"

    async def spawn(self, name: str, snapshot: Any, ms: int) -> str:
        """Fire-and-forget `run_fiber` that stashes `snapshot` and works for `ms`; its id."""
        self.host.tasks.wait_until(self.run_fiber(name, lambda ctx: self._work(ctx, snapshot, ms)))
        (row,) = self.sql("SELECT id FROM cf_agents_runs ORDER BY rowid DESC LIMIT 1")
        return row["id"]

    async def spawn_many(self, name: str, count: int, ms: int) -> list[str]:
        return [await self.spawn(name, {"n": n}, ms) for n in range(count)]

    async def start(self, name: str, snapshot: Any, ms: int, **options: Any) -> Any:
        """`start_fiber` (managed) with the same work; the StartFiberResult."""
        return await self.start_fiber(name, lambda ctx: self._work(ctx, snapshot, ms), **options)

    # -- recovery -------------------------------------------------------------------------------
    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> Any:
        self._note(
            "hook",
            {
                "id": ctx.id,
                "name": ctx.name,
                "snapshot": ctx.snapshot,
                "status": ctx.status,
                "idempotencyKey": ctx.idempotency_key,
            },
        )
        return await self.recover(ctx)

    async def recover(self, ctx: FiberRecoveryContext) -> Any:
        """What the hook does after recording the call: fibers named `poison...` cannot be
        recovered (the hook raises every time); the rest need nothing."""
        if ctx.name.startswith("poison"):
            raise RuntimeError(f"cannot recover {ctx.name}")
        return None


class Root(Node):
    """The top-level agent: owns the alarm slot for the whole tree."""

    async def destroy_later(self) -> dict[str, Any]:
        """`destroy(deferred=True)`, then what this agent sees right after it."""
        await self.destroy(deferred=True)
        return {
            "marker": self.host.kv.get(DESTROY_PENDING_KEY),
            "alarm": self.host.alarm.get_alarm(),
            "refs": self._keep_alive_refs,
        }


class Child(Node):
    options = {"keep_alive_interval_ms": CHILD_HEARTBEAT_MS}


class Grandchild(Node):
    pass


class AgingChild(Node):
    """A child whose failing recovery rows age out after `AGING_MAX_AGE_MS`."""

    options = {
        "keep_alive_interval_ms": CHILD_HEARTBEAT_MS,
        "fiber_recovery_max_age_ms": AGING_MAX_AGE_MS,
    }


class DeadlineChild(Node):
    """A child whose recovery scan yields after 75 ms, with hooks that take 25 ms each (the
    SDK's multi-pass facet recovery test)."""

    options = {"keep_alive_interval_ms": CHILD_HEARTBEAT_MS, "fiber_recovery_scan_deadline_ms": 75}

    async def recover(self, ctx: FiberRecoveryContext) -> Any:
        await self.host.clock.sleep(25)
        return None


class ResolvingChild(Node):
    """Recovers managed fibers as `completed`, with a snapshot that says so."""

    async def recover(self, ctx: FiberRecoveryContext) -> Any:
        if ctx.status is None:
            return None
        return FiberRecoveryResult(
            status="completed",
            snapshot={"last": ctx.snapshot, "recovered": True},
            metadata={"recoveredBy": "child"},
        )


class InternalChild(Node):
    """Claims `internal:` fibers in the framework handler: schedules their continuation and
    reports them handled, so the user hook never sees them."""

    async def _handle_internal_fiber_recovery(self, ctx: FiberRecoveryContext) -> bool:
        if not ctx.name.startswith("internal:"):
            return False
        self._note("internal", {"id": ctx.id, "snapshot": ctx.snapshot})
        await self.schedule(0, "continue_work", {"fiber": ctx.id, "snapshot": ctx.snapshot})
        return True


# -- reading what happened ------------------------------------------------------------------
def journal(sim: Simulation, ref: AgentRef, kind: str | None = None) -> list[dict[str, Any]]:
    """The agent's journal rows (data parsed), oldest first, optionally only of one kind."""
    rows = sim.query(ref, "SELECT t, inc, kind, data FROM journal ORDER BY seq")
    out = [{**row, "data": json.loads(row["data"])} for row in rows]
    return [row for row in out if kind is None or row["kind"] == kind]


def facet_runs(sim: Simulation, root: AgentRef) -> list[dict[str, Any]]:
    """The root's facet fiber leases (`cf_agents_facet_runs`), oldest first."""
    return sim.query(
        root,
        "SELECT owner_path, owner_path_key, run_id, created_at FROM cf_agents_facet_runs "
        "ORDER BY created_at, run_id",
    )


def schedule_rows(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    return sim.query(ref, "SELECT * FROM cf_agents_schedules ORDER BY rowid")


def owner_path_json(ref: AgentRef) -> list[dict[str, str]]:
    """The SDK's owner path of `ref`: one {className, name} step per hop, root first."""
    hops: list[AgentRef] = []
    current: AgentRef | None = ref
    while current is not None:
        hops.append(current)
        current = current.parent
    return [{"className": r.cls.__name__, "name": r.name} for r in reversed(hops)]


def owner_key(ref: AgentRef) -> str:
    return encode_owner_path(owner_path_json(ref))


def root_instance(sim: Simulation, root: AgentRef) -> Any:
    """The root's live instance, to read its in-memory keepAlive bookkeeping."""
    instance = sim.instance_of(root)
    assert instance is not None, f"{root.path} has no live incarnation"
    return instance
