"""Sub-agents (facets): children in the root's isolate with their own SQLite and no alarm.

Everything alarm-backed in a facet goes through the top-level ("root") agent (spec fibers §3.4,
§4.7, §6.9): a facet's keepAlive is a lease counted in the root's refs (held and released by
the KeepAlive component, `keep_alive.py`); a facet's fiber registers
a lease row in the root's `cf_agents_facet_runs`, which keeps the root's alarm at its heartbeat
interval; the root's alarm housekeeping walks each leased owner path hop by hop (checking each
parent's registry) and runs the facet's own recovery scan; schedules of a facet live on the root
and are dispatched back into it the same way. A registry entry that has gone makes the root prune
that whole sub-tree's bookkeeping.

`Facets` is the component: it owns the registry of sub-agents (`cf_agents_sub_agents`), the
root's fiber leases (`cf_agents_facet_runs`), the walks hop by hop down an owner path, and the
destroyed flag (`destroy` removes a sub-agent through its parent). The RPC entries (`_cf_*`) a
sub-agent or a root calls stay on `Agent`, which hands each to this component. The SDK's
counterpart is the Agent's sub-agent API (`subAgent`, `hasSubAgent`, `listSubAgents`,
`deleteSubAgent`, `destroy`) and its facet routing (0.32.0: the `dynamic-agents` capability).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote, unquote

from agents_core.durable_memo import FACET_RUNS
from agents_core.errors import InvalidArgument
from agents_core.probes import probe

__all__ = ["Facets", "encode_owner_path", "path_of"]

Step = Mapping[str, str]
"""One hop of an owner path: {"className": ..., "name": ...}."""


def encode_owner_path(path: Sequence[Step]) -> str:
    """The SDK's key: encodeURIComponent(class):encodeURIComponent(name) joined by '/'."""
    safe = "-_.!~*'()"
    return "/".join(
        f"{quote(s['className'], safe=safe)}:{quote(s['name'], safe=safe)}" for s in path
    )


def decode_owner_key(key: str) -> list[dict[str, str]]:
    """The owner path an `encode_owner_path` key spells (':' and '/' are escaped in names)."""
    path = []
    for hop in key.split("/"):
        class_name, _, name = hop.partition(":")
        path.append({"className": unquote(class_name), "name": unquote(name)})
    return path


def path_of(host: Host) -> list[dict[str, str]]:
    """The agent's owner path, from the root down to it (a top-level agent's has one hop)."""
    return [{"className": c, "name": n} for c, n in host.facets.path]


def _parse_owner_path(text: str | None) -> list[dict[str, str]] | None:
    try:
        path = json.loads(text or "")
    except ValueError:
        return None
    if not isinstance(path, list) or not path:
        return None
    if not all(
        isinstance(s, dict)
        and isinstance(s.get("className"), str)
        and isinstance(s.get("name"), str)
        for s in path
    ):
        return None
    return [{"className": s["className"], "name": s["name"]} for s in path]


if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.host import AgentStub, Host
    from agents_core.keep_alive import KeepAlive
    from agents_core.lifecycle import Lifecycle
    from agents_core.recovery import Recovery
    from agents_core.schedule_dispatch import ScheduleDispatch
    from agents_core.schedules import Scheduler


