"""The alarm slot of each top-level agent: replace-on-set, durable, at-least-once.

- `set` replaces whatever time was armed; `delete` clears it. The slot belongs to the platform's
  record of the agent, so it survives every eviction, and a due alarm wakes a dead agent.
- When the alarm fires the slot is consumed (reads null during the handler unless re-armed).
- A handler that throws, or whose incarnation dies under it, is retried: 2 s, doubling, up to
  6 retries; not when the agent itself ended the incarnation, by destroying itself or by a reset
  that asked for no retry (`reset`, the slot kept). A handler still running 15 minutes after it
  started is killed with its incarnation (reason `alarm-limit`) and retried the same way.
- Two handlers never overlap: a slot that comes due while one runs fires when it ends, unless
  it was set again or deleted before then (the slot holds one time: the due it held is gone). A
  retry that comes due then waits the same way and keeps its attempt number, so the limit of six
  retries holds even when the slot was re-armed under a failing handler. A handler that starts
  while a due is held serves it: one due, one run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.incarnation import AgentRecord, Incarnation, PlatformCore

__all__ = [
    "ALARM_HANDLER_LIMIT_MS",
    "ALARM_RETRY_BASE_MS",
    "ALARM_RETRY_LIMIT",
    "Alarms",
]

ALARM_HANDLER_LIMIT_MS = 15 * 60 * 1000
ALARM_RETRY_BASE_MS = 2_000
ALARM_RETRY_LIMIT = 6


@dataclass(eq=False)
class _AlarmRun:
    attempt: int
    incarnation: Incarnation
    started_ms: int
    over: bool = False


class Alarms:
    """Arms, fires, retries and bounds the alarm handlers of every agent."""

    def __init__(self, platform: PlatformCore) -> None:
        self._platform = platform

    def set(self, record: AgentRecord, at_ms: int) -> None:
        if not isinstance(at_ms, int) or isinstance(at_ms, bool):
            raise TypeError(f"alarm time is integer milliseconds since the epoch, got {at_ms!r}")
        self._keep_for_rollback(record)
        self._supersede_held_due(record)
        self._arm(record, at_ms)

    def delete(self, record: AgentRecord) -> None:
        self._keep_for_rollback(record)
        held_due = self._supersede_held_due(record)
        if record.alarm_at_ms is not None:
            self._platform.platform_event(record, "alarm:deleted", was=record.alarm_at_ms)
        elif held_due is not None:
            # The slot still held its past time, due behind the running handler: deleted now.
            self._platform.platform_event(record, "alarm:deleted", was=held_due)
        record.alarm_at_ms = None
        record.alarm_generation += 1

    def _keep_for_rollback(self, record: AgentRecord) -> None:
        """An alarm write is one of the turn's writes (the platform confirms them together): if
        the turn rolls back, the slot is put back as it was before the turn."""
        before = record.alarm_at_ms
        held = record.alarm_held_attempt, record.alarm_held_due_ms
        record.storage.undo_on_rollback("alarm", lambda: self._put_back(record, before, held))

    def _supersede_held_due(self, record: AgentRecord) -> int | None:
        """A fresh due held behind a handler is the slot's past time: writing the slot replaces
        it (its time returned). A held retry is the platform's own and stays."""
        if record.alarm_held_attempt != 0:
            return None
        self._platform.probes.hit("platform.alarm_held_due_superseded")
        due = record.alarm_held_due_ms
        self._release_held(record)
        return due

    def _put_back(
        self, record: AgentRecord, at_ms: int | None, held: tuple[int | None, int | None]
    ) -> None:
        attempt, due_ms = held
        if attempt == 0 and record.alarm_held_attempt is None:
            # The rolled-back write had replaced a due held behind a handler: it is owed again.
            record.alarm_held_attempt, record.alarm_held_due_ms = 0, due_ms
            if due_ms is not None:
                self._platform.platform_event(record, "alarm:set", at=due_ms, rolled_back=True)
            if record.alarm_run is None:
                self._after_run(record)
        if record.alarm_at_ms == at_ms:
            return
        if at_ms is None:
            self._platform.platform_event(
                record, "alarm:deleted", was=record.alarm_at_ms, rolled_back=True
            )
            record.alarm_at_ms = None
            record.alarm_generation += 1
            return
        self._arm(record, at_ms, rolled_back=True)

    def _arm(self, record: AgentRecord, at_ms: int, rolled_back: bool = False) -> None:
        kernel = self._platform.kernel
        record.alarm_at_ms = at_ms
        record.alarm_generation += 1
        generation = record.alarm_generation
        if rolled_back:
            self._platform.platform_event(record, "alarm:set", at=at_ms, rolled_back=True)
        else:
            self._platform.platform_event(record, "alarm:set", at=at_ms)
        kernel.call_at(
            at_ms,
            lambda: self._due(record, generation),
            live=lambda: generation == record.alarm_generation and record.alarm_at_ms is not None,
        )

    def _due(self, record: AgentRecord, generation: int) -> None:
        if generation != record.alarm_generation or record.alarm_at_ms is None:
            return
        due_ms, record.alarm_at_ms = record.alarm_at_ms, None
        record.alarm_generation += 1
        if record.alarm_run is not None:
            self._platform.probes.hit("platform.alarm_due_while_running")
            self._hold(record, attempt=0, due_ms=due_ms)
            return
        self._fire(record, attempt=0)

    def _fire(self, record: AgentRecord, attempt: int) -> None:
        platform = self._platform
        resetting = record.incarnation is not None and record.incarnation.resetting
        if record.alarm_run is not None or resetting:
            # Behind a running handler, or an isolate being reset (the platform's next alarm
            # comes after the abort the isolate had already asked for): it fires after that.
            self._hold(record, attempt, due_ms=platform.kernel.now_ms)
            return
        held = record.alarm_held_attempt
        if held is not None:
            # A due held behind the last handler is served by this run (the higher count stands).
            self._release_held(record)
            attempt = max(attempt, held)
        incarnation = platform.live_incarnation(record, "alarm")
        run = _AlarmRun(attempt, incarnation, platform.kernel.now_ms)
        record.alarm_run = run
        platform.platform_event(record, "alarm:fired", attempt=attempt)

        async def handler(agent: Any) -> None:
            await agent._cf_alarm()

        # The limit can only cut a handler that waits: one that ends in its first step is over
        # long before 15 minutes. So its timer is armed the first time the delivery waits, in
        # the slot a timer armed now would have had among the events due at its instant.
        slot = platform.kernel.reserve_slot()
        platform.deliver(
            record,
            "alarm",
            handler,
            label="alarm",
            on_done=lambda ok, value: self._ended(record, run, ok, value),
            on_suspend=lambda: self._arm_limit(record, run, slot),
        )
        platform.lifecycle.touch(incarnation)

    def _arm_limit(self, record: AgentRecord, run: _AlarmRun, slot: int) -> None:
        def live() -> bool:
            return not run.over and record.alarm_run is run

        self._platform.kernel.call_in_slot(
            run.started_ms + ALARM_HANDLER_LIMIT_MS,
            slot,
            lambda: self._limit(record, run),
            live=live,
            acts=live,
        )

    def _ended(self, record: AgentRecord, run: _AlarmRun, ok: bool, value: Any) -> None:
        if run.over:
            return
        run.over = True
        record.alarm_run = None
        if ok:
            self._platform.platform_event(record, "alarm:done", attempt=run.attempt)
        else:
            self._platform.platform_event(record, "alarm:failed", attempt=run.attempt, error=value)
            self._retry(record, run.attempt)
        if run.incarnation.alive:
            self._platform.lifecycle.touch(run.incarnation)
        self._after_run(record)

    def _limit(self, record: AgentRecord, run: _AlarmRun) -> None:
        if run.over or record.alarm_run is not run:
            return
        self._platform.probes.hit("platform.alarm_limit_killed")
        if run.attempt > 0:
            self._platform.probes.hit("platform.alarm_killed_on_retry")
        self._platform.platform_event(
            record, "alarm:killed", attempt=run.attempt, limit_ms=ALARM_HANDLER_LIMIT_MS
        )
        self._platform.kill(record, "alarm-limit")

    def incarnation_died(self, record: AgentRecord, incarnation: Incarnation, reason: str) -> None:
        run = record.alarm_run
        if run is None or run.over or run.incarnation is not incarnation:
            self._after_run(record)  # an alarm held behind a reset fires in a fresh incarnation
            return
        run.over = True
        record.alarm_run = None
        self._platform.platform_event(
            record, "alarm:interrupted", attempt=run.attempt, reason=reason
        )
        if reason == "destroyed":
            # The agent deleted itself (storage and alarm): nothing is left to retry, nor is
            # an alarm that came due while this handler ran still owed.
            self._release_held(record)
            return
        if reason == "reset":
            # The agent aborted itself asking for no retry (`ctx.abort(reason, {retryAlarm:
            # false})`): the run is not retried; the slot stays as the agent armed it, and a
            # slot that came due during the run still fires, as after any other end.
            self._after_run(record)
            return
        self._retry(record, run.attempt)
        self._after_run(record)

    def _retry(self, record: AgentRecord, attempt: int) -> None:
        platform = self._platform
        if attempt >= ALARM_RETRY_LIMIT:
            platform.probes.hit("platform.alarm_given_up")
            platform.platform_event(record, "alarm:given_up", attempts=attempt + 1)
            return
        at_ms = platform.kernel.now_ms + ALARM_RETRY_BASE_MS * 2**attempt
        platform.platform_event(record, "alarm:retry", attempt=attempt + 1, at=at_ms)
        platform.kernel.call_at(at_ms, lambda: self._fire(record, attempt + 1))

    @staticmethod
    def _hold(record: AgentRecord, attempt: int, due_ms: int | None) -> None:
        # A retry held behind another handler keeps its attempt number: the slot is one alarm,
        # so a fresh due and a held retry merge, and the higher count stands.
        held = record.alarm_held_attempt
        record.alarm_held_attempt = attempt if held is None else max(held, attempt)
        if record.alarm_held_attempt == 0 and record.alarm_held_due_ms is None:
            record.alarm_held_due_ms = due_ms

    @staticmethod
    def _release_held(record: AgentRecord) -> None:
        record.alarm_held_attempt = record.alarm_held_due_ms = None

    def _after_run(self, record: AgentRecord) -> None:
        if record.alarm_held_attempt is not None:
            self._platform.kernel.call_soon(lambda: self._fire_held(record))

    def _fire_held(self, record: AgentRecord) -> None:
        # Read when it fires: a write of the slot may have superseded the held due since, or
        # a run started since may have served it.
        attempt = record.alarm_held_attempt
        if attempt is not None:
            self._release_held(record)
            self._fire(record, attempt=attempt)

    def next_due_ms(self) -> int | None:
        """The earliest armed alarm of any agent (for `advance to the next alarm`)."""
        times = [
            r.alarm_at_ms for r in self._platform.records.values() if r.alarm_at_ms is not None
        ]
        return min(times) if times else None
