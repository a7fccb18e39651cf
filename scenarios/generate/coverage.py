"""What the generated runs reached: each probe, and each (API call, option) pair.

A probe is a named mark on a rare path of the runtime or the platform (`sim.probes`); a run's
`probes` say which it reached. An (API call, option) pair is what a drawn agent uses
(`scenarios.generate.parts.Use`: `schedule cron`, `start_fiber idempotency_key`,
`run_agent_tool detached.max_budget`); a run reached it when the record that shows it
(`Use.event`) is in the trace, written by that agent or one of its sub-agents. A pair drawn
but never reached is a path the workload asked for and no run took. `novelty` scores a run by
how rarely the runs so far reached what it reached: the hunt hands it to Hypothesis's
`target()`, which mutates towards the rare.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scenarios.generate.parts import Use
from sim.probes import ALL_PROBES, never_hit
from sim.trace import TraceRecord

__all__ = ["CATALOGUE", "Coverage", "reached_uses"]

CATALOGUE: dict[str, tuple[str, ...]] = {
    "schedules": (
        "schedule delayed",
        "schedule scheduled",
        "schedule cron",
        "schedule interval",
        "schedule idempotent: true",
        "schedule idempotent: false",
        "schedule retry.backoff",
        "schedule recovery_loop",
        "schedule a burst of one callback",
        "option hung_schedule_timeout_seconds",
        "job a dispatch past its hung timeout",
        "schedule re-created",
        "schedule_every another interval",
        "schedule callback raises",
        "schedule callback resets at the memory limit",
        "schedule callback loses the network",
        "option max_alarm_memory_limit_strikes",
        "schedule retry.max_attempts",
        "retry max_attempts",
        "retry base_delay_ms",
        "retry max_delay_ms",
        "cron any",
        "cron value",
        "cron range",
        "cron step",
        "cron range-step",
        "cron list",
        "cron name",
        "cron seconds",
        "cron nickname",
        "keep_alive_while in a schedule callback",
        "run_fiber in a schedule callback",
        "alarm a long handler",
        "on_start awaits (warmup)",
        "setup by a call",
        "cancel_schedule by a call",
        "sub_agent schedules of its own",
        "sub_agent re-created under its name",
        "delete_sub_agent by a call",
        "destroy a sub-agent itself",
        "destroy the agent itself, at once",
        "destroy the agent itself, deferred",
        "list_schedules type",
        "list_schedules any type",
        "list_schedules time_range",
        "on_request GET",
    ),
    "fibers": (
        "run_fiber plain",
        "run_fiber body raises",
        "start_fiber plain",
        "start_fiber body raises",
        "start_fiber idempotency_key",
        "stash after each step",
        "cancel_fiber by a deadline",
        "cancel_fiber by a call",
        "keep_alive interval",
        "on_fiber_recovered resume",
        "on_fiber_recovered drop",
        "on_fiber_recovered throw",
        "fiber_recovery max_age_ms",
        "start again (duplicate)",
        "start_fiber same key again",
        "start_fiber wait_for_completion",
        "add_mcp_server by a call",
        "remove_mcp_server by a call",
        "stash 1000 bytes",
        "stash 100000 bytes",
        "resolve_fiber by a call",
        "delete_fibers every status",
        "delete_fibers completed",
        "delete_fibers aborted",
        "delete_fibers settled_before",
        "delete_fibers limit",
        "start_fiber explicit fiber_id",
        "list_fibers status",
        "list_fibers name",
        "list_fibers limit",
        "keep_alive by hand",
        "keep_alive nested",
        "keep_alive_while raises",
        "keep_alive disposer called twice",
        "sub_agent fibers of its own",
        "delete_sub_agent by a call",
        "sub_agent re-created under its name",
    ),
    "tools": (
        "run_agent_tool awaited",
        "run_agent_tool detached",
        "run_agent_tool think child",
        "run_agent_tool chat child",
        "run_agent_tool input at the preview's limit",
        "run_agent_tool detached.max_budget",
        "run_agent_tool detached.no_progress_budget",
        "run_agent_tool detached.notify",
        "run_agent_tool detached.on_milestones",
        "run_agent_tool max_concurrent_agent_tools",
        "run_agent_tool re-issued run id",
        "on_finish works",
        "on_finish raises",
        "child sleep",
        "child progress",
        "child milestone",
        "child text",
        "child chunks: text",
        "child chunks: reasoning",
        "child chunks: tool",
        "child chunks: data",
        "child chunks: step",
        "child chunks: source",
        "child hang",
        "child finish completed",
        "child finish error",
        "child resume: false",
        "tools parent think host",
        "tools parent chat host",
        "cancel_agent_tool by a call",
        "clear_agent_tool_runs every status",
        "clear_agent_tool_runs completed",
        "clear_agent_tool_runs error",
        "clear_agent_tool_runs aborted",
        "run_agent_tool run id again after a clear",
        "run_agent_tool run ids of mixed case",
        "child calls its work tool",
        "client connect to a tools parent",
        "client reconnect to a tools parent",
    ),
    "facets": (
        "sub_agent schedules of its own",
        "sub_agent fibers of its own",
        "sub_agent re-created under its name",
        "delete_sub_agent by a call",
        "destroy a sub-agent itself",
        "keep_alive by hand in a sub-agent",
        "evict a sub-agent alone",
        "sub_agent the parent's only work",
    ),
    "chat": (
        "chat host think",
        "chat host chat",
        "model own reply in chunks",
        "model the scenario's, in chunks",
        "save_messages a turn",
        "save_messages turns queued",
        "client connect",
        "client reconnect",
        "client disconnect",
    ),
}
"""Every (API call, option) pair the generator can draw, by area (a test keeps it complete)."""


def reached_uses(uses: Iterable[Use], trace: Iterable[TraceRecord]) -> set[str]:
    """The pairs of `uses` whose record the trace holds, from their agent or its sub-agents."""
    seen: dict[str, set[str]] = {}
    for record in trace:
        seen.setdefault(record.event, set()).update(record.agent.split("/"))
    return {use.pair for use in uses if use.alias in seen.get(use.event, ())}


@dataclass
class Coverage:
    """Runs that reached each probe and each pair, and the pairs the draws used."""

    areas: tuple[str, ...]
    runs: int = 0
    probes: dict[str, int] = field(default_factory=dict)
    pairs: dict[str, int] = field(default_factory=dict)
    drawn: dict[str, int] = field(default_factory=dict)

    def novelty(self, probes: Iterable[str], pairs: Iterable[str]) -> float:
        """How rarely the runs so far reached what a run reached (higher: rarer)."""
        score = sum(1.0 / (1 + self.probes.get(name, 0)) for name in probes)
        return score + sum(1.0 / (1 + self.pairs.get(pair, 0)) for pair in pairs)

    def add(self, probes: Mapping[str, int], uses: Iterable[Use], reached: Iterable[str]) -> None:
        self.runs += 1
        for name in probes:
            self.probes[name] = self.probes.get(name, 0) + 1
        for pair in sorted({use.pair for use in uses}):
            self.drawn[pair] = self.drawn.get(pair, 0) + 1
        for pair in reached:
            self.pairs[pair] = self.pairs.get(pair, 0) + 1

    def catalogue(self) -> list[str]:
        return [pair for area in self.areas for pair in CATALOGUE.get(area, ())]

    def unreached_probes(self) -> list[str]:
        return never_hit(self.probes, ALL_PROBES)

    def unreached_pairs(self) -> list[str]:
        """Pairs of the areas' catalogue no run reached (drawn or not), in catalogue order."""
        return [pair for pair in self.catalogue() if pair not in self.pairs]

    def report(self) -> list[str]:
        """The coverage lines of the report: reached counts, then what was never reached."""
        known = [name for name in self.probes if name in ALL_PROBES]
        pairs = self.catalogue()
        reached = [pair for pair in pairs if pair in self.pairs]
        lines = [
            f"probes: {len(known)} of {len(ALL_PROBES)} reached in {self.runs} runs",
            f"API/option pairs: {len(reached)} of {len(pairs)} reached in {self.runs} runs",
        ]
        missing = self.unreached_probes()
        lines.append(f"probes never reached ({len(missing)}): {', '.join(missing) or 'none'}")
        never = self.unreached_pairs()
        drawn = [pair for pair in never if pair in self.drawn]
        shown = [
            f"{pair} (drawn {self.drawn[pair]}x)" if pair in self.drawn else pair for pair in never
        ]
        lines.append(
            f"API/option pairs never reached ({len(never)}, {len(drawn)} of them drawn): "
            f"{', '.join(shown) or 'none'}"
        )
        return lines
