"""The `agents:` and `clients:` sections: agent classes by import path, and built-in workloads.

An agent is either a class (`{class: "package.module:Class", options: {...}}`) or a workload
described in YAML (`{workload: fibers | tools | chat | schedules, ...}`), which the loader
builds into a subclass of the workload's agent (`scenarios.workloads`) carrying the description.
Everything a workload description can get wrong is reported here with its place
(`agents.worker.fibers[2]`): duplicate names, a `fail_at` past the last step, steps for a child
that plays none, `notify` on a parent that has no chat to notify, a schedule with two timings.
"""

from __future__ import annotations

import re
from typing import Any

from agents_core.cron import InvalidCronExpression, parse_cron
from agents_core.options import OPTION_RANGES
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
from scenarios.language.schema import MODEL_SERVICE, AgentSpec, ClientSpec, ModelScript
from scenarios.language.shapes import (
    Anything,
    Duration,
    Flag,
    Map,
    Number,
    OneOf,
    Seq,
    Shape,
    Text,
    Whole,
)
from scenarios.workloads.chat import CHAT_HOSTS, chat_workload
from scenarios.workloads.children import CHILD_CLASSES
from scenarios.workloads.fibers import FIBER_RECOVERIES, FIBER_STARTS, FiberPlan, fiber_workload
from scenarios.workloads.schedules import (
    FAIL_AS,
    SCHEDULE_SETUPS,
    SchedulePlan,
    schedule_workload,
)
from scenarios.workloads.sub_agents import sub_agents_problem
from scenarios.workloads.tools import TOOL_HOSTS, TOOL_STARTS, DetachedPlan, RunPlan, tools_workload
from sim.model import text

__all__ = [
    "AGENT",
    "CLIENT",
    "NAME_HINT",
    "NAME_PATTERN",
    "WORKLOADS",
    "parse_agents",
    "parse_clients",
]

NAME_PATTERN = re.compile(
    # Any script's letters, marks and digits (a Durable Object name is any string), but no
    # ASCII punctuation beyond '.', '_' and '-' and no space, control or invisible format
    # character: names end up in agent paths (`parent/child`), file names and the commands a
    # failure prints. A leading '.' or '-' is refused ('.', '..', a name read as an option).
    # Written as a negated class so the JSON schema (ECMAScript) reads it the same.
    r"(?![.-])[^\x00-\x2c\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\xa0\s\u00ad\u061c\u180e"
    r"\u200b-\u200f\u2028-\u202f\u2060-\u206f\ufeff\ufff9-\uffff]{1,100}"
)
"""Scenario, agent, client, fiber and run names: they end up in file names and agent paths."""
NAME_HINT = (
    "expected a name of letters (any script), digits, '.', '_' and '-', not starting with "
    "'.' or '-' (at most 100, no spaces or '/')"
)
NAME = Text(pattern=NAME_PATTERN.pattern, hint=NAME_HINT)
OPTIONS = Map(doc="Runtime options (keep_alive_interval_ms, ...) and public class attributes.")

CLASS_AGENT = Shape(
    {
        "class": Text(hint="expected 'package.module:Class'", doc="The Agent subclass."),
        "options": OPTIONS,
    },
    required=("class",),
    doc="An agent class by import path.",
)

