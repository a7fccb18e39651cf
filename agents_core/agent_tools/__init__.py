"""Agents as tools: a parent agent delegating a task to a child agent as one of its tools.

Public surface of the package; the client side (the reducer and the UI chunk builder) lives in
`reducer` and `ui_chunks`.
"""

from agents_core.agent_tools.reducer import (
    AgentToolEvents,
    AgentToolEventsState,
    AgentToolRunState,
    apply_agent_tool_event,
)
from agents_core.agent_tools.ui_chunks import MalformedChunk, apply_chunk, parts_text

__all__ = [
    "AgentToolEvents",
    "AgentToolEventsState",
    "AgentToolRunState",
    "MalformedChunk",
    "apply_agent_tool_event",
    "apply_chunk",
    "parts_text",
]
