"""Plan compilation: one scenario, run once in agentsim, becomes the JSON plan the workerd step
runner (`differential/test/play.test.ts`) plays on the real SDK.

The Python run comes first because it decides what the real side cannot decide by itself: when
each step's action happens (its `at:` / `after:` resolved against the run's step timings), and
every eviction the simulator drew (idle timeouts, unscripted deploys). Every `incarnation:end`
of the trace becomes an explicit `evict` action at its instant, so the scripted `deploy:` and
`evict:` steps need no action of their own: their evictions are in the trace too. A scenario
the real side cannot play (a Python-only step, an agent class it has no player for) is refused
with a `Skip` saying which step and why. The run's records and final tables are kept for the
comparison (`scenarios.diff.compare`), so the scenario runs in agentsim once.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from scenarios.diff.agentsim_run import PythonRun, alias_of, run_python
from scenarios.diff.model_plan import model_description, seeded_latency
from scenarios.language.releases import upgrades
from scenarios.language.schema import (
    MODEL_SERVICE,
    ArmStorageFaultStep,
    CallStep,
    ConnectStep,
    DeployStep,
    DisconnectStep,
    EvictStep,
    FailModelStep,
    QuiesceStep,
    ReconnectStep,
    RequestStep,
    RunForStep,
    RunToNextAlarmStep,
    RunUntilStep,
    Scenario,
    SendStep,
    StallModelStep,
    Step,
)

if TYPE_CHECKING:
    from scenarios.workloads.fibers import FiberWorkload
from sim import parse_duration_ms
from sim.alarms import ALARM_RETRY_BASE_MS, ALARM_RETRY_LIMIT
from sim.faults import FaultProfile

__all__ = [
    "PLAYED_CLASSES",
    "PLAYED_HOSTS",
    "PLAYED_WORKLOADS",
    "PYTHON_ONLY_STEPS",
    "UNPLAYED_CALLS",
    "UNPLAYED_FIELDS",
    "Compiled",
    "PythonRun",
    "Skip",
    "compile_plan",
    "faults_skip",
    "static_skip",
]

PLAYED_CLASSES = {
    "scenarios.workloads:Counter": "Counter",
    "scenarios.library_agents:Researcher": "Researcher",
    "scenarios.library_agents:PoisonedResearcher": "PoisonedResearcher",
    "scenarios.library_agents:SlowRecoveryResearcher": "SlowRecoveryResearcher",
    "scenarios.library_agents:Batcher": "Batcher",
    "scenarios.library_agents:Webhooks": "Webhooks",
    "scenarios.library_agents:StrictWebhooks": "StrictWebhooks",
    "scenarios.library_agents:Exporter": "Exporter",
    "scenarios.library_agents:Digest": "Digest",
    "scenarios.library_agents:StoryParent": "StoryParent",
    "scenarios.library_agents:SlowFinishParent": "SlowFinishParent",
}
"""Scenario class path -> the class the workerd worker exports for it (`differential/src`)."""

PLAYED_WORKLOADS = {
    "fibers": "FiberWorkload",
    "tools": "ToolsWorkload",
    "schedules": "ScheduleWorkload",
}
"""Workload kind -> the class that plays its description on the real side."""

PLAYED_CHILDREN = ("scripted", "chat")
"""The `child:` kinds of a tools workload's runs the real side plays (`ScriptedToolChild`, and
the SDK's own AIChatAgent as `ChatToolChild` answering from the scripted model)."""

UNPLAYED_CALLS: dict[str, tuple[str, ...]] = {
    "fibers": (
        "start_again",
        "start_waiting",
        "resolve",
        "forget",
        "listing",
        "start_as",
        "connect_mcp",
        "disconnect_mcp",
        "open",
        "close",
    ),
    "schedules": ("listing", "open", "close", "destroy_agent"),
    "tools": ("clear",),
}
"""Workload kind -> the workload methods its real-side player does not implement yet."""
UNPLAYED_FIELDS: dict[str, tuple[tuple[str, Any], ...]] = {
    "fibers": (("stash_bytes", 0),),
    "schedules": (
        ("backoff_ms", None),
        ("max_backoff_ms", None),
        ("idempotent", None),
        ("recovery_loop", False),
    ),
}
"""Workload kind -> the plan fields its real-side player does not read yet, with the value
that leaves them unused (a plan that sets another is refused)."""