FIBER = Shape(
    {
        "name": NAME,
        "steps": Whole(minimum=1, maximum=100_000, doc="How many steps the fiber runs."),
        "step": Duration(default="30s", doc="How long each step sleeps."),
        "stash": Flag(default=True, doc="Stash {step} after each step (workload:stashed)."),
        "fail_at": Whole(minimum=1, maximum=100_000, doc="The step that raises instead."),
        "managed": Flag(default=False, doc="Start it with start_fiber (the ledger)."),
        "idempotency_key": Text(doc="start_fiber's idempotency key (managed fibers)."),
        "deadline": Duration(doc="Cancel the managed fiber this long after it starts."),
        "recovery": Text(
            choices=FIBER_RECOVERIES, doc="This fiber's recovery (default: the agent's)."
        ),
        "stash_bytes": Whole(
            minimum=0, maximum=1_000_000, default=0, doc="Pad each stash with this many bytes."
        ),
    },
    required=("name", "steps"),
)
FIBERS_WORKLOAD = Shape(
    {
        "workload": Text(choices=("fibers",)),
        "fibers": Seq(FIBER, min_items=1),
        "start": Text(choices=FIBER_STARTS, default="on_start", doc="on_start, or a start call."),
        "keep_alive_interval": Duration(doc="The keepAlive heartbeat (keep_alive_interval_ms)."),
        "recovery": Text(
            choices=FIBER_RECOVERIES, default="resume", doc="What the recovery hook does."
        ),
        "sub_agents": Seq(
            Text(), doc="Names of sub-agents running the same fibers, opened by open(name) calls."
        ),
        "options": OPTIONS,
    },
    required=("workload", "fibers"),
    doc="An agent running fibers of N sleeping steps (scenarios.workloads.fibers).",
)

