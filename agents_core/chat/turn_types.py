"""What a chat turn is made of: the frame types, the plan a turn runs from, its result, the
state of a running turn, the turn the calling code runs in, and what the turn engine runs of
its host (`TurnHooks`).

The queue that runs turns is `turns.py`; the model and tool steps inside one turn are
`turn_steps.py`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agents_core.chat.messages import MessageBuilder
    from agents_core.signals import AbortController, AbortSignal

__all__ = [
    "ABORTED",
    "CHAT_MESSAGES_TYPE",
    "CHAT_REQUEST_TYPE",
    "CHAT_RESPONSE_TYPE",
    "CHAT_TURN_FIBER_PREFIX",
    "END",
    "RECOVERING_OUTCOME",
    "STALLED",
    "ChatTurnContext",
    "TurnHooks",
    "TurnPlan",
    "TurnResult",
    "TurnState",
    "current_chat_turn",
    "enter_chat_turn",
    "leave_chat_turn",
]

CHAT_RESPONSE_TYPE = "cf_agent_use_chat_response"
CHAT_MESSAGES_TYPE = "cf_agent_chat_messages"
CHAT_REQUEST_TYPE = "cf_agent_use_chat_request"
CHAT_TURN_FIBER_PREFIX = "__cf_internal_chat_turn:"


class _Signal:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


END = _Signal("<end of stream>")
ABORTED = _Signal("<aborted>")
STALLED = _Signal("<stalled>")
RECOVERING_OUTCOME = "recovering"
"""The outcome of a request that stopped while recovery continues its turn (sdk-0.32 §8.2)."""


@dataclass(frozen=True)
class TurnResult:
    """How a turn ended: `completed`, `error`, `aborted` or `skipped`."""

    request_id: str
    status: str
    error: str | None = None
    stream_id: str | None = None
    message_id: str | None = None
    cleared: bool = False
    """The chat was cleared while the turn was queued or running."""
    recovering: bool = False
    """The turn's outcome is `recovering` (its status `aborted`): it stalled and chat recovery
    continues it under a new request."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"requestId": self.request_id, "status": self.status}
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass
class TurnPlan:
    """What to run: the turn's request id and where it comes from."""

    request_id: str
    trigger: str = "chat"
    signal: AbortSignal | None = None
    body: Any = None
    origin_request_id: str | None = None
    attempt: int = 0
    continue_message_id: str | None = None
    """Chat recovery's continue path: extend this (persisted, partial) assistant message."""
    prepare: Callable[[str], Any] | None = None
    """Runs when the turn is admitted (after the queue), before its fiber starts."""
    stream_id: str | None = None
    """Chat recovery of an agent-tool run: the interrupted turn's stream, which this turn
    continues instead of opening its own (the run's chunk indices never start over, S5)."""


@dataclass(frozen=True)
class ChatTurnContext:
    """The turn the current code runs in (tools use it to find their agent)."""

    agent: Any
    request_id: str
    trigger: str


@dataclass
class TurnState:
    plan: TurnPlan
    stream_id: str
    builder: MessageBuilder
    controller: AbortController
    aborted: Any
    snapshot: dict[str, Any]
    """The turn's own snapshot (what chat recovery reads to continue it)."""
    started: bool = False


_current_turn: contextvars.ContextVar[ChatTurnContext | None] = contextvars.ContextVar(
    "agents_core_chat_turn", default=None
)


def current_chat_turn() -> ChatTurnContext | None:
    """The chat turn the calling code runs in, or None outside any turn."""
    return _current_turn.get()


def enter_chat_turn(turn: ChatTurnContext) -> ChatTurnContext | None:
    """Make `turn` the current one; the one it replaces (for `leave_chat_turn`)."""
    outer = _current_turn.get()
    _current_turn.set(turn)
    return outer


def leave_chat_turn(outer: ChatTurnContext | None) -> None:
    """Restore the turn `enter_chat_turn` replaced."""
    _current_turn.set(outer)


class TurnHooks(Protocol):
    """What the turn engine runs of its chat host: the user's overrides (the tools, the
    system prompt, the model service and step budget), the fiber a turn runs in, and the steps
    of the host's other parts (the agent-tool run a turn serves, the broadcast snoop, the
    The host passes itself; a subclass's override is what runs."""

    @property
    def model_service(self) -> str: ...
    @property
    def max_steps(self) -> int: ...
    def get_tools(self) -> Mapping[str, Any]: ...
    def get_system_prompt(self) -> str | None: ...
    async def _run_chat_turn(
        self,
        request_id: str,
        continuation: bool,
        fn: Callable[[Any], Awaitable[Any]],
        *,
        initial_snapshot: Any,
        wrap: Callable[[Any], Any],
    ) -> Any: ...
    def _turn_snapshot_extra(self, request_id: str) -> dict[str, Any]: ...
    def _stream_stall_timeout_ms(self) -> int: ...
    async def _route_stalled_turn(
        self,
        request_id: str,
        snapshot: dict[str, Any],
        partial: dict[str, Any],
        *,
        backoff: bool = False,
    ) -> str | None: ...
    def _on_turn_settled(self, request_id: str) -> None: ...
    def _on_turn_result(self, result: TurnResult) -> None: ...
    def _broadcast_chat_frame(self, frame: Any, chunk_index: int | None = None) -> None: ...
    def broadcast(self, frame: Any, exclude: tuple[str, ...] = ()) -> None: ...
