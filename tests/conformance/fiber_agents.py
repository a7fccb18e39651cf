"""Agents the fiber conformance tests drive, and the helpers that read what they did.

Each agent writes what happens to it (fiber steps, recovery hook calls with their context) into
its own `journal` table, which survives eviction, so a test reads behaviour from committed
storage. Fiber bodies are small scripts of steps (`sleep(ms)`, `stash(data)`, `note(kind)`,
`fail(message)`, `returns(value)`), so one agent class serves most scenarios; the recovery hook's
behaviour is what subclasses change.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agents_core import Agent
from agents_core.fiber_ledger import FiberRecoveryResult
from agents_core.recovery import FiberRecoveryContext
from sim import AgentRef, Simulation

__all__ = [
    "FAST_HEARTBEAT",
    "Poisoned",
    "Recorder",
    "Researcher",
    "ResolvingRecorder",
    "SlowHook",
    "fail",
    "hook_calls",
    "journal",
    "note",
    "returns",
    "run_rows",
    "self_stash",
    "sleep",
    "stash",
]

FAST_HEARTBEAT = {"keep_alive_interval_ms": 2_000}
"""The SDK tests' base interval: heartbeat and recovery backoff base of 2 s."""

Step = tuple[str, Any]


def sleep(ms: int) -> Step:
    """Let `ms` of virtual time pass inside the fiber."""
    return ("sleep", ms)


def stash(data: Any) -> Step:
    """`ctx.stash(data)`."""
    return ("stash", data)


def self_stash(data: Any) -> Step:
    """`self.stash(data)` (found through the current-fiber context)."""
    return ("self_stash", data)


def note(kind: str, data: Any = None) -> Step:
    """Write a journal row `kind` (with `data`) for this fiber."""
    return ("note", (kind, data))


def fail(message: str) -> Step:
    """Raise `RuntimeError(message)` from the fiber."""
    return ("fail", message)


def returns(value: Any) -> Step:
    """End the fiber with `value`."""
    return ("return", value)


class Recorder(Agent):
    """Runs scripted fibers and records every step and every recovery hook call."""

    options = FAST_HEARTBEAT

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        # Created at construction: recovery runs before on_start and must find the table.
        self.sql(
            "CREATE TABLE IF NOT EXISTS journal (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
            "t INTEGER, inc INTEGER, kind TEXT, fiber TEXT, data TEXT)"
        )
        self._leases: dict[int, Any] = {}

    def _note(self, kind: str, fiber: str = "", data: Any = None) -> None:
        self.sql(
            "INSERT INTO journal (t, inc, kind, fiber, data) VALUES (?, ?, ?, ?, ?)",
            self.host.clock.now_ms(),
            self.host.incarnation_number,
            kind,
            fiber,
            json.dumps(data),
        )

    async def _play(self, ctx: Any, script: Sequence[Step]) -> Any:
        for op, arg in script:
            if op == "sleep":
                await self.host.clock.sleep(arg)
            elif op == "stash":
                ctx.stash(arg)
            elif op == "self_stash":
                self.stash(arg)
            elif op == "note":
                self._note(arg[0], ctx.id, arg[1])
            elif op == "fail":
                raise RuntimeError(arg)
            elif op == "return":
                return arg
            else:
                raise ValueError(f"unknown fiber script step {op!r}")
        return None

    # -- fibers -------------------------------------------------------------------------------
    async def run(self, name: str, script: Sequence[Step]) -> Any:
        """`run_fiber(name, script)`, awaited: the fiber's value or its error."""
        return await self.run_fiber(name, lambda ctx: self._play(ctx, script))

    async def spawn(self, name: str, script: Sequence[Step]) -> None:
        """Fire-and-forget `run_fiber` (the SDK's `void this.runFiber(...)`); failures noted."""

        async def background() -> None:
            try:
                await self.run(name, script)
            except Exception as exc:  # noqa: BLE001 - a fire-and-forget caller's own catch
                self._note("spawn:failed", "", str(exc))

        self.host.tasks.wait_until(background())

    async def run_wrapped(self, name: str, initial: Any, script: Sequence[Step]) -> Any:
        """The internal stash wrapper: initial snapshot, every user stash wrapped per turn."""
        return await self._run_fiber_with_stash_wrapper(
            name,
            lambda ctx: self._play(ctx, script),
            initial_snapshot=initial,
            wrap=lambda data: {"turn": initial["turn"], "user": data},
        )

    async def start(self, name: str, script: Sequence[Step], **options: Any) -> Any:
        """`start_fiber(name, script, **options)`: the StartFiberResult."""
        return await self.start_fiber(name, lambda ctx: self._play(ctx, script), **options)

    async def stash_outside(self, data: Any) -> None:
        self.stash(data)

    # -- keepAlive ----------------------------------------------------------------------------
    async def acquire(self) -> int:
        """Take a keepAlive lease; its number, for `release`."""
        number = len(self._leases)
        self._leases[number] = await self.keep_alive()
        return number

    async def release(self, number: int) -> None:
        """Call lease `number`'s disposer (again, if already called)."""
        self._leases[number]()

    async def while_returning(self, value: Any, ms: int) -> Any:
        async def work() -> Any:
            await self.host.clock.sleep(ms)
            self._note("inside", "", {"refs": self._keep_alive_refs})
            return value

        return await self.keep_alive_while(work)

    async def while_failing(self, message: str, ms: int) -> None:
        async def work() -> None:
            await self.host.clock.sleep(ms)
            raise RuntimeError(message)

        await self.keep_alive_while(work)

    async def tick(self, payload: Any = None, row: Any = None) -> None:
        self._note("tick", "", payload)

    async def ping(self) -> str:
        return "pong"

    def ping_sync(self) -> str:
        """A synchronous method: an RPC to it never runs startup (on 0.32.0 an RPC to an
        `async` one does, spec sdk-0.32 §1.3)."""
        return "pong"

    # -- recovery -----------------------------------------------------------------------------
    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> Any:
        self._note(
            "hook",
            ctx.id,
            {
                "name": ctx.name,
                "snapshot": ctx.snapshot,
                "createdAt": ctx.created_at,
                "recoveryReason": ctx.recovery_reason,
                "status": ctx.status,
                "idempotencyKey": ctx.idempotency_key,
                "metadata": ctx.metadata,
            },
        )
        return await self.recover(ctx)

    async def recover(self, ctx: FiberRecoveryContext) -> Any:
        """What the hook does after recording the call: nothing by default."""
        return None


