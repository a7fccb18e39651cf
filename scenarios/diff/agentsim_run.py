"""The agentsim side of a differential play: the scenario run once in agentsim, with what the
comparison and the plan need from it (`PythonRun`).

The run keeps its trace as `{t, agent alias, type, payload}` records, the frames and closes each
client saw (`harness:frame`, `harness:close`), the alarm each agent has armed after each step
(`harness:alarm`), what each waited call and request answered (`harness:reply`, with the error of
one that failed) and how each call not waited for ended (`harness:outcome`), the final tables of
every agent and sub-agent, every incarnation end, and the steps' times. The real side's runner
(`differential/test/play.test.ts`) records the same kinds the same way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from agents_core.errors import AgentReset
from scenarios.diff.jitter import record_draws
from scenarios.language.schema import CallStep, Scenario
from scenarios.run.runner import budget_for
from scenarios.run.steps import StepRunner
from sim import AgentRef, Simulation

__all__ = ["PythonRun", "alias_of", "error_value", "run_python"]


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
    """(t, trace seq, agent path, reason) of every incarnation end."""
    timings: list[tuple[int, int]] = field(default_factory=list)
    """(begin, end) sim ms of each step, as `scenarios.run.runner.StepTiming`."""
    draws: list[dict[str, Any]] = field(default_factory=list)
    """`{t, agent, fraction}` of every retry jitter the run drew, in order (`jitter.py`)."""


def alias_of(path: str) -> str:
    """`parent` for `Class/parent`, `parent/r1` for a sub-agent `Class/parent/Child/r1`."""
    parts = path.split("/")
    return "/".join(parts[1::2]) if len(parts) >= 2 else path


def _records(trace: Any) -> list[dict[str, Any]]:
    """The trace as `{t, agent, type, payload}`; a frame a client received becomes
    `harness:frame {client, frame}` and a closed connection `harness:close {client, code}`, as
    the real side records them."""
    clients: dict[str, str] = {}
    out = []
    for r in trace:
        if r.event == "connection:open":
            clients[str(r.fields.get("connection"))] = str(r.fields.get("client"))
        if r.event == "connection:frame":
            client = clients.get(str(r.fields.get("connection")), "?")
            kind, payload = "harness:frame", {"client": client, "frame": r.fields.get("frame")}
        elif r.event == "connection:close":
            # The close code the client sees (1006 when its agent's incarnation ends).
            client = clients.get(str(r.fields.get("connection")), "?")
            kind, payload = "harness:close", {"client": client, "code": r.fields.get("code")}
        else:
            kind, payload = r.event, dict(r.fields)
        out.append({"t": r.t_ms, "agent": alias_of(r.agent), "type": kind, "payload": payload})
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


def error_value(error: BaseException) -> dict[str, Any]:
    """A failed call's error as both sides record it: `{"reset": reason}` when the agent was
    reset under it (evicted, redeployed), else `{"error": message}`."""
    if isinstance(error, AgentReset):
        return {"reset": error.reason}
    return {"error": str(error)}


class _Replies:
    """The simulation as the step runner sees it, noting what each waited call and request
    answered (`harness:reply`, with the error of one that failed), and keeping the calls started
    without waiting, whose outcome is noted at the end (`harness:outcome`), as the real side's
    runner notes them."""

    def __init__(self, sim: Simulation, records: list[dict[str, Any]]) -> None:
        self._sim = sim
        self._records = records
        self.step_number = 0
        self.alias = ""
        self.waits = True
        self.unawaited: list[tuple[int, str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sim, name)

    def _note(self, ok: bool, value: Any, error: BaseException | None = None) -> None:
        payload = {"step": self.step_number, "ok": ok, "value": _plain(value) if ok else None}
        if error is not None:
            payload["error"] = error_value(error)
        record = {"t": self._sim.now_ms, "agent": self.alias, "type": "harness:reply"}
        self._records.append({**record, "payload": payload})

    def start_call(self, *args: Any, **kwargs: Any) -> Any:
        pending = self._sim.start_call(*args, **kwargs)
        if not self.waits:
            self.unawaited.append((self.step_number, self.alias, pending))
        return pending

    def outcomes(self) -> None:
        """`harness:outcome {step, ok, error}` of every call started without waiting."""
        for step, alias, pending in self.unawaited:
            payload: dict[str, Any] = {"step": step, "ok": None}
            if pending.done():
                payload["ok"] = bool(pending.event.ok)
                if not pending.event.ok:
                    payload["error"] = error_value(pending.event.value)
            record = {"t": self._sim.now_ms, "agent": alias, "type": "harness:outcome"}
            self._records.append({**record, "payload": payload})

    def wait(self, pending: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            value = self._sim.wait(pending, *args, **kwargs)
        except Exception as exc:
            self._note(False, None, exc)
            raise
        self._note(True, value)
        return value

    def fetch(self, agent: Any, request: Any = None) -> Any:
        try:
            response = self._sim.fetch(agent, request)
        except Exception as exc:
            self._note(False, None, exc)
            raise
        self._note(True, {"status": response.status, "body": response.body})
        return response


def run_python(scenario: Scenario) -> PythonRun:
    """Run the scenario in agentsim (its own seed, no invariants), keeping what the comparison
    needs: the steps' action times, alarm snapshots, the trace and the final tables."""
    sim = Simulation(
        seed=scenario.seed, faults=scenario.faults, budget=budget_for(scenario), sdk=scenario.sdk
    )
    snapshots: list[dict[str, Any]] = []
    timings: list[tuple[int, int]] = []
    replies: list[dict[str, Any]] = []
    draws = record_draws(sim)
    try:
        steps = StepRunner(sim, scenario)
        answers = _Replies(sim, replies)
        steps.sim = answers  # type: ignore[assignment]  # a proxy: it notes the replies
        refs = {spec.alias: AgentRef(spec.cls, spec.alias) for spec in scenario.agents}
        for index, step in enumerate(scenario.steps):
            begin = sim.now_ms
            answers.step_number, answers.alias = index + 1, str(getattr(step, "agent", ""))
            answers.waits = not isinstance(step, CallStep) or step.wait
            steps.run(step)
            timings.append((begin, sim.now_ms))
            if answers.waits:
                # The real side reads the alarms after running to the step's end, work the step
                # left due at that instant included, as the next step's `run_until` would. A
                # call sent without waiting is read before anything it does (scenarios/diff/
                # plan.py), as the port's step has only sent it.
                sim.run_until(sim.now_ms)
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
        answers.outcomes()
        end_ms = sim.now_ms
        records = _records(sim.trace.records)
        evictions = [
            (r.t_ms, r.seq, r.agent, str(r.fields.get("reason")))
            for r in sim.trace.records
            if r.event == "incarnation:end"
        ]
        # Every agent's tables, sub-agents' included (`parent/r1`), as the real side reads them.
        tables = {
            alias_of(path): record.storage.snapshot()
            for path, record in sim.platform.records.items()
        }
    finally:
        sim.close()
    return PythonRun(records + snapshots + replies, tables, end_ms, evictions, timings, draws)
