"""Schedules: `schedule`, `schedule_every`, cancel, get and list, stored in `cf_agents_schedules`.

A schedule is one row naming a method of the agent, a JSON payload and its next due time in Unix
*seconds*. Three one-call forms (a datetime → `scheduled`, a number of seconds → `delayed`, a cron
string → `cron`) and the fixed `interval` form; cron and interval rows are idempotent by default
(same arguments → same row), the one-shot forms only on request. Every write re-arms the alarm
slot through the multiplexer, also on a dedupe hit, which is how a lost alarm is recovered.
Running the due rows is in `agents_core.schedule_dispatch` (spec fibers §4).

Rows are scoped by owner: `owner_path_key IS NULL` for the agent's own rows, a facet's path key for
rows the root keeps on a sub-agent's behalf (`_insert_schedule` takes the owner explicitly). A
sub-agent has no alarm: its Scheduler sends each call to its root's (`_cf_*_for_facet`).

`Scheduler` is the component: it owns the table's rows (written here; run by the due-schedule
dispatch) and the callbacks warned about in `on_start`; it re-arms through the Lifecycle and
finds callbacks by name on the agent it is given. The SDK's counterpart is the Agent's
`schedule`, `scheduleEvery`, `cancelSchedule`, `getScheduleById`, `listSchedules` (0.21.0) and
the `scheduler` capability (0.32.0, spec sdk-0.32 §3).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from agents_core.cron import next_cron_time_ms
from agents_core.errors import AgentsError, InvalidArgument
from agents_core.options import RetryOptions, resolve_retry
from agents_core.probes import probe
from agents_core.schedule_dispatch import retry_from_json, retry_to_json
from agents_core.stored_names import callback_method

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.lifecycle import Lifecycle

__all__ = ["Schedule", "Scheduler"]

SCHEDULE_EVERY_MAX_SECONDS = 2_592_000  # 30 days
TIME_RANGE_END_MAX_S = 999_999_999_999  # the SDK's `new Date(999999999999999)`, in seconds
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)


@dataclass(frozen=True)
class Schedule:
    """A schedule as the API returns it: no internal storage columns (spec fibers §4.1)."""

    callback: str
    id: str
    payload: Any
    retry: Mapping[str, Any] | None
    time: int
    type: str
    delay_in_seconds: int | float | None = None
    cron: str | None = None
    interval_seconds: int | float | None = None

    @classmethod
    def of(
        cls,
        timing: ScheduleTiming,
        *,
        callback: str,
        id: str,
        payload: Any,
        retry: Mapping[str, Any] | None,
    ) -> Schedule:
        """The schedule a `schedule()` call returns for a row of this timing."""
        return cls(
            callback=callback,
            id=id,
            payload=payload,
            retry=None if retry is None else dict(retry),
            time=timing.time,
            type=timing.type,
            delay_in_seconds=timing.delay_in_seconds,
            cron=timing.cron,
            interval_seconds=timing.interval_seconds,
        )

    def to_dict(self) -> dict[str, Any]:
        """The SDK's `Schedule` object, with its camelCase keys and only its type's extra key."""
        out: dict[str, Any] = {
            "callback": self.callback,
            "id": self.id,
            "payload": self.payload,
            "retry": None if self.retry is None else retry_to_json(self.retry),
            "time": self.time,
            "type": self.type,
        }
        if self.type == "delayed":
            out["delayInSeconds"] = self.delay_in_seconds
        elif self.type == "cron":
            out["cron"] = self.cron
        elif self.type == "interval":
            out["intervalSeconds"] = self.interval_seconds
        return out


@dataclass(frozen=True)
class ScheduleTiming:
    """When a new row is due and which form it is; computed before the row is written."""

    type: str
    time: int
    delay_in_seconds: int | float | None = None
    cron: str | None = None
    interval_seconds: int | float | None = None

    @property
    def recurring(self) -> bool:
        return self.type in ("cron", "interval")


def encode_payload(payload: Any) -> str | None:
    """`JSON.stringify` of the payload; no payload is stored as NULL (the SDK's `undefined`)."""
    if payload is None:
        return None
    try:
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(
            f"schedule payload must be JSON-serialisable ({exc}); got {payload!r}"
        ) from None


def row_to_schedule(row: Mapping[str, Any]) -> Schedule:
    payload = None if row["payload"] is None else json.loads(row["payload"])
    kind = row["type"]
    return Schedule(
        callback=row["callback"],
        id=row["id"],
        payload=payload,
        retry=retry_from_json(row["retry_options"]),
        time=row["time"],
        type=kind,
        delay_in_seconds=(row["delayInSeconds"] or 0) if kind == "delayed" else None,
        cron=(row["cron"] or "") if kind == "cron" else None,
        interval_seconds=(row["intervalSeconds"] or 0) if kind == "interval" else None,
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _epoch_seconds(value: datetime, what: str) -> int:
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(
            f"{what} must be an aware datetime (a JavaScript Date is an absolute instant); got "
            f"the naive {value!r}: pass tzinfo=timezone.utc"
        )
    return ((value - _EPOCH) // _ONE_MS) // 1000


class Scheduler:
    """One agent's schedules: creating, cancelling, reading (a sub-agent's, on its root)."""

    __slots__ = (
        "_ctx",
        "_lifecycle",
        "_agent",
        "_self_path",
        "_owner_key",
        "host",
        "sql",
        "_options",
        "_emit",
        "_log",
        "_on_start_schedule_warned",
    )

    def __init__(
        self,
        ctx: AgentContext,
        lifecycle: Lifecycle,
        agent: object,
        self_path: list[dict[str, str]],
        owner_key: str,
    ) -> None:
        self._ctx = ctx
        self._lifecycle = lifecycle
        self._agent = agent
        """Where a callback is looked up by name (the agent, with the user's methods)."""
        self._self_path = self_path
        self._owner_key = owner_key
        """This agent's owner path and its key (a sub-agent's rows are kept on its root)."""
        self.host = ctx.host
        self.sql = ctx.sql
        self._options = ctx.options
        self._emit = ctx.emit
        self._log = ctx.log
        self._on_start_schedule_warned: set[str] = set()

    # -- creating ---------------------------------------------------------------------------
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
        `idempotent=True` (spec fibers §4.1).

        `recovery_loop` is 0.32.0's option (spec sdk-0.32 §3.2, the Scheduler that stores it is
        `releases/v0_32/scheduler.py`). 0.21.0 ignores it without a word, as its SDK does: its
        `schedule()` reads only `retry` and `idempotent` of the options object
        (`agents@0.21.0` dist `index.js:1764-1771` `_validateScheduleCallback`, `index.js:1782`
        `_insertScheduleForOwner`, `index.js:2231` `schedule`), and the key is not in the
        declared options type (`agent-tool-types-CzGGB-20.d.ts:4145-4153`), so at run time an
        untyped caller's `recoveryLoop` is dropped, neither refused nor stored. Here it travels
        down to `_insert_schedule`, which on 0.21.0 does nothing with it."""
        self._check_schedule_callback(callback)
        given_retry = self._check_schedule_retry(retry)
        if not (isinstance(when, datetime | str) or _is_number(when)):
            raise InvalidArgument(
                f"Invalid schedule type: {when!r} ({type(when).__name__}) trying to schedule "
                f"{callback}; pass an aware datetime, a number of seconds or a cron string"
            )
        self._warn_schedule_in_on_start(when, callback, idempotent)
        timing = self._schedule_timing(when)
        schedule, created = await self._store_schedule(
            timing,
            callback,
            payload,
            retry=given_retry,
            idempotent=idempotent,
            recovery_loop=recovery_loop,
        )
        if created:
            self._emit("schedule:create", callback=callback, id=schedule.id)
        return schedule

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
        self._check_interval_seconds(interval_seconds)
        self._check_schedule_callback(callback)
        given_retry = self._check_schedule_retry(retry)
        timing = self._interval_timing(interval_seconds)
        schedule, created = await self._store_schedule(
            timing, callback, payload, retry=given_retry, idempotent=_idempotent
        )
        if created:
            self._emit("schedule:create", callback=callback, id=schedule.id)
        return schedule

    # -- validation and timing --------------------------------------------------------------
    def _check_schedule_callback(self, callback: Any) -> None:
        if not isinstance(callback, str):
            raise InvalidArgument(
                f"Callback must be a string (the name of a method), got {callback!r}"
            )
        if callback_method(self._agent, callback) is None:
            raise InvalidArgument(
                f"self.{callback} is not a function: define the method "
                f"{type(self._agent).__name__}.{callback}(payload, row)"
            )

    def _check_schedule_retry(self, retry: Any) -> dict[str, Any] | None:
        """Validated against the class's retry defaults; returns the fields as given."""
        if retry is None:
            return None
        if not isinstance(retry, Mapping | RetryOptions):
            raise InvalidArgument(
                f"retry must be a mapping such as {{'max_attempts': 5}} or RetryOptions, "
                f"got {retry!r}"
            )
        resolve_retry(retry, self._options.retry)
        if isinstance(retry, RetryOptions):
            return {f.name: getattr(retry, f.name) for f in fields(RetryOptions)}
        return {k: v for k, v in retry.items() if v is not None}

    def _check_interval_seconds(self, interval_seconds: Any) -> None:
        if not (
            _is_number(interval_seconds) and 0 < interval_seconds <= SCHEDULE_EVERY_MAX_SECONDS
        ):
            raise InvalidArgument(
                f"interval_seconds must be a number > 0 and <= {SCHEDULE_EVERY_MAX_SECONDS} "
                f"(30 days), got {interval_seconds!r}"
            )

    def _schedule_timing(self, when: datetime | int | float | str) -> ScheduleTiming:
        now_ms = self.host.clock.now_ms()
        if isinstance(when, datetime):
            return ScheduleTiming("scheduled", _epoch_seconds(when, "schedule(when)"))
        if isinstance(when, str):
            return ScheduleTiming("cron", next_cron_time_ms(when, now_ms) // 1000, cron=when)
        if not math.isfinite(when):
            raise InvalidArgument(
                f"schedule delay must be a finite number of seconds, got {when!r}"
            )
        return ScheduleTiming(
            "delayed", math.floor((now_ms + when * 1000) / 1000), delay_in_seconds=when
        )

    def _interval_timing(self, interval_seconds: int | float) -> ScheduleTiming:
        now_ms = self.host.clock.now_ms()
        due = math.floor((now_ms + interval_seconds * 1000) / 1000)
        return ScheduleTiming("interval", due, interval_seconds=interval_seconds)

    def _warn_schedule_in_on_start(self, when: Any, callback: str, idempotent: Any) -> None:
        """A non-idempotent one-shot made in on_start adds a row on every wake (§4.1)."""
        if not self._lifecycle.in_on_start or idempotent is not None or isinstance(when, str):
            return
        if callback in self._on_start_schedule_warned:
            return
        self._on_start_schedule_warned.add(callback)
        self._log(
            "warn",
            f'schedule("{callback}") called inside on_start() without idempotent=True. This '
            "creates a new row on every Durable Object restart, which can cause duplicate "
            "executions. Pass idempotent=True to deduplicate, or use schedule_every() for "
            "recurring tasks.",
        )

    # -- storage ----------------------------------------------------------------------------
    def _schedule_owner_key(self) -> str | None:
        """The owner key of rows this agent reads and writes itself (None: its own rows)."""
        return None

    async def _store_schedule(
        self,
        timing: ScheduleTiming,
        callback: str,
        payload: Any,
        *,
        retry: Mapping[str, Any] | None,
        idempotent: bool | None,
        recovery_loop: bool | None = None,
    ) -> tuple[Schedule, bool]:
        """Where this agent's new schedules go: its own table; a facet's, its root's (which
        calls `_insert_schedule` with the facet as the owner)."""
        if self._ctx.is_facet:
            options = {"retry": retry, "idempotent": idempotent, "recovery_loop": recovery_loop}
            stored: tuple[Schedule, bool] = await self.host.facets.root().call(
                "_cf_schedule_for_facet",
                timing,
                callback,
                payload,
                list(self._self_path),
                self._owner_key,
                options,
            )
            return stored
        return await self._insert_schedule(
            timing,
            callback,
            payload,
            retry=retry,
            idempotent=idempotent,
            recovery_loop=recovery_loop,
            owner_path=None,
            owner_path_key=self._schedule_owner_key(),
        )

    async def _insert_schedule(
        self,
        timing: ScheduleTiming,
        callback: str,
        payload: Any,
        *,
        retry: Mapping[str, Any] | None,
        idempotent: bool | None,
        recovery_loop: bool | None = None,
        owner_path: str | Sequence[Mapping[str, str]] | None,
        owner_path_key: str | None,
    ) -> tuple[Schedule, bool]:
        """Write a row for this owner, or return the row an idempotent request matches; the
        flag says whether a row was created. Re-arms the alarm either way. `recovery_loop` is
        ignored: 0.21.0's rows have no such column (see `schedule`)."""
        payload_json = encode_payload(payload)
        dedupe = idempotent is not False if timing.recurring else bool(idempotent)
        if dedupe:
            existing = self._find_matching_schedule(timing, callback, payload_json, owner_path_key)
            if existing is not None:
                probe(self.host, "schedule.idempotent_dedupe")
                await self._lifecycle.rearm()
                return row_to_schedule(existing), False
        if owner_path is not None and not isinstance(owner_path, str):
            owner_path = json.dumps(list(owner_path), separators=(",", ":"))
        schedule_id = self.host.entropy.nanoid(9)
        self.sql(
            "INSERT OR REPLACE INTO cf_agents_schedules (id, callback, payload, type, time, "
            "delayInSeconds, cron, intervalSeconds, running, created_at, retry_options, "
            "owner_path, owner_path_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)",
            schedule_id,
            callback,
            payload_json,
            timing.type,
            timing.time,
            timing.delay_in_seconds,
            timing.cron,
            timing.interval_seconds,
            self.host.clock.now_ms() // 1000,
            None if retry is None else json.dumps(retry_to_json(retry), separators=(",", ":")),
            owner_path,
            owner_path_key,
        )
        await self._lifecycle.rearm()
        schedule = Schedule.of(
            timing, callback=callback, id=schedule_id, payload=payload, retry=retry
        )
        return schedule, True

    def _find_matching_schedule(
        self,
        timing: ScheduleTiming,
        callback: str,
        payload_json: str | None,
        owner_path_key: str | None,
    ) -> dict[str, Any] | None:
        # Time and delay are not compared: a second one-shot with another time dedupes onto the
        # first (spec fibers §10.2 item 7).
        query = (
            "SELECT * FROM cf_agents_schedules WHERE type = ? AND callback = ? "
            "AND payload IS ? AND owner_path_key IS ?"
        )
        params: list[Any] = [timing.type, callback, payload_json, owner_path_key]
        if timing.type == "cron":
            query += " AND cron = ?"
            params.append(timing.cron)
        elif timing.type == "interval":
            query += " AND intervalSeconds = ?"
            params.append(timing.interval_seconds)
        rows = self.sql(query + " LIMIT 1", *params)
        return rows[0] if rows else None

    # -- cancel, get, list ------------------------------------------------------------------
    async def cancel_schedule(self, id: str) -> bool:
        """Delete this agent's schedule `id`; False when it has none by that id."""
        if self._ctx.is_facet:
            routed = await self.host.facets.root().call(
                "_cf_cancel_schedule_for_facet", id, self._owner_key
            )
            if routed is None:
                return False
            self._emit("schedule:cancel", callback=routed, id=id)  # on the facet, not the root
            return True
        callback = await self._cancel_schedule_for_owner(id, self._schedule_owner_key())
        return callback is not None

    async def _cancel_schedule_for_owner(
        self, schedule_id: str, owner_path_key: str | None
    ) -> str | None:
        """Delete one owner's row; its callback name, or None when there was no such row. The
        cancel event is emitted before the delete, as the SDK does."""
        rows = self.sql(
            "SELECT callback FROM cf_agents_schedules WHERE id = ? AND owner_path_key IS ?",
            schedule_id,
            owner_path_key,
        )
        if not rows:
            return None
        callback: str = rows[0]["callback"]
        self._emit("schedule:cancel", callback=callback, id=schedule_id)
        self.sql(
            "DELETE FROM cf_agents_schedules WHERE id = ? AND owner_path_key IS ?",
            schedule_id,
            owner_path_key,
        )
        await self._lifecycle.rearm()
        return callback

    async def get_schedule_by_id(self, id: str) -> Schedule | None:
        """This agent's schedule `id`, or None."""
        if self._ctx.is_facet:
            found = await self.list_schedules(id=id)
            return found[0] if found else None
        rows = self.sql(
            "SELECT * FROM cf_agents_schedules WHERE id = ? AND owner_path_key IS ?",
            id,
            self._schedule_owner_key(),
        )
        return row_to_schedule(rows[0]) if rows else None

    def get_schedule(self, id: str) -> Schedule | None:
        """Deprecated synchronous `get_schedule_by_id`: this agent's schedule `id`, or None.
        A sub-agent's schedules live on its root, out of a synchronous read's reach, so inside
        one it raises (as the SDK's `getSchedule` throws)."""
        if self._ctx.is_facet:
            raise AgentsError(
                "get_schedule() is synchronous and cannot read parent-owned sub-agent "
                f"schedules (asked for {id!r}). Use await self.get_schedule_by_id(id) instead."
            )
        rows = self.sql(
            "SELECT * FROM cf_agents_schedules WHERE id = ? AND owner_path_key IS NULL", id
        )
        return row_to_schedule(rows[0]) if rows else None

    def get_schedules(
        self,
        *,
        id: str | None = None,
        type: str | None = None,
        time_range: Mapping[str, datetime | None] | None = None,
    ) -> list[Schedule]:
        """Deprecated synchronous `list_schedules` (same filters); raises inside a sub-agent,
        whose schedules live on its root (as the SDK's `getSchedules` throws)."""
        if self._ctx.is_facet:
            raise AgentsError(
                "get_schedules() is synchronous and cannot read parent-owned sub-agent "
                "schedules. Use await self.list_schedules(...) instead."
            )
        return self._list_schedules_for_owner(None, id=id, type=type, time_range=time_range)

    async def list_schedules(self, **filters: Any) -> list[Schedule]:
        """This agent's schedules, filtered by id, type and a `{"start", "end"}` datetime range
        (inclusive, compared in whole seconds; a missing bound is open); a facet's, read on its
        root with the filters as given."""
        if self._ctx.is_facet:
            schedules: list[Schedule] = await self.host.facets.root().call(
                "_cf_list_schedules_for_facet", self._owner_key, filters
            )
            return schedules
        return self._list_own_schedules(**filters)

    def _list_own_schedules(
        self,
        *,
        id: str | None = None,
        type: str | None = None,
        time_range: Mapping[str, datetime | None] | None = None,
    ) -> list[Schedule]:
        return self._list_schedules_for_owner(
            self._schedule_owner_key(), id=id, type=type, time_range=time_range
        )

    def _list_schedules_for_owner(
        self,
        owner_path_key: str | None,
        *,
        id: str | None = None,
        type: str | None = None,
        time_range: Mapping[str, datetime | None] | None = None,
    ) -> list[Schedule]:
        query = "SELECT * FROM cf_agents_schedules WHERE owner_path_key IS ?"
        params: list[Any] = [owner_path_key]
        if id:
            query += " AND id = ?"
            params.append(id)
        if type:
            query += " AND type = ?"
            params.append(type)
        if time_range is not None:
            unknown = sorted(set(time_range) - {"start", "end"})
            if unknown:
                raise InvalidArgument(
                    f"time_range takes the keys 'start' and 'end', got {unknown} in {time_range!r}"
                )
            start, end = time_range.get("start"), time_range.get("end")
            query += " AND time >= ? AND time <= ?"
            params.append(0 if start is None else _epoch_seconds(start, "time_range['start']"))
            params.append(
                TIME_RANGE_END_MAX_S if end is None else _epoch_seconds(end, "time_range['end']")
            )
        return [row_to_schedule(row) for row in self.sql(query, *params)]

    # -- on a root, for its sub-agents ------------------------------------------------------------
    async def schedule_for_facet(
        self,
        timing: ScheduleTiming,
        callback: str,
        payload: Any,
        owner_path: list[dict[str, str]],
        owner_key: str,
        options: dict[str, Any],
    ) -> tuple[Schedule, bool]:
        return await self._insert_schedule(
            timing,
            callback,
            payload,
            retry=options.get("retry"),
            idempotent=options.get("idempotent"),
            recovery_loop=options.get("recovery_loop"),
            owner_path=owner_path,
            owner_path_key=owner_key,
        )

    async def cancel_for_facet(self, schedule_id: str, owner_key: str) -> str | None:
        rows = self.sql(
            "SELECT callback FROM cf_agents_schedules WHERE id = ? AND owner_path_key = ?",
            schedule_id,
            owner_key,
        )
        if not rows:
            return None
        self.sql(
            "DELETE FROM cf_agents_schedules WHERE id = ? AND owner_path_key = ?",
            schedule_id,
            owner_key,
        )
        await self._lifecycle.rearm()
        callback: str = rows[0]["callback"]
        return callback

    def list_for_facet(self, owner_key: str, filters: dict[str, Any]) -> list[Schedule]:
        return self._list_schedules_for_owner(owner_key, **filters)

    def drop_owned_under(self, under: Callable[[str | None], bool]) -> None:
        """On a root: delete every sub-agent's schedule whose stored owner path `under` accepts
        (the prune of a deleted sub-tree), each with its `schedule:cancel` event. The caller
        re-arms the alarm once its own prune is done."""
        for row in self.sql(
            "SELECT id, callback, owner_path FROM cf_agents_schedules WHERE owner_path IS NOT NULL"
        ):
            if under(row["owner_path"]):
                self._emit("schedule:cancel", callback=row["callback"], id=row["id"])
                self.sql("DELETE FROM cf_agents_schedules WHERE id = ?", row["id"])
