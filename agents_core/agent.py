"""`Agent`, the one class users subclass: name, persisted state, SQL and the platform entries.

The platform (any `Host`) constructs an agent once per incarnation and calls its `_cf_*` entries:
`_cf_start` once under the input gate, then `_cf_fetch`, `_cf_connect`, `_cf_message`,
`_cf_close` and `_cf_alarm` for each event. A new connection first gets the SDK's protocol
frames, in its order: `cf_agent_identity`, `cf_agent_state` (when there is state),
`cf_agent_mcp_servers`; then the agent-tool replay, then `on_connect`. User code overrides the
`on_*` hooks. The durable runtime is made of components, each owning its state and seeing the
agent through one `AgentContext` (the Lifecycle, which owns the alarm and the order of startup
and of an alarm; KeepAlive; the FiberRunner and FiberLedger; Recovery; the Scheduler and its
dispatch; Facets; MCP; the agent-tool components; docs/architecture.md). This module holds what
every agent has, builds the components, and gives each public method and hook of the SDK its
one-line delegation.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar, cast, overload

from agents_core import observability
from agents_core.agent_tools.notify import completion_text, milestone_text
from agents_core.agent_tools.recovery_sweep import RECOVERY_TIMEOUT_MS, RECOVERY_TOTAL_TIMEOUT_MS
from agents_core.agent_tools.registry import (
    AGENT_TOOL_RUNS_DDL,
    AgentToolRunInfo,
    DetachedRunAgentToolResult,
    RunAgentToolResult,
)
from agents_core.agent_tools.tool import set_current_agent
from agents_core.context import AgentContext
from agents_core.durable_memo import DurableMemo, statement_effects
from agents_core.facets import encode_owner_path, path_of
from agents_core.fiber_ledger import (
    FiberInspection,
    FiberRecoveryResult,
    StartFiberResult,
)
from agents_core.fibers import FiberContext, stash_current_fiber
from agents_core.host import Connection, Host
from agents_core.mcp import MCP_SERVERS_DDL
from agents_core.options import AgentOptions, RetryOptions, resolve_options
from agents_core.probes import probe
from agents_core.recovery import FiberRecoveryContext
from agents_core.releases.registry import release_named
from agents_core.schedules import Schedule, ScheduleTiming

if TYPE_CHECKING:
    from agents_core.releases.v0_32.breaker import MemoryLimitContext
    from agents_core.releases.v0_32.tasks import TaskDefinition, Tasks

__all__ = ["Agent", "Request", "Response"]

IDENTITY_FRAME_TYPE = "cf_agent_identity"
STATE_FRAME_TYPE = "cf_agent_state"

T = TypeVar("T")


def kebab_case(name: str) -> str:
    """The SDK's `camelCaseToKebabCase`, which names an agent class in `cf_agent_identity`
    (`StoryParent` -> `story-parent`; an all-capitals name is just lowered)."""
    if name == name.upper() and name != name.lower():
        return name.lower().replace("_", "-")
    kebab = "".join(f"-{c.lower()}" if "A" <= c <= "Z" else c for c in name)
    kebab = kebab.removeprefix("-").replace("_", "-")
    return kebab.removesuffix("-")


@dataclass(frozen=True)
class Request:
    """An HTTP request delivered to an agent."""

    method: str = "GET"
    path: str = "/"
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Response:
    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()


_OPTIONS_BY_CLASS: dict[type, AgentOptions] = {}


def _options_of(cls: type) -> AgentOptions:
    """Resolved once per class (the SDK caches per instance; the class value cannot change)."""
    found = _OPTIONS_BY_CLASS.get(cls)
    if found is None:
        try:
            found = _OPTIONS_BY_CLASS[cls] = resolve_options(getattr(cls, "options", None))
        except ValueError as exc:
            raise ValueError(f"{cls.__qualname__}.options: {exc}") from None
    return found


class Agent:
    """A durable agent: one instance per incarnation, its storage kept by the host."""

    initial_state: ClassVar[Any] = None
    """The state before the first `set_state` (copied, never shared between instances)."""

    options: ClassVar[Mapping[str, Any]] = {}
    """Static options (the SDK's `static options`), each falling back to its default."""

    _agent_tool_recovery_timeout_ms: int = RECOVERY_TIMEOUT_MS
    """Per-child inspection timeout of the agent-tool recovery sweep (a test may lower it)."""
    _agent_tool_recovery_total_timeout_ms: int = RECOVERY_TOTAL_TIMEOUT_MS
    """Pass-1 deadline of the agent-tool recovery sweep; <= 0 means none."""

    def __init__(self, host: Host, name: str) -> None:
        self._host = host
        self.name = name
        self._state: Any = _UNSET
        self._options: AgentOptions = _options_of(type(self))
        # In-memory runtime state: all of it is gone with the incarnation (spec fibers §1.3).
        self._memo = DurableMemo(host)
        self._no_protocol_connections: set[str] = set()
        self._self_path = self_path = path_of(host)
        self._is_facet = len(self_path) > 1
        owner_key = encode_owner_path(self_path)
        context = AgentContext(
            host,
            name,
            self._options,
            self._memo,
            is_facet=self._is_facet,
            sql=self.sql,
            emit=self._emit,
            log=self._log,
        )
        self._context = context
        """The components' view of this agent (a subclass's components are given it too)."""
        self._release = release_named(host.release)
        """The SDK release this agent runs: the host's choice (what is deployed)."""
        runtime = self._release.build(context, self, self_path, owner_key)
        self._mcp = runtime.mcp
        self._lifecycle = runtime.lifecycle
        self._keep_alive = runtime.keep_alive
        self._fiber_ledger = runtime.fiber_ledger
        self._fibers = runtime.fibers
        self._recovery = runtime.recovery
        self._scheduler = runtime.scheduler
        self._schedule_dispatch = runtime.schedule_dispatch
        self._queue = runtime.queue
        self._facets = runtime.facets
        self._tools = runtime.tools
        self._state_store = runtime.state
        if self._is_facet and host.kv.get("cf_agents_is_facet"):
            # A facet that lived before died on its own: its root still holds the leases that
            # incarnation took. Released at construction, not at startup, because a plain RPC
            # starts an incarnation without startup (docs/divergences.md F3).
            host.tasks.wait_until(self._keep_alive.release_leases_of_earlier_incarnations())
        runtime.schema.ensure(host, (*AGENT_TOOL_RUNS_DDL, *MCP_SERVERS_DDL))

    # -- storage ----------------------------------------------------------------------------
    def sql(self, query: str, *params: Any) -> list[dict[str, Any]]:
        """Run one SQL statement on this agent's database; rows as dicts."""
        effects = statement_effects(query)
        if effects:
            self._memo.wrote(effects)
        return self._host.sql.query(query, params)

    @property
    def host(self) -> Host:
        return self._host

    # -- state ------------------------------------------------------------------------------
    @property
    def state(self) -> Any:
        """The persisted state (it survives eviction); `initial_state` until first set."""
        if self._state is _UNSET:
            stored = self._state_store.load()
            if stored is not None:
                self._state = json.loads(stored)
            else:
                self._state = copy.deepcopy(self.initial_state)
        return self._state

    def set_state(self, state: Any) -> None:
        """Persist `state` (JSON), tell connected clients, then call `on_state_update`."""
        try:
            encoded = json.dumps(state, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"agent state must be JSON-serialisable: {exc}; got {state!r}"
            ) from None
        self._state_store.save(encoded)
        self._state = json.loads(encoded)
        self._broadcast_protocol({"type": STATE_FRAME_TYPE, "state": self._state})
        self.on_state_update(self._state, "server")

    def on_state_update(self, state: Any, source: str) -> None:
        """Called after every `set_state` (source `server`)."""

    # -- clients ----------------------------------------------------------------------------
    def broadcast(self, frame: Any, exclude: tuple[str, ...] = ()) -> None:
        for connection in self._host.clients.connections():
            if connection.id not in exclude:
                connection.send(frame)

    def get_connections(self) -> list[Connection]:
        return self._host.clients.connections()

    def should_send_protocol_messages(self, connection: Connection) -> bool:
        """Whether `connection` gets the protocol frames (identity, state, MCP servers), on
        connect and in later broadcasts; override to keep them from binary-only clients."""
        return True

    def _broadcast_protocol(self, frame: Any) -> None:
        """A protocol frame to every connection that takes protocol frames."""
        self.broadcast(frame, tuple(self._no_protocol_connections))

    # -- user hooks -------------------------------------------------------------------------
    async def on_start(self) -> None:
        """Runs once per incarnation, before any other event is delivered."""

    async def on_request(self, request: Request) -> Response:
        return Response(404, "Not implemented")

    async def on_connect(self, connection: Connection) -> None:
        """A client connected."""

    async def on_message(self, connection: Connection, message: Any) -> None:
        """A client sent a message."""

    async def on_close(self, connection: Connection, code: int, reason: str) -> None:
        """A client closed its connection."""

    def on_error(self, error: BaseException) -> Any:
        """Called with errors the runtime swallows (a schedule's final failure, ...)."""
        self._log("error", f"{type(error).__name__}: {error}")

    async def on_alarm(self) -> None:
        """Runs at the start of every alarm, before the due schedules (empty by default)."""

    async def on_alarm_memory_limit(self, context: MemoryLimitContext) -> None:
        """0.32.0: an alarm's memory-limit breaker recorded a strike (sealed or not), after the
        executing job's policy and the capabilities' own (`context`: `sealed`, `next_time`,
        `executing`, `purged_recovery_loop_jobs`). An error here is dropped: the isolate
        resets either way. A plain agent has no policy of its own; a chat host seals its live
        recoveries on a sealing strike. Never called on 0.21.0 (its breaker has no hook)."""

    # -- keepAlive ----------------------------------------------------------------------------
    async def keep_alive(self) -> Callable[[], None]:
        """Take a lease; returns its disposer (synchronous and idempotent)."""
        return await self._keep_alive.lease("keep_alive")

    async def keep_alive_while(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Hold a lease (from `keep_alive`) while `fn()` runs; release it however `fn` ends."""
        return await self._keep_alive.while_held(fn, self.keep_alive)

    # -- fibers -------------------------------------------------------------------------------
    async def run_fiber(self, name: str, fn: Callable[[FiberContext], Awaitable[Any]]) -> Any:
        """Run `fn(ctx)` as a durable fiber; its value, or its error (no retries)."""
        return await self._fibers.run_fiber(name, fn)

    def stash(self, data: Any) -> None:
        """Checkpoint the current fiber (found through the context); full replacement."""
        stash_current_fiber(data)

    async def start_fiber(
        self,
        name: str,
        fn: Callable[[FiberContext], Awaitable[Any]],
        *,
        fiber_id: str | None = None,
        idempotency_key: str | None = None,
        metadata: dict[str, Any] | None = None,
        wait_for_completion: bool = False,
    ) -> StartFiberResult:
        """Accept managed work once per id or key; returns status, never the callback's value."""
        return await self._fibers.start_fiber(
            name,
            fn,
            fiber_id=fiber_id,
            idempotency_key=idempotency_key,
            metadata=metadata,
            wait_for_completion=wait_for_completion,
        )

    def cancel_fiber(self, fiber_id: str, reason: str | None = None) -> bool:
        """Abort a pending or running managed fiber (cooperatively); False if missing/terminal."""
        return self._fibers.cancel_fiber(fiber_id, reason)

    def cancel_fiber_by_key(self, idempotency_key: str, reason: str | None = None) -> bool:
        return self._fibers.cancel_fiber_by_key(idempotency_key, reason)

    def inspect_fiber(self, fiber_id: str) -> FiberInspection | None:
        return self._fiber_ledger.inspect(fiber_id)

    def inspect_fiber_by_key(self, idempotency_key: str) -> FiberInspection | None:
        return self._fiber_ledger.inspect_by_key(idempotency_key)

    def list_fibers(
        self,
        *,
        status: str | Iterable[str] | None = None,
        name: str | None = None,
        limit: int | None = None,
    ) -> list[FiberInspection]:
        """Newest first (created_at, then fiber_id, descending); limit 50 by default, 1–100."""
        return self._fiber_ledger.list(status=status, name=name, limit=limit)

    def delete_fibers(
        self,
        *,
        status: str | Iterable[str] | None = None,
        settled_before: datetime | int | None = None,
        limit: int | None = None,
    ) -> int:
        """Delete terminal rows, oldest settled first; `interrupted` only when asked for."""
        return self._fiber_ledger.delete(status=status, settled_before=settled_before, limit=limit)

    def resolve_fiber(self, fiber_id: str, result: FiberRecoveryResult | Mapping[str, Any]) -> bool:
        """Settle an `interrupted` fiber by hand; False for any other status or a missing row."""
        return self._fiber_ledger.resolve(fiber_id, result)

    # -- sub-agents ---------------------------------------------------------------------------
    async def sub_agent(self, cls: type, name: str) -> Any:
        """The child `cls` named `name` (created on first use, its startup run on resolution)."""
        return await self._facets.sub_agent(cls, name)

    def has_sub_agent(self, cls_or_name: type | str, name: str) -> bool:
        return self._facets.has_sub_agent(cls_or_name, name)

    def list_sub_agents(self) -> list[dict[str, Any]]:
        return self._facets.list_sub_agents()

    async def delete_sub_agent(self, cls: type, name: str) -> None:
        """Abort the child, wipe its storage, and prune its sub-tree's schedules and leases."""
        await self._facets.delete_sub_agent(cls, name)

    async def destroy(self, *, deferred: bool = False) -> None:
        """Delete this agent. A sub-agent is removed by its parent; a top-level agent wipes its
        storage and alarm and aborts. `deferred=True` (top-level) only sets the destroy marker
        and lets the next alarm, armed for now, do it."""
        await self._facets.destroy(deferred=deferred)

    # -- schedules ----------------------------------------------------------------------------
    async def schedule(
        self,
        when: datetime | int | float | str,
        callback: str,
        payload: Any = None,
        *,
        retry: Mapping[str, Any] | RetryOptions | None = None,
        idempotent: bool | None = None,
        recovery_loop: bool | None = None,
    ) -> Schedule:
        """Run `self.<callback>(payload, row)` at a datetime, after a number of seconds, or on
        every occurrence of a cron expression. Cron rows dedupe by default; the others only with
        `idempotent=True` (spec fibers §4.1). `recovery_loop=True` makes the schedule a member
        of the memory-limit breaker's recovery loop on 0.32.0 (spec sdk-0.32 §3.2); 0.21.0
        ignores it."""
        return await self._scheduler.schedule(
            when,
            callback,
            payload,
            retry=retry,
            idempotent=idempotent,
            recovery_loop=recovery_loop,
        )

    async def schedule_every(
        self,
        interval_seconds: int | float,
        callback: str,
        payload: Any = None,
        *,
        retry: Mapping[str, Any] | RetryOptions | None = None,
        _idempotent: bool | None = None,
    ) -> Schedule:
        """Run `self.<callback>` every `interval_seconds`, first one interval from now, the next
        one interval after each run *completes*. Idempotent on (callback, interval, payload)."""
        return await self._scheduler.schedule_every(
            interval_seconds, callback, payload, retry=retry, _idempotent=_idempotent
        )

    async def cancel_schedule(self, id: str) -> bool:
        """Delete this agent's schedule `id`; False when it has none by that id."""
        return await self._scheduler.cancel_schedule(id)

    async def get_schedule_by_id(self, id: str) -> Schedule | None:
        """This agent's schedule `id`, or None."""
        return await self._scheduler.get_schedule_by_id(id)

    def get_schedule(self, id: str) -> Schedule | None:
        """Deprecated synchronous `get_schedule_by_id` (raises inside a sub-agent)."""
        return self._scheduler.get_schedule(id)

    def get_schedules(
        self,
        *,
        id: str | None = None,
        type: str | None = None,
        time_range: Mapping[str, datetime | None] | None = None,
    ) -> list[Schedule]:
        """Deprecated synchronous `list_schedules` (raises inside a sub-agent)."""
        return self._scheduler.get_schedules(id=id, type=type, time_range=time_range)

    async def list_schedules(self, **filters: Any) -> list[Schedule]:
        """This agent's schedules, filtered by `id`, `type` and a `time_range` of `{"start",
        "end"}` datetimes (inclusive, in whole seconds; a missing bound is open)."""
        return await self._scheduler.list_schedules(**filters)

    # -- tasks (0.32.0) -----------------------------------------------------------------------
    task_definitions: Mapping[str, TaskDefinition] | None = None
    """The agent's Task definitions, by name (0.32.0): each `async (input, step) -> result`.
    Read again on every dispatch, so a property returning bound methods is the way to declare
    them; a run of a name no longer declared fails (`MissingTaskDefinitionError`)."""

    @property
    def tasks(self) -> Tasks:
        """0.32.0's Tasks capability (`agents_core/releases/v0_32/tasks.py`): `run`, `handle`,
        `get`, `get_by_idempotency_key`, `list`, `cancel`, `delete`. An agent on 0.21.0 has no
        such attribute (AttributeError), as an SDK 0.21.0 agent has no `this.tasks`."""
        lookup = getattr(self._lifecycle, "capability", None)
        tasks = lookup("tasks") if lookup is not None else None
        if tasks is None:
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute 'tasks': agents "
                f"{self._release.name} has no Tasks capability (0.32.0 added it)"
            )
        return cast("Tasks", tasks)

    # -- queue --------------------------------------------------------------------------------
    async def queue(
        self,
        callback: str,
        payload: Any = None,
        *,
        retry: Mapping[str, Any] | RetryOptions | None = None,
        id: str | None = None,
    ) -> str:
        """Run `self.<callback>(payload, item)` in the background, in queue order, with retries;
        the item's id. 0.21.0 runs it from this incarnation at once; 0.32.0 from the alarm (it
        survives eviction), where an `id` of a pending item replaces that item."""
        return await self._queue.queue(callback, payload, retry=retry, id=id)

    async def dequeue(self, id: str) -> bool | None:
        """Drop the pending item `id` (0.32.0 says whether it did; 0.21.0 returns None)."""
        return await self._queue.dequeue(id)

    async def dequeue_all(self) -> int | None:
        """Drop every pending item (0.32.0 says how many; 0.21.0 returns None)."""
        return await self._queue.dequeue_all()

    async def dequeue_all_by_callback(self, callback: str) -> int | None:
        """Drop every pending item of `callback` (0.32.0 says how many; 0.21.0 returns None)."""
        return await self._queue.dequeue_all_by_callback(callback)

    async def get_queue(self, id: str) -> dict[str, Any] | None:
        """The pending item `id`, or None."""
        return await self._queue.get_queue(id)

    async def get_queues(self, key: str, value: Any) -> list[dict[str, Any]]:
        """The pending items whose payload's `key` is `value`."""
        return await self._queue.get_queues(key, value)

    # -- recovery -----------------------------------------------------------------------------
    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> Any:
        """Called for each orphaned fiber. Return nothing (unmanaged: the row is dropped; managed:
        the ledger stays `interrupted`), a `FiberRecoveryResult` (managed), or raise (retried)."""
        self._log(
            "warn",
            f'Fiber "{ctx.name}" ({ctx.id}) was interrupted. Override on_fiber_recovered to '
            "resume or record it.",
        )
        return None

    async def _handle_internal_fiber_recovery(self, ctx: FiberRecoveryContext) -> bool:
        """Framework hosts (chat) claim their own fibers here; plain agents claim none."""
        return False

    # -- MCP ----------------------------------------------------------------------------------
    def add_mcp_server(self, name: str, url: str) -> str:
        """Register a server (durably) and connect it; returns its id."""
        return self._mcp.add_server(name, url)

    def remove_mcp_server(self, server_id: str) -> None:
        self._mcp.remove_server(server_id)

    def get_mcp_servers(self) -> dict[str, Any]:
        """The SDK's `MCPServersState` (tools, prompts and resources always empty here)."""
        return self._mcp.servers()

    @property
    def mcp_connections(self) -> dict[str, dict[str, Any]]:
        """The connected servers by id (MCP's own map, read-only here)."""
        return self._mcp.connections

    # -- agent tools --------------------------------------------------------------------------
    # An awaited run (detached None or False) answers with its result, a detached one with its
    # handle.
    @overload
    async def run_agent_tool(
        self,
        cls: type,
        *,
        input: Any,
        run_id: str | None = None,
        parent_tool_call_id: str | None = None,
        display_order: int = 0,
        signal: Any = None,
        detached: Literal[False] | None = None,
        input_preview: Any = None,
        display: Any = None,
        event_delivery: str | None = None,
    ) -> RunAgentToolResult: ...

    @overload
    async def run_agent_tool(
        self,
        cls: type,
        *,
        input: Any,
        run_id: str | None = None,
        parent_tool_call_id: str | None = None,
        display_order: int = 0,
        signal: Any = None,
        detached: Literal[True] | Mapping[str, Any],
        input_preview: Any = None,
        display: Any = None,
        event_delivery: str | None = None,
    ) -> DetachedRunAgentToolResult: ...

    async def run_agent_tool(
        self,
        cls: type,
        *,
        input: Any,
        run_id: str | None = None,
        parent_tool_call_id: str | None = None,
        display_order: int = 0,
        signal: Any = None,
        detached: Any = None,
        input_preview: Any = None,
        display: Any = None,
        event_delivery: str | None = None,
    ) -> RunAgentToolResult | DetachedRunAgentToolResult:
        """Run `cls` as a tool on `input` in a child sub-agent named by the run id.
        `event_delivery` (0.32.0): `"full"` (the default) or `"terminal"`, whose clients get only
        the run's progress, milestones and terminal event; 0.21.0 has no such option."""
        return await self._tools.runs.run(
            cls,
            input=input,
            run_id=run_id,
            parent_tool_call_id=parent_tool_call_id,
            display_order=display_order,
            signal=signal,
            detached=detached,
            input_preview=input_preview,
            display=display,
            event_delivery=event_delivery,
        )

    async def cancel_agent_tool(self, run_id: str, reason: Any = None) -> None:
        """Cancel a run's child. A detached run is delivered `aborted` (its `on_finish` fires);
        an awaited one is finished by its awaiting call. Idempotent: an unknown or hard-terminal
        run is left alone."""
        await self._tools.detached.cancel(run_id, reason)

    def has_agent_tool_run(self, cls_or_name: type | str, run_id: str) -> bool:
        """True iff a run with this id and child class exists (cap-rejected ones too)."""
        return self._tools.retention.has_run(cls_or_name, run_id)

    async def clear_agent_tool_runs(
        self,
        *,
        status: str | Iterable[str] | None = None,
        older_than: datetime | int | None = None,
    ) -> int:
        """Delete runs (all, or those with these statuses / started before `older_than`),
        cancelling children that still run and deleting their facets. Returns how many."""
        return await self._tools.retention.clear(status=status, older_than=older_than)

    @property
    def max_concurrent_agent_tools(self) -> float | None:
        """Per instance (each nesting level has its own); default: no limit."""
        return self._tools.admission.max_concurrent

    @max_concurrent_agent_tools.setter
    def max_concurrent_agent_tools(self, value: float | None) -> None:
        self._tools.admission.max_concurrent = value

    def report_progress(self, **progress: Any) -> None:
        """Progress is reported by chat agents running as agent-tool children; on a plain agent
        this is a no-op with a warning."""
        self._log(
            "warn",
            "report_progress is only supported on chat agents running as agent "
            "tools; ignoring on base Agent.",
        )

    async def on_agent_tool_start(self, run: AgentToolRunInfo) -> None:
        """Once per admitted new run, before its `started` frame."""

    async def on_agent_tool_finish(self, run: AgentToolRunInfo, result: Any) -> None:
        """When a run finishes (awaited: each time a live call, re-issue or recovery finishes it;
        detached: once per ledger delivery, at least once across a crash)."""

    async def on_progress(self, run: AgentToolRunInfo, snapshot: dict[str, Any]) -> None:
        """A forwarded progress or milestone of one of this agent's runs (best effort: live only,
        not re-fired after an eviction; use `inspect_agent_tool_run` for the durable state)."""

    def format_detached_completion(self, run: AgentToolRunInfo, result: Any) -> str:
        """The text a chat host injects when a detached run finishes (override it; "" injects
        nothing). `result` is the lifecycle `{status, summary?, error?, reason?, ...}`."""
        return completion_text(run, result)

    def format_detached_milestone(self, run: AgentToolRunInfo, milestone: Any) -> str:
        """The text of a milestone notification (override it; "" injects nothing)."""
        return milestone_text(run, milestone)

    async def on_before_sub_agent(self, request: Any, class_name: str, name: str) -> Any:
        """Gate a drill-in request to a sub-agent: return a Response to answer it here (a
        recommended gate is 404 unless `has_agent_tool_run(class_name, name)`); None allows."""
        return None

    async def _run_serialized_delivery(self, invoke: Callable[[], Awaitable[None]]) -> None:
        """Chat hosts run serialized deliveries between turns; a plain agent runs them inline."""
        await invoke()

    def _on_agent_tool_stream_progress(self) -> None:
        """Chat-host parents credit their own recovery progress here; plain agents do nothing."""

    # The schedule callbacks of agent tools, found by NAME on the agent (stored_names.py).
    async def _cf_detached_reconcile_tick(
        self, payload: Any, row: Mapping[str, Any] | None = None
    ) -> None:
        """The detached backbone's tick (one reconcile pass, then the next tick)."""
        await self._tools.backbone.tick(payload, row)

    async def _cf_redeliver_agent_tool_hooks(self, payload: Any = None, row: Any = None) -> None:
        """The redelivery of awaited runs' slots whose claims expired."""
        await self._tools.ledger.redeliver_hooks(payload, row)

    async def _cf_retry_agent_tool_recovery(self, payload: Any = None, row: Any = None) -> None:
        """The retry of the runs a recovery sweep of this incarnation could not finalize."""
        await self._tools.sweep.retry(payload, row)

    # -- runtime plumbing -------------------------------------------------------------------
    def _emit(self, event_type: str, **payload: Any) -> None:
        observability.emit(self, event_type, payload)

    def _log(self, level: str, message: str) -> None:
        """The SDK's console output, as trace records (`console:warn`, `console:error`)."""
        self._host.trace.emit(f"console:{level}", message=message)

    @property
    def options_resolved(self) -> AgentOptions:
        return self._options

    async def _run_fiber_with_stash_wrapper(
        self,
        name: str,
        fn: Callable[[FiberContext], Awaitable[Any]],
        *,
        initial_snapshot: Any,
        wrap: Callable[[Any], Any],
    ) -> Any:
        """Framework use (chat turns): write an initial snapshot and wrap every user stash."""
        return await self._fibers._run_fiber_with_stash_wrapper(
            name, fn, initial_snapshot=initial_snapshot, wrap=wrap
        )

    @property
    def _run_fiber_active_fibers(self) -> dict[str, None]:
        """The FiberRunner's fibers executing in this incarnation (read by recovery)."""
        return self._fibers.active

    @property
    def _destroyed(self) -> bool:
        return self._facets._destroyed

    def _hydrate_facet_identity(self) -> bool:
        return self._facets._hydrate_facet_identity()

    async def _facet_register_run(self, fiber_id: str) -> None:
        await self._facets._facet_register_run(fiber_id)

    async def _facet_unregister_run_logged(self, fiber_id: str) -> None:
        await self._facets._facet_unregister_run_logged(fiber_id)

    async def _check_facet_run_fibers(self) -> None:
        await self._facets._check_facet_run_fibers()
        owners = self._keep_alive.facet_lease_owners()
        if owners:  # in the background: the alarm itself ends as it did
            self.host.tasks.wait_until(self._facets._check_facet_lease_holders(owners))

    async def _cf_resolve_lease_holder(self, steps: list[dict[str, str]]) -> None:
        await self._facets._cf_resolve_lease_holder(steps)

    async def _dispatch_facet_schedule(self, row: dict[str, Any]) -> bool:
        return await self._facets._dispatch_facet_schedule(row)

    async def _process_due_schedules(self) -> None:
        await self._schedule_dispatch._process_due_schedules()

    async def _execute_schedule_callback(self, row: dict[str, Any]) -> None:
        await self._schedule_dispatch._execute_schedule_callback(row)

    async def _handle_alarm_memory_limit(self, error: BaseException) -> bool:
        return await self._schedule_dispatch._handle_alarm_memory_limit(error)

    def _clear_alarm_memory_limit_strikes(self) -> None:
        self._schedule_dispatch._clear_alarm_memory_limit_strikes()

    async def _check_run_fibers(self) -> None:
        """One recovery pass (Recovery's); at once if one is already running."""
        await self._recovery._check_run_fibers()

    def _has_pending_fiber_recovery(self) -> bool:
        return self._recovery._has_pending_fiber_recovery()

    @property
    def _recovery_no_progress_scans(self) -> int:
        """Recovery's count of passes in a row without progress (read by tests)."""
        return self._recovery._recovery_no_progress_scans

    async def _schedule_next_alarm(self) -> None:
        await self._lifecycle.rearm()

    @property
    def _keep_alive_refs(self) -> int:
        """KeepAlive's count of the leases held (read by tests and fixtures)."""
        return self._keep_alive.refs

    @property
    def _facet_keep_alive_tokens(self) -> dict[str, None]:
        """On a root, KeepAlive's tokens of its sub-agents' leases (read by tests)."""
        return self._keep_alive.facet_tokens

    # -- platform entries -------------------------------------------------------------------
    async def _cf_start(self) -> None:
        """Startup, once per incarnation under the input gate, in the Lifecycle's order."""
        set_current_agent(self)
        await self._lifecycle.start()

    async def _cf_fetch(self, request: Request) -> Response:
        set_current_agent(self)
        routed = await self._route_sub_agent_request(request)
        if routed is not None:
            return routed
        return await self.on_request(request)

    async def _route_sub_agent_request(self, request: Request) -> Response | None:
        """`.../sub/<Class>/<name>[/rest]` drills into a sub-agent, gated by on_before_sub_agent."""
        parts = request.path.strip("/").split("/")
        if "sub" not in parts:
            return None
        at = parts.index("sub")
        if len(parts) < at + 3:
            return Response(400, "sub-agent path needs /sub/<class>/<name>")
        class_name, name = parts[at + 1], parts[at + 2]
        gate = await self.on_before_sub_agent(request, class_name, name)
        if isinstance(gate, Response):
            probe(self.host, "agent.sub_agent_request_gated")
            return gate
        forwarded = gate if isinstance(gate, Request) else request
        try:
            child = await self.host.facets.resolve_named(class_name, name)
        except LookupError:
            return Response(404, f"no sub-agent {class_name}/{name}")
        rest = "/" + "/".join(parts[at + 3 :])
        response: Response = await child.call(
            "_cf_fetch", Request(forwarded.method, rest, forwarded.body, forwarded.headers)
        )
        return response

    async def _cf_connect(self, connection: Connection) -> None:
        set_current_agent(self)
        if self.should_send_protocol_messages(connection):
            if self._options.send_identity_on_connect:
                connection.send(
                    {
                        "type": IDENTITY_FRAME_TYPE,
                        "name": self.name,
                        "agent": kebab_case(type(self).__name__),
                    }
                )
            if self.state is not None:
                connection.send({"type": STATE_FRAME_TYPE, "state": self.state})
            connection.send(self._mcp.servers_frame())
        else:
            self._no_protocol_connections.add(connection.id)
        self._emit("connect", connectionId=connection.id)
        await self._tools.retention.replay(connection)
        await self.on_connect(connection)

    async def _cf_message(self, connection: Connection, message: Any) -> None:
        set_current_agent(self)
        await self.on_message(connection, message)

    async def _cf_close(self, connection: Connection, code: int, reason: str) -> None:
        self._no_protocol_connections.discard(connection.id)
        self._emit("disconnect", connectionId=connection.id, code=code, reason=reason)
        await self.on_close(connection, code, reason)

    async def _cf_rpc(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A call on a stub: the method runs with this agent as the ambient agent."""
        set_current_agent(self)
        result = getattr(self, method)(*args, **kwargs)
        if hasattr(result, "__await__"):
            result = await result
        return result

    def _cf_rpc_starts(self, method: str) -> bool:
        """Whether an RPC to `method` on a cold incarnation runs startup first (the release's
        rule: never on 0.21.0)."""
        return self._lifecycle.rpc_starts(method)

    def _cf_alarm_arriving(self) -> None:
        """The platform delivers an alarm next, before startup (0.32.0 arms a fallback here)."""
        self._lifecycle.alarm_arriving()

    async def _cf_alarm_startup_failed(self, error: BaseException) -> bool:
        """The startup an alarm delivery ran failed: whether the alarm handles it itself (0.32.0
        starts inside its alarm handler, whose breaker takes a memory-limit reset)."""
        return await self._lifecycle.alarm_startup_failed(error)

    async def _cf_alarm(self) -> None:
        set_current_agent(self)
        await self.alarm()

    async def alarm(self) -> None:
        """The platform's alarm entry (startup has already run in this incarnation)."""
        await self._lifecycle.alarm()

    # -- RPC entries a sub-agent calls on its root ------------------------------------------
    async def _cf_reschedule(self) -> None:
        await self._lifecycle.rearm()

    async def _cf_register_facet_run(self, owner_path: str, owner_key: str, run_id: str) -> None:
        await self._facets._cf_register_facet_run(owner_path, owner_key, run_id)

    async def _cf_unregister_facet_run(self, owner_key: str, run_id: str) -> None:
        await self._facets._cf_unregister_facet_run(owner_key, run_id)

    async def _cf_check_run_fibers_for_facet(self, steps: list[dict[str, str]]) -> int:
        return await self._facets._cf_check_run_fibers_for_facet(steps)

    async def _cf_dispatch_scheduled_callback(
        self, row: dict[str, Any], steps: list[dict[str, str]]
    ) -> bool:
        return await self._facets._cf_dispatch_scheduled_callback(row, steps)

    async def _cf_cleanup_facet_prefix(self, prefix: list[dict[str, str]]) -> None:
        await self._facets._cf_cleanup_facet_prefix(prefix)

    async def _cf_schedule_for_facet(
        self,
        timing: ScheduleTiming,
        callback: str,
        payload: Any,
        owner_path: list[dict[str, str]],
        owner_key: str,
        options: dict[str, Any],
    ) -> tuple[Schedule, bool]:
        return await self._scheduler.schedule_for_facet(
            timing, callback, payload, owner_path, owner_key, options
        )

    async def _cf_cancel_schedule_for_facet(self, schedule_id: str, owner_key: str) -> str | None:
        return await self._scheduler.cancel_for_facet(schedule_id, owner_key)

    async def _cf_list_schedules_for_facet(
        self, owner_key: str, filters: dict[str, Any]
    ) -> list[Schedule]:
        return self._scheduler.list_for_facet(owner_key, filters)

    async def _cf_route_queue(self, owner: dict[str, str], message: dict[str, Any]) -> Any:
        return await self._queue.on_route(owner, message)

    async def _cf_dispatch_queued_item(
        self, item: dict[str, Any], steps: list[dict[str, str]]
    ) -> bool:
        return await self._queue.dispatch_down(item, steps)

    async def _cf_acquire_facet_keep_alive(self, owner_key: str) -> str:
        return await self._keep_alive.acquire_for_facet(owner_key)

    async def _cf_release_facet_keep_alive(self, token: str) -> None:
        await self._keep_alive.release_facet_token(token)

    async def _cf_release_facet_keep_alives_of(self, owner_key: str) -> None:
        await self._keep_alive.release_leases_of(owner_key)
