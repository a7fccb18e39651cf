"""KeepAlive: ref-counted leases that keep an agent warm through the heartbeat alarm.

No timer and no schedule row: while the count is above zero, the Lifecycle's alarm takes this
component's candidate `now + keep_alive_interval_ms`, and every alarm re-arms it, so the agent is
woken often enough never to idle out. Refs live in memory and vanish with the incarnation; the
heartbeat alarm that was armed still fires once afterwards and, finding nothing, clears itself.
A sub-agent has no alarm: its lease is a ref on its root, taken by RPC and named by a token
`<owner key>:<nanoid(9)>` that the root keeps, so that the root can drop the leases of a
sub-tree that died or was deleted. Nothing here emits an observability event (the SDK emits
none). The SDK's counterpart is `keepAlive` / `keepAliveWhile` on the Agent (0.21.0); 0.32.0
keeps the API and makes the heartbeat a `cf:keep-alive` job (spec sdk-0.32 §4).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from agents_core.probes import probe

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.lifecycle import Lifecycle

__all__ = ["KeepAlive"]

T = TypeVar("T")


class KeepAlive:
    """One agent's keepAlive: its refs, its lease numbers and (on a root) its facets' tokens."""

    __slots__ = ("_ctx", "_lifecycle", "_owner_key", "refs", "leases", "facet_tokens")

    def __init__(self, ctx: AgentContext, lifecycle: Lifecycle, owner_key: str) -> None:
        self._ctx = ctx
        self._lifecycle = lifecycle
        self._owner_key = owner_key
        """This agent's owner-path key (a sub-agent's leases are counted on its root by it)."""
        self.refs = 0
        """Leases held: this agent's own and, on a root, its sub-agents'."""
        self.leases = 0
        """Leases taken in this incarnation (the number each trace record names)."""
        self.facet_tokens: dict[str, None] = {}
        """On a root: the tokens of the leases its sub-agents hold, in the order taken."""

    # -- leases ---------------------------------------------------------------------------------
    async def lease(self, holder: str) -> Callable[[], None]:
        """`keep_alive` for a named holder (`fiber:<id>`, ...): the trace records say who took
        each lease and when it was given back (`keep_alive:acquire` / `keep_alive:release`, the
        harness's own records: the SDK emits no event for keepAlive)."""
        ctx = self._ctx
        if ctx.is_facet:
            release = await self._lease_from_root()
        else:
            self.refs += 1
            if self.refs == 1:
                try:
                    await self._lifecycle.host_work_changed()
                except BaseException:
                    # No disposer reaches the caller, so nobody could give this ref back: the
                    # heartbeat would run forever (the SDK's order leaks it: divergence F4).
                    self.refs = max(0, self.refs - 1)
                    probe(ctx.host, "keep_alive.acquire_failed")
                    raise
            release = self._release_ref
        self.leases += 1
        lease = self.leases
        trace = ctx.host.trace
        trace.emit("keep_alive:acquire", lease=lease, holder=holder)
        disposed = False

        def dispose() -> None:
            nonlocal disposed
            if disposed:
                return
            disposed = True
            trace.emit("keep_alive:release", lease=lease, holder=holder)
            release()

        return dispose

    def _release_ref(self) -> None:
        self.refs = max(0, self.refs - 1)
        if self.refs == 0:
            # Reads the live count when it runs, so an immediate re-acquire wins.
            self._ctx.host.tasks.wait_until(self._lifecycle.host_work_changed_logged())

    async def while_held(
        self, fn: Callable[[], Awaitable[T]], take: Callable[[], Awaitable[Callable[[], None]]]
    ) -> T:
        """Hold a lease taken with `take` (the agent's `keep_alive`, which a subclass may
        override) while `fn()` runs; release it however `fn` ends."""
        dispose = await take()
        try:
            return await fn()
        finally:
            dispose()

    def alarm_candidates(self, now: int) -> list[int]:
        """The heartbeat, while any lease is held."""
        if self.refs > 0:
            return [now + self._ctx.options.keep_alive_interval_ms]
        return []

    # -- a sub-agent's lease, held on its root --------------------------------------------------
    async def _lease_from_root(self) -> Callable[[], None]:
        ctx = self._ctx
        root = ctx.host.facets.root()
        token = await root.call("_cf_acquire_facet_keep_alive", self._owner_key)
        disposed = False

        async def release() -> None:
            try:
                await root.call("_cf_release_facet_keep_alive", token)
            except Exception as exc:  # noqa: BLE001 - a failed release is only logged
                ctx.log("error", f"failed to release facet keepAlive {token}: {exc}")

        def dispose() -> None:
            nonlocal disposed
            if not disposed:
                disposed = True
                ctx.host.tasks.wait_until(release())

        return dispose

    async def release_leases_of_earlier_incarnations(self) -> None:
        """A facet constructed again after a death of its own (its root lived on) tells the
        root to drop the keepAlive leases its dead incarnation held: their disposers never ran,
        and the root would otherwise heartbeat for them forever (docs/divergences.md F3)."""
        try:
            await self._ctx.host.facets.root().call(
                "_cf_release_facet_keep_alives_of", self._owner_key
            )
        except Exception as exc:  # noqa: BLE001 - a failed release is only logged
            self._ctx.log("error", f"failed to release the leases of an earlier incarnation: {exc}")

    async def release_leases_of(self, owner_key: str) -> None:
        """On the root: drop the leases an earlier incarnation of the sub-agent `owner_key`
        held (its own only, not those of the sub-agents below it)."""
        if self.release_facet_leases_under(owner_key, exact=True):
            probe(self._ctx.host, "facet.dead_incarnation_leases_released")
            await self._lifecycle.host_work_changed()

    async def acquire_for_facet(self, owner_key: str) -> str:
        """On the root: a lease for the sub-agent `owner_key`; returns its token."""
        token = f"{owner_key}:{self._ctx.host.entropy.nanoid(9)}"
        self.facet_tokens[token] = None
        self.refs += 1
        if self.refs == 1:
            try:
                await self._lifecycle.host_work_changed()
            except BaseException:
                # The facet gets the error and no token to release: give the ref back, or the
                # root's heartbeat would run for as long as it lives (F4, for a facet's lease).
                self.facet_tokens.pop(token, None)
                self.refs = max(0, self.refs - 1)
                probe(self._ctx.host, "keep_alive.acquire_failed")
                raise
        return token

    async def release_facet_token(self, token: str) -> None:
        """On the root: give back the lease a sub-agent's token names (once)."""
        if token not in self.facet_tokens:
            return
        del self.facet_tokens[token]
        self.refs = max(0, self.refs - 1)
        await self._lifecycle.host_work_changed()

    def facet_lease_owners(self) -> list[str]:
        """On the root: the owner keys of the sub-agents it holds leases for, in lease order."""
        return list(dict.fromkeys(_owner_of(token) for token in self.facet_tokens))

    def release_facet_leases_under(self, prefix_key: str, exact: bool = False) -> int:
        """Drop the keepAlive leases held for facets at or below `prefix_key`. Their work died
        with them and their disposers will never run, so without this the root's heartbeat
        would go on for a deleted sub-tree (docs/divergences.md F1). `exact`: only the facet's own
        leases, not those of facets below it. Returns how many were dropped."""
        released = 0
        for token in list(self.facet_tokens):
            owner_key = _owner_of(token)
            below = not exact and owner_key.startswith(prefix_key + "/")
            if owner_key == prefix_key or below:
                del self.facet_tokens[token]
                released += 1
        self.refs = max(0, self.refs - released)
        return released


def _owner_of(token: str) -> str:
    """The owner key of a facet lease token: tokens are "<owner key>:<nanoid(9)>"."""
    return token.rsplit(":", 1)[0]
