"""Validation of the `steps` and `expect` lists of a scenario document into schema dataclasses.

A step is a mapping with exactly one action key (`call`, `evict`, ...) and an optional `at:`
(absolute sim time) or `after:` (time after the previous step) beside it. Everything that can be
checked without running is checked here, so that a run never stops on a typo: agent aliases,
method names and their arguments, client names (declared, or connected by an earlier step),
regular expressions, durations, and `at:` times that would go back in time. Expectations are
read by `scenarios.parse_expect`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from scenarios import agents as agent_classes
from scenarios.errors import InvalidScenario
from scenarios.fields import DURATION_HINT, MAX_DURATION_MS, Fields, plain, show
from scenarios.schema import (
    ACTIONS,
    DEFAULT_LIVENESS_LIMIT_MS,
    EVICTION_REASONS,
    AgentSpec,
    ClientSpec,
    Step,
)
from sim.units import parse_duration_ms

__all__ = ["HTTP_METHODS", "StepContext", "known_agent", "parse_steps"]

TIMING_KEYS = ("at", "after")
TIMING_HINT = " (at: and after: go beside the action, not inside it)"
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
_ERROR_NAME = re.compile(r"[A-Za-z_]\w*")


@dataclass
class StepContext:
    """What the steps so far have established, for the checks of the next one."""

    path: str
    agents: dict[str, AgentSpec]
    clients: dict[str, str] = field(default_factory=dict)
    """Client name to agent alias: declared ones, and those an earlier step connected."""
    latest_ms: int = 0
    latest_label: str = ""
    kind: str = ""
    """The action of the step being read (names its value in errors: `call: 5; ...`)."""


# -- steps ------------------------------------------------------------------------------------
def parse_steps(
    top: Fields, agents: dict[str, AgentSpec], clients: dict[str, ClientSpec]
) -> tuple[Step, ...]:
    items = top.sequence("steps")
    if not items:
        top.bad("steps", "expected a list of at least one step")
    context = StepContext(top.path, agents, {name: spec.agent for name, spec in clients.items()})
    lines = getattr(items, "lines", [])
    return tuple(
        _step(context, index, item, lines[index - 1] if index <= len(lines) else top.line)
        for index, item in enumerate(items, start=1)
    )


def _step(context: StepContext, index: int, item: Any, line: int) -> Step:
    where = f"step {index}"
    allowed_actions = f"each step has exactly one action of {sorted(ACTIONS)}, plus at: or after:"
    if not isinstance(item, dict):
        raise InvalidScenario(
            context.path, line, where, f"{show(item)} is not a mapping", allowed_actions
        )
    lines = getattr(item, "lines", {})
    actions = [key for key in item if key not in TIMING_KEYS]
    for key in actions:
        if not isinstance(key, str) or key not in ACTIONS:
            raise InvalidScenario(
                context.path,
                lines.get(key, line),
                where,
                f"unknown action {show(key)}",
                allowed_actions,
            )
    if not actions:
        raise InvalidScenario(context.path, line, where, "no action", allowed_actions)
    if len(actions) > 1:
        raise InvalidScenario(
            context.path,
            lines.get(actions[1], line),
            where,
            f"two actions {actions[0]!r} and {actions[1]!r}",
            "a step has exactly one action; write two steps",
        )
    kind = context.kind = actions[0]
    where = f"step {index} ({kind})"
    timing = Fields(context.path, where, item, line, keys=(kind, *TIMING_KEYS))
    if "at" in timing and "after" in timing:
        timing.fail("after", "both at: and after:", "give one of them")
    at_ms = timing.duration("at", None)
    if at_ms is not None:
        _not_back_in_time(context, timing, "at", at_ms, where)
    after_ms = timing.duration("after", None)
    value, value_line = item[kind], lines.get(kind, line)
    parser = _PARSERS[kind]
    details = parser(context, where, value, value_line)
    if kind == "run_until":
        _not_back_in_time(context, timing, kind, details["until_ms"], where)
    return ACTIONS[kind](index=index, line=line, at_ms=at_ms, after_ms=after_ms, **details)


def _not_back_in_time(
    context: StepContext, timing: Fields, key: str, t_ms: int, where: str
) -> None:
    if t_ms < context.latest_ms:
        timing.fail(
            key,
            f"{key}: {show(timing.raw(key))} is before {context.latest_label}",
            "steps run in order, so absolute times must not decrease",
        )
    context.latest_ms = t_ms
    context.latest_label = f"{where}'s {key}: {show(timing.raw(key))}"


def _fields(
    context: StepContext,
    where: str,
    value: Any,
    line: int,
    keys: tuple[str, ...],
    required: tuple[str, ...] = (),
) -> Fields:
    return Fields(
        context.path,
        where,
        value,
        line,
        keys=keys,
        required=required,
        hint=TIMING_HINT,
        name=context.kind,
    )


def known_agent(context: StepContext, fields: Fields, key: str = "agent") -> AgentSpec:
    alias = fields.text(key)
    if alias not in context.agents:
        fields.fail(key, f"unknown agent {show(alias)}", f"known agents: {sorted(context.agents)}")
    return context.agents[alias]


def _known_client(context: StepContext, fields: Fields) -> str:
    name = fields.text("client")
    if name not in context.clients:
        fields.fail(
            "client",
            f"unknown client {show(name)}",
            f"known so far: {sorted(context.clients)}; declare it under clients: or connect it "
            f"in an earlier step",
        )
    return name


def _expect_error(fields: Fields) -> bool | str:
    value = fields.raw("expect_error", False)
    if isinstance(value, bool) or (isinstance(value, str) and _ERROR_NAME.fullmatch(value)):
        return value
    fields.bad(
        "expect_error", "expected true, false, or an exception class name such as 'AgentEvicted'"
    )


def _call(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(
        context,
        where,
        value,
        line,
        ("agent", "method", "args", "kwargs", "wait", "expect_error"),
        ("agent", "method"),
    )
    spec = known_agent(context, fields)
    method = fields.text("method")
    if method.startswith("_") or not callable(getattr(spec.cls, method, None)):
        fields.fail(
            "method",
            f"method: {show(method)} is not a public method of {spec.cls.__qualname__}",
            f"methods: {agent_classes.public_methods(spec.cls)}",
        )
    args = tuple(plain(fields.sequence("args", [])))
    kwargs = plain(fields.mapping("kwargs", {}))
    problem = agent_classes.call_signature_error(spec.cls, method, args, kwargs)
    if problem:
        key = "kwargs" if "kwargs" in fields and "args" not in fields else "args"
        shown = show(list(args)) if key == "args" else show(kwargs)
        fields.fail(key if key in fields else "method", f"{key}: {shown}", problem)
    return {
        "agent": spec.alias,
        "method": method,
        "args": args,
        "kwargs": kwargs,
        "wait": fields.flag("wait", True),
        "expect_error": _expect_error(fields),
    }


def _request(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(
        context,
        where,
        value,
        line,
        ("agent", "method", "path", "body", "headers", "status", "expect_error"),
        ("agent",),
    )
    spec = known_agent(context, fields)
    path = fields.text("path", "/")
    if not path.startswith("/"):
        fields.bad("path", "expected a path starting with '/'")
    headers = fields.mapping("headers", {})
    if any(not isinstance(v, str) for v in headers.values()):
        fields.bad("headers", "expected a mapping of header names to strings")
    status = fields.whole("status", None, minimum=100, maximum=599)
    return {
        "agent": spec.alias,
        "method": fields.text("method", "GET", choices=HTTP_METHODS),
        "path": path,
        "body": plain(fields.raw("body")),
        "headers": plain(headers),
        "status": status,
        "expect_error": _expect_error(fields),
    }


def _connect(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line, ("client", "agent"), ("client",))
    name = fields.text("client")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", name):
        fields.bad("client", "expected a name of letters, digits, '.', '_' and '-'")
    known = context.clients.get(name)
    if "agent" in fields:
        alias = known_agent(context, fields).alias
        if known is not None and known != alias:
            fields.fail(
                "agent",
                f"agent: {show(alias)}",
                f"client {name!r} belongs to agent {known!r}; a client has one agent",
            )
    elif known is None:
        fields.fail(
            "client",
            f"unknown client {show(name)}",
            "declare it under clients: or give agent: to connect it to",
        )
    else:
        alias = known
    context.clients[name] = alias
    return {"client": name, "agent": alias}


def _disconnect(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line, ("client", "code", "reason"), ("client",))
    return {
        "client": _known_client(context, fields),
        "code": fields.whole("code", 1000, minimum=1000, maximum=4999),
        "reason": fields.text("reason", "client closed"),
    }


def _reconnect(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line, ("client",), ("client",))
    return {"client": _known_client(context, fields)}


def _send(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line, ("client", "message"), ("client", "message"))
    return {"client": _known_client(context, fields), "message": plain(fields.raw("message"))}


def _duration(context: StepContext, where: str, key: str, value: Any, line: int) -> int:
    try:
        ms = parse_duration_ms(value)
    except ValueError:
        ms = -1
    if not 0 <= ms <= MAX_DURATION_MS:
        raise InvalidScenario(context.path, line, where, f"{key}: {show(value)}", DURATION_HINT)
    return ms


def _run_for(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    return {"duration_ms": _duration(context, where, "run_for", value, line)}


def _run_until(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    return {"until_ms": _duration(context, where, "run_until", value, line)}


def _evict(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line, ("agent", "reason"), ("agent",))
    return {
        "agent": known_agent(context, fields).alias,
        "reason": fields.text("reason", "explicit", choices=EVICTION_REASONS),
    }


def _nothing(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    _fields(context, where, value, line, ())
    return {}


def _arm_storage_fault(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(
        context, where, value, line, ("agent", "kind", "match", "skip", "count"), ("agent", "kind")
    )
    match = fields.raw("match")
    if match is not None:
        if not isinstance(match, str):
            fields.bad("match", "expected a regular expression (a string)")
        try:
            re.compile(match)
        except (re.error, RecursionError, OverflowError) as exc:
            fields.bad("match", f"not a regular expression ({exc})")
    return {
        "agent": known_agent(context, fields).alias,
        "fault": fields.text("kind", choices=("error", "crash")),
        "match": match,
        "skip": fields.whole("skip", 0),
        "count": fields.whole("count", 1, minimum=1),
    }


def _quiesce(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line, ("limit",))
    return {"limit_ms": fields.duration("limit", DEFAULT_LIVENESS_LIMIT_MS)}


_PARSERS = {
    "call": _call,
    "request": _request,
    "connect": _connect,
    "disconnect": _disconnect,
    "reconnect": _reconnect,
    "send": _send,
    "run_for": _run_for,
    "run_until": _run_until,
    "evict": _evict,
    "deploy": _nothing,
    "arm_storage_fault": _arm_storage_fault,
    "run_to_next_alarm": _nothing,
    "quiesce": _quiesce,
}
