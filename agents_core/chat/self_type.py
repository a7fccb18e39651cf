"""`ChatSelf`: the self type of the chat mixins, what each of them may use of the chat host.

A chat host (`base.py`) is an `Agent` assembled from the chat mixins (messages, the stream
store, turns, chat recovery, progress, the agent-tool child adapter and its tails, the parent
side), which call one another's methods through `self`. Each member they call is declared here
once, grouped by the module that defines it; the Protocol extends the agent-tool mixins' self
type, which a chat host satisfies as every agent does, so what both packages use (`schedule`,
`broadcast`, ...) is declared there. Every chat mixin method annotates `self` with `ChatSelf`
(the notify mixins with a Protocol that adds their own few methods);
the end of this module checks statically that the chat hosts satisfy it. Nothing here runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from agents_core.agent_tools.self_type import AgentToolsSelf

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from agents_core.agent_tools.registry import AgentToolRunInfo
    from agents_core.chat.ai_chat import ChatAgent
    from agents_core.chat.base import ChatHost
    from agents_core.chat.chat_recovery import ChatRecovery, ChatRecoveryContext
    from agents_core.chat.messages import ChatMessages
    from agents_core.chat.parent import RecoveryCredit
    from agents_core.chat.progress import AgentToolProgress
    from agents_core.chat.stream_store import ResumableStream
    from agents_core.chat.think import ThinkAgent
    from agents_core.chat.turns import ChatTurns
    from agents_core.fibers import FiberContext
    from agents_core.signals import AbortController, AbortSignal

__all__ = ["ChatSelf"]


class ChatSelf(AgentToolsSelf, Protocol):
    """What the chat mixins use of the chat host they are mixed into, each member once."""

    @property
    def _run_fiber_active_fibers(self) -> dict[str, None]: ...

    # state the chat mixins keep on the host
    _agent_tool_controllers: dict[str, AbortController]
    _agent_tool_request_runs: dict[str, str | None]
    _agent_tool_last_errors: dict[str, str]
    _agent_tool_pre_turn_ids: dict[str, set[str]]
    _agent_tool_live_seq: dict[str, int]
    _agent_tool_tails: dict[str, Any]
    _agent_tool_active_statuses: ClassVar[tuple[str, ...]]
    _agent_tool_runs_table: ClassVar[str]
    _agent_tool_milestones_table: ClassVar[str]
    system_prompt: ClassVar[str | None]
    max_steps: ClassVar[int]
    model_service: ClassVar[str]

    # defined by the core mixins (keepAlive, fibers)
    async def _run_fiber_with_stash_wrapper(
        self,
        name: str,
        fn: Callable[[FiberContext], Awaitable[Any]],
        *,
        initial_snapshot: Any,
        wrap: Callable[[Any], Any],
    ) -> Any: ...
    async def keep_alive(self) -> Callable[[], None]: ...
    async def keep_alive_while(self, fn: Callable[[], Awaitable[Any]]) -> Any: ...

    # defined by the agent-tool notify mixin
    def format_detached_milestone(self, run: AgentToolRunInfo, milestone: Any) -> str: ...

    # the components (base.py)
    _messages: ChatMessages
    _turns: ChatTurns
    _recovery_credit: RecoveryCredit
    _chat_recovery: ChatRecovery
    _progress: AgentToolProgress
    _stream: ResumableStream

    @property
    def messages(self) -> list[dict[str, Any]]: ...
    def stream_chunks(self, stream_id: str | None, after: int = -1) -> list[dict[str, Any]]: ...

    # defined by base.py (the hooks users override)
    def get_tools(self) -> Mapping[str, Any]: ...
    def get_system_prompt(self) -> str | None: ...
    async def save_messages(
        self, messages: Sequence[Mapping[str, Any]], *, signal: AbortSignal | None = None
    ) -> dict[str, Any]: ...

    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> str | None: ...
    def classify_chat_recovery(self, run_id: str | None = None) -> str: ...

    # defined by tails.py
    def _broadcast_chat_frame(self, frame: Any, chunk_index: int | None = None) -> None: ...
    def _close_agent_tool_tails(self, run_id: str) -> None: ...
    def _snoop_agent_tool_frame(self, frame: Any, chunk_index: int | None) -> None: ...
    def _agent_tool_run_for_request(self, request_id: str) -> str | None: ...
    def _visible_chunk_count(self, run_id: str) -> int: ...
    async def _read_agent_tool_backlog(
        self, run_id: str, after_sequence: int
    ) -> list[dict[str, Any]]: ...
    def _drop_idle_live_sequence(self, run_id: str) -> None: ...
    def _forward_agent_tool_frame(self, frame: Any, chunk_index: int | None) -> None: ...

    # defined by child_runs.py
    def _ensure_agent_tool_tables(self) -> None: ...
    def _insert_agent_tool_row(self, run_id: str, input: Any, now: int) -> None: ...
    def _seal_agent_tool_aborted(self, run_id: str, reason: str | None) -> None: ...
    def _write_agent_tool_terminal(self, run_id: str, terminal: dict[str, Any]) -> None: ...
    async def _inspection_from_row(self, row: dict[str, Any]) -> dict[str, Any]: ...
    def _agent_tool_stream_id(self, row: dict[str, Any]) -> str | None: ...
    def _agent_tool_tables_exist(self) -> bool: ...
    async def _drive_agent_tool_run(
        self, run_id: str, input: Any, controller: AbortController
    ) -> dict[str, Any]: ...
    def _agent_tool_exception_terminal(
        self, error: Exception, controller: AbortController
    ) -> dict[str, Any]: ...
    async def _stale_completion(self, row: dict[str, Any]) -> dict[str, Any]: ...
    async def _messages_after_run_start(self, row: dict[str, Any]) -> list[dict[str, Any]]: ...
    def _active_agent_tool_run(self) -> tuple[str | None, str | None]: ...
    def _agent_tool_row(self, run_id: str) -> dict[str, Any] | None: ...
    def _is_stale_agent_tool_row(self, row: dict[str, Any]) -> bool: ...
    def _release_agent_tool_run(self, run_id: str) -> None: ...
    def _bind_agent_tool_request(self, run_id: str, request_id: str) -> None: ...
    async def _run_agent_tool_in_background(
        self, run_id: str, input: Any, controller: AbortController
    ) -> None: ...
    async def _reconcile_stale_agent_tool_runs(self, only: str | None = None) -> None: ...
    async def inspect_agent_tool_run(self, run_id: str) -> dict[str, Any] | None: ...
    def _finalize_agent_tool_run(self, run_id: str, terminal: dict[str, Any]) -> None: ...
    async def get_agent_tool_chunks(
        self, run_id: str, after_sequence: int = -1
    ) -> list[dict[str, Any]]: ...
    def _turn_snapshot_extra(self, request_id: str) -> dict[str, Any]: ...
    def _on_turn_settled(self, request_id: str) -> None: ...


if TYPE_CHECKING:
    # Type-checked, never run: the chat hosts, which override some of Agent's methods, still
    # give the agent-tool mixins and the chat mixins what their self types name.
    def _chat_hosts_fit_the_agent_tool_mixins(agent: ChatHost) -> AgentToolsSelf:
        return agent

    def _chat_hosts_fit_the_chat_mixins(agent: ChatHost) -> ChatSelf:
        return agent

    def _think_agent_fits_the_chat_mixins(agent: ThinkAgent) -> ChatSelf:
        return agent

    def _chat_agent_fits_the_chat_mixins(agent: ChatAgent) -> ChatSelf:
        return agent
