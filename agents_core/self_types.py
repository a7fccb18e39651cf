"""The self types of the mixins not yet recomposed into components (docs/architecture.md).

The rest of `Agent` is still assembled from mixins (the due-schedule dispatch, sub-agents,
agent tools, chat), each of which calls methods the others define. A mixin's methods annotate
`self` with a Protocol naming exactly what they use, so the type checker checks both sides: the
mixin's code against the Protocol, and every class that mixes it in (Agent and its subclasses)
against the same Protocol wherever one of those methods is called. `AgentSelf` is the part every
mixin shares, all of it defined by `Agent` itself; each core mixin's module extends it with what
it uses of the other mixins and of its own methods, and the agent-tool and chat packages each
extend it once for all their mixins (`agent_tools/self_type.py`, `chat/self_type.py`), so that a
member several of them use is declared once. Nothing here runs: the module holds only Protocols.
The components (Lifecycle, KeepAlive, FiberRunner, ...) need none of this: each sees the agent
through an `AgentContext` and the narrow port of its own module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agents_core.agent import Agent
    from agents_core.agent_tools.self_type import AgentToolsSelf
    from agents_core.host import Host
    from agents_core.options import AgentOptions
    from agents_core.run_rows import DurableMemo

__all__ = ["AgentSelf"]


class AgentSelf(Protocol):
    """What `Agent` itself gives every mixin: its name, host, options, SQL and log."""

    name: str
    _options: AgentOptions
    _is_facet: bool

    @property
    def _destroyed(self) -> bool: ...

    _memo: DurableMemo

    @property
    def host(self) -> Host: ...

    def sql(self, query: str, *params: Any) -> list[dict[str, Any]]: ...

    def _log(self, level: str, message: str) -> None: ...

    def _emit(self, event_type: str, **payload: Any) -> None: ...


if TYPE_CHECKING:
    # Type-checked, never run: Agent gives the agent-tool mixins what their self type names (a
    # method called on an instance checks the same, but only where one is called). The chat
    # hosts are checked in `chat/self_type.py`, so that the runtime's core never imports chat.
    def _agent_fits_its_mixins(agent: Agent) -> AgentToolsSelf:
        return agent
