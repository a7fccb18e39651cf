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
        """Activity: cancel the pending idle eviction and, if idle now, arm a new one."""
        incarnation = incarnation.isolate
        incarnation.idle_generation += 1
        if not incarnation.alive or not self.is_idle(incarnation):
            return
        platform = self._platform
        if not platform.faults.idle_eviction:
            return
        generation = incarnation.idle_generation
        timeout = platform.seeds.stream("eviction").int_between(
            IDLE_TIMEOUT_MIN_MS, IDLE_TIMEOUT_MAX_MS
        )
        platform.kernel.call_at(
            platform.kernel.now_ms + timeout,
            lambda: self._idle_due(incarnation, generation),
            live=lambda: generation == incarnation.idle_generation and incarnation.alive,
        )

    def _idle_due(self, incarnation: Incarnation, generation: int) -> None:
        if generation != incarnation.idle_generation or not incarnation.alive:
            return
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