PLAYED_HOSTS: dict[str, tuple[str, ...]] = {"tools": ("agent", "chat"), "chat": ("chat",)}
"""Workload kind -> the `host:` values the real side plays it with (a Think-like host has no
player: the SDK's Think, @cloudflare/think, is not installed there)."""

CHAT_TOOLS_PARENT = "AiChatToolsWorkload"
"""The class that plays a tools workload with `host: chat` (the SDK's AIChatAgent)."""
CHAT_WORKLOAD = "AiChatWorkload"
"""The class that plays a chat workload with `host: chat` (the SDK's AIChatAgent)."""

PYTHON_ONLY_STEPS: dict[type[Step], str] = {
    ArmStorageFaultStep: "storage faults and crashes between statements exist only in agentsim",
    StallModelStep: "the scripted model provider exists only in agentsim",
    FailModelStep: "the scripted model provider exists only in agentsim",
}
"""Step kinds the real side cannot play, with the reason a SKIP line gives."""

DIVERGENT_STORIES = {
    "child-reset-is-retryable": "the story pins divergence S6 (docs/divergences.md): on the SDK "
    "a child's reset makes the parent's tail read reject, so the awaited run ends `error`, not "
    "retryable, and the retry the rest of the story is about never happens",
    "clear-runs-and-gate-drill-in": "the story pins divergence A19 (docs/divergences.md): in "
    "workerd the SDK's clearAgentToolRuns cannot resolve a child's class, so it neither cancels "
    "the live child nor deletes any facet, and the child runs on with its keepAlive lease",
    "chat-child-recovered-keeps-chunk-numbers": "the story pins divergence T9 "
    "(docs/divergences.md), and on the SDK divergence T11 comes first: the four chunks each "
    "chat child streamed before the deploy were still in its stream's memory buffer (written "
    "ten to a row), so chat recovery finds no stored answer and retries each turn from the "
    "start instead of continuing it, and the chunk numbering the story is about never arises",
    "hunt-tools-parent-awaited-detached-budgets": "the webhook makes the reconcile backbone's "
    "first passes throw, and divergence S8 (docs/divergences.md) changes everything after: the "
    "port re-arms the tick even after a throwing pass (at 315000 ms), the SDK only after the "
    "clean pass its retries end with (at 315258 ms, in some plays at 320000 ms), so every later "
    "tick, finish delivery and retry lands at other instants. Before it, S7 (the SDK delivers "
    "`aborted` again for silent and stuck) and one replayed chunk differ: at the 5-minute "
    "reconnect the port replays import-a's `Imported 80k rows`, which its child, restarted at "
    "that instant by the replay's read, has written by then; the SDK's has not. The SDK's retry "
    "jitter is the port's (the plan carries its draws), and the retries land alike",
}
"""Stories written to show a divergence whose first difference changes everything after it,
so no verdict past it would mean anything: refused, naming the row."""

UNSTABLE_STORIES: dict[str, str] = {}
"""Stories whose real side has been measured to disagree with itself from play to play:
refused with the reason, so that a run of the library gives a verdict that does not depend on
luck. None is today: reattach-after-parent-restart was, until the real side started a
sub-agent once when two first calls reach it together (`differential/src/startup.ts`) and
counted the calls agents make on one another as work in flight (`differential/src/sdk-work.ts`)."""

_PLAYED_EVICTIONS = ("idle", "deploy", "explicit")
"""`incarnation:end` reasons the real side reproduces (the object is aborted at that instant)."""

_SELF_ENDED = ("destroyed", "deleted")
"""`incarnation:end` reasons the agents' own code causes on both sides (a sub-agent that aborts
itself, a parent deleting a sub-agent): the real side's code does it again, with no action."""

_EVICTION_WHY = {
    "alarm-limit": "the platform's 15-minute alarm kill is Python-only (workerd's test pool has "
    "no alarm time limit)",
    "crash": "a crash between two statements is Python-only",
    "reset": "0.32.0's isolate reset after an alarm memory-limit strike (the agent's own "
    "ctx.abort(reason, {retryAlarm: false}) of a top-level agent, on a 0 ms timer) is not "
    "played: the real side reproduces only a sub-agent's own end, and has not been shown to "
    "follow a top-level agent's abort of itself with the same fresh incarnation and no alarm "
    "retry",
}


