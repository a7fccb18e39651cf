"""`agent_tool(ChildClass, ...)`: a child agent class packaged as a tool a parent model can call.

The tool runs the child through `run_agent_tool` with run id `agent-tool:<toolCallId>` (stable,
so a recovery re-run of the same tool call reaches the same child run) and maps the result to
what the model sees: the summary string, the validated structured output, or an
`AgentToolFailure` envelope whose `retryable` is true exactly for `interrupted` (spec
agent-tools §2.1). Input and output schemas are JSON Schema, validated with `jsonschema`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agents_core.errors import InvalidArgument

__all__ = ["AgentTool", "agent_tool", "current_agent", "failure_envelope"]

_current_agent: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "agents_core_agent", default=None
)

NOT_IN_TURN = (
    "agentTool() can only run inside an Agent turn. Use it from get_tools() on an Agent subclass."
)


def current_agent() -> Any:
    """The agent whose turn is running in this context (None outside one)."""
    return _current_agent.get()


def set_current_agent(agent: Any) -> Any:
    """Make `agent` ambient for the rest of this task; returns the previous one."""
    previous = _current_agent.get()
    _current_agent.set(agent)
    return previous


def failure_envelope(result: Any) -> dict[str, Any]:
    status, error = result.status, result.error
    if status == "aborted":
        return {
            "ok": False,
            "status": "aborted",
            "error": error or "agent tool run was cancelled",
            "retryable": False,
        }
    if status == "interrupted":
        envelope: dict[str, Any] = {
            "ok": False,
            "status": "interrupted",
            "error": error
            or "agent tool run was interrupted before it finished; it can be retried",
            "retryable": True,
        }
        if result.reason is not None:
            envelope["reason"] = result.reason
        if result.child_still_running is not None:
            envelope["childStillRunning"] = result.child_still_running
        return envelope
    return {
        "ok": False,
        "status": "error",
        "error": error or "agent tool run failed",
        "retryable": False,
    }


def _validator(schema: Any, what: str) -> Any:
    if schema is None:
        return None
    if hasattr(schema, "parse") and callable(schema.parse):
        return schema
    if not isinstance(schema, Mapping):
        raise InvalidArgument(
            f"{what} must be a JSON Schema mapping or have .parse(), got {schema!r}"
        )
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise InvalidArgument(f"{what} is not a valid JSON Schema: {exc.message}") from None
    return jsonschema.Draft202012Validator(schema)


def _validate(validator: Any, value: Any, what: str) -> Any:
    if hasattr(validator, "parse"):
        return validator.parse(value)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(root)"
        raise InvalidArgument(f"{what} is invalid at {where}: {first.message}; got {value!r}")
    return value


@dataclass
class AgentTool:
    """A tool for a parent model: `await tool.execute(input, tool_call_id=...)`."""

    child: type
    description: str
    input_schema: Mapping[str, Any]
    display_name: str | None = None
    output_schema: Any = None
    icon: str | None = None
    display: Mapping[str, Any] | None = None
    _input_validator: Any = field(default=None, repr=False)
    _output_validator: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.description, str) or not self.description:
            raise InvalidArgument(f"agent_tool needs a description, got {self.description!r}")
        if self.input_schema is None:
            raise InvalidArgument("agent_tool needs an input_schema (a JSON Schema mapping)")
        self._input_validator = _validator(self.input_schema, "input_schema")
        self._output_validator = _validator(self.output_schema, "output_schema")

    @property
    def name(self) -> str:
        return self.child.__name__

    def display_metadata(self) -> dict[str, Any] | None:
        if self.display_name is None and self.icon is None and self.display is None:
            return None
        out = dict(self.display or {})
        if self.display_name is not None:
            out["name"] = self.display_name
        if self.icon is not None:
            out["icon"] = self.icon
        return out

    async def execute(
        self, input: Any, *, tool_call_id: str | None = None, signal: Any = None
    ) -> Any:
        agent = current_agent()
        if agent is None or not hasattr(agent, "run_agent_tool"):
            raise RuntimeError(NOT_IN_TURN)
        input = _validate(self._input_validator, input, "agent tool input")
        result = await agent.run_agent_tool(
            self.child,
            input=input,
            run_id=f"agent-tool:{tool_call_id}" if tool_call_id else None,
            parent_tool_call_id=tool_call_id,
            signal=signal,
            display=self.display_metadata(),
        )
        if result.status != "completed":
            return failure_envelope(result)
        if self._output_validator is None:
            return result.summary if result.summary is not None else ""
        if not result.has_output or result.output is None:
            return {
                "ok": False,
                "status": "error",
                "error": "agent tool completed without structured output required by outputSchema",
                "retryable": False,
            }
        return _validate(self._output_validator, result.output, "agent tool output")


def agent_tool(
    child: type,
    *,
    description: str,
    input_schema: Mapping[str, Any],
    display_name: str | None = None,
    output_schema: Any = None,
    icon: str | None = None,
    display: Mapping[str, Any] | None = None,
) -> AgentTool:
    """Package `child` (a chat agent class) as a tool a parent model can call."""
    return AgentTool(child, description, input_schema, display_name, output_schema, icon, display)
