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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from scenarios.language.schema import (
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
from scenarios.run.runner import budget_for
from scenarios.run.steps import StepRunner

if TYPE_CHECKING:
    from scenarios.workloads.fibers import FiberWorkload
from sim import AgentRef, Simulation, parse_duration_ms

__all__ = [
    "PLAYED_CLASSES",
    "PLAYED_WORKLOADS",
    "PYTHON_ONLY_STEPS",
    "Compiled",
    "PythonRun",
    "Skip",
    "compile_plan",
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
}
"""Scenario class path -> the class the workerd worker exports for it (`differential/src`)."""

PLAYED_WORKLOADS = {"fibers": "FiberWorkload"}
"""Workload kind -> the class that plays its description on the real side."""

PYTHON_ONLY_STEPS: dict[type[Step], str] = {
    ArmStorageFaultStep: "storage faults and crashes between statements exist only in agentsim",
    StallModelStep: "the scripted model provider exists only in agentsim",
    FailModelStep: "the scripted model provider exists only in agentsim",
}
"""Step kinds the real side cannot play, with the reason a SKIP line gives."""

_PLAYED_EVICTIONS = ("idle", "deploy", "explicit")
"""`incarnation:end` reasons the real side reproduces (the object is aborted at that instant)."""

_EVICTION_WHY = {
    "alarm-limit": "the platform's 15-minute alarm kill is Python-only (workerd's test pool has "
    "no alarm time limit)",
    "crash": "a crash between two statements is Python-only",
}


@dataclass(frozen=True)
class Skip:
    """A scenario the real side cannot play: where (a step's line, or the run) and why."""

    where: str
    why: str

    def sentence(self) -> str:
        return f"{self.where}: {self.why}"


@dataclass
class PythonRun:
    """What the agentsim run of a scenario leaves for the comparison."""

    records: list[dict[str, Any]]
    """Trace records as `{t, agent (alias), type, payload}`, plus one `harness:alarm` per agent
    after each step (the armed alarm, as the real side snapshots it)."""
    tables: dict[str, dict[str, list[dict[str, Any]]]]
    """Alias -> table -> rows, read after the liveness phase."""
    end_ms: int
    evictions: list[tuple[int, int, str, str]] = field(default_factory=list)
    """(t, trace seq, alias, reason) of every incarnation end."""
    timings: list[tuple[int, int]] = field(default_factory=list)
    """(begin, end) sim ms of each step, as `scenarios.run.runner.StepTiming`."""


@dataclass
class Compiled:
    """A scenario's plan (None when skipped), its skip reason, and its Python run."""

    plan: dict[str, Any] | None
    skip: Skip | None
    python: PythonRun | None


def _alias(path: str) -> str:
    parts = path.split("/")
    return parts[1] if len(parts) >= 2 else path


def _static_skip(scenario: Scenario) -> Skip | None:
    for spec in scenario.agents:
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
    faults = scenario.faults
    if faults.storage_error_rate > 0 or faults.crash_rate > 0:
        return Skip("faults:", "background storage errors and crashes are Python-only")
    if scenario.interleave is not None:
        return Skip("interleave:", "same-instant reordering is agentsim's own exploration")
    for step in scenario.steps:
        why = PYTHON_ONLY_STEPS.get(type(step))
        if why is not None:
            return Skip(f"step {step.index + 1} ({step.kind}, line {step.line})", why)
        if isinstance(step, EvictStep) and step.child:
            return Skip(
                f"step {step.index + 1} (evict, line {step.line})",
                "sub-agents are not played on the real side yet",
            )
    return None


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
    for key in spec.options:
        value = getattr(spec.cls, key, spec.options[key])
        if isinstance(value, str) and key.endswith("_ms"):
            value = parse_duration_ms(value)
        out[key] = list(value) if isinstance(value, tuple) else value
    return out


def _records(trace: Any) -> list[dict[str, Any]]:
    """The trace as `{t, agent, type, payload}`; a frame a client received becomes
    `harness:frame {client, frame}`, as the real side records it."""
    clients: dict[str, str] = {}
    out = []
    for r in trace:
        if r.event == "connection:open":
            clients[str(r.fields.get("connection"))] = str(r.fields.get("client"))
        if r.event == "connection:frame":
            client = clients.get(str(r.fields.get("connection")), "?")
            kind, payload = "harness:frame", {"client": client, "frame": r.fields.get("frame")}
        else:
            kind, payload = r.event, dict(r.fields)
        out.append({"t": r.t_ms, "agent": _alias(r.agent), "type": kind, "payload": payload})
    return out


def _plain(value: Any) -> Any:
    """A value a caller received, as JSON would carry it (`to_dict`, dataclasses, tuples)."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


class _Replies:
    """The simulation as the step runner sees it, noting what each waited call and request
    answered (`harness:reply`), as the real side's runner notes it."""

    def __init__(self, sim: Simulation, records: list[dict[str, Any]]) -> None:
        self._sim = sim
        self._records = records
        self.step_number = 0
        self.alias = ""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sim, name)

    def _note(self, ok: bool, value: Any) -> None:
        payload = {"step": self.step_number, "ok": ok, "value": _plain(value) if ok else None}
        record = {"t": self._sim.now_ms, "agent": self.alias, "type": "harness:reply"}
        self._records.append({**record, "payload": payload})

    def wait(self, pending: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            value = self._sim.wait(pending, *args, **kwargs)
        except Exception:
            self._note(False, None)
            raise
        self._note(True, value)
        return value

    def fetch(self, agent: Any, request: Any = None) -> Any:
        try:
            response = self._sim.fetch(agent, request)
        except Exception:
            self._note(False, None)
            raise
        self._note(True, {"status": response.status, "body": response.body})
        return response


def _run_python(scenario: Scenario) -> PythonRun:
    """Run the scenario in agentsim (its own seed, no invariants), keeping what the comparison
    needs: the steps' action times, alarm snapshots, the trace and the final tables."""
    sim = Simulation(seed=scenario.seed, faults=scenario.faults, budget=budget_for(scenario))
    snapshots: list[dict[str, Any]] = []
    timings: list[tuple[int, int]] = []
    replies: list[dict[str, Any]] = []
    try:
        steps = StepRunner(sim, scenario)
        answers = _Replies(sim, replies)
        steps.sim = answers  # type: ignore[assignment]  # a proxy: it notes the replies
        refs = {spec.alias: AgentRef(spec.cls, spec.alias) for spec in scenario.agents}
        for index, step in enumerate(scenario.steps):
            begin = sim.now_ms
            answers.step_number, answers.alias = index + 1, str(getattr(step, "agent", ""))
            steps.run(step)
            timings.append((begin, sim.now_ms))
            for alias, ref in refs.items():
                at = sim.alarm_of(ref) if ref.path in sim.platform.records else None
                snapshots.append(
                    {
                        "t": sim.now_ms,
                        "agent": alias,
                        "type": "harness:alarm",
                        "payload": {"at": at, "step": f"step {index + 1}"},
                    }
                )
        sim.quiesce(scenario.liveness_limit_ms)
        end_ms = sim.now_ms
        records = _records(sim.trace.records)
        evictions = [
            (r.t_ms, r.seq, _alias(r.agent), str(r.fields.get("reason")))
            for r in sim.trace.records
            if r.event == "incarnation:end"
        ]
        tables = {
            alias: sim.snapshot(ref)
            for alias, ref in refs.items()
            if ref.path in sim.platform.records
        }
    finally:
        sim.close()
    return PythonRun(records + snapshots + replies, tables, end_ms, evictions, timings)


def _action_time(step: Step, begin_ms: int) -> int:
    t = begin_ms
    if step.after_ms is not None:
        t += step.after_ms
    if step.at_ms is not None and step.at_ms >= t:
        t = step.at_ms
    return t


def _step_action(step: Step, clients: dict[str, str]) -> dict[str, Any] | None:
    if isinstance(step, CallStep):
        if step.kwargs:
            return {"unsupported": "a call with keyword arguments"}
        return {
            "do": "call",
            "agent": step.agent,
            "method": step.method,
            "args": list(step.args),
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
        return {"do": "connect", "client": step.client, "agent": clients.get(step.client)}
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


def compile_plan(scenario: Scenario, repeat: int = 3) -> Compiled:
    """The plan for `scenario`, or why it cannot be played, and its agentsim run."""
    skip = _static_skip(scenario)
    if skip is not None:
        return Compiled(None, skip, None)
    python = _run_python(scenario)
    for t, _seq, alias, reason in python.evictions:
        if reason not in _PLAYED_EVICTIONS:
            why = _EVICTION_WHY.get(reason, f"an incarnation end for {reason!r} is Python-only")
            return Compiled(None, Skip(f"the run, at {t} ms ({alias})", why), python)
    timings = python.timings
    clients = {spec.name: spec.agent for spec in scenario.clients}
    items: list[tuple[int, float, dict[str, Any]]] = []
    scripted: dict[int, int] = {}  # action time of a deploy/evict step -> its rank
    for index, (step, (begin, end)) in enumerate(zip(scenario.steps, timings, strict=True)):
        t = _action_time(step, begin)
        action = _step_action(step, clients)
        if action is not None and "unsupported" in action:
            where = f"step {index + 1} ({step.kind}, line {step.line})"
            return Compiled(None, Skip(where, f"{action['unsupported']} is not played"), python)
        if isinstance(step, DeployStep | EvictStep):
            scripted.setdefault(t, 2 * index + 1)
        if action is not None:
            items.append((t, 2 * index + 1, {"t": t, "step": index + 1, **action}))
        items.append(
            (end, 2 * index + 2, {"t": end, "do": "snapshot", "label": f"step {index + 1}"})
        )
    for t, seq, alias, _reason in python.evictions:
        rank = scripted.get(t, -1) + seq / 1e9
        items.append((t, rank, {"t": t, "do": "evict", "agent": alias}))
    items.sort(key=lambda item: (item[0], item[1]))
    plan = {
        "name": scenario.name,
        "repeat": repeat,
        "end_ms": python.end_ms,
        "agents": {
            spec.alias: {
                "class": PLAYED_WORKLOADS.get(spec.workload or "")
                or PLAYED_CLASSES[spec.class_path],
                "options": _options(scenario, spec.alias),
            }
            for spec in scenario.agents
        },
        "actions": [item[2] for item in items],
    }
    return Compiled(plan, None, python)
