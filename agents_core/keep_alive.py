"""keepAlive: ref-counted leases that keep an agent warm through the heartbeat alarm.

No timer and no schedule row: while the count is above zero, the alarm multiplexer adds the
candidate `now + keep_alive_interval_ms`, and every alarm re-arms it, so the agent is woken
often enough never to idle out. Refs live in memory and vanish with the incarnation; the
heartbeat alarm that was armed still fires once afterwards and, finding nothing, clears itself.
Nothing here emits an observability event (the SDK emits none).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from agents_core.probes import probe
from agents_core.self_types import AgentSelf

__all__ = ["KeepAliveMixin"]

T = TypeVar("T")


class KeepAliveSelf(AgentSelf, Protocol):
    """What KeepAliveMixin uses of the agent it is mixed into."""

    _keep_alive_refs: int
    _keep_alive_leases: int

    async def _facet_keep_alive(self) -> Callable[[], None]: ...
    async def _schedule_next_alarm(self) -> None: ...
    async def keep_alive(self) -> Callable[[], None]: ...
    async def _keep_alive_lease(self, holder: str) -> Callable[[], None]: ...
    def _release_keep_alive_ref(self) -> None: ...
    async def _schedule_next_alarm_logged(self) -> None: ...


class KeepAliveMixin:
    _keep_alive_refs: int
    _keep_alive_leases: int

    async def keep_alive(self: KeepAliveSelf) -> Callable[[], None]:
        """Take a lease; returns its disposer (synchronous and idempotent)."""
        return await self._keep_alive_lease("keep_alive")

    async def _keep_alive_lease(self: KeepAliveSelf, holder: str) -> Callable[[], None]:
        """`keep_alive` for a named holder (`fiber:<id>`, ...): the trace records say who took
        each lease and when it was given back (`keep_alive:acquire` / `keep_alive:release`, the
        harness's own records: the SDK emits no event for keepAlive)."""
        if self._is_facet:
            release = await self._facet_keep_alive()
        else:
            self._keep_alive_refs += 1
            if self._keep_alive_refs == 1:
                try:
                    await self._schedule_next_alarm()
                except BaseException:
                    # No disposer reaches the caller, so nobody could give this ref back: the
                    # heartbeat would run forever (the SDK's order leaks it: divergence F4).
                    self._keep_alive_refs = max(0, self._keep_alive_refs - 1)
                    probe(self.host, "keep_alive.acquire_failed")
                    raise
            release = self._release_keep_alive_ref
        self._keep_alive_leases += 1
        lease = self._keep_alive_leases
        self.host.trace.emit("keep_alive:acquire", lease=lease, holder=holder)
        disposed = False

        def dispose() -> None:
            nonlocal disposed
            if disposed:
                return
            disposed = True
            self.host.trace.emit("keep_alive:release", lease=lease, holder=holder)
            release()

        return dispose

    def _release_keep_alive_ref(self: KeepAliveSelf) -> None:
        self._keep_alive_refs = max(0, self._keep_alive_refs - 1)
        if self._keep_alive_refs == 0:
            # Reads the live count when it runs, so an immediate re-acquire wins.
            self.host.tasks.wait_until(self._schedule_next_alarm_logged())

    async def keep_alive_while(self: KeepAliveSelf, fn: Callable[[], Awaitable[T]]) -> T:
        """Hold a lease while `fn()` runs; release it however `fn` ends."""
        dispose = await self.keep_alive()
        try:
            return await fn()
        finally:
            dispose()

    async def _schedule_next_alarm_logged(self: KeepAliveSelf) -> None:
        try:
            await self._schedule_next_alarm()
        except Exception as exc:  # noqa: BLE001 - a background reschedule only logs
            self._log("error", f"failed to reschedule the alarm: {exc}")