PROGRESS = Shape(
    {
        "fraction": Number(),
        "message": Text(empty=True),
        "phase": Text(empty=True),
    }
)
MILESTONE = Shape({"name": Text(), "data": Anything()}, required=("name",))
FINISH_STATUSES = ("completed", "error")
FINISH = Shape(
    {
        "status": Text(choices=FINISH_STATUSES, default="completed"),
        "summary": Text(empty=True),
        "error": Text(empty=True),
    }
)
CHILD_STEPS = {
    "text": Text(empty=True, doc="A stored text chunk."),
    "progress": PROGRESS,
    "milestone": OneOf((Text(), MILESTONE), doc="A milestone: its name, or {name, data}."),
    "sleep": Duration(doc="Virtual time passes."),
    "finish": OneOf((Text(choices=("completed", "error")), FINISH), doc="The run ends."),
    "hang": Flag(doc="The run never ends (true)."),
    "chunk": Anything(
        doc="Any UI message chunk, as the AI SDK streams it ({type: text-start, id: t1}, "
        "{type: tool-input-available, toolCallId, toolName, input}, {type: data-x, id, data}, "
        "...): stored and streamed as it is; a transient one is streamed and not stored."
    ),
}
CHILD_STEP = OneOf(
    tuple(Shape({kind: value}, required=(kind,)) for kind, value in CHILD_STEPS.items()),
    doc="One step of a scripted child.",
)
MILESTONES_CONFIG = Shape(
    {
        "names": Seq(Text(), min_items=1),
        "mode": Text(choices=("narrate", "react"), default="narrate"),
    },
    required=("names",),
)
DETACHED = Shape(
    {
        "on_finish": Flag(doc="Call the built-in workload_on_finish (default: unless notify)."),
        "max_budget": Duration(doc="Give up (interrupted) this long after dispatch."),
        "no_progress_budget": Duration(doc="Give up after this long without progress."),
        "notify": Flag(default=False, doc="Narrate the finish in the parent's chat."),
        "on_finish_work": Duration(
            default="0ms", doc="The built-in on_finish works this long before it records."
        ),
        "on_finish_fails": Whole(
            minimum=0, maximum=1_000, default=0, doc="Its first N calls raise (a flaky hook)."
        ),
        "on_milestones": OneOf(
            (Seq(Text()), MILESTONES_CONFIG), doc="Milestones narrated in the parent's chat."
        ),
    }
)
RUN = Shape(
    {
        "run_id": NAME,
        "child": Text(choices=tuple(CHILD_CLASSES), default="scripted"),
        "detached": OneOf((Flag(), DETACHED), doc="Detached options; absent or false: awaited."),
        "steps": Seq(CHILD_STEP, doc="A scripted child's script."),
        "input": Text(doc="A think or chat child's user message (default 'go')."),
        "resume": Flag(doc="A scripted child resumes its script after a restart (default)."),
        "brief": Text(doc="A scripted child's input carries it beside its script, as `brief`."),
    },
    required=("run_id",),
)
TOOLS_WORKLOAD = Shape(
    {
        "workload": Text(choices=("tools",)),
        "host": Text(choices=tuple(TOOL_HOSTS), default="agent", doc="The parent's kind."),
        "start": Text(choices=TOOL_STARTS, default="call", doc="A dispatch call, or on_start."),
        "runs": Seq(RUN, min_items=1),
        "options": OPTIONS,
    },
    required=("workload", "runs"),
    doc="A parent running agent tools (scenarios.workloads.tools).",
)
CHAT_MODEL = Shape(
    {
        "reply": Text(empty=True, doc="What the model answers to everything."),
        "chunks": Whole(minimum=1, maximum=10_000, default=1),
        "chunk_delay": Duration(doc="Time before each chunk."),
    },
    required=("reply",),
    doc="A model of this agent's own (service model/<alias>).",
)
CHAT_WORKLOAD = Shape(
    {
        "workload": Text(choices=("chat",)),
        "host": Text(choices=tuple(CHAT_HOSTS), default="think"),
        "model": CHAT_MODEL,
        "options": OPTIONS,
    },
    required=("workload",),
    doc="A chat host answering say(text) (scenarios.workloads.chat).",
)
SCHEDULE = Shape(
    {
        "name": NAME,
        "every": Duration(doc="An interval schedule (schedule_every), in whole seconds."),
        "cron": Text(doc="A cron schedule: five fields, or six with seconds."),
        "after": Duration(doc="A one-shot this long after setup (a delayed row), whole seconds."),
        "at": Duration(doc="A one-shot at this sim time (a scheduled row), whole seconds."),
        "runs": Whole(minimum=1, maximum=100_000, doc="A recurring schedule stops after N runs."),
        "work": Duration(default="0ms", doc="How long each run works (inside the alarm)."),
        "fail": Whole(minimum=0, maximum=100_000, default=0, doc="The first N attempts raise."),
        "fail_as": Text(
            choices=FAIL_AS,
            default="error",
            doc="How they raise: an ordinary error, or the platform's memory-limit reset.",
        ),
        "attempts": Whole(minimum=1, maximum=1_000, doc="The row's retry max_attempts."),
        "backoff": Duration(doc="The row's retry base_delay_ms (1ms or more)."),
        "max_backoff": Duration(doc="The row's retry max_delay_ms (1ms or more, >= backoff)."),
        "idempotent": Flag(doc="schedule(idempotent=...) of a one-shot or cron row."),
        "recovery_loop": Flag(
            default=False,
            doc="schedule(recovery_loop=True) of a one-shot or cron row: on 0.32.0 the memory-"
            "limit breaker backs it off or purges it with the executing job (0.21.0 ignores it).",
        ),
        "keep_alive": Flag(default=False, doc="Run the work inside keep_alive_while."),
        "fiber": Flag(default=False, doc="Run the work inside run_fiber(name)."),
    },
    required=("name",),
)
SCHEDULES_WORKLOAD = Shape(
    {
        "workload": Text(choices=("schedules",)),
        "schedules": Seq(SCHEDULE, min_items=1),
        "setup": Text(
            choices=SCHEDULE_SETUPS, default="on_start", doc="on_start, or a setup call."
        ),
        "warmup": Duration(default="0ms", doc="How long on_start awaits before it sets up."),
        "sub_agents": Seq(
            Text(),
            doc="Names of sub-agents keeping the same schedules, opened by open(name) calls.",
        ),
        "options": OPTIONS,
    },
    required=("workload", "schedules"),
    doc="An agent keeping interval, cron and one-shot schedules (scenarios.workloads.schedules).",
)
WORKLOADS = {
    "fibers": FIBERS_WORKLOAD,
    "tools": TOOLS_WORKLOAD,
    "chat": CHAT_WORKLOAD,
    "schedules": SCHEDULES_WORKLOAD,
}
AGENT = OneOf((CLASS_AGENT, *WORKLOADS.values()), doc="An agent: a class, or a workload.")
RUNTIME_OPTIONS = frozenset(OPTION_RANGES) | {"retry"}
DESCRIBED = (
    "fibers",
    "start_on",
    "recovery",
    "runs",
    "model_service",
    "schedules",
    "setup_on",
    "warmup_ms",
    "sub_agents",
)
"""Class attributes that carry a workload's description: never set through `options`."""
CLIENT = Shape({"agent": Text(doc="The agent it connects to.")}, required=("agent",))
AGENT_HINT = (
    "an agent is {class: 'package.module:Class', options: {...}} or "
    "{workload: fibers | tools | chat | schedules, ...}"
)


