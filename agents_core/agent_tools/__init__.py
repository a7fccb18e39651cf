"""Agents as tools: a parent agent delegating a task to a child agent as one of its tools.

The parent side (`run_agent_tool`, detached runs, re-attach, replay) is on every `Agent`, whose
methods delegate to the components `AgentTools` builds (`components.py`); this package's public
names are the tool factory, the result shapes and the client side (the reducer and the UI chunk
builder).
"""

from agents_core.agent_tools.reducer import (
    AgentToolEvents,
    AgentToolEventsState,
    AgentToolRunState,
    apply_agent_tool_event,
)
from agents_core.agent_tools.registry import (
    AgentToolRunInfo,
    DetachedRunAgentToolResult,
    RunAgentToolResult,
)
from agents_core.agent_tools.tool import AgentTool, agent_tool, failure_envelope
from agents_core.agent_tools.ui_chunks import MalformedChunk, apply_chunk, parts_text

__all__ = [
    "AgentTool",
    "AgentToolEvents",
    "AgentToolEventsState",
    "AgentToolRunInfo",
    "AgentToolRunState",
    "DetachedRunAgentToolResult",
    "MalformedChunk",
    "RunAgentToolResult",
    "agent_tool",
    "apply_agent_tool_event",
    "apply_chunk",
    "failure_envelope",
    "parts_text",
]
