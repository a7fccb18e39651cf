"""The self types of the runtime's mixins: what each may use of the agent it is mixed into.

`Agent` is assembled from mixins (schedules, fibers, recovery, facets, ...), each
of which calls methods the others define. A mixin's methods annotate `self` with a Protocol
naming exactly what they use, so the type checker checks both sides: the mixin's code against
the Protocol, and every class that mixes it in (Agent and its subclasses) against the same
Protocol wherever one of those methods is called. `AgentSelf` is the part every mixin shares,
all of it defined by `Agent` itself; each core mixin's module extends it with what it uses of
the other mixins and of its own methods, and the agent-tool and chat packages each extend it
once for all their mixins (`agent_tools/self_type.py`, `chat/self_type.py`), so that a member
several of them use is declared once. `SchedulesSelf` lives here too, because `FacetsSelf`
extends it rather than repeat the schedule methods it calls. Nothing here runs: the module holds
only Protocols.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    from agents_core.agent import Agent
    from agents_core.agent_tools.self_type import AgentToolsSelf
    from agents_core.chat.ai_chat import ChatAgent
    from agents_core.chat.base import ChatHost
    from agents_core.chat.notify_inject import AiChatNotifySelf, ThinkNotifySelf
    from agents_core.chat.self_type import ChatSelf
    from agents_core.chat.think import ThinkAgent
    from agents_core.facets import FacetsSelf
    from agents_core.host import Host
    from agents_core.options import AgentOptions
    from agents_core.run_rows import DurableMemo
    from agents_core.schedule_dispatch import ScheduleDispatchSelf
    from agents_core.schedules import Schedule, ScheduleTiming

__all__ = ["AgentSelf", "SchedulesSelf"]


class AgentSelf(Protocol):
    """What `Agent` itself gives every mixin: its name, host, options, SQL and log."""

    name: str
    _options: AgentOptions
    _is_facet: bool
    _destroyed: bool
    _memo: DurableMemo

    @property
    def host(self) -> Host: ...

    def sql(self, query: str, *params: Any) -> list[dict[str, Any]]: ...

    def _log(self, level: str, message: str) -> None: ...

    def _emit(self, event_type: str, **payload: Any) -> None: ...


class SchedulesSelf(AgentSelf, Protocol):
    """What SchedulesMixin uses of the agent it is mixed into (FacetsMixin extends it)."""

    _on_start_schedule_warned: set[str]

    @property
    def _in_on_start(self) -> bool: ...

    async def _schedule_next_alarm(self) -> None: ...

    # its own methods, called through self
    def _check_schedule_callback(self, callback: Any) -> None: ...
    def _check_schedule_retry(self, retry: Any) -> dict[str, Any] | None: ...
    def _warn_schedule_in_on_start(self, when: Any, callback: str, idempotent: Any) -> None: ...
    def _schedule_timing(self, when: datetime | int | float | str) -> ScheduleTiming: ...
    def _check_interval_seconds(self, interval_seconds: Any) -> None: ...
    def _interval_timing(self, interval_seconds: int | float) -> ScheduleTiming: ...
    def _list_schedules_for_owner(
        self,
        owner_path_key: str | None,
        *,
        id: str | None = None,
        type: str | None = None,
        time_range: Mapping[str, datetime | None] | None = None,
    ) -> list[Schedule]: ...
    async def _store_schedule(
        self,
        timing: ScheduleTiming,
        callback: str,
        payload: Any,
        *,
        retry: Mapping[str, Any] | None,
        idempotent: bool | None,
    ) -> tuple[Schedule, bool]: ...
    async def _insert_schedule(
        self,
        timing: ScheduleTiming,
        callback: str,
        payload: Any,
        *,
        retry: Mapping[str, Any] | None,
        idempotent: bool | None,
        owner_path: str | Sequence[Mapping[str, str]] | None,
        owner_path_key: str | None,
    ) -> tuple[Schedule, bool]: ...
    def _find_matching_schedule(
        self,
        timing: ScheduleTiming,
        callback: str,
        payload_json: str | None,
        owner_path_key: str | None,
    ) -> dict[str, Any] | None: ...
    async def _cancel_schedule_for_owner(
        self, schedule_id: str, owner_path_key: str | None
    ) -> str | None: ...
    def _schedule_owner_key(self) -> str | None: ...


if TYPE_CHECKING:
    _MixinSelves = tuple[
        ScheduleDispatchSelf,
        SchedulesSelf,
        AgentToolsSelf,
        FacetsSelf,
    ]

    # Type-checked, never run: Agent, and the chat hosts that override some of its methods,
    # give every mixin what its self type names (a method called on an instance checks the
    # same, but only where one is called).
    def _agent_fits_its_mixins(agent: Agent) -> _MixinSelves:
        return (agent,) * 4

    def _chat_hosts_fit_them_too(agent: ChatHost) -> _MixinSelves:
        return (agent,) * 4

    def _chat_hosts_fit_the_chat_mixins(agent: ChatHost) -> ChatSelf:
        return agent

    def _think_agent_fits_its_notify_mixin(agent: ThinkAgent) -> ThinkNotifySelf:
        return agent

    def _chat_agent_fits_its_notify_mixin(agent: ChatAgent) -> AiChatNotifySelf:
        return agent
