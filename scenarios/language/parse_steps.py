"""Validation of the `steps` list of a scenario document into schema dataclasses.

A step is a mapping with exactly one action key (`call`, `evict`, ...) and an optional `at:`
(absolute sim time) or `after:` (time after the previous step) beside it. Each action's value is
declared in `scenarios.language.step_shapes` (what the loader checks and the JSON Schema says).
Everything that can be checked without running is checked here, so that a run never stops on a
typo: agent aliases, sub-agents of a tools workload, method names and their arguments, client
names (declared, or connected by an earlier step), model services, regular expressions,
durations, and `at:` times that would go back in time. Expectations are read by
`scenarios.language.parse_expect`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, cast

from scenarios.language import agents as agent_classes
from scenarios.language.errors import InvalidScenario, Skipped
from scenarios.language.fields import (
    DURATION_HINT,
    MAX_DURATION_MS,
    Fields,
    did_you_mean,
    duration_ms,
    gather,
    plain,
    show,
)
from scenarios.language.parse_agents import NAME_HINT, NAME_PATTERN
from scenarios.language.parse_model import read_reply
from scenarios.language.releases import check_release
from scenarios.language.schema import (
    ACTIONS,
    MODEL_SERVICE,
    AgentSpec,
    ClientSpec,
    ModelScript,
    Step,
)
from scenarios.language.step_shapes import ERROR_NAME, HTTP_METHODS, STEP, STEP_SHAPES
from scenarios.workloads.children import CHILD_CLASSES
from sim.model import fail, stall
from sim.sqlite import compile_match

if TYPE_CHECKING:
    from scenarios.workloads.tools import _ToolsMixin

__all__ = ["HTTP_METHODS", "STEP", "STEP_SHAPES", "StepContext", "known_agent", "parse_steps"]

TIMING_KEYS = ("at", "after")
TIMING_HINT = " (at: and after: go beside the action, not inside it)"


@dataclass
class StepContext:
    """What the steps so far have established, for the checks of the next one."""

    path: str
    agents: dict[str, AgentSpec]
    clients: dict[str, str] = field(default_factory=dict)
    """Client name to agent alias: declared ones, and those an earlier step connected."""
    models: dict[str, ModelScript] = field(default_factory=dict)
    """The scenario's model services by name."""
    latest_ms: int = 0
    latest_label: str = ""
    kind: str = ""
    """The action of the step being read (names its value in errors: `call: 5; ...`)."""
    broken_agents: set[str] = field(default_factory=set)
    """Aliases whose declaration was wrong: a part naming one is skipped, not reported."""
    broken_clients: set[str] = field(default_factory=set)
    """Clients whose declaration or connect step was wrong (skipped the same way)."""


# -- steps ------------------------------------------------------------------------------------
def parse_steps(
    top: Fields,
    agents: dict[str, AgentSpec],
    clients: dict[str, ClientSpec],
    models: dict[str, ModelScript] | None = None,
) -> tuple[Step, ...]:
    items = top.sequence("steps")
    if not items:
        top.bad("steps", "expected a list of at least one step")
    context = StepContext(
        top.path,
        agents,
        {name: spec.agent for name, spec in clients.items()},
        dict(models or {MODEL_SERVICE: ModelScript()}),
        broken_agents=set(top.broken_agents),
        broken_clients=set(top.broken_clients),
    )
    lines = getattr(items, "lines", [])
    steps = []
    for index, item in enumerate(items, start=1):
        line = lines[index - 1] if index <= len(lines) else top.line
        step = gather(top.problems, _step, context, index, item, line)
        if step is not None:
            steps.append(step)
            continue
        connect = item.get("connect") if isinstance(item, dict) else None
        if isinstance(connect, dict) and isinstance(connect.get("client"), str):
            context.broken_clients.add(connect["client"])  # later uses are skipped
    top.broken_clients = context.broken_clients
    return tuple(steps)


_ALLOWED_ACTIONS = f"each step has exactly one action of {sorted(ACTIONS)}, plus at: or after:"


def _step(context: StepContext, index: int, item: Any, line: int) -> Step:
    where = f"step {index}"
    allowed_actions = _ALLOWED_ACTIONS
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
                did_you_mean(key, ACTIONS) + allowed_actions,
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
    at_ms = after_ms = None
    timing = None
    if len(item) > 1 or kind == "run_until":  # (most steps have no at: or after:)
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
    if timing is not None and kind == "run_until":
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


def _fields(context: StepContext, where: str, value: Any, line: int) -> Fields:
    """The action's value, checked against its shape in `STEP_SHAPES`."""
    return Fields(
        context.path,
        where,
        value,
        line,
        shape=STEP_SHAPES[context.kind],
        hint=TIMING_HINT,
        name=context.kind,
    )


def known_agent(context: StepContext, fields: Fields, key: str = "agent") -> AgentSpec:
    alias = fields.text(key)
    if alias not in context.agents:
        unknown_agent(context, fields, key, alias)
    return context.agents[alias]


