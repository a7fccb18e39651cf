"""`Queue` (0.21.0): background work run in the order it was queued, in `cf_agents_queues`.

`queue(callback, payload)` inserts one row (`id` a `nanoid(9)`, the payload as JSON, the
callback's name, the caller's own retry options as JSON, `created_at` in Unix seconds), emits
`queue:create` and starts a flush in the background of the incarnation, without waiting for it.
The flush runs one at a time per incarnation: it reads every row `ORDER BY created_at`, and for
each one calls `self.<callback>(payload, row)` with the SDK's retries (the row's options over the
class's; `queue:retry` before every attempt after the first, a jittered wait between them), and
deletes the row after, however the callback ended; a callback that fails its last attempt is
reported (`queue:error`, `on_error`) first. A row whose callback has gone is deleted with an
error in the log. The flush reads the table again until it is empty, so a row queued while it
runs is run by it. Nothing flushes at startup: rows left by an incarnation that died mid-flush
run at the next `queue()` call. `dequeue`, `dequeue_all`, `dequeue_all_by_callback` delete rows;
`get_queue` and `get_queues` read them (the row, with its payload and retry parsed).

0.21.0 creates the table with the agent's schema at construction; this port creates it on the
first queue call of an incarnation instead (docs/divergences.md Q1), so that an agent that never
queues runs the statements it ran before the queue existed.

The same module holds what 0.32.0's Queue capability shares with it (`releases/v0_32/queue.py`):
the surface the agent delegates to (`QueueApi`), the agent's port (`QueueHooks`) and the
payload filter of `get_queues`.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from agents_core.errors import AgentsError, InvalidArgument
from agents_core.options import RetryOptions, jitter_backoff_ms, resolve_retry
from agents_core.schedule_dispatch import retry_from_json, retry_to_json
from agents_core.stored_names import callback_method

if TYPE_CHECKING:
    from agents_core.context import AgentContext

__all__ = [
    "QUEUES_DDL",
    "Queue",
    "QueueApi",
    "QueueHooks",
    "call_on_error",
    "check_queue_callback",
    "check_queue_retry",
    "js_strict_equal",
    "parse_json",
]

QUEUES_DDL = """CREATE TABLE IF NOT EXISTS cf_agents_queues (
        id TEXT PRIMARY KEY NOT NULL,
        payload TEXT,
        callback TEXT,
        created_at INTEGER DEFAULT (unixepoch()),
        retry_options TEXT
      )"""
"""0.21.0's table, as its schema leaves it (`retry_options` is a later added column)."""

_MISSING: Any = object()


class QueueHooks(Protocol):
    """What a Queue uses of the agent: `on_error` (a hook users override), the sub-agent
    registry a routed item is walked down by, and the root's prune of a sub-tree that has gone.
    The agent is also where a callback is looked up by name."""

    def on_error(self, error: BaseException) -> Any: ...
    def has_sub_agent(self, cls_or_name: type | str, name: str) -> bool: ...
    async def _cf_cleanup_facet_prefix(self, prefix: list[dict[str, str]]) -> None: ...


class QueueApi(Protocol):
    """The queue calls `Agent` delegates to, whichever release built the queue, and the two
    entries a root and its sub-agents call on each other (0.32.0 only)."""

    async def queue(
        self,
        callback: Any,
        payload: Any = None,
        *,
        retry: Mapping[str, Any] | RetryOptions | None = None,
        id: str | None = None,
    ) -> str: ...
    async def dequeue(self, id: str) -> bool | None: ...
    async def dequeue_all(self) -> int | None: ...
    async def dequeue_all_by_callback(self, callback: str) -> int | None: ...
    async def get_queue(self, id: str) -> dict[str, Any] | None: ...
    async def get_queues(self, key: str, value: Any) -> list[dict[str, Any]]: ...
    async def on_route(self, owner: Mapping[str, str], message: Mapping[str, Any]) -> Any: ...
    async def dispatch_down(self, item: dict[str, Any], steps: list[dict[str, str]]) -> bool: ...