def _items(fields: Fields, key: str) -> list[tuple[int, Any, int]]:
    items = fields.get(key) or []
    lines = getattr(items, "lines", [])
    return [
        (n, item, lines[n - 1] if n <= len(lines) else fields.line_of(key))
        for n, item in enumerate(items, start=1)
    ]


# -- agents -------------------------------------------------------------------------------------
def parse_agents(top: Fields) -> tuple[dict[str, AgentSpec], dict[str, ModelScript]]:
    """The agents by alias, and the model services of chat workloads with their own model."""
    declared = top.mapping("agents")
    if not declared:
        top.bad("agents", "declare at least one agent: alias: {class: 'package.module:Class'}")
    agents: dict[str, AgentSpec] = {}
    models: dict[str, ModelScript] = {}
    broken: set[str] = set()
    search = agent_classes.search_dirs(top.path, top.get("python_path") or ())
    for alias, value in declared.items():
        line = getattr(declared, "lines", {}).get(alias, top.line_of("agents"))
        spec = gather(top.problems, _agent, top.path, alias, value, line, models, search)
        if spec is None:
            broken.add(alias)  # what names it later is skipped, not reported again
        else:
            agents[alias] = spec
    top.broken_agents = broken
    return agents, models


def _agent(
    path: str,
    alias: Any,
    value: Any,
    line: int,
    models: dict[str, ModelScript],
    search: tuple[str, ...] = (),
) -> AgentSpec:
    where = f"agents.{alias}"
    if not isinstance(alias, str) or not NAME_PATTERN.fullmatch(alias):
        raise InvalidScenario(path, line, where, f"agent name {show(alias)}", NAME_HINT)
    if isinstance(value, dict) and "workload" in value:
        return _workload(path, alias, where, value, line, models)
    if not isinstance(value, dict):
        raise InvalidScenario(path, line, where, f"{show(value)} is not a mapping", AGENT_HINT)
    spec = Fields(path, where, value, line, shape=CLASS_AGENT)
    class_path = spec.get("class")
    options = plain(spec.get("options") or {})
    try:
        base = agent_classes.resolve(class_path, search or agent_classes.search_dirs(path))
    except ValueError as exc:
        spec.fail("class", f"class: {exc}")
    return AgentSpec(
        alias=alias,
        class_path=class_path,
        options=options,
        cls=_with_options(spec, base, options),
        line=line,
    )


def _with_options(spec: Fields, base: type, options: dict[str, Any]) -> type:
    given = spec.raw("options")
    for key, value in options.items():
        # A class attribute in ms (a workload's step_ms, alarm_work_ms) is a duration like any
        # other: 0 to 366 days. The runtime's own options are checked by their ranges.
        if key.endswith("_ms") and key not in RUNTIME_OPTIONS:
            try:
                ms = duration_ms(value)
            except (ValueError, TypeError):
                ms = -1
            if not 0 <= ms <= MAX_DURATION_MS:
                line = getattr(given, "lines", {}).get(key, spec.line_of("options"))
                raise InvalidScenario(
                    spec.path, line, spec.where, f"options.{key}: {show(value)}", DURATION_HINT
                )
    try:
        return agent_classes.with_options(base, options)
    except ValueError as exc:
        # At the line of the option the error names, when it names one of the file's.
        lines = getattr(given, "lines", {})
        named = [key for key in lines if str(exc).startswith((f"{key} ", f"option {key}:"))]
        if named:
            problem = f"options.{named[0]}: {show(given[named[0]])}"
            raise InvalidScenario(
                spec.path, lines[named[0]], spec.where, problem, str(exc)
            ) from None
        spec.fail("options", f"options: {exc}")