class Facets:
    """One agent's sub-agents, and (on a root) their leases and the walks down to them."""

    __slots__ = (
        "_agent",
        "_lifecycle",
        "_keep_alive",
        "_recovery",
        "_dispatch",
        "_scheduler",
        "_run_routed",
        "_prune_owned",
        "_prune_last",
        "_self_path",
        "_is_facet",
        "_destroyed",
        "name",
        "host",
        "sql",
        "_memo",
        "_options",
        "_emit",
        "_log",
    )

    def __init__(
        self,
        ctx: AgentContext,
        agent: object,
        self_path: list[dict[str, str]],
        *,
        lifecycle: Lifecycle,
        keep_alive: KeepAlive,
        recovery: Recovery,
        dispatch: ScheduleDispatch,
        scheduler: Scheduler,
        run_routed: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
        prune_owned: Sequence[Callable[[str], object]] = (),
        prune_last: bool = False,
    ) -> None:
        self._agent = agent
        """The agent: its RPC entries are called by name on a root, its class names it."""
        self._lifecycle = lifecycle
        self._keep_alive = keep_alive
        self._recovery = recovery
        self._dispatch = dispatch
        self._scheduler = scheduler
        self._run_routed = run_routed or dispatch._execute_schedule_callback
        """How this agent runs a schedule its root routed down to it: 0.21.0's row through the
        dispatch's retry loop, or 0.32.0's dispatch message through its Scheduler's."""
        self._prune_owned = tuple(prune_owned)
        """What else a pruned sub-tree owns on the root, dropped by its owner key after its
        schedules (0.32.0: the wakes of its Task runs, then its queue items, the SDK's
        `cleanupPrefix` order)."""
        self._prune_last = prune_last
        """`delete_sub_agent`'s order: 0.21.0 prunes the sub-tree on the root first, then
        deletes the facet and forgets its registry row; 0.32.0 deletes and forgets first and
        prunes last."""
        self._self_path = self_path
        self._is_facet = ctx.is_facet
        self._destroyed = False
        """`destroy()` ran: the storage is gone and the incarnation is being aborted."""
        self.name = ctx.name
        self.host = ctx.host
        self.sql = ctx.sql
        self._memo = ctx.memo
        self._options = ctx.options
        self._emit = ctx.emit
        self._log = ctx.log

    def _hydrate_facet_identity(self) -> bool:
        """Store a facet's identity on its first start; True when an earlier incarnation of
        this facet had already stored it."""
        if not self._is_facet:
            return False
        if self.host.kv.get("cf_agents_is_facet"):
            return True
        self.host.kv.put("cf_agents_is_facet", True)
        self.host.kv.put("cf_agents_facet_name", self.name)
        self.host.kv.put("cf_agents_parent_path", self._self_path[:-1])
        return False

    def _self_path_key(self) -> str:
        return encode_owner_path(self._self_path)

    # -- the public sub-agent API ---------------------------------------------------------------
    async def sub_agent(self, cls: type, name: str) -> Any:
        """The child `cls` named `name` (created on first use, its startup run on resolution)."""
        if not isinstance(name, str) or not name or "\0" in name:
            raise InvalidArgument(
                f"sub-agent name must be a non-empty string without NUL, got {name!r}"
            )
        self.sql(
            "INSERT OR IGNORE INTO cf_agents_sub_agents (class, name, created_at) VALUES (?, ?, ?)",
            cls.__name__,
            name,
            self.host.clock.now_ms(),
        )
        return await self.host.facets.resolve(cls, name)

    def has_sub_agent(self, cls_or_name: type | str, name: str) -> bool:
        class_name = cls_or_name if isinstance(cls_or_name, str) else cls_or_name.__name__
        rows = self.sql(
            "SELECT 1 AS x FROM cf_agents_sub_agents WHERE class = ? AND name = ?", class_name, name
        )
        return bool(rows)

    def list_sub_agents(self) -> list[dict[str, Any]]:
        return self.sql(
            "SELECT class, name, created_at FROM cf_agents_sub_agents ORDER BY created_at"
        )

    async def delete_sub_agent(self, cls: type, name: str) -> None:
        """Abort the child, wipe its storage, forget its registry row, and prune its sub-tree's
        schedules and leases on the root, in the release's order (`prune_last`)."""
        prefix = [*self._self_path, {"className": cls.__name__, "name": name}]
        if not self._prune_last:
            await self._on_root("_cf_cleanup_facet_prefix", prefix)
        self.host.facets.delete(cls, name)
        self.sql(
            "DELETE FROM cf_agents_sub_agents WHERE class = ? AND name = ?", cls.__name__, name
        )
        if self._prune_last:
            await self._on_root("_cf_cleanup_facet_prefix", prefix)

    async def destroy(self, *, deferred: bool = False) -> None:
        """Delete this agent. A facet is removed by its parent (sub-tree pruned on the root); a
        top-level agent wipes its storage and alarm and aborts. `deferred=True` (top-level) only
        sets the destroy marker and lets the next alarm, armed for now, do it."""
        if self._is_facet:
            await self._on_root("_cf_cleanup_facet_prefix", list(self._self_path))
            parent = cast("AgentStub", self.host.facets.parent())  # a facet always has one
            await parent.call("delete_sub_agent", type(self._agent), self.name)
            return
        if deferred:
            self._memo.set_destroy_pending()
            await self._lifecycle.host_work_changed()
            return
        await self._lifecycle.disable_alarms()
        self._destroyed = True
        self.host.lifecycle.delete_all_storage()
        self._memo.storage_wiped()
        self.host.lifecycle.abort("destroyed")

    async def _on_root(self, method: str, *args: Any) -> Any:
        if not self._is_facet:
            return await getattr(self._agent, method)(*args)
        return await self.host.facets.root().call(method, *args)

    # -- the alarm, from a facet -----------------------------------------------------------------
    def _facet_lease_candidates(self, now: int) -> list[int]:
        """The Lifecycle's alarm source on a root: the heartbeat while a sub-agent holds a fiber
        lease (its housekeeping runs the sub-agent's recovery scan)."""
        if self._memo.empty(FACET_RUNS):
            return []
        return [now + self._options.keep_alive_interval_ms]

    async def _cf_reschedule(self) -> None:
        await self._lifecycle.rearm()

    # -- fiber leases ---------------------------------------------------------------------------
    async def _facet_register_run(self, fiber_id: str) -> None:
        await self.host.facets.root().call(
            "_cf_register_facet_run",
            json.dumps(self._self_path, separators=(",", ":")),
            self._self_path_key(),
            fiber_id,
        )

    async def _facet_unregister_run_logged(self, fiber_id: str) -> None:
        try:
            await self.host.facets.root().call(
                "_cf_unregister_facet_run", self._self_path_key(), fiber_id
            )
        except Exception as exc:  # noqa: BLE001 - root housekeeping prunes the lease later
            self._log("error", f"failed to unregister facet fiber {fiber_id}: {exc}")

    async def _cf_register_facet_run(self, owner_path: str, owner_key: str, run_id: str) -> None:
        self.sql(
            "INSERT OR REPLACE INTO cf_agents_facet_runs (owner_path, owner_path_key, run_id, "
            "created_at) VALUES (?, ?, ?, ?)",
            owner_path,
            owner_key,
            run_id,
            self.host.clock.now_ms(),
        )
        await self._lifecycle.host_work_changed()

    async def _cf_unregister_facet_run(self, owner_key: str, run_id: str) -> None:
        self.sql(
            "DELETE FROM cf_agents_facet_runs WHERE owner_path_key = ? AND run_id = ?",
            owner_key,
            run_id,
        )
        await self._lifecycle.host_work_changed()

    # -- root housekeeping: recovery inside facets ----------------------------------------------
    async def _check_facet_run_fibers(self) -> None:
        if self._is_facet:
            return
        if self._memo.known_empty(FACET_RUNS):
            return  # no sub-agent holds a fiber lease
        owners: dict[str, str] = {}
        rows = self.sql(
            "SELECT owner_path, owner_path_key FROM cf_agents_facet_runs ORDER BY created_at ASC"
        )
        self._memo.saw_table(FACET_RUNS, rows)
        for row in rows:
            owners.setdefault(row["owner_path_key"], row["owner_path"])
        for owner_key, owner_path in owners.items():
            path = _parse_owner_path(owner_path)
            if path is None:
                self.sql("DELETE FROM cf_agents_facet_runs WHERE owner_path_key = ?", owner_key)
                continue
            try:
                count = await self._cf_check_run_fibers_for_facet(path[1:])
            except Exception as exc:  # noqa: BLE001 - leases kept, retried on the next alarm
                self._log("error", f"facet recovery check for {owner_key} failed: {exc}")
                continue
            if count == 0:
                probe(self.host, "facet.stale_fiber_lease_pruned")
                self.sql("DELETE FROM cf_agents_facet_runs WHERE owner_path_key = ?", owner_key)

    async def _check_facet_lease_holders(self, owner_keys: Sequence[str]) -> None:
        """On the root: look up each sub-agent it holds keepAlive leases for, hop by hop. A
        live one is only looked up; one that died on its own (its root lived on) is constructed
        again, without its startup (nothing of it resumes before the SDK would wake it), and
        its construction drops the leases its dead incarnation still held, which nothing else
        would ever release (docs/divergences.md F3)."""
        if self._is_facet:
            return
        for owner_key in owner_keys:
            try:
                await self._cf_resolve_lease_holder(decode_owner_key(owner_key)[1:])
            except Exception as exc:  # noqa: BLE001 - the leases stay, checked on the next alarm
                self._log("error", f"keepAlive lease check for {owner_key} failed: {exc}")

    async def _cf_resolve_lease_holder(self, steps: list[dict[str, str]]) -> None:
        """Walk down `steps`, looking each hop up without starting it (a gone registry entry
        ends the walk)."""
        if not steps:
            return
        step = steps[0]
        if not self.has_sub_agent(step["className"], step["name"]):
            return
        child = await self.host.facets.look_up_named(step["className"], step["name"])
        if len(steps) > 1:
            await child.call("_cf_resolve_lease_holder", steps[1:])

    async def _cf_check_run_fibers_for_facet(self, steps: list[dict[str, str]]) -> int:
        """Walk down `steps`; at the owner run its scan and return its total run-row count."""
        if not steps:
            probe(self.host, "facet.recovery_driven_by_root")
            await self._recovery._check_run_fibers()
            return len(self.sql("SELECT id FROM cf_agents_runs"))
        child = await self._resolve_registered_child(steps[0])
        if child is None:
            return 0
        total: int = await child.call("_cf_check_run_fibers_for_facet", steps[1:])
        return total

    async def _resolve_registered_child(self, step: Mapping[str, str]) -> Any | None:
        if not self.has_sub_agent(step["className"], step["name"]):
            return None
        return await self.host.facets.resolve_named(step["className"], step["name"])

    # -- schedules of a facet live on the root (the Scheduler routes them) ------------------
    async def _dispatch_facet_schedule(self, row: dict[str, Any]) -> bool:
        """On the root: walk the owner path of a due schedule (0.21.0's row, 0.32.0's dispatch
        message: both carry its `id` and `owner_path`) hop by hop and run it in the owner; False
        (nothing executed) when a hop's registry entry is gone (that sub-tree is pruned)."""
        path = _parse_owner_path(row["owner_path"])
        if path is None:
            raise InvalidArgument(
                f"schedule {row['id']} has an unreadable owner_path {row['owner_path']!r}"
            )
        return await self._cf_dispatch_scheduled_callback(row, path[1:])

    async def _cf_dispatch_scheduled_callback(
        self, row: dict[str, Any], steps: list[dict[str, str]]
    ) -> bool:
        if not steps:
            await self._run_routed(row)
            return True
        child = await self._resolve_registered_child(steps[0])
        if child is None:
            probe(self.host, "facet.schedule_owner_gone_pruned")
            await self._on_root("_cf_cleanup_facet_prefix", [*self._self_path, steps[0]])
            return False
        dispatched: bool = await child.call("_cf_dispatch_scheduled_callback", row, steps[1:])
        return dispatched

    # -- pruning ---------------------------------------------------------------------------------
    async def _cf_cleanup_facet_prefix(self, prefix: list[dict[str, str]]) -> None:
        """On the root: drop every schedule (then what `prune_owned` names) and fiber lease
        owned at or below `prefix`."""

        def under(text: str | None) -> bool:
            path = _parse_owner_path(text)
            return path is not None and path[: len(prefix)] == prefix

        self._scheduler.drop_owned_under(under)
        for prune in self._prune_owned:
            prune(encode_owner_path(prefix))
        for row in self.sql("SELECT owner_path, owner_path_key, run_id FROM cf_agents_facet_runs"):
            if under(row["owner_path"]):
                self.sql(
                    "DELETE FROM cf_agents_facet_runs WHERE owner_path_key = ? AND run_id = ?",
                    row["owner_path_key"],
                    row["run_id"],
                )
        self._keep_alive.release_facet_leases_under(encode_owner_path(prefix))
        await self._lifecycle.host_work_changed()