def unknown_agent(context: StepContext, fields: Fields, key: str, alias: Any) -> NoReturn:
    """The error of a name that is no agent: skipped when its declaration was the mistake."""
    if alias in context.broken_agents:
        raise Skipped(fields.path, fields.line_of(key), fields.where)
    fields.fail(
        key,
        f"unknown agent {show(alias)}",
        f"{did_you_mean(alias, context.agents)}known agents: {sorted(context.agents)}",
    )


def _known_client(context: StepContext, fields: Fields) -> str:
    name = fields.text("client")
    if name in context.broken_clients and name not in context.clients:
        raise Skipped(fields.path, fields.line_of("client"), fields.where)
    if name not in context.clients:
        fields.fail(
            "client",
            f"unknown client {show(name)}",
            f"{did_you_mean(name, context.clients)}known so far: {sorted(context.clients)}; "
            f"declare it under clients: or connect it in an earlier step",
        )
    return name


def _expect_error(fields: Fields) -> bool | str:
    value = fields.raw("expect_error", False)
    if isinstance(value, bool) or (isinstance(value, str) and ERROR_NAME.fullmatch(value)):
        return value
    fields.bad(
        "expect_error", "expected true, false, or an exception class name such as 'AgentEvicted'"
    )


def _call(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line)
    spec = known_agent(context, fields)
    method = fields.get("method")
    if method.startswith("_") or not callable(getattr(spec.cls, method, None)):
        methods = agent_classes.public_methods(spec.cls)
        fields.fail(
            "method",
            f"method: {show(method)} is not a public method of {spec.cls.__qualname__}",
            f"{did_you_mean(method, methods)}methods: {methods}",
        )
    args = tuple(plain(fields.get("args") or []))
    kwargs = plain(fields.get("kwargs") or {})
    problem = _signature_error(spec.cls, method, len(args), tuple(kwargs))
    if problem:
        key = "kwargs" if "kwargs" in fields and "args" not in fields else "args"
        shown = show(list(args)) if key == "args" else show(kwargs)
        fields.fail(key if key in fields else "method", f"{key}: {shown}", problem)
    return {
        "agent": spec.alias,
        "method": method,
        "args": args,
        "kwargs": kwargs,
        "wait": fields.get("wait"),
        "expect_error": _expect_error(fields),
        "may_fail_with": fields.get("may_fail_with"),
        "checks_return": "returns" in fields,
        "returns": plain(fields.raw("returns", None)),
    }


def _run_in(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line)
    spec = known_agent(context, fields)
    function = fields.get("function")
    try:
        fn = agent_classes.resolve_function(function, agent_classes.search_dirs(context.path))
    except ValueError as exc:
        fields.fail("function", f"function: {exc}")
    return {
        "agent": spec.alias,
        "function": function,
        "fn": fn,
        "expect_error": _expect_error(fields),
        "checks_return": "returns" in fields,
        "returns": plain(fields.raw("returns", None)),
    }


@functools.lru_cache(maxsize=1024)
def _signature_error(cls: type, method: str, positional: int, keywords: tuple[str, ...]) -> str:
    """Whether a call binds depends on how many arguments it has and the keywords' names, not
    their values: checked once per shape (a long scenario repeats a few shapes)."""
    kwargs = dict.fromkeys(keywords)
    return agent_classes.call_signature_error(cls, method, (None,) * positional, kwargs)


def _request(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line)
    spec = known_agent(context, fields)
    path = fields.get("path")
    headers = fields.get("headers") or {}
    if any(not isinstance(v, str) for v in headers.values()):
        fields.bad("headers", "expected a mapping of header names to strings")
    return {
        "agent": spec.alias,
        "method": fields.get("method"),
        "path": path,
        "body": plain(fields.get("body")),
        "headers": plain(headers),
        "status": fields.get("status"),
        "expect_error": _expect_error(fields),
        "may_fail_with": fields.get("may_fail_with"),
    }


def _connect(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line)
    name = fields.get("client")
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
    return {"client": name, "agent": alias, "may_fail_with": fields.get("may_fail_with")}


def _disconnect(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line)
    return {
        "client": _known_client(context, fields),
        "code": fields.get("code"),
        "reason": fields.get("reason"),
    }


def _reconnect(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line)
    return {"client": _known_client(context, fields), "may_fail_with": fields.get("may_fail_with")}


def _send(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line)
    return {"client": _known_client(context, fields), "message": plain(fields.get("message"))}


def _duration(context: StepContext, where: str, key: str, value: Any, line: int) -> int:
    try:
        ms = duration_ms(value)
    except ValueError:
        ms = -1
    if not 0 <= ms <= MAX_DURATION_MS:
        raise InvalidScenario(context.path, line, where, f"{key}: {show(value)}", DURATION_HINT)
    return ms


