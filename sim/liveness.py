"""What kept a run busy: the sentence a liveness failure prints.

A liveness phase (`Simulation.quiesce`) that does not go quiet within its bound is a failure
unless the scenario says a busy end is intended (`liveness: {settles: false}`). "It did not
settle" is useless on its own, so `busy_report` reads the trace of the phase and says which
agents were active and what did it: how often each alarm fired (and how it ended), which
schedule callbacks ran, which fibers started or were recovered, which keepAlive leases were
never given back, with the average gap between repeats. It reads records only, like a checker.
`durable_deadline` is the one thing read from storage: the latest deadline the runtime promised
to act on (a detached run's budget, a failing fiber's maximum age), to which a busy liveness
phase is extended before it is judged.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agents_core.options import resolve_options
from sim.trace import TraceRecord, format_sim_time

if TYPE_CHECKING:
    from sim.simulation import Simulation

__all__ = ["DEADLINE_EXTENSION_MAX_MS", "busy_report", "durable_deadline", "format_gap"]

TOP_AGENTS = 3
"""How many of the busiest agents the sentence names."""

DEADLINE_EXTENSION_MAX_MS = 48 * 3_600_000
"""How far past its start a liveness phase may be extended to reach a durable deadline."""

_ALARM_ENDS = {
    "alarm:killed": "killed by the 15-minute limit",
    "alarm:failed": "failed",
    "alarm:interrupted": "interrupted",
    "alarm:given_up": "given up",
}


def format_gap(ms: int) -> str:
    """90_500 -> '1m30.5s'; a short duration for sentences."""
    if ms < 1_000:
        return f"{ms}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:g}s"
    minutes, rest = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text + (f"{rest}s" if rest else "")


@dataclass
class _Agent:
    records: int = 0
    events: Counter[str] = field(default_factory=Counter)
    alarms: list[int] = field(default_factory=list)
    alarm_ends: Counter[str] = field(default_factory=Counter)
    schedules: Counter[str] = field(default_factory=Counter)
    fibers: Counter[str] = field(default_factory=Counter)
    recovered: Counter[str] = field(default_factory=Counter)


def busy_report(
    records: Sequence[TraceRecord], since_ms: int, end_ms: int, next_due_ms: int | None
) -> str:
    """One paragraph: what the records from `since_ms` on show kept the run busy until
    `end_ms`, and when the next event was due (`next_due_ms`, None if nothing was left)."""
    agents: dict[str, _Agent] = defaultdict(_Agent)
    held: dict[str, dict[int, tuple[str, int]]] = defaultdict(dict)
    for record in records:
        if record.event == "keep_alive:acquire":
            held[f"{record.agent}#{record.inc}"][int(record.get("lease", 0))] = (
                str(record.get("holder")),
                record.t_ms,
            )
        elif record.event == "keep_alive:release":
            held[f"{record.agent}#{record.inc}"].pop(int(record.get("lease", 0)), None)
        elif record.event == "incarnation:end":
            held.pop(f"{record.agent}#{record.inc}", None)
        if record.t_ms < since_ms or not record.agent:
            continue
        agent = agents[record.agent]
        agent.records += 1
        event = record.event
        agent.events[event] += 1
        if event == "alarm:fired":
            agent.alarms.append(record.t_ms)
        elif event in _ALARM_ENDS:
            agent.alarm_ends[_ALARM_ENDS[event]] += 1
        elif event == "schedule:execute":
            agent.schedules[str(record.get("callback"))] += 1
        elif event == "fiber:run:started":
            agent.fibers[str(record.get("fiberName"))] += 1
        elif event == "fiber:recovery:detected":
            agent.recovered[str(record.get("fiberName"))] += 1
    window = f"{format_sim_time(since_ms)} to {format_sim_time(end_ms)}"
    due = (
        f"the next event was due at {format_sim_time(next_due_ms)}"
        if next_due_ms is not None
        else "nothing was left to run"
    )
    busiest = sorted(agents.items(), key=lambda item: (-item[1].records, item[0]))[:TOP_AGENTS]
    parts = [_describe(path, agent) for path, agent in busiest]
    open_leases = _open_leases(held)
    if not parts and not open_leases:
        return (
            f"the liveness phase ({window}) did not go quiet and wrote no record: {due} (a "
            f"timer or sleep far in the future keeps the run from settling)"
        )
    text = f"the liveness phase ({window}) did not go quiet ({due}); what kept it busy: "
    text += "; ".join(parts) if parts else "no agent wrote a record"
    if open_leases:
        text += f"; keepAlive leases never released: {open_leases}"
    return text


def _describe(path: str, agent: _Agent) -> str:
    bits = []
    alarms = agent.alarms
    if alarms:
        phrase = f"its alarm fired {_times(len(alarms))}"
        if len(alarms) > 1:
            gap = (alarms[-1] - alarms[0]) // (len(alarms) - 1)
            phrase += f" (every {format_gap(gap)} on average"
            ends = ", ".join(f"{how} {_times(n)}" for how, n in sorted(agent.alarm_ends.items()))
            phrase += f"; {ends})" if ends else ")"
        elif agent.alarm_ends:
            phrase += " (" + ", ".join(sorted(agent.alarm_ends)) + ")"
        bits.append(phrase)
    for what, counts in (
        ("schedule callback", agent.schedules),
        ("fiber", agent.fibers),
        ("recovery of fiber", agent.recovered),
    ):
        for name, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]:
            verb = "started" if what == "fiber" else "ran"
            bits.append(f"{what} {name!r} {verb} {_times(count)}")
    if not bits:
        common = sorted(agent.events.items(), key=lambda kv: (-kv[1], kv[0]))[:4]
        bits.append("its records: " + ", ".join(f"{event} x{n}" for event, n in common))
    return f"{path} ({agent.records} records): " + ", ".join(bits)


def _open_leases(held: dict[str, dict[int, tuple[str, int]]]) -> str:
    out = []
    for where in sorted(held):
        for lease, (holder, since) in sorted(held[where].items()):
            out.append(f"{where} lease {lease} ({holder}) since {format_sim_time(since)}")
    return ", ".join(out[:5]) + (f" and {len(out) - 5} more" if len(out) > 5 else "")


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def durable_deadline(sim: Simulation, recent_ms: int = 0) -> int | None:
    """The latest deadline the runtime has durably promised to act on and has not reached yet,
    or reached less than `recent_ms` ago, or None: a detached agent-tool run's budget
    (`detached_max_budget_at`: until then the backbone keeps watching a silent child, as the
    seed says), or a failing fiber row's maximum age (until then recovery retries it with
    backoff). A liveness phase that is still busy only because of such a promise is extended to
    it rather than failed early. A deadline just passed counts too, whatever its run's delivery
    columns say now: the runtime acts on it at its next tick (the backbone's is up to 120 s
    away), and its incarnations then wind down, which a phase that ends right then would
    otherwise call a run that never settles."""
    now = sim.now_ms
    latest: int | None = None
    for record in sim.platform.records.values():
        storage = record.storage
        tables = set(storage.tables())
        found: list[int] = []
        if "cf_agent_tool_runs" in tables:
            rows = storage.query(
                "SELECT MAX(detached_max_budget_at) AS t FROM cf_agent_tool_runs WHERE "
                "detached = 1 AND ((finish_delivered_at IS NULL AND give_up_delivered_at IS NULL)"
                " OR detached_max_budget_at <= ?)",
                (now,),
            )
            if rows and rows[0]["t"] is not None:
                found.append(int(rows[0]["t"]))
        if "cf_agents_runs" in tables:
            max_age = _option(record.cls, "fiber_recovery_max_age_ms")
            rows = storage.query("SELECT MAX(created_at) AS t FROM cf_agents_runs")
            if max_age and max_age > 0 and rows and rows[0]["t"] is not None:
                found.append(int(rows[0]["t"]) + int(max_age))
        for t in found:
            if t > now - recent_ms and (latest is None or t > latest):
                latest = t
    return latest


def _option(cls: type, name: str) -> int | None:
    try:
        return getattr(resolve_options(getattr(cls, "options", None)), name)
    except (ValueError, AttributeError):
        return None