def _workload(
    path: str, alias: str, where: str, value: Any, line: int, models: dict[str, ModelScript]
) -> AgentSpec:
    kind, lines = value["workload"], getattr(value, "lines", {})
    if not isinstance(kind, str) or kind not in WORKLOADS:
        raise InvalidScenario(
            path,
            lines.get("workload", line),
            where,
            f"workload: {show(plain(kind))}",
            f"{did_you_mean(kind, WORKLOADS)}allowed: {list(WORKLOADS)}",
        )
    if "class" in value:
        raise InvalidScenario(
            path, lines.get("class", line), where, "both class: and workload:", "give one of them"
        )
    spec = Fields(path, where, value, line, shape=WORKLOADS[kind])
    options = dict(plain(spec.get("options") or {}))
    described = sorted(set(options) & set(DESCRIBED))
    if described:
        spec.fail(
            "options",
            f"options: {described[0]!r} is part of the workload's description",
            f"write the workload's own keys instead ({list(WORKLOADS[kind].keys)})",
        )
    if kind == "fibers":
        built = _fibers(spec, options)
    elif kind == "tools":
        built = _tools(spec)
    elif kind == "schedules":
        built = _schedules(spec)
    else:
        service = MODEL_SERVICE
        if "model" in spec:
            model = spec.sub("model", shape=CHAT_MODEL, where=f"{where}.model")
            service = f"{MODEL_SERVICE}/{alias}"
            reply = text(model.get("reply"), model.get("chunks"), delay_ms=model.get("chunk_delay"))
            models[service] = ModelScript(default=(reply,))
        built = chat_workload(spec.get("host"), model_service=service)
    return AgentSpec(
        alias=alias,
        class_path=f"scenarios.workloads:{built.__name__}",
        options=options,
        cls=_with_options(spec, built, options),
        line=line,
        workload=kind,
    )


def _unique_name(entry: Fields, earlier: list[str], key: str) -> Any:
    """`entry`'s name, failing on it when an earlier entry of the `key` list has it."""
    name = entry.get("name")
    if name in earlier:
        entry.fail(
            "name",
            f"name: {show(name)} is already {key}[{earlier.index(name) + 1}]'s",
            f"{key.removesuffix('s')} names must be unique in a workload",
        )
    return name


def _sub_agents(spec: Fields) -> tuple[str, ...]:
    """A workload's `sub_agents:` names (`scenarios.workloads.sub_agents`), refused when bad."""
    subs = tuple(spec.get("sub_agents") or ())
    problem = sub_agents_problem(subs)
    if problem is not None:
        spec.bad("sub_agents", problem)
    return subs