def check_queue_callback(agent: object, callback: Any) -> None:
    """`Agent.queue`'s checks, the same on both releases."""
    if not isinstance(callback, str):
        raise InvalidArgument(f"Callback must be a string (the name of a method), got {callback!r}")
    if callback_method(agent, callback) is None:
        raise InvalidArgument(
            f"self.{callback} is not a function: define the method "
            f"{type(agent).__name__}.{callback}(payload, item)"
        )


def check_queue_retry(
    retry: Mapping[str, Any] | RetryOptions | None, defaults: RetryOptions
) -> dict[str, Any] | None:
    """The caller's retry options, validated over the class's, as stored (camelCase JSON keys);
    None when it gave none."""
    if retry is None:
        return None
    if not isinstance(retry, Mapping | RetryOptions):
        raise InvalidArgument(
            f"retry must be a mapping such as {{'max_attempts': 5}} or RetryOptions, got {retry!r}"
        )
    resolve_retry(retry, defaults)
    if isinstance(retry, RetryOptions):
        retry = {
            "max_attempts": retry.max_attempts,
            "base_delay_ms": retry.base_delay_ms,
            "max_delay_ms": retry.max_delay_ms,
        }
    return retry_to_json({k: v for k, v in retry.items() if v is not None})


def js_strict_equal(a: Any, b: Any) -> bool:
    """JavaScript's `===` between two values read from JSON: an object or array is never equal
    to another one, a boolean never to a number."""
    if a is _MISSING or b is _MISSING:
        return False
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return a is b
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return bool(a == b)


def parse_json(text: Any) -> Any:
    """`JSON.parse` of a column: NULL reads as null."""
    return None if text is None else json.loads(text)


async def call_on_error(hooks: QueueHooks, error: BaseException) -> None:
    """Hand an item's error to the agent's `on_error`, sync or async; an error of `on_error`
    itself is swallowed, as in the SDK."""
    try:
        result = hooks.on_error(error)
        if inspect.isawaitable(result):
            await result
    except Exception:  # noqa: BLE001 - errors of on_error are swallowed, as in the SDK
        return


def _property(payload: Any, key: str) -> Any:
    """`payload[key]` as JavaScript reads it (0.21.0's `get_queues`): a missing key is no value
    at all, and a null payload throws."""
    if payload is None:
        raise TypeError(f"Cannot read properties of null (reading '{key}')")
    if isinstance(payload, dict):
        return payload.get(key, _MISSING)
    return _MISSING


def _encode(payload: Any) -> str:
    try:
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(
            f"queue payload must be JSON-serialisable ({exc}); got {payload!r}"
        ) from None


def _item_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """0.21.0's `QueueItem`: the row, its payload and retry options parsed."""
    item = dict(row)
    item["payload"] = parse_json(row["payload"])
    retry = row["retry_options"]
    item["retry"] = json.loads(retry) if isinstance(retry, str) else None
    return item


