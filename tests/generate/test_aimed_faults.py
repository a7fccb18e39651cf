"""Storage faults aimed at a verb and a table: what `scenarios.generate.faults` draws where a
generated scenario has no base run to aim them at."""

from __future__ import annotations

import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenarios.generate.faults import TABLES, statement_patterns
from scenarios.generate.strategy import AREAS, scenarios
from scenarios.generate.surface import FULL
from scenarios.language.loader import parse_scenario
from scenarios.run.runner import run_scenario

DRAWS = settings(
    max_examples=80,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
NO_AIMED = type(FULL)(aimed_storage=False)


def _aimed(generated) -> list[dict]:
    return [dict(s.args) for s in generated.steps if s.action == "arm_storage_fault"]


def test_a_pattern_names_its_verb_and_table_and_no_longer_table() -> None:
    patterns = dict(statement_patterns(("fibers",)))
    cases = {
        r"^UPDATE cf_agents_fibers\b": (
            "UPDATE cf_agents_fibers SET status = 'running' WHERE fiber_id = ?",
            "UPDATE cf_agents_fibers_old SET x = 1",
        ),
        r"^INSERT (OR [A-Z]+ )?INTO cf_agents_runs\b": (
            "INSERT OR REPLACE INTO cf_agents_runs (id) VALUES (?)",
            "INSERT INTO cf_agents_runs_archive (id) VALUES (?)",
        ),
        r"^SELECT .*FROM cf_agents_state\b": (
            "SELECT id, state FROM cf_agents_state WHERE id = ?",
            "SELECT * FROM cf_agents_statements",
        ),
        r"^DELETE FROM cf_agents_mcp_servers\b": (
            "DELETE FROM cf_agents_mcp_servers WHERE name = ?",
            "SELECT * FROM cf_agents_mcp_servers",
        ),
    }
    for pattern, (hit, miss) in cases.items():
        assert pattern in patterns
        assert re2.search(pattern, hit) and not re2.search(pattern, miss)
    assert patterns[r"^SELECT .*FROM cf_agents_state\b"] is False  # a read: no after-commit crash
    assert patterns[r"^UPDATE cf_agents_fibers\b"] is True


def test_only_the_tables_of_the_areas_drawn_are_named() -> None:
    named = {p for p, _ in statement_patterns(("schedules",))}
    assert any("cf_agents_jobs" in p for p in named)  # every agent's alarm rows
    assert not any("cf_agent_tool_runs" in p for p in named)
    tools = {p for p, _ in statement_patterns(("tools",))}
    assert all(any(table in p for p in tools) for table in TABLES["tools"])


@given(generated=scenarios(st, tuple(AREAS)))
@DRAWS
def test_an_aimed_fault_names_an_agent_of_its_scenario_and_a_table_of_its_areas(
    generated,
) -> None:
    targets = (
        set(generated.agents)
        | {
            f"{alias}/{run['run_id']}"
            for alias, agent in generated.agents.items()
            for run in agent.get("runs", ())
        }
        | {
            f"{alias}/{name}"
            for alias, agent in generated.agents.items()
            for name in agent.get("sub_agents", ())
        }
    )
    patterns = dict(statement_patterns(generated.areas))
    for fault in _aimed(generated):
        assert fault["agent"] in targets
        assert fault["match"] in patterns
        assert fault["kind"] != "crash-after-commit" or patterns[fault["match"]]
    parse_scenario(generated.text(), "generated.yaml")


@given(generated=scenarios(st, tuple(AREAS), surface=NO_AIMED))
@DRAWS
def test_a_surface_without_aimed_faults_draws_none(generated) -> None:
    assert _aimed(generated) == []


FIBERS_RUN = """
name: aimed
description: a fault aimed at one statement shape of a plain fibers run
seed: 1
agents:
  worker:
    workload: fibers
    start: call
    keep_alive_interval: 1s
    fibers: [{name: f1, steps: 2, step: 1s, managed: true}, {name: f2, steps: 1, step: 1s}]
steps:
  - arm_storage_fault: {agent: worker, kind: error, match: 'PATTERN'}
  - call: {agent: worker, method: status}
  - call: {agent: worker, method: start, wait: false}
  - run_for: 10s
  - call: {agent: worker, method: forget, wait: false}
  - run_for: 10s
"""


def test_each_fiber_write_pattern_fails_a_statement_the_runtime_makes() -> None:
    """The patterns name statements as the runtime writes them: armed at the start of a plain
    fibers run, each write pattern of the fibers' own tables fails one of its statements."""
    for pattern, write in statement_patterns(("fibers",)):
        if not write or not any(t in pattern for t in ("cf_agents_fibers", "cf_agents_runs")):
            continue
        text = FIBERS_RUN.replace("PATTERN", pattern)
        result = run_scenario(parse_scenario(text, "aimed.yaml"))
        failed = [
            r.fields.get("statement", "")
            for r in result.trace.records
            if r.event == "fault:storage_error"
        ]
        assert len(failed) == 1, pattern
        assert re2.search(pattern, failed[0]), (pattern, failed[0])