@dataclass(frozen=True)
class Skip:
    """A scenario the real side cannot play: where (a step's line, or the run) and why."""

    where: str
    why: str

    def sentence(self) -> str:
        return f"{self.where}: {self.why}"


@dataclass
class Compiled:
    """A scenario's plan (None when skipped), its skip reason, and its Python run."""

    plan: dict[str, Any] | None
    skip: Skip | None
    python: PythonRun | None


def _tools_skip(spec: Any) -> Skip | None:
    """Why the real side cannot play this tools workload, or None."""
    from scenarios.workloads.tools import TOOL_HOSTS

    where = f"agent {spec.alias} (line {spec.line})"
    played = tuple(TOOL_HOSTS[host] for host in PLAYED_HOSTS["tools"])
    if not issubclass(spec.cls, played):
        return Skip(
            where,
            "a Think-like chat host as the tools parent has no player on the real side yet (the "
            "SDK's Think, @cloudflare/think, is not installed there)",
        )
    for run in spec.cls.runs:
        if run.child not in PLAYED_CHILDREN:
            return Skip(
                where,
                f"run {run.run_id}: a {run.child} child answers from the scripted model, "
                "which exists only in agentsim",
            )
    return None


UPGRADE_WHY = (
    "an upgrade (a deploy that brings another SDK release) is not played: the real side plays "
    "every plan in one worker bundle, built by the test pool (@cloudflare/vitest-pool-workers, "
    "wrangler.jsonc's one main module) against the one agents version installed in its npm "
    "project, and the pool cannot load a second bundle over the same Durable Object storage "
    "in the middle of a play"
)
"""Why a story that upgrades is refused (`agentsim diff` plays one release per scenario)."""


def faults_skip(faults: FaultProfile) -> Skip | None:
    """Why the real side cannot play a scenario with this `faults:` profile, or None."""
    if faults.storage_error_rate > 0 or faults.crash_rate > 0:
        return Skip("faults:", "background storage errors and crashes are Python-only")
    return None


def static_skip(scenario: Scenario) -> Skip | None:
    """Why the real side cannot play `scenario`, decided before any run (its agents, faults
    profile and steps), or None. A plan may still be refused after the agentsim run, for an
    incarnation end the real side cannot reproduce (`compile_plan`)."""
    from scenarios.workloads.chat import CHAT_HOSTS

    for upgrade, before, after in upgrades(scenario):
        if before != after:
            return Skip(f"step {upgrade.index} ({upgrade.kind}, line {upgrade.line})", UPGRADE_WHY)
    if scenario.name in DIVERGENT_STORIES:
        return Skip("the story", DIVERGENT_STORIES[scenario.name])
    if scenario.name in UNSTABLE_STORIES:
        return Skip("the story", UNSTABLE_STORIES[scenario.name])
    for spec in scenario.agents:
        if spec.workload == "tools":
            skip = _tools_skip(spec)
            if skip is not None:
                return skip
            continue
        if spec.workload == "chat":
            if not issubclass(spec.cls, tuple(CHAT_HOSTS[h] for h in PLAYED_HOSTS["chat"])):
                return Skip(
                    f"agent {spec.alias} (line {spec.line})",
                    "a Think-like chat workload has no player on the real side yet (the SDK's "
                    "Think, @cloudflare/think, is not installed there)",
                )
            continue
        if spec.workload in PLAYED_WORKLOADS:
            continue
        if spec.workload is not None:
            return Skip(
                f"agent {spec.alias} (line {spec.line})",
                f"the {spec.workload} workload has no player on the real side yet",
            )
        if spec.class_path not in PLAYED_CLASSES:
            return Skip(
                f"agent {spec.alias} (line {spec.line})",
                f"class {spec.class_path} has no player on the real side",
            )
    skip = faults_skip(scenario.faults)
    if skip is not None:
        return skip
    if scenario.interleave is not None:
        return Skip("interleave:", "same-instant reordering is agentsim's own exploration")
    skip = _model_skip(scenario)
    if skip is not None:
        return skip
    skip = _player_skip(scenario)
    if skip is not None:
        return skip
    for step in scenario.steps:
        why = PYTHON_ONLY_STEPS.get(type(step))
        if why is not None:
            return Skip(f"step {step.index + 1} ({step.kind}, line {step.line})", why)
        if isinstance(step, EvictStep) and len(step.child) > 1:
            return Skip(
                f"step {step.index + 1} (evict, line {step.line})",
                "a sub-agent below a sub-agent is not evicted on the real side yet",
            )
    return None


