"""Each package's public surface is its explicit `__all__`, pinned here so that a change to it is
a deliberate change to this file."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "agents_core": [
        "AbortController",
        "AbortSignal",
        "Agent",
        "AgentReset",
        "AgentsError",
        "FiberContext",
        "FiberInspection",
        "FiberRecoveryContext",
        "FiberRecoveryResult",
        "InvalidArgument",
        "NotInFiber",
        "Request",
        "Response",
        "Schedule",
        "StartFiberResult",
    ],
    "agents_core.agent_tools": [
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
    ],
    "agents_core.chat": [
        "CHAT_RESPONSE_TYPE",
        "ChatAgent",
        "ChatRecoveryContext",
        "ChatTurnContext",
        "ThinkAgent",
        "Tool",
        "TurnResult",
        "current_chat_turn",
        "tool",
    ],
    "scenarios.tools": ["ToolChild", "ToolResult", "ToolRun", "ToolRunCancelled"],
    "sim.model": [
        "ModelError",
        "Reply",
        "Rule",
        "ScriptedModel",
        "ToolCall",
        "after_tool",
        "asked",
        "call",
        "continuing",
        "fail",
        "offers",
        "stall",
        "text",
        "tool_calls",
        "when",
    ],
    "scenarios": [
        "InvalidScenario",
        "Scenario",
        "ScenarioResult",
        "load_scenario",
        "parse_scenario",
        "run_scenario",
    ],
    "sim": [
        "PROFILES",
        "AgentEvicted",
        "AgentRef",
        "Client",
        "FaultProfile",
        "IncarnationKilled",
        "NondeterministicCall",
        "Simulation",
        "SimulationStuck",
        "StorageError",
        "Trace",
        "TraceRecord",
        "format_sim_time",
        "parse_duration_ms",
        "profile_named",
    ],
}


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_public_names_are_pinned(package: str) -> None:
    """`__all__` is exactly the pinned list, and every name in it exists."""
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(PUBLIC[package])
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []
