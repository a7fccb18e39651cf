"""`agent-tool-event` frames: what a parent broadcasts to its clients about its runs.

One frame type, `{type: "agent-tool-event", parentToolCallId?, sequence, replay?, event}`, with
event kinds `started`, `chunk`, `finished`, `error`, `aborted`, `interrupted` (spec agent-tools
§3.1). Chunk events also carry `chunkSequence`, the child's stored chunk index, whenever the
chunk is a stored one: it is the identity the client reducer dedupes on, so that replay and live
frames are never dropped or doubled whatever their wire sequence (seed decision S5).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents_core.agent_tools.registry import RunAgentToolResult

__all__ = ["FRAME_TYPE", "chunk_event", "frame", "started_event", "terminal_event"]

FRAME_TYPE = "agent-tool-event"


def frame(
    parent_tool_call_id: str | None,
    sequence: int,
    event: Mapping[str, Any],
    *,
    replay: bool = False,
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": FRAME_TYPE}
    if parent_tool_call_id is not None:
        out["parentToolCallId"] = parent_tool_call_id
    out["sequence"] = sequence
    if replay:
        out["replay"] = True
    out["event"] = dict(event)
    return out


def started_event(
    run_id: str, agent_type: str, input_preview: Any, order: int, display: Any
) -> dict[str, Any]:
    event: dict[str, Any] = {"kind": "started", "runId": run_id, "agentType": agent_type}
    if input_preview is not None:
        event["inputPreview"] = input_preview
    event["order"] = order
    if display is not None:
        event["display"] = display
    return event


def chunk_event(run_id: str, body: str, chunk_sequence: int | None) -> dict[str, Any]:
    event: dict[str, Any] = {"kind": "chunk", "runId": run_id, "body": body}
    if chunk_sequence is not None:
        event["chunkSequence"] = chunk_sequence
    return event


def terminal_event(result: RunAgentToolResult) -> dict[str, Any]:
    run_id = result.run_id
    if result.status == "completed":
        return {"kind": "finished", "runId": run_id, "summary": result.summary or ""}
    if result.status == "aborted":
        event: dict[str, Any] = {"kind": "aborted", "runId": run_id}
        if result.error is not None:
            event["reason"] = result.error
        return event
    if result.status == "interrupted":
        event = {
            "kind": "interrupted",
            "runId": run_id,
            "error": result.error or "Agent tool run was interrupted",
        }
        if result.reason is not None:
            event["reason"] = result.reason
        if result.child_still_running is not None:
            event["childStillRunning"] = result.child_still_running
        return event
    return {"kind": "error", "runId": run_id, "error": result.error or "Agent tool run failed"}