class Poisoned(Recorder):
    """A recovery hook that always throws."""

    async def recover(self, ctx: FiberRecoveryContext) -> Any:
        raise RuntimeError(f"cannot recover {ctx.name}")


class SlowHook(Recorder):
    """A recovery hook that succeeds after `hook_ms` of work, noting when it ends."""

    hook_ms = 100

    async def recover(self, ctx: FiberRecoveryContext) -> Any:
        await self.host.clock.sleep(self.hook_ms)
        self._note("hook:end", ctx.id)
        return None


class Researcher(Recorder):
    """The seed's research agent: three slow steps, a full checkpoint after each, and a hook
    that resumes the pending steps in a new fiber."""

    step_ms = 10_000

    async def begin_research(self) -> None:
        """Fire-and-forget the research (no caller waits for it)."""
        steps = ["search", "analyze", "synthesize"]
        self.host.tasks.wait_until(
            self.run_fiber("research", lambda ctx: self._research(ctx, [], {}, steps))
        )

    async def _research(
        self, ctx: Any, completed: list[str], results: dict[str, Any], pending: list[str]
    ) -> None:
        for index, step in enumerate(pending):
            await self.host.clock.sleep(self.step_ms)
            results[step] = f"{step} of {self.name}"
            completed.append(step)
            self._note("step", ctx.id, step)
            ctx.stash(
                {"completed": completed, "results": results, "pendingSteps": pending[index + 1 :]}
            )
        self.set_state({"result": results})

    async def recover(self, ctx: FiberRecoveryContext) -> Any:
        if ctx.name != "research":
            return None
        snapshot = ctx.snapshot
        if snapshot and snapshot["pendingSteps"]:
            completed, results = snapshot["completed"], snapshot["results"]
            pending = snapshot["pendingSteps"]
            self.host.tasks.wait_until(
                self.run_fiber("research", lambda c: self._research(c, completed, results, pending))
            )
        return None


class ResolvingRecorder(Recorder):
    """Managed fibers are recovered as completed, marking the snapshot `recovered`."""

    async def recover(self, ctx: FiberRecoveryContext) -> Any:
        if ctx.status is None:
            return None
        return FiberRecoveryResult(
            status="completed",
            snapshot={"last": ctx.snapshot, "recovered": True},
            metadata={"recoveredBy": "hook"},
        )


# -- reading what happened ------------------------------------------------------------------
def journal(sim: Simulation, ref: AgentRef, kind: str | None = None) -> list[dict[str, Any]]:
    """The agent's journal rows (data parsed), oldest first, optionally only of one kind."""
    rows = sim.query(ref, "SELECT t, inc, kind, fiber, data FROM journal ORDER BY seq")
    out = [{**row, "data": json.loads(row["data"])} for row in rows]
    return [row for row in out if kind is None or row["kind"] == kind]


def hook_calls(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    """Every `on_fiber_recovered` call: journal rows of kind `hook`."""
    return journal(sim, ref, "hook")


def run_rows(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    """The committed `cf_agents_runs` rows, in insertion order."""
    return sim.query(
        ref, "SELECT id, name, snapshot, created_at FROM cf_agents_runs ORDER BY rowid"
    )
