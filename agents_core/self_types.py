"""The self types of the runtime's mixins: what each may use of the agent it is mixed into.

`Agent` is assembled from mixins (keepAlive, the alarm, schedules, fibers, facets, ...), each
of which calls methods the others define. A mixin's methods annotate `self` with a Protocol
naming exactly what they use, so the type checker checks both sides: the mixin's code against
the Protocol, and every class that mixes it in (Agent and its subclasses) against the same
Protocol wherever one of those methods is called. `AgentSelf` is the part every mixin shares,
all of it defined by `Agent` itself; each mixin's module extends it with what it uses of the
other mixins and of its own methods. Nothing here runs: the module holds only Protocols.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agents_core.agent import Agent
    from agents_core.agent_tools.backbone import BackboneSelf
    from agents_core.agent_tools.detached import DetachedSelf
    from agents_core.agent_tools.forward import ForwardingSelf
    from agents_core.agent_tools.ledger import LedgerSelf
    from agents_core.agent_tools.notify import NotifySelf
    from agents_core.agent_tools.reattach import ReattachSelf
    from agents_core.agent_tools.recovery_sweep import RecoverySweepSelf
    from agents_core.agent_tools.retention import RetentionSelf
    from agents_core.agent_tools.runs import RunsSelf
    from agents_core.alarm import AlarmSelf
    from agents_core.chat.ai_chat import ChatAgent
    from agents_core.chat.base import ChatHost
    from agents_core.chat.chat_recovery import ChatRecoverySelf
    from agents_core.chat.child_runs import ChildRunsSelf
    from agents_core.chat.messages import MessagesSelf
    from agents_core.chat.notify_inject import AiChatNotifySelf, ThinkNotifySelf
    from agents_core.chat.parent import ChatParentSelf
    from agents_core.chat.progress import ProgressSelf
    from agents_core.chat.stream_store import StreamStoreSelf
    from agents_core.chat.tails import TailsSelf
    from agents_core.chat.think import ThinkAgent
    from agents_core.chat.turns import ChatTurnsSelf
    from agents_core.facets import FacetsSelf
    from agents_core.fiber_ledger import FiberLedgerSelf
    from agents_core.fibers import FibersSelf
    from agents_core.host import Host
    from agents_core.keep_alive import KeepAliveSelf
    from agents_core.mcp import McpSelf
    from agents_core.options import AgentOptions
    from agents_core.recovery import RecoverySelf
    from agents_core.schedule_dispatch import ScheduleDispatchSelf
    from agents_core.schedules import SchedulesSelf

__all__ = ["AgentSelf"]


class AgentSelf(Protocol):
    """What `Agent` itself gives every mixin: its name, host, options, SQL and log."""

    name: str
    _options: AgentOptions
    _is_facet: bool
    _destroyed: bool

    @property
    def host(self) -> Host: ...

    def sql(self, query: str, *params: Any) -> list[dict[str, Any]]: ...

    def _log(self, level: str, message: str) -> None: ...

    def _emit(self, event_type: str, **payload: Any) -> None: ...


if TYPE_CHECKING:
    _MixinSelves = tuple[
        KeepAliveSelf,
        AlarmSelf,
        McpSelf,
        FiberLedgerSelf,
        ScheduleDispatchSelf,
        RecoverySelf,
        FibersSelf,
        SchedulesSelf,
        NotifySelf,
        ForwardingSelf,
        RetentionSelf,
        DetachedSelf,
        ReattachSelf,
        BackboneSelf,
        RecoverySweepSelf,
        LedgerSelf,
        RunsSelf,
        FacetsSelf,
    ]
    _ChatMixinSelves = tuple[
        MessagesSelf,
        StreamStoreSelf,
        ChatParentSelf,
        ProgressSelf,
        TailsSelf,
        ChatRecoverySelf,
        ChatTurnsSelf,
        ChildRunsSelf,
    ]

    # Type-checked, never run: Agent, and the chat hosts that override some of its methods,
    # give every mixin what its self type names (a method called on an instance checks the
    # same, but only where one is called).
    def _agent_fits_its_mixins(agent: Agent) -> _MixinSelves:
        return (agent,) * 18

    def _chat_hosts_fit_them_too(agent: ChatHost) -> _MixinSelves:
        return (agent,) * 18

    def _chat_hosts_fit_the_chat_mixins(agent: ChatHost) -> _ChatMixinSelves:
        return (agent,) * 8

    def _think_agent_fits_its_notify_mixin(agent: ThinkAgent) -> ThinkNotifySelf:
        return agent

    def _chat_agent_fits_its_notify_mixin(agent: ChatAgent) -> AiChatNotifySelf:
        return agent
