"""`AgentToolHooks`: what the agent-tool components use of the agent they serve.

The components (run store, ledger, backbone, forwarder, ...) reach the agent only for what its
user, or a framework host built on it, may override: the SDK's hooks (`on_agent_tool_start`,
`on_agent_tool_finish`, `on_progress`, `on_error`), the public methods a subclass may wrap
(`broadcast`, `schedule`, `sub_agent`, ...), the two steps a chat host replaces (a serialized
delivery runs between its turns, a forwarded chunk credits its recovery), and the recovery
timeouts a subclass may lower. The agent object is also where a run's stored callback NAME is
looked up (`callback_method`). Everything else a component needs it is handed as a component.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from datetime import datetime

    from agents_core.agent_tools.registry import AgentToolRunInfo
    from agents_core.options import RetryOptions
    from agents_core.schedules import Schedule

__all__ = ["AgentToolHooks"]


class AgentToolHooks(Protocol):
    """The agent as the agent-tool components see it."""

    _agent_tool_recovery_timeout_ms: int
    _agent_tool_recovery_total_timeout_ms: int

    def broadcast(self, frame: Any, exclude: tuple[str, ...] = ()) -> None: ...
    def on_error(self, error: BaseException) -> Any: ...
    async def on_agent_tool_start(self, run: AgentToolRunInfo) -> None: ...
    async def on_agent_tool_finish(self, run: AgentToolRunInfo, result: Any) -> None: ...
    async def on_progress(self, run: AgentToolRunInfo, snapshot: dict[str, Any]) -> None: ...
    async def _run_serialized_delivery(self, invoke: Callable[[], Awaitable[None]]) -> None: ...
    def _on_agent_tool_stream_progress(self) -> None: ...
    async def schedule(
        self,
        when: datetime | int | float | str,
        callback: str,
        payload: Any = None,
        *,
        retry: Mapping[str, Any] | RetryOptions | None = None,
        idempotent: bool | None = None,
    ) -> Schedule: ...
    async def cancel_schedule(self, id: str) -> bool: ...
    async def list_schedules(self, **filters: Any) -> list[Schedule]: ...
    async def sub_agent(self, cls: type, name: str) -> Any: ...
    async def delete_sub_agent(self, cls: type, name: str) -> None: ...