def _fibers(spec: Fields, options: dict[str, Any]) -> type:
    plans: list[FiberPlan] = []
    for index, item, line in _items(spec, "fibers"):
        fiber = Fields(spec.path, f"{spec.where}.fibers[{index}]", item, line, shape=FIBER)
        name = _unique_name(fiber, [plan.name for plan in plans], "fibers")
        steps, fail_at = fiber.get("steps"), fiber.get("fail_at")
        if fail_at is not None and fail_at > steps:
            fiber.bad("fail_at", f"expected a step from 1 to {steps} (the fiber has {steps} steps)")
        managed, key = fiber.get("managed"), fiber.get("idempotency_key")
        if key is not None and not managed:
            fiber.bad("idempotency_key", "only a managed fiber has one: add managed: true")
        deadline = fiber.get("deadline")
        if deadline is not None and not managed:
            fiber.bad("deadline", "only a managed fiber can be cancelled: add managed: true")
        plans.append(
            FiberPlan(
                name=name,
                steps=steps,
                step_ms=fiber.get("step"),
                stash=fiber.get("stash"),
                fail_at=fail_at,
                managed=managed,
                idempotency_key=key,
                deadline_ms=deadline,
                recovery=fiber.get("recovery"),
                stash_bytes=fiber.get("stash_bytes"),
            )
        )
    interval = spec.get("keep_alive_interval")
    if interval is not None:
        if interval < 1:
            spec.bad(
                "keep_alive_interval",
                "expected a positive duration (1ms to 366d): the heartbeat re-arms the alarm "
                "this long after each alarm, so 0 would fire it at the same instant for ever",
            )
        if "keep_alive_interval_ms" in options:
            spec.fail(
                "keep_alive_interval",
                "both keep_alive_interval: and options.keep_alive_interval_ms",
                "give one of them",
            )
        options["keep_alive_interval_ms"] = interval
    subs = _sub_agents(spec)
    return fiber_workload(
        plans, start=spec.get("start"), recovery=spec.get("recovery"), sub_agents=subs
    )


TIMINGS = ("every", "cron", "after", "at")


def _schedules(spec: Fields) -> type:
    plans: list[SchedulePlan] = []
    for index, item, line in _items(spec, "schedules"):
        entry = Fields(spec.path, f"{spec.where}.schedules[{index}]", item, line, shape=SCHEDULE)
        name = _unique_name(entry, [plan.name for plan in plans], "schedules")
        given = [key for key in TIMINGS if key in entry]
        if len(given) != 1:
            entry.fail(
                given[1] if len(given) > 1 else "name",
                f"{' and '.join(given) or 'no timing'} for schedule {show(name)}",
                "give exactly one of every: 10s, cron: '*/5 * * * *', after: 45s, at: 2m",
            )
        seconds = {}
        for key in ("every", "after", "at"):
            ms = entry.get(key)
            if ms is None:
                continue
            if ms % 1000 or (key == "every" and not 1000 <= ms <= 30 * 86_400_000):
                entry.bad(
                    key,
                    "expected whole seconds (schedules are kept in seconds)"
                    + (", from 1s to 30d" if key == "every" else ""),
                )
            seconds[key] = ms // 1000
        cron = entry.get("cron")
        if cron is not None:
            try:
                parse_cron(cron)
            except InvalidCronExpression as exc:
                entry.bad("cron", str(exc))
        runs = entry.get("runs")
        if runs is not None and given[0] not in ("every", "cron"):
            entry.bad("runs", "only a recurring schedule (every or cron) stops after N runs")
        if entry.get("idempotent") is not None and given[0] == "every":
            entry.bad("idempotent", "an every schedule is always idempotent (one row per interval)")
        if entry.get("recovery_loop") and given[0] == "every":
            entry.bad("recovery_loop", "an option of schedule(); schedule_every takes none such")
        backoff, most = entry.get("backoff"), entry.get("max_backoff")
        for key, ms in (("backoff", backoff), ("max_backoff", most)):
            if ms is not None and ms < 1:
                entry.bad(key, "expected a positive duration (1ms or more)")
        if backoff is not None and most is not None and backoff > most:
            entry.bad("max_backoff", f"expected at least the backoff ({backoff} ms)")
        plans.append(
            SchedulePlan(
                name=name,
                every_s=seconds.get("every"),
                cron=cron,
                after_s=seconds.get("after"),
                at_s=seconds.get("at"),
                runs=runs,
                work_ms=entry.get("work"),
                fail=entry.get("fail"),
                fail_as=entry.get("fail_as"),
                attempts=entry.get("attempts"),
                backoff_ms=backoff,
                max_backoff_ms=most,
                idempotent=entry.get("idempotent"),
                recovery_loop=entry.get("recovery_loop"),
                keep_alive=entry.get("keep_alive"),
                fiber=entry.get("fiber"),
            )
        )
    subs = _sub_agents(spec)
    return schedule_workload(
        plans, setup=spec.get("setup"), warmup_ms=spec.get("warmup"), sub_agents=subs
    )


