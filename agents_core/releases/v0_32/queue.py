"""0.32.0's Queue capability: queued items as jobs of the capability `queue` (sdk-0.32 §6.4).

The API is 0.21.0's (`agents_core/queue.py`); what changes is where an item lives and who runs
it. An item is one job of `cf_agents_jobs`, due at once: `fn` is the callback, `time` a strictly
increasing "now" in ms (never before the clock, always after the last item's time, so the job
driver runs items in push order), `retry_options` the fully resolved retry, and the payload the
envelope `{payload, owner_path, owner_path_key}` with the user's payload under `payload`. The job
driver runs it (`on_job`): `queue:retry` before every attempt after the first, the callback with
its payload and the item `{id, callback, payload, createdAt, retry}`; a final ordinary failure is
reported (`queue:error`, `on_error`) and the job is deleted. Items survive the incarnation: the
alarm runs them, not a flush of the queuing incarnation. A push with the id of an item of the
same owner replaces it and keeps its place. `dequeue` answers whether an item went,
`dequeue_all` and `dequeue_all_by_callback` how many.

At startup, below `cf_agents:queue_schema_version` 1, the rows of 0.21.0's `cf_agents_queues`
become jobs with their ids, in `created_at, rowid` order (a row whose payload is not JSON is
skipped, retry options that are not JSON count as none), and the table is dropped.

A sub-agent's items are jobs of its root whose envelope names the owner (its path as JSON and
its key): the sub-agent sends each call to its root's Queue and announces `queue:create` itself.
When due, the root walks down to the owner hop by hop; the owner runs the callback with its own
retries (a platform failure goes back to the root, which keeps the job). A hop whose registry
entry has gone prunes that sub-tree on the root (its schedules, queue items and fiber leases:
the build gives Facets `drop_owned_under` to prune with), and the item is not run; a walk that
throws (not a platform failure) is reported with `attempts: 0` and the job yields, due again at
once.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from agents_core.errors import InvalidArgument
from agents_core.jsontext import parse_json_text
from agents_core.options import RetryOptions, jitter_backoff_ms
from agents_core.queue import (
    QueueHooks,
    call_on_error,
    check_queue_callback,
    check_queue_retry,
    js_strict_equal,
)
from agents_core.releases.v0_32.job_driver import is_platform_failure
from agents_core.releases.v0_32.schema_keys import QUEUE_SCHEMA
from agents_core.schedule_dispatch import is_code_update_reset
from agents_core.stored_names import callback_method

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.releases.v0_32.job_queue import Job
    from agents_core.releases.v0_32.lifecycle import Lifecycle

__all__ = ["QUEUE_CAPABILITY", "QueueCapability"]

QUEUE_CAPABILITY = "queue"
"""The capability of the jobs `queue()` writes (the SDK's `Queue`)."""

_RETRY_KEYS = ("maxAttempts", "baseDelayMs", "maxDelayMs")


def _is_item_envelope(payload: Any) -> bool:
    """The SDK's `isQueueJobPayload`: an object with an `owner_path` key."""
    return isinstance(payload, Mapping) and "owner_path" in payload


def _resolved(given: Any, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The SDK's `resolveRetryConfig`: each field of `given` (camelCase), else the default."""
    source = given if isinstance(given, Mapping) else {}
    return {k: defaults[k] if source.get(k) is None else source[k] for k in _RETRY_KEYS}


def _job_to_item(job: Job, envelope: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": job.id,
        "callback": job.fn,
        "payload": envelope.get("payload"),
        "createdAt": job.created_at,
        "retry": None if job.retry is None else dict(job.retry),
    }


def _owner_key(owner: Mapping[str, str] | None) -> str | None:
    return None if owner is None else owner["key"]


class QueueCapability:
    """One agent's queue on the job queue, and the capability that runs its items."""

    __slots__ = ("_ctx", "_lc", "_jobs", "_hooks", "_self_path", "_owner", "_last_time")

    def __init__(
        self,
        ctx: AgentContext,
        lifecycle: Lifecycle,
        hooks: QueueHooks,
        self_path: list[dict[str, str]],
        owner_key: str,
    ) -> None:
        self._ctx = ctx
        self._lc = lifecycle
        self._jobs = lifecycle.jobs_for(QUEUE_CAPABILITY)
        self._hooks = hooks
        self._self_path = self_path
        self._owner: dict[str, str] | None = (
            {"key": owner_key, "data": json.dumps(self_path, separators=(",", ":"))}
            if ctx.is_facet
            else None
        )
        """A sub-agent's address on its root (the SDK's `routes.source`); None on a root."""
        self._last_time: int | None = None
        """The due time of the last item pushed (read from the queue on first need)."""

    @property
    def _defaults(self) -> dict[str, Any]:
        retry = self._ctx.options.retry
        return {
            "maxAttempts": retry.max_attempts,
            "baseDelayMs": retry.base_delay_ms,
            "maxDelayMs": retry.max_delay_ms,
        }

    # -- the capability --------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return QUEUE_CAPABILITY

    async def on_start(self) -> None:
        """Move a 0.21.0 queue table into the job queue once (below
        `cf_agents:queue_schema_version` 1, spec §6.4)."""
        await QUEUE_SCHEMA.migrate(self._ctx.host.kv, self._migrate_legacy_table)

    async def _migrate_legacy_table(self, version: int) -> None:
        sql = self._ctx.sql
        exists = sql(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'cf_agents_queues'"
        )
        if not exists:
            return
        for row in sql("SELECT * FROM cf_agents_queues ORDER BY created_at ASC, rowid ASC"):
            envelope: dict[str, Any] = {}
            if isinstance(row["payload"], str):
                try:
                    envelope["payload"] = json.loads(row["payload"])
                except ValueError as exc:
                    self._ctx.log(
                        "error",
                        f'Skipping queue item "{row["id"]}" during job-queue migration: its '
                        f"payload is not valid JSON: {exc}",
                    )
                    continue
            _, retry = parse_json_text(row["retry_options"])  # invalid JSON reads as none
            envelope["owner_path"] = None
            envelope["owner_path_key"] = None
            await self._jobs.push(
                row["callback"],
                self._next_time(),
                id=row["id"],
                payload=envelope,
                retry=_resolved(retry, self._defaults),
            )
        sql("DROP TABLE cf_agents_queues")

    async def on_job(self, job: Job, attempt: int) -> Any:
        envelope = job.payload
        if not _is_item_envelope(envelope):
            self._ctx.log("error", f"Malformed queue item {job.id}; dropping it")
            return None
        item = _job_to_item(job, envelope)
        if attempt > 1:
            self._lc.emit_event(
                "queue:retry",
                callback=job.fn,
                id=job.id,
                attempt=attempt,
                maxAttempts=_resolved(job.retry, self._defaults)["maxAttempts"],
            )
        if envelope.get("owner_path"):
            try:
                await self._route_down(item, envelope["owner_path"])
            except Exception as error:
                if is_platform_failure(error):
                    raise
                self._ctx.log(
                    "error",
                    f'error dispatching queue callback "{job.fn}": {type(error).__name__}: {error}',
                )
                self._lc.emit_event(
                    "queue:error", callback=job.fn, id=job.id, error=str(error), attempts=0
                )
                await call_on_error(self._hooks, error)
                return "yield"
            return None
        method = callback_method(self._hooks, job.fn)
        if method is None:
            self._ctx.log("error", f"callback {job.fn} not found")
            return None
        result = method(item["payload"], item)
        if inspect.isawaitable(result):
            await result
        return None

    @property
    def on_job_error(self) -> Callable[[Job, int, BaseException], Awaitable[Any]]:
        return self._on_job_error

    async def _on_job_error(self, job: Job, attempt: int, error: BaseException) -> Any:
        """An item's final ordinary failure: reported, then the item is dropped."""
        attempts = _resolved(job.retry, self._defaults)["maxAttempts"]
        self._ctx.log(
            "error",
            f'queue callback "{job.fn}" failed after {attempts} attempts: '
            f"{type(error).__name__}: {error}",
        )
        self._lc.emit_event(
            "queue:error", callback=job.fn, id=job.id, error=str(error), attempts=attempts
        )
        await call_on_error(self._hooks, error)
        return None

    # -- the API ---------------------------------------------------------------------------------
    async def queue(
        self,
        callback: Any,
        payload: Any = None,
        *,
        retry: Mapping[str, Any] | RetryOptions | None = None,
        id: str | None = None,
    ) -> str:
        """Push one item, due at once; its id. The row is written before this returns."""
        check_queue_callback(self._hooks, callback)
        given = check_queue_retry(retry, self._ctx.options.retry)
        if id is not None and (not isinstance(id, str) or not id.strip()):
            raise InvalidArgument("Queue item ids must be non-empty")
        options = {"retry": given, "id": id}
        if self._owner is not None:
            item = await self._to_root(
                {"type": "push", "callback": callback, "payload": payload, "options": options}
            )
        else:
            item = await self._insert(None, callback, payload, options)
        self._lc.emit_event("queue:create", callback=callback, id=item["id"])
        return str(item["id"])

    async def dequeue(self, id: str) -> bool:
        if self._owner is not None:
            return bool(await self._to_root({"type": "cancel", "id": id}))
        return await self._cancel_for_owner(None, id)

    async def dequeue_all(self) -> int:
        return await self._cancel_all(None)

    async def dequeue_all_by_callback(self, callback: str) -> int:
        return await self._cancel_all(callback)

    async def _cancel_all(self, callback: str | None) -> int:
        if self._owner is not None:
            return int(await self._to_root({"type": "cancelAll", "callback": callback}))
        return await self._cancel_all_for_owner(None, callback)

    async def get_queue(self, id: str) -> dict[str, Any] | None:
        if self._owner is not None:
            found: dict[str, Any] | None = await self._to_root({"type": "get", "id": id})
            return found
        return self._get_for_owner(None, id)

    async def get_queues(self, key: str, value: Any) -> list[dict[str, Any]]:
        """Every item of this agent, in push order, whose payload is an object with `key`
        strictly equal to `value`."""
        if self._owner is not None:
            items: list[dict[str, Any]] = await self._to_root({"type": "list", "criteria": {}})
        else:
            items = self._list_for_owner(None, {})
        return [
            item
            for item in items
            if isinstance(item["payload"], dict)
            and key in item["payload"]
            and js_strict_equal(item["payload"][key], value)
        ]

    # -- a root's side of a sub-agent's calls ----------------------------------------------------
    async def _to_root(self, message: dict[str, Any]) -> Any:
        return await self._ctx.host.facets.root().call("_cf_route_queue", self._owner, message)

    async def on_route(self, owner: Mapping[str, str], message: Mapping[str, Any]) -> Any:
        """A sub-agent's call, on its root (`owner` is its address)."""
        kind = message.get("type")
        if kind == "push":
            return await self._insert(
                owner, message["callback"], message.get("payload"), message.get("options") or {}
            )
        if kind == "get":
            return self._get_for_owner(owner, message["id"])
        if kind == "list":
            return self._list_for_owner(owner, message.get("criteria") or {})
        if kind == "cancel":
            return await self._cancel_for_owner(owner, message["id"])
        if kind == "cancelAll":
            return await self._cancel_all_for_owner(owner, message.get("callback"))
        raise InvalidArgument("Unknown routed Queue message")

    # -- a sub-agent's items, walked down from the root ------------------------------------------
    async def _route_down(self, item: dict[str, Any], owner_path: Any) -> bool:
        """On the root: walk to the owner the envelope names and run the item there."""
        try:
            target = json.loads(owner_path)
        except (TypeError, ValueError):
            raise InvalidArgument("Lifecycle route target is not a valid Agent path") from None
        here = self._self_path
        if not isinstance(target, list) or target[: len(here)] != here:
            shown = json.dumps(here, separators=(",", ":"))
            raise InvalidArgument(f"Lifecycle route does not descend from {shown}.")
        return await self.dispatch_down(item, target[len(here) :])

    async def dispatch_down(self, item: dict[str, Any], steps: list[dict[str, str]]) -> bool:
        """One hop of the walk: run the item here when `steps` is empty, else hand it to the
        next sub-agent; a registry entry that has gone prunes its sub-tree on the root and
        runs nothing (False)."""
        if not steps:
            await self._execute_routed(item)
            return True
        step = steps[0]
        if not self._hooks.has_sub_agent(step["className"], step["name"]):
            stale = [*self._self_path, {"className": step["className"], "name": step["name"]}]
            if self._ctx.is_facet:
                await self._ctx.host.facets.root().call("_cf_cleanup_facet_prefix", stale)
            else:
                await self._hooks._cf_cleanup_facet_prefix(stale)
            return False
        child = await self._ctx.host.facets.resolve_named(step["className"], step["name"])
        dispatched: bool = await child.call("_cf_dispatch_queued_item", item, steps[1:])
        return dispatched

    async def _execute_routed(self, item: Mapping[str, Any]) -> None:
        """The owner's run of its item, with its own retries: a code-update reset is not
        retried, a final platform failure goes back to the root, any other is reported."""
        callback = item["callback"]
        method = callback_method(self._hooks, callback)
        if method is None:
            self._ctx.log("error", f"callback {callback} not found")
            return
        retry = _resolved(item.get("retry"), self._defaults)
        attempts = int(retry["maxAttempts"])
        base, cap = int(retry["baseDelayMs"]), int(retry["maxDelayMs"])
        host = self._ctx.host
        attempt = 1
        try:
            while True:
                if attempt > 1:
                    self._lc.emit_event(
                        "queue:retry",
                        callback=callback,
                        id=item["id"],
                        attempt=attempt,
                        maxAttempts=attempts,
                    )
                try:
                    result = method(item.get("payload"), dict(item))
                    if inspect.isawaitable(result):
                        await result
                    return
                except Exception as error:
                    if attempt + 1 > attempts or is_code_update_reset(error):
                        raise
                await host.clock.sleep(jitter_backoff_ms(host.entropy, attempt, base, cap))
                attempt += 1
        except Exception as error:
            if is_platform_failure(error):
                raise
            self._ctx.log(
                "error",
                f'queue callback "{callback}" failed after {attempts} attempts: '
                f"{type(error).__name__}: {error}",
            )
            self._lc.emit_event(
                "queue:error",
                callback=callback,
                id=item["id"],
                error=str(error),
                attempts=attempts,
            )
            await call_on_error(self._hooks, error)

    def drop_owned_under(self, prefix: str) -> None:
        """On a root: delete every item owned by the sub-agent whose key is `prefix` or by one
        below it (the caller re-arms once its prune is done)."""
        for job in self._jobs.routed_under(prefix):
            if _is_item_envelope(job.payload):
                self._lc.queue.cancel(QUEUE_CAPABILITY, job.id)

    # -- storage ---------------------------------------------------------------------------------
    def _owned(self) -> list[tuple[Job, Mapping[str, Any]]]:
        """Every item of this queue, in push order."""
        return [(job, job.payload) for job in self._jobs.list() if _is_item_envelope(job.payload)]

    def _next_time(self) -> int:
        """The next due time: now, or one ms after the last item's, whichever is later."""
        if self._last_time is None:
            self._last_time = max((job.time for job, _ in self._owned()), default=0)
        at = max(self._ctx.host.clock.now_ms(), self._last_time + 1)
        self._last_time = at
        return at

    async def _insert(
        self,
        owner: Mapping[str, str] | None,
        callback: str,
        payload: Any,
        options: Mapping[str, Any],
    ) -> dict[str, Any]:
        id = options.get("id")
        existing = self._jobs.get(id) if id is not None else None
        keep_time = existing is not None and self._get_for_owner(owner, existing.id) is not None
        envelope: dict[str, Any] = {}
        if payload is not None:
            envelope["payload"] = payload
        envelope["owner_path"] = None if owner is None else owner["data"]
        envelope["owner_path_key"] = _owner_key(owner)
        job = await self._jobs.push(
            callback,
            existing.time if keep_time and existing is not None else self._next_time(),
            id=id,
            payload=envelope,
            retry=_resolved(options.get("retry"), self._defaults),
        )
        return _job_to_item(job, job.payload)

    def _get_for_owner(self, owner: Mapping[str, str] | None, id: str) -> dict[str, Any] | None:
        job = self._jobs.get(id)
        if job is None or not _is_item_envelope(job.payload):
            return None
        if job.payload.get("owner_path_key") != _owner_key(owner):
            return None
        return _job_to_item(job, job.payload)

    def _list_for_owner(
        self, owner: Mapping[str, str] | None, criteria: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        wanted = criteria.get("callback")
        return [
            _job_to_item(job, envelope)
            for job, envelope in self._owned()
            if envelope.get("owner_path_key") == _owner_key(owner)
            and not (wanted and job.fn != wanted)
        ]

    async def _cancel_for_owner(self, owner: Mapping[str, str] | None, id: str) -> bool:
        if self._get_for_owner(owner, id) is None:
            return False
        return await self._jobs.cancel(id)

    async def _cancel_all_for_owner(
        self, owner: Mapping[str, str] | None, callback: str | None
    ) -> int:
        cancelled = 0
        for item in self._list_for_owner(owner, {"callback": callback}):
            if await self._jobs.cancel(item["id"]):
                cancelled += 1
        return cancelled
