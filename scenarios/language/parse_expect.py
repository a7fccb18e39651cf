"""Validation of the `expect` list of a scenario document into expectation dataclasses.

An expectation is a trace matcher (`event:` with optional `agent`, `incarnation`, `fields`,
`count`, `between`), a hook count (`hook:` with `run`, `slot`, `status` and a count), a client
timeline (`client:` with `frames:`, or `run:` and `reduced:`), or one of `{query: ...}` (a SQL
query on an agent's final storage and the rows it must return), `{state: ...}` (an agent's
persisted state; both may name a sub-agent, `agent: parent/r1`), `{invariants: [...]}` (named
`sim.checkers` invariants, or `all`), `{order: [...]}` (records in this order) and `{timing:
{...}}` (how far apart records are in sim time). Each is declared in `EXPECTATION` (what the JSON
Schema says); aliases, clients, run ids and invariant names are checked against the scenario.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import TYPE_CHECKING, Any, cast

from agents_core.probes import PROBE_NAME
from agents_core.releases.registry import DEFAULT_RELEASE, RELEASES
from scenarios.language import agents as agent_classes
from scenarios.language.errors import InvalidScenario, Skipped
from scenarios.language.fields import Fields, LineDict, did_you_mean, gather, line_of, plain, show
from scenarios.language.parse_agents import NAME_HINT, NAME_PATTERN
from scenarios.language.parse_steps import StepContext, known_agent
from scenarios.language.parse_steps import _sub_agent_target as sub_agent_target
from scenarios.language.query_check import check_query
from scenarios.language.schema import (
    HOOK_EVENTS,
    AgentSpec,
    CallSelector,
    ClientFramesExpectation,
    ClientRunExpectation,
    ClientSpec,
    ConnectStep,
    Count,
    EventExpectation,
    Expectation,
    HookExpectation,
    InvariantsExpectation,
    OrderExpectation,
    ProbesExpectation,
    QueryExpectation,
    RecordMatcher,
    StateExpectation,
    Step,
    TimingExpectation,
)
from scenarios.language.shapes import (
    Anything,
    Duration,
    Flag,
    Map,
    Named,
    OneOf,
    Seq,
    Shape,
    Text,
    Whole,
)
from sim.checkers import CHECKERS
from sim.probes import ALL_PROBES
from sim.trace import RESERVED_KEYS

if TYPE_CHECKING:
    from scenarios.workloads.tools import _ToolsMixin

__all__ = [
    "BUILTIN_INVARIANTS",
    "COUNT_KEYS",
    "EVENT_KEYS",
    "EXPECTATION",
    "REDUCED_KEYS",
    "parse_expectations",
]

COUNT_KEYS = ("exactly", "at_least", "at_most", "never")
COUNT_HINT = "give {exactly: N}, {never: true}, or at_least: and/or at_most:"
BUILTIN_INVARIANTS = tuple(
    name for name, checker in CHECKERS.items() if checker.__module__.startswith("sim.checkers")
)
"""The invariants the harness ships (more may be registered with `sim.checkers.register`)."""
RUN_STATUSES = ("running", "completed", "error", "aborted", "interrupted")

COUNT_FIELDS = {
    "exactly": Whole(doc="Exactly this many."),
    "at_least": Whole(doc="At least this many."),
    "at_most": Whole(doc="At most this many."),
    "never": Flag(doc="None at all (true)."),
}
COUNT_EXCLUSIVE = (
    ("exactly", "at_least"),
    ("exactly", "at_most"),
    ("exactly", "never"),
    ("never", "at_least"),
    ("never", "at_most"),
)
PER_ACCEPTED_CALL = Shape(
    {
        "method": Text(doc="The method called."),
        "agent": Text(doc="The alias it is called on (default: any agent)."),
    },
    required=("method",),
    doc="The count is per call of this method that returned: a call a fault refused (it "
    "failed, or never finished) may count once or not at all, as its caller cannot know "
    "whether it took effect. Calls a hunt inserts count too.",
)
COUNT = Named(
    "count",
    Shape(
        {**COUNT_FIELDS, "per_accepted_call": PER_ACCEPTED_CALL},
        exclusive=(*COUNT_EXCLUSIVE, ("never", "per_accepted_call")),
        doc="How many matching records are allowed (default: at least 1); with "
        "per_accepted_call, how many per accepted call.",
    ),
)
COUNT_WITH_CALLS = (*COUNT_KEYS, "per_accepted_call")
AGENT = Text(doc="An agent alias (default: any agent, and the platform).")
RECORD_FIELDS = Map(doc="Fields the record must have, compared as JSON.")
RECORD_CONTAINS = Map(
    doc="Fields whose values must contain these: a mapping holds at least the keys given "
    "(compared the same way, at any depth), a list holds as many items, each containing the "
    "one given; anything else is compared as JSON."
)
MATCHER = Named(
    "matcher",
    Shape(
        {
            "event": Text(doc="The record's event name; a trailing * matches a prefix."),
            "agent": AGENT,
            "incarnation": Whole(minimum=1),
            "fields": RECORD_FIELDS,
            "contains": RECORD_CONTAINS,
        },
        required=("event",),
        doc="One trace record to find.",
    ),
)
ALWAYS = Flag(
    default=False,
    doc="This expectation holds whatever faults a hunt injects: fuzz --invariants-only and "
    "explore keep it (they drop the others).",
)
ONLY_ON = Text(
    choices=tuple(RELEASES),
    doc='Check this expectation only on a run that starts on this SDK release ("0.21.0", '
    '"0.32.0"); on the other it is left out. For a story whose promise each release keeps in '
    "its own spelling (a table, an alarm time).",
)
EVENT = Shape(
    {
        **MATCHER.resolve().fields,
        "always": ALWAYS,
        "sdk": ONLY_ON,
        "count": COUNT,
        "between": Seq(Duration(), min_items=2, max_items=2, doc="[from, to] sim times."),
    },
    required=("event",),
    doc="A trace matcher: how many records of an event (with these fields) there are.",
)
EVENT_KEYS = EVENT.keys
HOOK = Shape(
    {
        "hook": Text(choices=tuple(HOOK_EVENTS), doc="Which hook (see HOOK_EVENTS)."),
        "agent": AGENT,
        "run": Text(doc="The run id."),
        "slot": Text(choices=("finish", "give_up")),
        "status": Text(doc="The delivered status."),
        "count": COUNT,
        **COUNT_FIELDS,
        "always": ALWAYS,
        "sdk": ONLY_ON,
    },
    required=("hook",),
    exclusive=(*(("count", key) for key in COUNT_KEYS), *COUNT_EXCLUSIVE),
    doc="How many times a finish hook ran; the count may be given inline.",
)
FRAMES = Shape(
    {
        "type": Text(doc="The frame's type (agent-tool-event, cf_agent_use_chat_response, ...)."),
        "kind": Text(doc="An agent-tool-event's kind (started, chunk, finished, ...)."),
        "run": Text(doc="An agent-tool-event's run id."),
        "fields": RECORD_FIELDS,
        "count": COUNT,
    },
    doc="Which frames to count (all given filters must hold).",
)
REDUCED = Shape(
    {
        "status": Text(choices=RUN_STATUSES),
        "text": Text(empty=True, doc="The run's visible text (its text parts, joined)."),
        "summary": Text(empty=True, null=True, doc="null: the run has none."),
        "error": Text(empty=True, null=True, doc="null: the run has none."),
        "reason": Text(empty=True, null=True, doc="null: the run has none."),
        "milestones": Seq(Text(), doc="Milestone names, in order."),
        "progress": Map(doc="These fields of the last progress."),
    },
    doc="What the client's reducer shows for the run (only the keys given are compared).",
)
REDUCED_KEYS = REDUCED.keys
CLIENT = Text(doc="A client name.")
CLIENT_FRAMES = Shape(
    {"client": CLIENT, "frames": FRAMES, "always": ALWAYS, "sdk": ONLY_ON},
    required=("client", "frames"),
)
CLIENT_RUN = Shape(
    {
        "client": CLIENT,
        "run": Text(doc="The run id."),
        "reduced": REDUCED,
        "always": ALWAYS,
        "sdk": ONLY_ON,
    },
    required=("client", "run", "reduced"),
)
STORAGE_AGENT = {
    "agent": Text(doc="An agent alias, or alias/name/... for a sub-agent."),
    "run_id": Text(pattern=NAME_PATTERN.pattern, hint=NAME_HINT, doc="A sub-agent's name."),
    "child": Text(
        pattern=r"[A-Za-z_]\w*",
        hint="expected the sub-agent's class name, or scripted, think or chat",
        doc="The sub-agent's class (with run_id): a class name, or a child kind.",
    ),
}
"""Whose storage an expectation reads: an agent, or a sub-agent (as `evict` names one)."""
QUERY = Shape(
    {
        **STORAGE_AGENT,
        "sql": Text(),
        "params": Seq(),
        "rows": Seq(Map(), doc="Exactly these rows, in order."),
    },
    required=("agent", "sql", "rows"),
)
STATE = Shape({**STORAGE_AGENT, "equals": Anything()}, required=("agent", "equals"))
TIMING = Shape(
    {
        "first": MATCHER,
        "then": MATCHER,
        "within": Duration(doc="Each first record is followed by a then record this soon."),
        "at_least": Duration(doc="The next then record comes no sooner than this."),
    },
    required=("first",),
    doc="How far apart records are in sim time: for each record matching first, the next "
    "record after it matching then (first again when not given) must come within `within` "
    "(and exist) and no sooner than `at_least` (when it exists).",
)
INVARIANT_NAME = OneOf(
    (
        Text(choices=BUILTIN_INVARIANTS),
        Text(pattern=r"[A-Za-z_][A-Za-z0-9_]*", doc="One registered by sim.checkers.register."),
    )
)
INVARIANTS = OneOf(
    (Seq(INVARIANT_NAME, min_items=1), Text(choices=("all",))),
    doc="sim.checkers invariants that must hold after the liveness phase (all: every one).",
)
PROBES = Seq(
    Text(
        pattern=PROBE_NAME.pattern, hint="expected a probe name such as platform.crash_after_commit"
    ),
    min_items=1,
    doc="Probes (sim.probes) the run must reach, each at least once.",
)
WRAPPED = {
    "query": QUERY,
    "state": STATE,
    "invariants": INVARIANTS,
    "probes": PROBES,
    "order": Seq(MATCHER, min_items=2, doc="Records matching these exist, in this order."),
    "timing": TIMING,
}
EXPECTATION = OneOf(
    (
        EVENT,
        HOOK,
        CLIENT_FRAMES,
        CLIENT_RUN,
        *(
            Shape({kind: value, "always": ALWAYS, "sdk": ONLY_ON}, required=(kind,))
            for kind, value in WRAPPED.items()
        ),
    ),
    doc="One expectation, checked after the liveness phase.",
)
ALLOWED = (
    "each expectation is a trace matcher {event: name, ...}, a hook count {hook: ...}, a client "
    "timeline {client: ...}, or one of {query: {...}}, {state: {...}}, {invariants: [...]}, "
    "{order: [...]}, {timing: {...}}, {probes: [...]}"
)


def parse_expectations(
    top: Fields,
    agents: dict[str, AgentSpec],
    clients: dict[str, ClientSpec] | None = None,
    steps: tuple[Step, ...] = (),
) -> tuple[Expectation, ...]:
    items = top.sequence("expect", [])
    lines = getattr(items, "lines", [])
    known_clients = {name: spec.agent for name, spec in (clients or {}).items()}
    for step in steps:
        if isinstance(step, ConnectStep):
            known_clients.setdefault(step.client, step.agent)
    context = StepContext(
        top.path,
        agents,
        known_clients,
        broken_agents=set(top.broken_agents),
        broken_clients=set(top.broken_clients),
    )
    out: list[Expectation] = []
    for index, item in enumerate(items, start=1):
        line = lines[index - 1] if index <= len(lines) else top.line
        expectation = gather(top.problems, _expectation, context, index, item, line)
        if expectation is not None:
            out.append(expectation)
    return tuple(out)


MODIFIERS = ("always", "sdk")
"""Keys any expectation may carry beside its own: when it holds (`always`) and on which release
it is checked (`sdk`)."""


def _expectation(context: StepContext, index: int, item: Any, line: int) -> Expectation:
    where = f"expect {index}"
    if not isinstance(item, dict):
        raise InvalidScenario(context.path, line, where, f"{show(item)} is not a mapping", ALLOWED)
    if not any(key in item for key in MODIFIERS):
        return _one_expectation(context, index, item, line)
    lines = getattr(item, "lines", {})
    modified: dict[str, Any] = {}
    always = item.get("always", False)
    if not isinstance(always, bool):
        raise InvalidScenario(
            context.path,
            lines.get("always", line),
            where,
            f"always: {show(always)}",
            "expected true (this expectation holds under any fault) or false",
        )
    modified["always"] = always
    if "sdk" in item:
        release = item["sdk"]
        if not isinstance(release, str) or release not in RELEASES:
            raise InvalidScenario(
                context.path,
                lines.get("sdk", line),
                where,
                f"sdk: {release!r} is not an SDK release agentsim models",
                f"supported releases: {', '.join(RELEASES)} (quote the version: "
                f'sdk: "{DEFAULT_RELEASE}")',
            )
        modified["sdk"] = release
    rest = LineDict(getattr(item, "line", line))
    for key, value in item.items():
        if key not in MODIFIERS:
            rest[key] = value
    rest.lines = {k: v for k, v in lines.items() if k not in MODIFIERS}
    return dataclasses.replace(_one_expectation(context, index, rest, line), **modified)


def _one_expectation(context: StepContext, index: int, item: Any, line: int) -> Expectation:
    where = f"expect {index}"
    for flat, reader in (("event", _event), ("hook", _hook), ("client", _client)):
        if flat in item:
            return reader(context, index, item, line)
    keys = list(item)
    if len(keys) != 1 or keys[0] not in WRAPPED:
        raise InvalidScenario(context.path, line, where, f"keys {show(keys)}", ALLOWED)
    kind = keys[0]
    value, value_line = item[kind], getattr(item, "lines", {}).get(kind, line)
    where = f"{where} ({kind})"
    if kind == "invariants":
        return _invariants(context, index, where, value, value_line, line)
    if kind == "probes":
        return _probes(context, index, where, value, value_line, line)
    if kind == "order":
        return _order(context, index, where, value, value_line, line)
    fields = Fields(context.path, where, value, value_line, shape=WRAPPED[kind], name=kind)
    if kind == "timing":
        return _timing(context, index, where, fields, line)
    alias, names, child_class = sub_agent_target(context, fields)
    target: dict[str, Any] = {"agent": alias, "child": tuple(names), "child_class": child_class}
    if kind == "query":
        rows = fields.get("rows")
        if any(
            not isinstance(row, dict) or not all(isinstance(k, str) for k in row) for row in rows
        ):
            fields.bad("rows", "expected a list of mappings, column name to value")
        params = tuple(plain(fields.get("params") or []))
        sql = fields.get("sql")
        check_query(fields, sql, params)
        return QueryExpectation(
            index=index, line=line, **target, sql=sql, params=params, rows=tuple(plain(rows))
        )
    return StateExpectation(index=index, line=line, **target, equals=plain(fields.get("equals")))


# -- records ------------------------------------------------------------------------------------
def _record_fields(fields: Fields, key: str = "fields") -> dict[str, Any]:
    matched = plain(fields.get(key) or {})
    for name in matched:
        if name in RESERVED_KEYS:
            fields.fail(
                key,
                f"{key}: {name!r} is not a field of the record",
                "use agent: and incarnation: to match where a record is from",
            )
    return matched


def _event(context: StepContext, index: int, item: Any, line: int) -> EventExpectation:
    fields = Fields(context.path, f"expect {index} (event)", item, line, shape=EVENT)
    agent = known_agent(context, fields).alias if "agent" in fields else None
    matched = _record_fields(fields)
    between = None
    if "between" in fields:
        pair = fields.get("between")
        if len(pair) != 2:
            fields.bad("between", "expected [from, to]: two absolute sim times, e.g. [70s, 140s]")
        low, high = (fields.duration_value("between", value) for value in pair)
        if low > high:
            fields.bad("between", "expected from <= to")
        between = (low, high)
    return EventExpectation(
        index=index,
        line=fields.line,
        event=fields.get("event"),
        agent=agent,
        incarnation=fields.get("incarnation"),
        fields=matched,
        contains=_record_fields(fields, "contains"),
        count=_count(fields, context=context),
        between_ms=between,
    )


def _matcher(context: StepContext, where: str, item: Any, line: int) -> RecordMatcher:
    fields = Fields(context.path, where, item, line, shape=MATCHER.resolve())
    return RecordMatcher(
        event=fields.get("event"),
        agent=known_agent(context, fields).alias if "agent" in fields else None,
        incarnation=fields.get("incarnation"),
        fields=_record_fields(fields),
        contains=_record_fields(fields, "contains"),
        line=fields.line,
    )


def _timing(
    context: StepContext, index: int, where: str, fields: Fields, line: int
) -> TimingExpectation:
    if "within" not in fields and "at_least" not in fields:
        fields.fail(
            "first",
            "neither within: nor at_least:",
            "within: 5s says each first record is followed by a then record that soon; "
            "at_least: 1m says the next one comes no sooner",
        )
    within, at_least = fields.get("within"), fields.get("at_least")
    if within is not None and at_least is not None and at_least > within:
        fields.bad("at_least", "expected at_least <= within (no record could come between)")

    def matcher(key: str) -> RecordMatcher:
        value = fields.raw(key)
        return _matcher(context, f"{where} {key}", value, line_of(value, fields.line_of(key)))

    return TimingExpectation(
        index=index,
        line=line,
        first=matcher("first"),
        then=matcher("then") if "then" in fields else None,
        within_ms=within,
        at_least_ms=at_least,
    )


def _order(
    context: StepContext, index: int, where: str, value: Any, value_line: int, line: int
) -> OrderExpectation:
    hint = "expected a list of at least two matchers {event: name, agent, incarnation, fields}"
    if not isinstance(value, list) or len(value) < 2:
        raise InvalidScenario(context.path, value_line, where, f"order: {show(value)}", hint)
    lines = getattr(value, "lines", [])
    matchers = tuple(
        _matcher(
            context, f"{where} matcher {n}", item, lines[n - 1] if n <= len(lines) else value_line
        )
        for n, item in enumerate(value, start=1)
    )
    return OrderExpectation(index=index, line=line, matchers=matchers)


# -- counts -------------------------------------------------------------------------------------
def _count(fields: Fields, inline: bool = False, context: StepContext | None = None) -> Count:
    """The `count:` mapping, or (`inline`) count keys written beside the others; with
    `context`, the mapping may say `per_accepted_call`."""
    given_inline = [key for key in COUNT_KEYS if key in fields] if inline else []
    if given_inline and "count" in fields:
        fields.fail(given_inline[0], f"both count: and {given_inline[0]}:", "give one of them")
    if given_inline:
        data = LineDict(fields.line)
        for key in given_inline:
            data[key], data.lines[key] = fields.raw(key), fields.line_of(key)
        count = Fields(fields.path, fields.where, data, fields.line, keys=COUNT_KEYS)
        return _count_of(fields, count, given_inline[0], show(dict(data)))
    if "count" not in fields:
        return Count()
    if not isinstance(fields.raw("count"), dict):
        fields.bad("count", COUNT_HINT)
    count = Fields(
        fields.path,
        fields.where,
        fields.raw("count"),
        line_of(fields.raw("count"), fields.line_of("count")),
        keys=COUNT_WITH_CALLS if context is not None else COUNT_KEYS,
        name="count",
    )
    if context is not None and "per_accepted_call" in count:
        # Alone, it says one record per accepted call: what "4 charges" means call by call.
        given = any(key in count for key in COUNT_KEYS)
        out = _count_of(fields, count, "count", show(fields.raw("count"))) if given else Count(1, 1)
    else:
        return _count_of(fields, count, "count", show(fields.raw("count")))
    if "never" in count:
        count.fail(
            "per_accepted_call",
            "per_accepted_call with never: true",
            "a count per accepted call gives exactly:, at_least: or at_most: (for no record at "
            "all, drop per_accepted_call)",
        )
    return dataclasses.replace(out, per_call=_call_selector(context, count))


def _call_selector(context: StepContext, count: Fields) -> CallSelector:
    calls = count.sub("per_accepted_call", shape=PER_ACCEPTED_CALL)
    method = calls.get("method")
    if "agent" in calls:
        spec = known_agent(context, calls)
        candidates = [spec]
    else:
        candidates = list(context.agents.values())
    if not any(callable(getattr(spec.cls, method, None)) for spec in candidates):
        methods = sorted(
            {name for spec in candidates for name in agent_classes.public_methods(spec.cls)}
        )
        whose = candidates[0].cls.__qualname__ if "agent" in calls else "any agent's class"
        calls.fail(
            "method",
            f"method: {show(method)} is not a public method of {whose}",
            f"{did_you_mean(method, methods)}methods: {methods}",
        )
    return CallSelector(method, candidates[0].alias if "agent" in calls else None)


def _count_of(fields: Fields, count: Fields, key: str, shown: str) -> Count:
    given = [name for name in COUNT_KEYS if name in count]

    def bad(allowed: str) -> None:
        fields.fail(key, f"count: {shown}", allowed)

    if not given:
        bad(COUNT_HINT)
    if "never" in count:
        if count.flag("never") is not True or len(given) > 1:
            bad(COUNT_HINT)
        return Count(0, 0)
    if "exactly" in count:
        if len(given) > 1:
            bad(COUNT_HINT)
        exactly = count.whole("exactly")
        return Count(exactly, exactly)
    low = count.whole("at_least", 0)
    high = count.whole("at_most", None)
    if high is not None and low > high:
        bad("expected at_least <= at_most")
    return Count(low, high)


# -- hooks, invariants, clients -----------------------------------------------------------------
def _known_run(context: StepContext, fields: Fields, alias: str | None, key: str = "run") -> str:
    run = fields.get(key)
    spec = context.agents.get(alias) if alias is not None else None
    if spec is not None and spec.workload == "tools":
        runs = [plan.run_id for plan in cast("type[_ToolsMixin]", spec.cls).runs]
        if run not in runs:
            fields.fail(key, f"agent {alias!r} has no run {show(run)}", f"its runs: {runs}")
    return run


def _hook(context: StepContext, index: int, item: Any, line: int) -> HookExpectation:
    fields = Fields(context.path, f"expect {index} (hook)", item, line, shape=HOOK)
    agent = known_agent(context, fields).alias if "agent" in fields else None
    if fields.get("hook") == "workload_on_finish" and "slot" in fields:
        fields.fail(
            "slot",
            f"slot: {show(fields.raw('slot'))} for workload_on_finish",
            "its records have no slot; count on_finish or delivered to tell slots apart",
        )
    return HookExpectation(
        index=index,
        line=fields.line,
        hook=fields.get("hook"),
        agent=agent,
        run=_known_run(context, fields, agent) if "run" in fields else None,
        slot=fields.get("slot"),
        status=fields.get("status"),
        count=_count(fields, inline=True, context=context),
    )


def _invariants(
    context: StepContext, index: int, where: str, value: Any, value_line: int, line: int
) -> InvariantsExpectation:
    known = f"known invariants: {sorted(CHECKERS)}"
    if value == "all":
        return InvariantsExpectation(index=index, line=line, names=tuple(CHECKERS))
    if not isinstance(value, list) or not value:
        problem = f"invariants: {show(value)}"
        raise InvalidScenario(
            context.path, value_line, where, problem, f"expected a list of names or all; {known}"
        )
    lines = getattr(value, "lines", [])
    for n, name in enumerate(value, start=1):
        if not isinstance(name, str) or name not in CHECKERS:
            item_line = lines[n - 1] if n <= len(lines) else value_line
            problem = f"unknown invariant {show(name)}"
            hint = did_you_mean(name, CHECKERS)
            raise InvalidScenario(context.path, item_line, where, problem, f"{hint}{known}, or all")
    return InvariantsExpectation(index=index, line=line, names=tuple(dict.fromkeys(value)))


def _probes(
    context: StepContext, index: int, where: str, value: Any, value_line: int, line: int
) -> ProbesExpectation:
    if not isinstance(value, list) or not value:
        raise InvalidScenario(
            context.path, value_line, where, f"probes: {show(value)}", "expected a list of names"
        )
    lines = getattr(value, "lines", [])
    areas = {name.split(".", 1)[0] for name in ALL_PROBES}
    for n, name in enumerate(value, start=1):
        item_line = lines[n - 1] if n <= len(lines) else value_line
        if not isinstance(name, str) or not PROBE_NAME.match(name):
            raise InvalidScenario(
                context.path,
                item_line,
                where,
                f"probe {show(name)}",
                "a probe name is dot-separated lower-case words (area.what_happened)",
            )
        if name.split(".", 1)[0] in areas and name not in ALL_PROBES:
            near = difflib.get_close_matches(name, ALL_PROBES, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise InvalidScenario(
                context.path,
                item_line,
                where,
                f"unknown probe {show(name)}",
                f"{hint}known probes of that area: "
                f"{sorted(p for p in ALL_PROBES if p.split('.')[0] == name.split('.')[0])}",
            )
    return ProbesExpectation(index=index, line=line, names=tuple(dict.fromkeys(value)))


def _client(context: StepContext, index: int, item: Any, line: int) -> Expectation:
    where = f"expect {index} (client)"
    if "frames" in item:
        fields = Fields(context.path, where, item, line, shape=CLIENT_FRAMES)
    elif "reduced" in item:
        fields = Fields(context.path, where, item, line, shape=CLIENT_RUN)
    else:
        raise InvalidScenario(
            context.path,
            line,
            where,
            f"keys {show(list(item))}",
            "a client expectation has frames: {type, kind, run, fields, count} to count, or "
            "run: and reduced: {status, text, ...} for what its reducer shows",
        )
    name = fields.get("client")
    agent = context.clients.get(name)
    if agent is None and name in context.broken_clients:
        raise Skipped(context.path, fields.line_of("client"), where)
    if agent is None:
        fields.fail(
            "client",
            f"unknown client {show(name)}",
            f"{did_you_mean(name, context.clients)}known clients: {sorted(context.clients)} "
            f"(declared under clients:, or connected by a step)",
        )
    if "reduced" in item:
        reduced = fields.sub("reduced", shape=REDUCED)
        checks = {key: plain(reduced.get(key)) for key in REDUCED_KEYS if key in reduced}
        if not checks:
            fields.bad("reduced", f"expected at least one of {list(REDUCED_KEYS)}")
        return ClientRunExpectation(
            index=index,
            line=fields.line,
            client=name,
            agent=agent,
            run=_known_run(context, fields, agent),
            reduced=checks,
        )
    frames = fields.sub("frames", shape=FRAMES)
    return ClientFramesExpectation(
        index=index,
        line=fields.line,
        client=name,
        agent=agent,
        type=frames.get("type"),
        event_kind=frames.get("kind"),
        run=_known_run(context, frames, agent) if "run" in frames else None,
        fields=plain(frames.get("fields") or {}),
        count=_count(frames, context=context),
    )
