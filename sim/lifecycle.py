"""When incarnations die by themselves: idle eviction and seeded deploys.

Idle: an incarnation with no delivery in flight, no open connection and no alarm handler running
is evicted after a timeout drawn from the `eviction` stream, uniform in 70–140 s. Any activity
(a delivery starting or ending, a connection opening or closing, an alarm handler ending) starts
the wait again with a fresh draw. Background work (`wait_until`, an unawaited fiber) does not
count: that is what keepAlive's heartbeat alarm is for.

Deploys: with a profile that asks for them, each simulated day gets a number of deploys drawn
from the `deploy` stream in the profile's range, at uniform times within that day.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.incarnation import Incarnation, PlatformCore

__all__ = ["DAY_MS", "IDLE_TIMEOUT_MAX_MS", "IDLE_TIMEOUT_MIN_MS", "Lifecycle"]

IDLE_TIMEOUT_MIN_MS = 70_000
IDLE_TIMEOUT_MAX_MS = 140_000
DAY_MS = 86_400_000


class Lifecycle:
    """Idle timers of live incarnations and the daily deploy schedule."""

    def __init__(self, platform: PlatformCore) -> None:
        self._platform = platform
        self._deploys_started = False

    def is_idle(self, incarnation: Incarnation) -> bool:
        record = incarnation.record
        alarm_running = record.alarm_run is not None and record.alarm_run.incarnation is incarnation
        return incarnation.inflight == 0 and not incarnation.connections and not alarm_running

    def touch(self, incarnation: Incarnation) -> None:
        """Activity: cancel the pending idle eviction and, if idle now, start a new wait.

        One timer per incarnation, re-armed lazily: a wait whose deadline is no earlier than the
        pending timer's only moves the deadline, and the timer, when it fires first, arms itself
        again for it. Each wait takes its slot among same-instant events when it starts
        (`Kernel.reserve_slot`), so the eviction runs exactly where a timer per wait would."""
        incarnation = incarnation.isolate
        incarnation.idle_deadline = None
        if not incarnation.alive or not self.is_idle(incarnation):
            return
        platform = self._platform
        if not platform.faults.idle_eviction:
            return
        kernel = platform.kernel
        timeout = platform.seeds.stream("eviction").int_between(
            IDLE_TIMEOUT_MIN_MS, IDLE_TIMEOUT_MAX_MS
        )
        deadline = kernel.now_ms + timeout
        incarnation.idle_deadline = deadline
        incarnation.idle_slot = kernel.reserve_slot()
        timer_at = incarnation.idle_timer_at
        if timer_at is None or timer_at > deadline:
            self._arm_idle(incarnation, deadline)

    def _arm_idle(self, incarnation: Incarnation, at_ms: int) -> None:
        token = object()
        incarnation.idle_timer = token
        incarnation.idle_timer_at = at_ms

        def live() -> bool:
            return (
                incarnation.idle_timer is token
                and incarnation.alive
                and incarnation.idle_deadline is not None
            )

        self._platform.kernel.call_in_slot(
            at_ms,
            incarnation.idle_slot,
            lambda: self._idle_due(incarnation, token),
            live=live,
            acts=lambda: live() and incarnation.idle_deadline == at_ms,
        )

    def _idle_due(self, incarnation: Incarnation, token: object) -> None:
        if incarnation.idle_timer is not token:
            return  # an earlier deadline armed a timer of its own: this one was left behind
        incarnation.idle_timer = None
        incarnation.idle_timer_at = None
        deadline = incarnation.idle_deadline
        if deadline is None or not incarnation.alive:
            return
        if deadline > self._platform.kernel.now_ms:
            self._arm_idle(incarnation, deadline)
            return
        incarnation.idle_deadline = None
        if self.is_idle(incarnation):
            self._platform.kill(incarnation.record, "idle")

    # -- deploys ----------------------------------------------------------------------------
    def start_deploys(self) -> None:
        if self._deploys_started or self._platform.faults.deploys_per_day == (0, 0):
            return
        self._deploys_started = True
        self._plan_day(0)

    def _plan_day(self, day: int) -> None:
        platform = self._platform
        if not platform.faults_active:
            return
        stream = platform.seeds.stream("deploy")
        low, high = platform.faults.deploys_per_day
        start = day * DAY_MS
        count = stream.int_between(low, high)
        times = sorted(stream.int_between(start, start + DAY_MS - 1) for _ in range(count))
        for at_ms in times:
            if at_ms >= platform.kernel.now_ms:
                platform.kernel.call_at(
                    at_ms, self._random_deploy, live=lambda: platform.faults_active
                )
        platform.kernel.call_at(
            start + DAY_MS, lambda: self._plan_day(day + 1), live=lambda: platform.faults_active
        )

    def _random_deploy(self) -> None:
        if self._platform.faults_active:
            self._platform.deploy(cause="profile")