def _player_skip(scenario: Scenario) -> Skip | None:
    """Why a workload's real-side player cannot play what this scenario asks of it (a plan
    field it does not read, a method it does not have), or None."""
    for spec in scenario.agents:
        # A workload's plans are its class's attribute of the workload's name.
        plans = getattr(spec.cls, spec.workload, ()) if spec.workload in UNPLAYED_FIELDS else ()
        for plan in plans:
            for name, unused in UNPLAYED_FIELDS.get(spec.workload or "", ()):
                if getattr(plan, name, unused) != unused:
                    return Skip(
                        f"agent {spec.alias} (line {spec.line})",
                        f"the {spec.workload} player on the real side does not read `{name}` yet",
                    )
    for step in scenario.steps:
        if isinstance(step, CallStep):
            workload = scenario.agent(step.agent).workload or ""
            if step.method in UNPLAYED_CALLS.get(workload, ()):
                return Skip(
                    f"step {step.index + 1} (call, line {step.line})",
                    f"the {workload} player on the real side has no `{step.method}` yet",
                )
    return None


def _played_class(spec: Any) -> str:
    """The class the real side plays an agent with (a tools parent's or a chat workload's by its
    `host:`)."""
    from scenarios.workloads.chat import AiChatWorkload
    from scenarios.workloads.tools import AiChatToolsWorkload

    if spec.workload == "tools" and issubclass(spec.cls, AiChatToolsWorkload):
        return CHAT_TOOLS_PARENT
    if spec.workload == "chat" and issubclass(spec.cls, AiChatWorkload):
        return CHAT_WORKLOAD
    return PLAYED_WORKLOADS.get(spec.workload or "") or PLAYED_CLASSES.get(spec.class_path, "")


def _model_skip(scenario: Scenario) -> Skip | None:
    """Why the real side's scripted model cannot play the model services this scenario's chat
    agents stream from, or None."""
    used = set()
    for spec in scenario.agents:
        if spec.workload == "chat":
            used.add(cast("Any", spec.cls).model_service)
        elif spec.workload == "tools" and (
            _played_class(spec) == CHAT_TOOLS_PARENT
            or any(run.child == "chat" for run in cast("Any", spec.cls).runs)
        ):
            used.add(MODEL_SERVICE)  # the chat host's and the chat children's
    scripts = {name: scenario.models[name] for name in sorted(used) if name in scenario.models}
    service = seeded_latency(model_description(scripts))
    if service is None:
        return None
    return Skip(
        f"model service {service}",
        "a reply without a `delay` streams at the port's seeded latency, which the real side's "
        "scripted model cannot draw",
    )


def _options(scenario: Scenario, alias: str) -> dict[str, Any]:
    """The agent's options as the class carries them (durations already in ms)."""
    spec = scenario.agent(alias)
    out: dict[str, Any] = {}
    if spec.workload == "fibers":
        # The description the port's player reads from its class, for the real side's player.
        cls = cast("type[FiberWorkload]", spec.cls)
        out["fibers"] = [dataclasses.asdict(plan) for plan in cls.fibers]
        out["start_on"] = cls.start_on
        out["recovery"] = cls.recovery
    if spec.workload == "tools":
        # The run plans the port's parent reads from its class, for the real side's parent.
        runs = cast("Any", spec.cls).runs
        out["runs"] = [json.loads(json.dumps(dataclasses.asdict(run))) for run in runs]
        out["start_on"] = cast("Any", spec.cls).start_on
    if spec.workload == "schedules":
        # The schedule plans the port's player reads from its class (`schedules.ts` reads them).
        described = cast("Any", spec.cls)
        out["schedules"] = [dataclasses.asdict(plan) for plan in described.schedules]
        out["setup_on"] = described.setup_on
        out["warmup_ms"] = described.warmup_ms
    if spec.workload == "chat":
        # The service its model streams from: `model`, or `model/<alias>` for a model of its own.
        out["model_service"] = cast("Any", spec.cls).model_service
    for key in spec.options:
        value = getattr(spec.cls, key, spec.options[key])
        if isinstance(value, property):  # an instance setting the class does not carry
            value = spec.options[key]
        if isinstance(value, str) and key.endswith("_ms"):
            value = parse_duration_ms(value)
        out[key] = list(value) if isinstance(value, tuple) else value
    return out


