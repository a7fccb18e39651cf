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

from collections.abc import Sequence

from scenarios.hunt.fault_draws import StatementSite, site_groups, sites_of
from scenarios.language.parse_agents import NAME_PATTERN
from scenarios.language.schema import Scenario
from scenarios.run.runner import ExecutedStatement

__all__ = ["StatementSite", "site_groups", "statement_sites", "target_of"]


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
    """Every statement of the base run that a step can name, in the order they ran (the
    counting is `fault_draws.sites_of`, shared with the Hypothesis API)."""
    return sites_of(statements, lambda path: target_of(scenario, path))