def _tools(spec: Fields) -> type:
    host = spec.get("host")
    plans: list[RunPlan] = []
    for index, item, line in _items(spec, "runs"):
        run = Fields(spec.path, f"{spec.where}.runs[{index}]", item, line, shape=RUN)
        run_id = run.get("run_id")
        earlier = [n for n, plan in enumerate(plans, start=1) if plan.run_id == run_id]
        if earlier:
            run.fail(
                "run_id",
                f"run_id: {show(run_id)} is already runs[{earlier[0]}]'s",
                "run ids must be unique in a workload",
            )
        child = run.get("child")
        scripted = child == "scripted"
        for key in ("steps", "resume", "brief") if not scripted else ("input",):
            if key in run:
                run.fail(
                    key,
                    f"{key}: {show(plain(run.raw(key)))} for a {child} child",
                    "a scripted child plays steps (and may resume them, and carry a brief); a "
                    "think or chat child answers its input: from the model",
                )
        plans.append(
            RunPlan(
                run_id=run_id,
                child=child,
                detached=_detached(run, host),
                steps=tuple(_child_steps(run)) if scripted else (),
                input=run.get("input") or "go",
                resume=True if run.get("resume") is None else run.get("resume"),
                brief=run.get("brief"),
            )
        )
    return tools_workload(plans, host=host, start=spec.get("start"))


def _detached(run: Fields, host: str) -> DetachedPlan | None:
    value = run.raw("detached")
    if value is None or value is False:
        return None
    if value is True:
        return DetachedPlan()
    if not isinstance(value, dict):
        run.bad("detached", "expected true, false, or a mapping of detached options")
    options = run.sub("detached", shape=DETACHED, where=f"{run.where}.detached")
    notify = options.get("notify")
    on_finish = options.get("on_finish")
    if notify and on_finish:
        options.fail(
            "on_finish",
            "both on_finish: true and notify: true",
            "each names the run's finish callback; give one of them",
        )
    names, mode = _milestones(options)
    for key, given in (("notify", notify), ("on_milestones", bool(names))):
        if given and host == "agent":
            options.fail(
                key,
                f"{key}: {show(plain(options.raw(key)))} on a plain agent parent",
                "it narrates in the parent's chat: give the workload host: think or chat",
            )
    work, fails = options.get("on_finish_work"), options.get("on_finish_fails")
    if (work or fails) and (notify or on_finish is False):
        key = "on_finish_work" if work else "on_finish_fails"
        options.bad(key, "it scripts the built-in on_finish: leave on_finish: true (no notify)")
    return DetachedPlan(
        on_finish=not notify if on_finish is None else on_finish,
        on_finish_work_ms=work,
        on_finish_fails=fails,
        max_budget_ms=options.get("max_budget"),
        no_progress_budget_ms=options.get("no_progress_budget"),
        notify=notify,
        on_milestones=names,
        milestone_mode=mode,
    )


def _milestones(options: Fields) -> tuple[tuple[str, ...], str]:
    value = options.raw("on_milestones")
    if value is None:
        return (), "narrate"
    hint = "expected a list of milestone names, or {names: [...], mode: narrate | react}"
    if isinstance(value, list):
        names, mode = value, "narrate"
    elif isinstance(value, dict):
        config = options.sub("on_milestones", shape=MILESTONES_CONFIG)
        names, mode = config.get("names"), config.get("mode")
    else:
        options.bad("on_milestones", hint)
    if not all(isinstance(name, str) and name for name in names):
        options.bad("on_milestones", hint)
    return tuple(names), mode


