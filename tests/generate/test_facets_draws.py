"""The `facets` area: every drawn agent keeps two or three sub-agents, its own evictions of
one sub-agent alone are marked as faults, and a surface that opens no sub-agents leaves the
area out."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scenarios.generate import FULL, scenarios
from scenarios.generate.facets import FACET_NAMES, OWN_WORK, SETS_TO_WORK
from scenarios.generate.faults import FAULT_NOTE
from scenarios.language.loader import parse_scenario

CLOSED = FULL.__class__(closed=frozenset({"schedules.open", "fibers.open"}))


@given(generated=scenarios(st, ("facets",)))
@settings(max_examples=40, deadline=None, database=None)
def test_a_facets_agent_keeps_sub_agents_and_evicts_them_alone_as_faults(generated) -> None:
    """Each agent keeps one of the facet lists; an eviction of a sub-agent is a fault step."""
    scenario = parse_scenario(generated.text(), "generated.yaml")
    for agent in generated.agents.values():
        assert tuple(agent["sub_agents"]) in FACET_NAMES
        assert agent["workload"] in ("schedules", "fibers")
    for number, step in enumerate(generated.steps, start=1):
        if step.action == "evict":  # the area's own, or the drawn faults'
            assert number in generated.fault_numbers and step.note == FAULT_NOTE
    assert len(scenario.steps) == len(generated.steps)


@given(generated=scenarios(st, ("facets",)))
@settings(max_examples=40, deadline=None, database=None)
def test_a_sub_agent_holds_keep_alive_only_under_its_parent_s_names(generated) -> None:
    """`hold_in` names one of its agent's sub-agents."""
    for step in generated.steps:
        if step.action == "call" and step.args["method"] == "hold_in":
            agent = generated.agents[step.args["agent"]]
            assert agent["workload"] == "fibers"
            assert step.args["args"][0] in agent["sub_agents"]


@given(generated=scenarios(st, ("facets", "chat"), surface=CLOSED))
@settings(max_examples=10, deadline=None, database=None)
def test_a_surface_without_sub_agents_leaves_the_area_out(generated) -> None:
    assert generated.areas == ("chat",)


def test_the_area_alone_on_a_surface_without_sub_agents_is_refused() -> None:
    with pytest.raises(ValueError, match="opens no sub-agents"):
        scenarios(st, ("facets",), surface=CLOSED)


@given(generated=scenarios(st, ("facets",)))
@settings(max_examples=40, deadline=None, database=None)
def test_a_hub_parent_gets_no_work_of_its_own(generated) -> None:
    """A hub leaves its own work to a call (`setup: call`, `start: call`) and no step makes
    one: its sub-agents' work is all it holds."""
    hubs = {u.alias for u in generated.uses if u.pair == "sub_agent the parent's only work"}
    for alias in hubs:
        agent = generated.agents[alias]
        field, value = SETS_TO_WORK[agent["workload"]]
        assert agent[field] == value
        own = OWN_WORK[agent["workload"]]
        assert not [
            s
            for s in generated.steps
            if s.action == "call" and s.args["agent"] == alias and s.args["method"] in own
        ]
