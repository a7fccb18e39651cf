"""The self types of the workloads' mixins: what each uses of the agent it is mixed into.

Three mixins give the same methods to a plain agent and to the two chat hosts: `_SayMixin`
(`chat.py`) answers `say`, `_WorkTool` (`children.py`) is the chat children's `work` tool, and
`_ToolsMixin` (`tools.py`) dispatches agent-tool runs. Each method annotates `self` with the
Protocol here that names what it uses, and the functions at the bottom make the type checker
check every workload class that mixes one in against it. Nothing here runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from agents_core.host import Host
    from agents_core.signals import AbortSignal
    from scenarios.workloads.tools import RunPlan

__all__ = ["ChatWorkloadSelf", "ToolsWorkloadSelf", "WorkToolSelf"]


class ChatWorkloadSelf(Protocol):
    """A chat workload that answers `say`: the chat host's transcript and `save_messages`."""

    @property
    def host(self) -> Host: ...
    @property
    def messages(self) -> list[dict[str, Any]]: ...
    async def save_messages(
        self, messages: Sequence[Mapping[str, Any]], *, signal: AbortSignal | None = None
    ) -> dict[str, Any]: ...


class WorkToolSelf(Protocol):
    """A chat child with the `work` tool: the chat host, its `report_progress` and active run,
    and the tool's own two methods."""

    @property
    def host(self) -> Host: ...
    def _active_agent_tool_run(self) -> tuple[str | None, str | None]: ...

    async def report_progress(
        self,
        fraction: float | None = None,
        message: str | None = None,
        phase: str | None = None,
        milestone: str | None = None,
        data: Any = None,
        persist: bool = False,
    ) -> str: ...
    async def _workload_work(self, input: Any, tool_call_id: Any, signal: Any) -> str: ...
    def _reported(self, kind: str, outcome: str, **fields: Any) -> None: ...


class ToolsWorkloadSelf(Protocol):
    """A `tools` workload parent: its plans, the agent-tool calls, and the mixin's dispatch."""

    name: str

    @property
    def host(self) -> Host: ...
    def sql(self, query: str, *params: Any) -> list[dict[str, Any]]: ...
    def _log(self, level: str, message: str) -> None: ...
    def _emit(self, event_type: str, **payload: Any) -> None: ...

    runs: ClassVar[tuple[RunPlan, ...]]
    start_on: ClassVar[str]

    async def run_agent_tool(
        self, cls: type, *, input: Any, run_id: str | None = None, detached: Any = None
    ) -> Any: ...
    async def cancel_agent_tool(self, run_id: str, reason: Any = None) -> None: ...
    async def clear_agent_tool_runs(
        self, *, status: str | None = None, older_than: Any = None
    ) -> int: ...
    async def _dispatch_one(self, plan: RunPlan) -> dict[str, Any]: ...


if TYPE_CHECKING:
    from scenarios.workloads.chat import AiChatWorkload, ThinkWorkload
    from scenarios.workloads.children import ChatToolChild, ThinkToolChild
    from scenarios.workloads.tools import AiChatToolsWorkload, ThinkToolsWorkload, ToolsWorkload

    # Type-checked, never run: each class that mixes a mixin in gives what its self type names.
    def _chat_workloads_say(agent: ThinkWorkload | AiChatWorkload) -> ChatWorkloadSelf:
        return agent

    def _chat_children_work(agent: ThinkToolChild | ChatToolChild) -> WorkToolSelf:
        return agent

    def _tool_parents_dispatch(
        agent: ToolsWorkload | ThinkToolsWorkload | AiChatToolsWorkload,
    ) -> ToolsWorkloadSelf:
        return agent