class Queue:
    """One agent's queue on 0.21.0 (one per incarnation; the rows are the agent's storage)."""

    __slots__ = ("_ctx", "_hooks", "_table_ensured", "_flushing")

    def __init__(self, ctx: AgentContext, hooks: QueueHooks) -> None:
        self._ctx = ctx
        self._hooks = hooks
        self._table_ensured = False
        self._flushing = False
        """A flush is running in this incarnation (a second one returns at once)."""

    def _sql(self, query: str, *params: Any) -> list[dict[str, Any]]:
        if not self._table_ensured:
            self._ctx.sql(QUEUES_DDL)
            self._table_ensured = True
        return self._ctx.sql(query, *params)

    # -- the API ---------------------------------------------------------------------------------
    async def queue(
        self,
        callback: Any,
        payload: Any = None,
        *,
        retry: Mapping[str, Any] | RetryOptions | None = None,
        id: str | None = None,
    ) -> str:
        """Insert the item, announce it, start a flush (not awaited); the item's id. 0.21.0
        reads no `id` option: every item gets a new one."""
        host = self._ctx.host
        item_id = host.entropy.nanoid(9)
        check_queue_callback(self._hooks, callback)
        given = check_queue_retry(retry, self._ctx.options.retry)
        self._sql(
            "INSERT OR REPLACE INTO cf_agents_queues (id, payload, callback, retry_options, "
            "created_at) VALUES (?, ?, ?, ?, ?)",
            item_id,
            _encode(payload),
            callback,
            None if given is None else _encode(given),
            host.clock.now_ms() // 1000,
        )
        self._ctx.emit("queue:create", callback=callback, id=item_id)
        host.tasks.wait_until(self._flush_logged())
        return item_id

    async def dequeue(self, id: str) -> None:
        self._sql("DELETE FROM cf_agents_queues WHERE id = ?", id)

    async def dequeue_all(self) -> None:
        self._sql("DELETE FROM cf_agents_queues")

    async def dequeue_all_by_callback(self, callback: str) -> None:
        self._sql("DELETE FROM cf_agents_queues WHERE callback = ?", callback)

    async def get_queue(self, id: str) -> dict[str, Any] | None:
        rows = self._sql("SELECT * FROM cf_agents_queues WHERE id = ?", id)
        return _item_of(rows[0]) if rows else None

    async def get_queues(self, key: str, value: Any) -> list[dict[str, Any]]:
        """Every item whose payload's `key` is `value` (strictly equal); a row whose payload is
        null makes it throw, as 0.21.0's does."""
        rows = self._sql("SELECT * FROM cf_agents_queues")
        return [
            _item_of(row)
            for row in rows
            if js_strict_equal(_property(parse_json(row["payload"]), key), value)
        ]

    async def on_route(self, owner: Mapping[str, str], message: Mapping[str, Any]) -> Any:
        raise AgentsError("0.21.0 routes no queue call: a sub-agent keeps its own queue")

    async def dispatch_down(self, item: dict[str, Any], steps: list[dict[str, str]]) -> bool:
        raise AgentsError("0.21.0 routes no queue item: a sub-agent runs its own queue")

    # -- the flush -------------------------------------------------------------------------------
    async def _flush_logged(self) -> None:
        try:
            await self._flush()
        except Exception as exc:  # noqa: BLE001 - the SDK logs a failed flush and goes on
            self._ctx.log("error", f"Error flushing queue: {type(exc).__name__}: {exc}")

    async def _flush(self) -> None:
        if self._flushing:
            return
        self._flushing = True
        try:
            while True:
                rows = self._sql("SELECT * FROM cf_agents_queues ORDER BY created_at ASC")
                if not rows:
                    return
                for row in rows:
                    await self._run_row(row)
        finally:
            self._flushing = False

    async def _run_row(self, row: dict[str, Any]) -> None:
        """One item: its callback with retries, then its row deleted. A payload or retry
        column that is not JSON ends the flush with the row kept, as in the SDK."""
        callback, item_id = row["callback"], row["id"]
        method = callback_method(self._hooks, callback)
        if method is None:
            self._ctx.log("error", f"callback {callback} not found")
            await self.dequeue(item_id)
            return
        retry = resolve_retry(retry_from_json(row["retry_options"]), self._ctx.options.retry)
        payload = parse_json(row["payload"])
        host = self._ctx.host
        try:
            attempt = 1
            while True:
                if attempt > 1:
                    self._ctx.emit(
                        "queue:retry",
                        callback=callback,
                        id=item_id,
                        attempt=attempt,
                        maxAttempts=retry.max_attempts,
                    )
                try:
                    result = method(payload, dict(row))
                    if inspect.isawaitable(result):
                        await result
                    break
                except Exception:
                    if attempt >= retry.max_attempts:
                        raise
                base, cap = int(retry.base_delay_ms), int(retry.max_delay_ms)
                await host.clock.sleep(jitter_backoff_ms(host.entropy, attempt, base, cap))
                attempt += 1
        except Exception as error:  # noqa: BLE001 - reported, then the row goes, as in the SDK
            self._ctx.log(
                "error",
                f'queue callback "{callback}" failed after {retry.max_attempts} attempts: '
                f"{type(error).__name__}: {error}",
            )
            self._ctx.emit(
                "queue:error",
                callback=callback,
                id=item_id,
                error=str(error),
                attempts=retry.max_attempts,
            )
            await call_on_error(self._hooks, error)
        finally:
            await self.dequeue(item_id)