def _action_time(step: Step, begin_ms: int) -> int:
    t = begin_ms
    if step.after_ms is not None:
        t += step.after_ms
    if step.at_ms is not None and step.at_ms >= t:
        t = step.at_ms
    return t


def _positional(scenario: Scenario, step: CallStep) -> list[Any] | None:
    """The call's arguments as positional ones (the real side's methods take no keywords):
    keywords bound by the port's method signature, the defaults before them filled in.
    None when they cannot be bound that way."""
    if not step.kwargs:
        return list(step.args)
    method = getattr(scenario.agent(step.agent).cls, step.method, None)
    try:
        bound = inspect.signature(method).bind(None, *step.args, **step.kwargs)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    bound.apply_defaults()
    if bound.kwargs:
        return None
    values = list(bound.args[1:])
    return json.loads(json.dumps(values)) if _json_safe(values) else None


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _step_action(step: Step, clients: dict[str, str], scenario: Scenario) -> dict[str, Any] | None:
    if isinstance(step, CallStep):
        args = _positional(scenario, step)
        if args is None:
            return {"unsupported": "a call whose keyword arguments bind to no positional ones"}
        return {
            "do": "call",
            "agent": step.agent,
            "method": step.method,
            "args": args,
            "wait": step.wait,
        }
    if isinstance(step, RequestStep):
        return {
            "do": "request",
            "agent": step.agent,
            "http_method": step.method,
            "path": step.path,
            "body": step.body,
            "headers": dict(step.headers),
        }
    if isinstance(step, ConnectStep):
        return {"do": "connect", "client": step.client, "agent": step.agent}
    if isinstance(step, ReconnectStep):
        # The port's reconnect closes the client's open connection first (1000, "reconnect").
        agent = clients.get(step.client)
        return {"do": "connect", "client": step.client, "agent": agent, "reconnect": True}
    if isinstance(step, DisconnectStep):
        return {"do": "disconnect", "client": step.client, "code": step.code, "reason": step.reason}
    if isinstance(step, SendStep):
        return {"do": "send", "client": step.client, "message": step.message}
    if isinstance(
        step,
        DeployStep | EvictStep | RunForStep | RunUntilStep | RunToNextAlarmStep | QuiesceStep,
    ):
        return None  # time only; deploy/evict come from the trace's incarnation ends
    return {"unsupported": f"step kind {step.kind}"}


def _evict_action(path: str) -> dict[str, Any]:
    """The real side's eviction of the agent at `path`: a root by its alias, a sub-agent
    (`Class/parent/Child/r1`) through its root, by class and name."""
    parts = path.split("/")
    action: dict[str, Any] = {"do": "evict", "agent": parts[1] if len(parts) >= 2 else path}
    if len(parts) >= 4:
        action.update(child="/".join(parts[3::2]), child_class=parts[-2])
    return action


WARMUPS_WHY = (
    "an agent of the plan holds its startup on a warm-up (`warmup:` of a schedules workload) "
    "beside other agents: in plays of such plans workerd reset the startup at "
    "blockConcurrencyWhile's time limit while the step runner waited on the others, which the "
    "port never does; the runner does not play a parked startup among other agents reliably "
    "yet (docs/not-built-yet.md)"
)


