"""Where storage faults can land: the statements a base run actually executed, as sites.

The hunt aims its storage faults at what the run really does instead of at "the next
statement, whatever it is" (which is almost always the runtime's housekeeping). A base run
recorded with `run_scenario(..., record_statements=True)` lists every statement agent code ran;
`statement_sites` turns each into a `StatementSite`: which agent (as a scenario names it, a
sub-agent as `alias/name`), which shape (`UPDATE cf_agents_runs`, with the anchored `match`
pattern a reproducer writes), and how to reach exactly that occurrence without moving the
run's timeline: an `arm_storage_fault` step put just before the base step during which it ran,
skipping the `skip` earlier statements of the same shape on the same agent in that step.
`site_groups` groups sites by (agent, kind, table), so that a draw over groups hits user and
runtime writes as often as housekeeping reads.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from scenarios.parse_agents import NAME_PATTERN
from scenarios.runner import ExecutedStatement
from scenarios.schema import Scenario
from sim.sqlite import is_write, shape_pattern, statement_shape

__all__ = ["StatementSite", "site_groups", "statement_sites", "target_of"]


@dataclass(frozen=True)
class StatementSite:
    """One statement of the base run, and how a step reaches exactly it."""

    target: str
    """The agent as a scenario step names it: `alias`, or `alias/name/...` for a sub-agent."""
    agent: str
    """Its path in the trace."""
    kind: str
    table: str
    pattern: str
    """The anchored regex of its shape (`match:`)."""
    step: int
    """The 0-based base step during which it ran (the number of steps: the liveness phase)."""
    skip: int
    """Earlier statements of the same target and pattern in that step."""
    t_ms: int
    turn: int
    write: bool
    statement: str

    @property
    def shape(self) -> str:
        return f"{self.kind} {self.table}".strip()


def target_of(scenario: Scenario, path: str) -> str | None:
    """`Cls/alias` -> `alias`; `Cls/alias/Child/r1` -> `alias/r1`; None when the path is not
    one of the scenario's agents or a sub-agent name cannot be written in a step."""
    parts = path.split("/")
    if len(parts) < 2 or len(parts) % 2:
        return None
    root = "/".join(parts[:2])
    alias = next((spec.alias for spec in scenario.agents if spec.path == root), None)
    if alias is None:
        return None
    names = parts[3::2]
    if not all(NAME_PATTERN.fullmatch(name) for name in names):
        return None
    return "/".join((alias, *names))


def statement_sites(
    scenario: Scenario, statements: Sequence[ExecutedStatement]
) -> list[StatementSite]:
    """Every statement of the base run that a step can name, in the order they ran."""
    earlier: dict[tuple[str, int], list[str]] = defaultdict(list)
    counts: dict[tuple[str, int], dict[str, int]] = defaultdict(dict)
    out = []
    for executed in statements:
        target = target_of(scenario, executed.agent)
        if target is None:
            continue
        kind, table = statement_shape(executed.statement)
        pattern = shape_pattern(executed.statement)
        text = " ".join(executed.statement.split())
        key = (target, executed.step)
        matched = counts[key]
        if pattern not in matched:
            # A pattern seen for the first time counts what it matches among earlier ones.
            regex = re.compile(pattern)
            matched[pattern] = sum(1 for before in earlier[key] if regex.search(before))
        out.append(
            StatementSite(
                target=target,
                agent=executed.agent,
                kind=kind,
                table=table,
                pattern=pattern,
                step=executed.step,
                skip=matched[pattern],
                t_ms=executed.t_ms,
                turn=executed.turn,
                write=is_write(executed.statement),
                statement=executed.statement,
            )
        )
        for known in matched:
            if re.search(known, text):
                matched[known] += 1
        earlier[key].append(text)
    return out


def site_groups(sites: Sequence[StatementSite]) -> list[list[StatementSite]]:
    """Sites grouped by (agent, kind, table), groups in order of first appearance."""
    groups: dict[tuple[str, str, str], list[StatementSite]] = {}
    for site in sites:
        groups.setdefault((site.target, site.kind, site.table), []).append(site)
    return list(groups.values())
