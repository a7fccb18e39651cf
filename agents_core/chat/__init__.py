"""Chat agents: a Think-like host (`ThinkAgent`) and an AIChatAgent-like one (`ChatAgent`).

Both keep a transcript, run one turn at a time as a fiber that streams from the model service
(with server tools, multi-step), store every UI chunk in a resumable stream, recover a turn an
eviction interrupted (continue or retry), and implement the agent-tool child adapter (start,
cancel, inspect, chunks, tail) with progress and milestones, so either can be an agent-tool
child. `tool(...)` builds a plain server tool; `current_chat_turn()` tells a tool which agent and
turn it runs in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agents_core.chat.ai_chat import ChatAgent
from agents_core.chat.chat_recovery import ChatRecoveryContext
from agents_core.chat.think import ThinkAgent
from agents_core.chat.turns import (
    CHAT_RESPONSE_TYPE,
    ChatTurnContext,
    TurnResult,
    current_chat_turn,
)

__all__ = [
    "CHAT_RESPONSE_TYPE",
    "ChatAgent",
    "ChatRecoveryContext",
    "ChatTurnContext",
    "ThinkAgent",
    "Tool",
    "TurnResult",
    "current_chat_turn",
    "tool",
]


@dataclass(frozen=True)
class Tool:
    """A server tool: what the model is told, and what runs when it calls it."""

    description: str
    execute: Callable[..., Awaitable[Any] | Any]
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})


def tool(
    description: str,
    execute: Callable[..., Awaitable[Any] | Any],
    input_schema: Mapping[str, Any] | None = None,
) -> Tool:
    """A tool whose `execute(input, tool_call_id=..., signal=...)` returns its JSON output."""
    if not callable(execute):
        raise TypeError(f"tool(execute=) must be callable, got {execute!r}")
    return Tool(description, execute, input_schema or {"type": "object"})