def _child_steps(run: Fields) -> list[tuple[Any, ...]]:
    steps: list[tuple[Any, ...]] = []
    allowed = (
        "each step is one mapping of {text: words}, {progress: {fraction, message, phase}}, "
        "{milestone: name}, {sleep: 1m}, {finish: completed}, {hang: true}, "
        "{chunk: {type: ..., ...}}"
    )
    for index, item, line in _items(run, "steps"):
        where = f"{run.where}.steps[{index}]"
        if not isinstance(item, dict) or len(item) != 1 or next(iter(item)) not in CHILD_STEPS:
            raise InvalidScenario(run.path, line, where, f"{show(plain(item))}", allowed)
        kind = next(iter(item))
        step = Fields(run.path, where, item, line, shape=Shape({kind: CHILD_STEPS[kind]}))
        steps.append(_child_step(step, kind))
    return steps


def _child_step(step: Fields, kind: str) -> tuple[Any, ...]:
    value = step.raw(kind)
    if kind == "text":
        return ("text", step.get("text"))
    if kind == "sleep":
        return ("sleep", step.get("sleep"))
    if kind == "chunk":
        chunk = plain(value)
        if not isinstance(chunk, dict) or not isinstance(chunk.get("type"), str):
            step.bad("chunk", "expected a UI message chunk: a mapping with a string 'type'")
        return ("chunk", chunk)
    if kind == "hang":
        if step.get("hang") is not True:
            step.bad("hang", "expected true (the run never ends)")
        return ("hang",)
    if kind == "progress":
        progress = step.sub("progress", shape=PROGRESS)
        return ("progress", {key: progress.get(key) for key in PROGRESS.keys if key in progress})
    if kind == "milestone":
        if isinstance(value, str) and value:
            return ("milestone", value)
        if not isinstance(value, dict):
            step.bad("milestone", "expected a milestone name, or {name: ..., data: ...}")
        milestone = step.sub("milestone", shape=MILESTONE)
        return ("milestone", milestone.get("name"), plain(milestone.get("data")))
    if isinstance(value, str):
        status = step.text("finish", choices=FINISH_STATUSES)
        return ("finish", status, "" if status == "completed" else None)
    if not isinstance(value, dict):
        step.bad("finish", "expected completed, error, or {status, summary, error}")
    finish = step.sub("finish", shape=FINISH)
    status = finish.get("status")
    if status == "completed":
        return ("finish", "completed", finish.get("summary") or "")
    return ("finish", status, finish.get("error"))


# -- clients ------------------------------------------------------------------------------------
def parse_clients(top: Fields, agents: dict[str, AgentSpec]) -> dict[str, ClientSpec]:
    declared = top.mapping("clients", {})
    clients: dict[str, ClientSpec] = {}
    broken_agents = top.broken_agents
    top.broken_clients = set()
    for name, value in declared.items():
        line = getattr(declared, "lines", {}).get(name, top.line_of("clients"))
        client = gather(top.problems, _client, top.path, name, value, line, agents, broken_agents)
        if client is None:
            top.broken_clients.add(name)
        else:
            clients[name] = client
    return clients


def _client(
    path: str,
    name: Any,
    value: Any,
    line: int,
    agents: dict[str, AgentSpec],
    broken_agents: set[str],
) -> ClientSpec:
    where = f"clients.{name}"
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidScenario(path, line, where, f"client name {show(name)}", NAME_HINT)
    spec = Fields(path, where, value, line, shape=CLIENT)
    agent = spec.get("agent")
    if agent in broken_agents:
        raise Skipped(path, line, where)
    if agent not in agents:
        spec.fail(
            "agent",
            f"unknown agent {show(agent)}",
            f"{did_you_mean(agent, agents)}known agents: {sorted(agents)}",
        )
    return ClientSpec(name=name, agent=agent, line=line)