def _warmups_skip(scenario: Scenario) -> Skip | None:
    """Refuses a plan in which an agent parks its startup on a warm-up beside other agents."""
    warmed = [
        spec
        for spec in scenario.agents
        if spec.workload == "schedules" and int(getattr(spec.cls, "warmup_ms", 0) or 0) > 0
    ]
    if not warmed or len(scenario.agents) < 2:
        return None
    return Skip(f"agent {warmed[0].alias} (line {warmed[0].line})", WARMUPS_WHY)


CHAT_TURN_CUT_WHY = (
    "an AIChatAgent-like chat host's turn may be cut by an eviction or a deploy while its reply "
    "streams: @cloudflare/ai-chat stores a reply's chunks in batches (divergence T11), so its "
    "recovery can find no partial and run the turn again (`_chatRecoveryRetry`) where the port, "
    "which stores every chunk, continues the partial reply (`_chatRecoveryContinue`); the "
    "recovery that follows a batched store is not modelled yet (docs/generate.md, open findings "
    "of the CI sample)"
)


def _chat_turn_cut_skip(scenario: Scenario) -> Skip | None:
    """Refuses a plan that evicts or redeploys an AIChatAgent-like chat host after a turn was
    asked of it (`CHAT_TURN_CUT_WHY`)."""
    hosts = {
        spec.alias
        for spec in scenario.agents
        if spec.workload == "chat" and spec.cls.__name__ == CHAT_WORKLOAD
    }
    asked = [
        step.at_ms
        for step in scenario.steps
        if isinstance(step, CallStep) and step.agent in hosts and step.method == "say"
    ]
    if not asked:
        return None
    first = min((at for at in asked if at is not None), default=0)  # a relative time: any
    for step in scenario.steps:
        cuts = isinstance(step, DeployStep) or (isinstance(step, EvictStep) and step.agent in hosts)
        if cuts and (step.at_ms is None or step.at_ms >= first):
            return Skip(f"step {step.kind} (line {step.line})", CHAT_TURN_CUT_WHY)
    return None


CHAT_JOIN_MID_STREAM_WHY = (
    "a client connects to an AIChatAgent-like chat host after a turn was asked of it, so it may "
    "join while a reply streams: @cloudflare/ai-chat then announces `cf_agent_stream_resuming` "
    "and waits for the client to ask for the stream, where the port streams the rest of the "
    "reply to the new connection; the resume handshake is not modelled yet (docs/generate.md, "
    "open findings of the CI sample)"
)


def _chat_join_mid_stream_skip(scenario: Scenario) -> Skip | None:
    """Refuses a plan whose client connects (or reconnects) to an AIChatAgent-like chat host
    after a turn was asked of it (`CHAT_JOIN_MID_STREAM_WHY`)."""
    hosts = {
        spec.alias
        for spec in scenario.agents
        if spec.workload == "chat" and spec.cls.__name__ == CHAT_WORKLOAD
    }
    clients = {client.name: client.agent for client in scenario.clients}
    asked = False
    for step in scenario.steps:  # in time order
        if isinstance(step, CallStep) and step.agent in hosts and step.method == "say":
            asked = True
        elif asked and isinstance(step, ConnectStep | ReconnectStep):
            agent = getattr(step, "agent", None) or clients.get(step.client)
            if agent in hosts:
                return Skip(f"step {step.kind} (line {step.line})", CHAT_JOIN_MID_STREAM_WHY)
    return None


CHAT_STORAGE_WHY = (
    "on this release the real side's chat agents run @cloudflare/ai-chat {chat}, which keeps a "
    "chat in tables the port does not model yet (session messages and stream blocks, with "
    "random message ids inside content hashes: sdk-0.32 section 8, docs/not-built-yet.md), so "
    "no play of it can agree"
)
MODELLED_CHAT_RELEASES = frozenset({"0.10.2"})
"""The releases of @cloudflare/ai-chat whose storage the port's chat agents keep."""


def _chat_storage_skip(scenario: Scenario) -> Skip | None:
    """Refuses a plan with an agent the real side plays on @cloudflare/ai-chat (a chat host or
    a chat child) when the release plays a chat release whose storage is not modelled."""
    from scenarios.diff.workerd import CHAT_RELEASES

    chat = CHAT_RELEASES.get(scenario.sdk)
    if chat is None or chat in MODELLED_CHAT_RELEASES:
        return None
    for spec in scenario.agents:
        children = [run.child for run in getattr(spec.cls, "runs", ())]
        if _played_class(spec) in (CHAT_TOOLS_PARENT, CHAT_WORKLOAD) or "chat" in children:
            where = f"agent {spec.alias} (line {spec.line})"
            return Skip(where, CHAT_STORAGE_WHY.format(chat=chat))
    return None


