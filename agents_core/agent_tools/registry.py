"""The parent's registry of agent-tool runs (`cf_agent_tool_runs`), its status machine and the
result and run-info shapes every hook and caller sees.

Status machine (spec agent-tools §1.5): a new run is `starting`, then `running`; a cap
rejection is born `error`. Every terminal write goes through one guarded UPDATE that changes the
row only while it is not hard terminal (`completed`, `error`, `aborted`): hard terminals are
immutable, `interrupted` is soft and may be repaired by any later terminal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agents_core.js_strings import js_json, js_length, js_slice
from agents_core.jsontext import parse_json_text, to_json_text

__all__ = [
    "AGENT_TOOL_RUNS_DDL",
    "AgentToolRunInfo",
    "DetachedRunAgentToolResult",
    "HARD_TERMINAL",
    "RunAgentToolResult",
    "TERMINAL",
    "default_input_preview",
]

HARD_TERMINAL = frozenset({"completed", "error", "aborted"})
TERMINAL = HARD_TERMINAL | {"interrupted"}
INPUT_PREVIEW_LIMIT = 500

AGENT_TOOL_RUNS_DDL = (
    """CREATE TABLE IF NOT EXISTS cf_agent_tool_runs (
        run_id TEXT PRIMARY KEY,
        parent_tool_call_id TEXT,
        agent_type TEXT NOT NULL,
        input_preview TEXT,
        input_redacted INTEGER NOT NULL DEFAULT 1,
        status TEXT NOT NULL,
        summary TEXT,
        output_json TEXT,
        error_message TEXT,
        interrupted_reason TEXT,
        child_still_running INTEGER,
        display_metadata TEXT,
        display_order INTEGER NOT NULL DEFAULT 0,
        started_at INTEGER NOT NULL,
        completed_at INTEGER,
        detached INTEGER NOT NULL DEFAULT 0,
        detached_on_finish TEXT,
        detached_notify_source TEXT,
        detached_max_budget_at INTEGER,
        finish_claimed_at INTEGER,
        finish_delivered_at INTEGER,
        give_up_claimed_at INTEGER,
        give_up_delivered_at INTEGER,
        detached_no_progress_budget_ms INTEGER,
        last_progress_at INTEGER,
        detached_on_milestones TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS idx_agent_tool_runs_parent "
    "ON cf_agent_tool_runs (parent_tool_call_id, display_order)",
)


def default_input_preview(value: Any) -> Any:
    """The SDK's default preview: a string's first 500 chars; None as is; anything else its JSON
    text, cut to 497 chars + '...' past 500; str() when JSON fails. Chars are JavaScript's
    (UTF-16 code units), so an emoji counts two and a cut may leave half of one."""
    if value is None or isinstance(value, str):
        return value if value is None else js_slice(value, INPUT_PREVIEW_LIMIT)
    try:
        text = js_json(value)
    except (TypeError, ValueError):
        return js_slice(str(value), INPUT_PREVIEW_LIMIT)
    if js_length(text) > INPUT_PREVIEW_LIMIT:
        return js_slice(text, INPUT_PREVIEW_LIMIT - 3) + "..."
    return text


@dataclass(frozen=True)
class RunAgentToolResult:
    """What an awaited `run_agent_tool` returns (and what hooks receive as the lifecycle)."""

    run_id: str
    agent_type: str
    status: str
    output: Any = None
    summary: str | None = None
    error: str | None = None
    reason: str | None = None
    child_still_running: bool | None = None
    has_output: bool = field(default=False, compare=True)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"runId": self.run_id, "agentType": self.agent_type}
        out.update(self.lifecycle())
        if self.has_output:
            out["output"] = self.output
        return out

    def lifecycle(self) -> dict[str, Any]:
        """The lifecycle object of detached deliveries: status and the defined keys only."""
        out: dict[str, Any] = {"status": self.status}
        for key, value in (
            ("summary", self.summary),
            ("error", self.error),
            ("reason", self.reason),
            ("childStillRunning", self.child_still_running),
        ):
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True)
class DetachedRunAgentToolResult:
    run_id: str
    agent_type: str
    status: str
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"runId": self.run_id, "agentType": self.agent_type, "status": self.status}
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class AgentToolRunInfo:
    """The run as hooks see it (`AgentToolRunInfo`)."""

    run_id: str
    parent_tool_call_id: str | None
    agent_type: str
    input_preview: Any
    status: str
    display: Any
    display_order: int
    started_at: int
    completed_at: int | None = None
    notify_source: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any], **overrides: Any) -> AgentToolRunInfo:
        _, preview = parse_json_text(row["input_preview"])
        _, display = parse_json_text(row["display_metadata"])
        values = dict(
            run_id=row["run_id"],
            parent_tool_call_id=row["parent_tool_call_id"],
            agent_type=row["agent_type"],
            input_preview=preview,
            status=row["status"],
            display=display,
            display_order=row["display_order"],
            started_at=row["started_at"],
            completed_at=row["completed_at"],
            notify_source=row["detached_notify_source"],
        )
        values.update(overrides)
        return cls(**values)


def preview_json(preview: Any) -> str | None:
    return None if preview is None else to_json_text(preview, "input preview")
