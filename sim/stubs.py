"""Agent stubs inside one isolate: a sub-agent seen from its parent, the root seen from a facet.

A call on a stub is an RPC: it is delivered to the callee's incarnation as its own event (never
run inside the caller's turn), waits at the callee's input gate, and fails with `AgentEvicted`
if the callee dies first. A stub is fenced by its caller: once the caller's incarnation is dead,
a call delivers nothing. Attribute access gives the same thing as a method:
`await stub.summarise(text)` is `await stub.call("summarise", text)`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from sim.errors import AgentEvicted
from sim.kernel import Gone, SimDeferred

if TYPE_CHECKING:
    from sim.incarnation import AgentRecord, PlatformCore

__all__ = ["Caller", "SimAgentStub", "invoke_method"]


class Caller(Protocol):
    """The incarnation's host a stub is fenced by (`sim.host.SimHost`, which hands out stubs, so
    this module names it only through this Protocol)."""

    def _dead(self) -> bool:
        """Whether the caller's incarnation is dead (inside its dying step it raises
        `IncarnationKilled` instead)."""
        ...


async def invoke_method(instance: Any, method: str, args: Any, kwargs: Any) -> Any:
    """Run an RPC on an agent instance: through its `_cf_rpc` entry when it has one (it makes
    itself the ambient agent), else by calling the method directly."""
    entry = getattr(instance, "_cf_rpc", None)
    if entry is not None:
        return await entry(method, tuple(args), dict(kwargs))
    result = getattr(instance, method)(*args, **kwargs)
    if hasattr(result, "__await__"):
        result = await result
    return result


class SimAgentStub:
    """`agents_core.host.AgentStub` for an agent reached from inside the same isolate."""

    def __init__(self, platform: PlatformCore, record: AgentRecord, caller: Caller | None) -> None:
        self._platform = platform
        self._record = record
        self._caller = caller

    @property
    def path(self) -> str:
        return self._record.path

    @property
    def record(self) -> AgentRecord:
        return self._record

    def call(self, method: str, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        record = self._record
        if self._caller is not None and self._caller._dead():
            return Gone()
        if not callable(getattr(record.cls, method, None)):
            raise AttributeError(f"{record.cls.__qualname__} has no method {method!r}")
        caller = SimDeferred(self._platform.kernel)
        if record.forgotten:
            # A stub kept across its sub-agent's deletion must not bring it back.
            caller.reject(AgentEvicted(record.path, "deleted"))
            return caller

        async def invoke(instance: Any) -> Any:
            return await invoke_method(instance, method, args, kwargs)

        # Internal routing calls (_cf_*) are not announced: they would drown the trace.
        announce = None if method.startswith("_") else {"method": method}
        self._platform.deliver(
            record, "rpc", invoke, label="rpc", announce=announce, caller=caller, method=method
        )
        return caller

    def __getattr__(self, method: str) -> Callable[..., Awaitable[Any]]:
        if method.startswith("__"):
            raise AttributeError(method)
        return lambda *args, **kwargs: self.call(method, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<SimAgentStub {self._record.path}>"