def compile_plan(scenario: Scenario, repeat: int = 3) -> Compiled:
    """The plan for `scenario`, or why it cannot be played, and its agentsim run."""
    skip = (
        static_skip(scenario)
        or _warmups_skip(scenario)
        or _chat_turn_cut_skip(scenario)
        or _chat_join_mid_stream_skip(scenario)
        or _chat_storage_skip(scenario)
    )
    if skip is not None:
        return Compiled(None, skip, None)
    python = run_python(scenario)
    for t, _seq, path, reason in python.evictions:
        if reason not in _PLAYED_EVICTIONS and not (
            reason in _SELF_ENDED and "/" in alias_of(path)
        ):
            why = _EVICTION_WHY.get(reason, f"an incarnation end for {reason!r} is Python-only")
            return Compiled(None, Skip(f"the run, at {t} ms ({alias_of(path)})", why), python)
    timings = python.timings
    clients = {spec.name: spec.agent for spec in scenario.clients}
    items: list[tuple[int, float, dict[str, Any]]] = []
    scripted: dict[int, int] = {}  # action time of a deploy/evict step -> its rank
    for index, (step, (begin, end)) in enumerate(zip(scenario.steps, timings, strict=True)):
        t = _action_time(step, begin)
        action = _step_action(step, clients, scenario)
        if action is not None and "unsupported" in action:
            where = f"step {index + 1} ({step.kind}, line {step.line})"
            return Compiled(None, Skip(where, f"{action['unsupported']} is not played"), python)
        if isinstance(step, DeployStep | EvictStep):
            scripted.setdefault(t, 2 * index + 1)
        label = f"step {index + 1}"
        if isinstance(step, CallStep) and not step.wait and end == t and action is not None:
            # The port's step returns as soon as the call is sent: its snapshot shows the alarm
            # before anything the call does at this instant, so the runner takes it then. A step
            # with `at:` or `after:` first runs the port until its time, work already pending at
            # that instant included (`Simulation.run_until`): `settled` asks the runner for the
            # alarms as that work left them, not as they were before the instant's first call.
            settled = step.at_ms is not None or step.after_ms is not None
            items.append(
                (
                    t,
                    2 * index + 1,
                    {"t": t, "step": index + 1, **action, "snapshot": label, "settled": settled},
                )
            )
            continue
        if action is not None:
            items.append((t, 2 * index + 1, {"t": t, "step": index + 1, **action}))
        items.append((end, 2 * index + 2, {"t": end, "do": "snapshot", "label": label}))
    roots_ended = {
        (t, path.split("/")[1]) for t, _s, path, _r in python.evictions if path.count("/") == 1
    }
    for t, seq, path, reason in python.evictions:
        if reason in _SELF_ENDED:
            continue
        if path.count("/") > 1 and (t, path.split("/")[1]) in roots_ended:
            continue  # its root ends at this instant too, and takes its sub-agents with it
        rank = scripted.get(t, -1) + seq / 1e9
        items.append((t, rank, {"t": t, **_evict_action(path), "reason": reason}))
    items.sort(key=lambda item: (item[0], item[1]))
    plan = {
        "name": scenario.name,
        "repeat": repeat,
        "alarm_retry": {"base_ms": ALARM_RETRY_BASE_MS, "limit": ALARM_RETRY_LIMIT},
        "end_ms": python.end_ms,
        "agents": {
            spec.alias: {
                "class": _played_class(spec),
                "options": _options(scenario, spec.alias),
            }
            for spec in scenario.agents
        },
        "actions": [item[2] for item in items],
        "models": model_description(scenario.models),
        # The port's retry jitter, drawn from its seeded stream: the real side's SDK draws
        # these fractions, in this order, instead of `Math.random`'s (`scenarios/diff/jitter.py`).
        "jitter": python.draws,
    }
    return Compiled(plan, None, python)
