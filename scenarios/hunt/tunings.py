"""Tuned options: asked to (`agentsim fuzz --faults ...,tune`), the fuzzer also draws an agent's
options at values a developer might set.

A promise must hold whatever the agent is configured with, and the paths that make it hard to
keep are the ones the defaults rarely take: a recovery hook that times out, a scan past its
deadline, fibers aged out, a cap on concurrent runs, a detached budget that runs out, a chat
recovery that gives up. `TUNINGS` names, per option, a few values of the kind a team sets in
production (short timeouts, zero budgets, small caps), not the extremes the loader accepts (a
1 ms heartbeat would only spin the alarm, one over 60 s lets the platform idle the agent out
between heartbeats). `tunable` says which of them an agent of a scenario
takes, leaving out any the file sets itself (under that name or another): the runtime's own
options for every agent, the agent-tool ones where the agent can run tools, a class attribute
(the chat hosts' recovery budget) where its class has it.

A drawn tuning is written into the scenario's text (`tune_text`), in the agent's `options:`
(added, or merged into the mapping that is there), with a comment saying the fuzzer set it:
the reproducer shows the configuration that breaks the promise, and shrinking drops every
tuning the failure does not need.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from scenarios.hunt.emit import flow_scalar, format_duration
from scenarios.language.schema import AgentSpec, Scenario

__all__ = ["TUNE_NOTE", "TUNINGS", "tunable", "tune_text"]

TUNE_NOTE = "tuned by agentsim fuzz"

TUNINGS: dict[str, tuple[Any, ...]] = {
    # the runtime's options (agents_core.options.AgentOptions)
    # Not above 60 s: a heartbeat longer than the platform's shortest idle timeout (70 s) lets
    # the agent be evicted between heartbeats, so keepAlive no longer keeps it alive; that is
    # the option's contract (a fiber of long steps is then recovered again and again), not a
    # broken promise.
    "keep_alive_interval_ms": (1_000, 5_000, 60_000),
    "hung_schedule_timeout_seconds": (1, 5, 600),
    "fiber_recovery_hook_timeout_ms": (0, 50, 1_000),
    "fiber_recovery_scan_deadline_ms": (0, 50, 1_000),
    "fiber_recovery_max_age_ms": (0, 30_000, 300_000),
    "max_alarm_memory_limit_strikes": (1, 2),
    "send_identity_on_connect": (False,),
    # agent tools
    "max_concurrent_agent_tools": (0, 1, 2),
    "agent_tool_reattach_no_progress_timeout_ms": (0, 5_000, 30_000),
    "agent_tool_reattach_max_window_ms": (10_000, 60_000),
    "detached_max_budget_ms": (0, 10_000, 60_000, 300_000),
    "detached_no_progress_budget_ms": (5_000, 30_000),
    # class attributes of the chat hosts
    "max_chat_recovery_attempts": (1, 2),
    "chat_recovery_no_progress_timeout_ms": (1_000, 10_000),
}
_AGENT_TOOL_OPTIONS = frozenset(
    {
        "max_concurrent_agent_tools",
        "agent_tool_reattach_no_progress_timeout_ms",
        "agent_tool_reattach_max_window_ms",
        "detached_max_budget_ms",
        "detached_no_progress_budget_ms",
    }
)
_CLASS_ATTRIBUTES = frozenset(
    {"max_chat_recovery_attempts", "chat_recovery_no_progress_timeout_ms"}
)
_RUNS_TOOLS = (None, "tools")
"""Workloads whose agents run agent tools (None: a class of the user's, which may)."""


def tunable(spec: AgentSpec) -> list[tuple[str, tuple[Any, ...]]]:
    """The options the fuzzer may tune on `spec`'s agent, with the values it draws from."""
    out = []
    for name, values in TUNINGS.items():
        if name in spec.options:
            continue  # the story's own setting is part of the story
        if name in _AGENT_TOOL_OPTIONS and spec.workload not in _RUNS_TOOLS:
            continue
        if name in _CLASS_ATTRIBUTES and not hasattr(spec.cls, name):
            continue
        out.append((name, values))
    return out


def _written(name: str, value: Any) -> Any:
    """A value as the file shows it: durations in the language's units (`5s`, not 5000)."""
    if name.endswith("_ms") and isinstance(value, int) and not isinstance(value, bool):
        return format_duration(value)
    return value


_DURATION = re.compile(r"(\d+(ms|s|m|h|d))+")


def _flow(value: Any) -> str:
    """`value` in YAML flow style, mappings nested, durations bare (`5s`, as people write them)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {_flow(item)}" for key, item in value.items()) + "}"
    if isinstance(value, str) and _DURATION.fullmatch(value):
        return value
    return flow_scalar(value)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _children(lines: list[str], start: int, parent_indent: int) -> list[int]:
    """Indices of the content lines after `start` indented deeper than `parent_indent`, up to
    the first content line that is not."""
    out = []
    for index in range(start + 1, len(lines)):
        stripped = lines[index].strip()
        if not stripped or stripped.startswith("#"):
            continue
        if _indent(lines[index]) <= parent_indent:
            break
        out.append(index)
    return out


def _tune_agent(lines: list[str], spec: AgentSpec, edits: Mapping[str, Any]) -> None:
    index = spec.line - 1
    head = lines[index] if 0 <= index < len(lines) else ""
    written = {name: _written(name, value) for name, value in edits.items()}
    flow = re.match(rf"^(\s*{re.escape(spec.alias)}:\s*)(\{{.*\}})\s*(#.*)?$", head)
    if flow:  # `alias: {workload: counter}`: the whole agent on its line
        agent = yaml.safe_load(flow.group(2))
        agent["options"] = {**(agent.get("options") or {}), **written}
        lines[index] = f"{flow.group(1)}{_flow(agent)}  # {TUNE_NOTE}"
        return
    if not re.match(rf"^\s*{re.escape(spec.alias)}:\s*(#.*)?$", head):
        raise ValueError(
            f"line {spec.line}: agent {spec.alias} is not written as a block mapping; the fuzzer "
            f"tunes options in files written in block style, like those in scenarios/library"
        )
    children = _children(lines, index, _indent(head))
    if not children:
        raise ValueError(f"line {spec.line}: agent {spec.alias} has nothing under it")
    indent = " " * _indent(lines[children[0]])
    found = [i for i in children if re.match(rf"^{indent}options:(\s|$)", lines[i])]
    if not found:
        line = f"{indent}options: {_flow(written)}  # {TUNE_NOTE}"
        lines.insert(index + 1, line)
        return
    at = found[0]
    rest = lines[at].split(":", 1)[1].strip()
    if rest.startswith("{") and "}" in rest:
        given = yaml.safe_load(rest[: rest.rindex("}") + 1])
        merged = {**given, **written}
        lines[at] = f"{indent}options: {_flow(merged)}  # {TUNE_NOTE}"
        return
    if rest and not rest.startswith("#"):
        raise ValueError(f"line {at + 1}: the options of agent {spec.alias} are not a mapping")
    keys = _children(lines, at, len(indent))
    if not keys:
        raise ValueError(f"line {at + 1}: the options of agent {spec.alias} are empty")
    inner = " " * _indent(lines[keys[0]])
    for name, value in reversed(list(written.items())):
        line = f"{inner}{name}: {_flow(value)}  # {TUNE_NOTE}"
        same = [i for i in keys if re.match(rf"^{inner}{re.escape(name)}:(\s|$)", lines[i])]
        if same:
            lines[same[0]] = line
        else:
            lines.insert(at + 1, line)


def tune_text(text: str, scenario: Scenario, edits: Mapping[str, Mapping[str, Any]]) -> str:
    """`text` (the file `scenario` was read from) with each agent's options in `edits`
    (alias -> {option: value}) set: merged into its `options:`, or a new `options:` line."""
    specs = {spec.alias: spec for spec in scenario.agents}
    unknown = sorted(set(edits) - set(specs))
    if unknown:
        raise ValueError(f"no agent {', '.join(unknown)} to tune")
    lines = text.split("\n")
    # From the bottom up, so that the line numbers of the agents above stay valid.
    for alias in sorted(edits, key=lambda a: specs[a].line, reverse=True):
        if edits[alias]:
            _tune_agent(lines, specs[alias], edits[alias])
    return "\n".join(lines)