def _run_for(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    return {"duration_ms": _duration(context, where, "run_for", value, line)}


def _run_until(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    return {"until_ms": _duration(context, where, "run_until", value, line)}


def _sub_agent_target(context: StepContext, fields: Fields) -> tuple[str, list[str], str | None]:
    """`agent: alias` or `alias/name/...`, or `agent:` with `run_id:` (and `child:`): the alias,
    the sub-agent names below it (outermost first) and the class the last must have."""
    alias, *names = fields.get("agent").split("/")
    if alias not in context.agents:
        unknown_agent(context, fields, "agent", alias)
    if not all(NAME_PATTERN.fullmatch(name) for name in names):
        part = NAME_HINT.removeprefix("expected ")
        fields.bad("agent", f"expected an alias, or alias/name for a sub-agent, each part {part}")
    key = "agent"
    if "run_id" in fields:
        if names:
            fields.fail("run_id", f"both agent: {fields.raw('agent')!r} and run_id:", "give one")
        key, names = "run_id", [fields.get("run_id")]
    child_class = fields.get("child")
    if child_class is not None and key != "run_id":
        fields.fail(
            "child",
            f"child: {show(child_class)} without run_id:",
            "child: is the sub-agent's class; run_id: is its name",
        )
    spec = context.agents[alias]
    if (
        names
        and spec.workload == "chat"
        or (names and spec.workload == "fibers" and not getattr(spec.cls, "sub_agents", ()))
    ):
        fields.fail(
            key,
            f"{key}: {show(fields.raw(key))}",
            f"a {spec.workload} workload has no sub-agents"
            + (" (list them in its sub_agents:)" if spec.workload == "fibers" else ""),
        )
    if names and spec.workload == "tools":
        plans = {plan.run_id: plan for plan in cast("type[_ToolsMixin]", spec.cls).runs}
        plan = plans.get(names[0])
        if plan is None:
            fields.fail(
                key,
                f"agent {alias!r} has no run {names[0]!r}",
                f"its runs (each child is named by its run id): {list(plans)}",
            )
        actual = CHILD_CLASSES[plan.child].__name__
        if child_class is not None and child_class not in (plan.child, actual):
            fields.fail(
                "child",
                f"child: {show(child_class)}",
                f"run {plan.run_id!r} runs a {plan.child} child ({actual})",
            )
        child_class = actual if child_class is not None else None
    elif child_class in CHILD_CLASSES:
        child_class = CHILD_CLASSES[child_class].__name__
    return alias, names, child_class


def _evict(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line)
    alias, names, child_class = _sub_agent_target(context, fields)
    return {
        "agent": alias,
        "child": tuple(names),
        "child_class": child_class,
        "reason": fields.get("reason"),
        "if_present": fields.get("if_present"),
    }


def _nothing(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    _fields(context, where, value, line)
    return {}


def _deploy(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line)
    return {"sdk": check_release(fields, "sdk")} if "sdk" in fields else {}


def _arm_storage_fault(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line)
    match = fields.raw("match")
    if match is not None:
        if not isinstance(match, str):
            fields.bad("match", "expected a regular expression (a string)")
        try:
            compile_match(match)
        except ValueError as exc:
            fields.bad("match", f"not a usable pattern: {exc}")
    alias, names, child_class = _sub_agent_target(context, fields)
    return {
        "agent": alias,
        "child": tuple(names),
        "child_class": child_class,
        "fault": fields.get("kind"),
        "match": match,
        "skip": fields.get("skip"),
        "count": fields.get("count"),
    }


def _model_service(context: StepContext, fields: Fields) -> dict[str, Any]:
    if "agent" not in fields:
        return {"agent": None, "service": MODEL_SERVICE}
    spec = known_agent(context, fields)
    service = f"{MODEL_SERVICE}/{spec.alias}"
    if service not in context.models:
        fields.fail(
            "agent",
            f"agent {spec.alias!r} has no model of its own",
            "only a chat workload with model: has one; omit agent: to re-script the scenario's "
            "model (the one every other chat agent streams from)",
        )
    return {"agent": spec.alias, "service": service}


def _stall_model(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line)
    duration_ms = fields.get("for")
    then = None
    if "then" in fields:
        then = read_reply(fields, "then", fields.raw("then"), fields.line_of("then"))
    return {
        **_model_service(context, fields),
        "duration_ms": duration_ms,
        "reply": stall(duration_ms, then),
        "times": fields.get("times"),
    }


def _fail_model(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line)
    message, partial = fields.get("message"), fields.get("partial")
    reply = fail(
        message,
        fields.get("after_chunks"),
        in_band=fields.get("in_band"),
        partial="partial answer" if partial is None else partial,
    )
    return {
        **_model_service(context, fields),
        "message": message,
        "reply": reply,
        "times": fields.get("times"),
    }


def _quiesce(context: StepContext, where: str, value: Any, line: int) -> dict[str, Any]:
    fields = _fields(context, where, value, line)
    return {"limit_ms": fields.get("limit")}


_PARSERS = {
    "call": _call,
    "run_in": _run_in,
    "request": _request,
    "connect": _connect,
    "disconnect": _disconnect,
    "reconnect": _reconnect,
    "send": _send,
    "run_for": _run_for,
    "run_until": _run_until,
    "evict": _evict,
    "deploy": _deploy,
    "deploy_all": _deploy,
    "arm_storage_fault": _arm_storage_fault,
    "run_to_next_alarm": _nothing,
    "advance_to_next_alarm": _nothing,
    "stall_model": _stall_model,
    "fail_model": _fail_model,
    "quiesce": _quiesce,
}
