"""The scenario language's newer pieces: a call's `returns:`, `query` and `state` on a
sub-agent, the `timing` matcher, and `contains:` (a subset match on nested fields). Each holds
where it should, fails with a sentence saying what it found, and refuses a mistake at load
time."""

from __future__ import annotations

import pytest

from scenarios import InvalidScenario, parse_scenario, run_scenario
from scenarios.run.records import contains
from scenarios.run.runner import ScenarioResult
from tests.scenarios.helpers import BASE, TOOLS, edit


def run(text: str, path: str = "x.yaml") -> ScenarioResult:
    return run_scenario(parse_scenario(text, path))


def problem(text: str) -> str:
    with pytest.raises(InvalidScenario) as caught:
        parse_scenario(text, "x.yaml")
    return str(caught.value)


# -- returns --------------------------------------------------------------------------------------
def test_a_call_returning_what_it_should_passes() -> None:
    """`returns:` is compared as JSON with what the RPC returned."""
    text = edit(
        "  - call: {agent: counter, method: increment}\n",
        "  - call: {agent: counter, method: increment, returns: 1}\n",
    )
    assert run(text).passed


def test_a_call_returning_something_else_fails_naming_both_values() -> None:
    """The sentence shows the call, what it returned and what was expected."""
    text = edit(
        "  - call: {agent: counter, method: increment}\n",
        "  - call: {agent: counter, method: increment, returns: 2}\n",
    )
    assert run(text).failures == (
        "x.yaml:9: step 1 (call): counter.increment() returned 1, expected 2",
    )


def test_returns_compares_as_json_and_null_means_none() -> None:
    """`true` is not `1`; a method returning None needs `returns: null`."""
    text = edit(
        "  - call: {agent: counter, method: increment}\n",
        "  - call: {agent: counter, method: increment, returns: true}\n"
        "  - call: {agent: counter, method: on_connect, args: [x], returns: null}\n",
    )
    assert run(text).failures == (
        "x.yaml:9: step 1 (call): counter.increment() returned 1, expected True",
    )


def test_a_call_left_running_is_judged_on_its_return_after_the_run() -> None:
    """With `wait: false`, the value is checked once the call ends."""
    text = edit(
        "  - call: {agent: counter, method: increment}\n",
        "  - call: {agent: counter, method: work, args: [2], wait: false, returns: 5}\n",
    ).replace("count: 1}", "count: 2}")
    assert run(text).failures == (
        "x.yaml:9: step 1 (call): counter.work(2) returned 2, expected 5",
    )


def test_returns_and_expect_error_together_are_refused() -> None:
    text = edit(
        "  - call: {agent: counter, method: increment}\n",
        "  - call: {agent: counter, method: increment, returns: 1, expect_error: true}\n",
    )
    assert "returns" in problem(text) and "expect_error" in problem(text)


# -- query and state on a sub-agent ---------------------------------------------------------------
def tools(expect: str) -> str:
    text = TOOLS.read_text()
    return text[: text.index("expect:\n")] + "expect:\n" + expect


def test_query_and_state_read_a_sub_agent_s_storage() -> None:
    """`agent: parent/import` and `run_id: lookup` read the children the parent created."""
    result = run(
        tools(
            "  - query:\n"
            "      agent: parent/import\n"
            "      sql: SELECT run_id, status FROM child_runs\n"
            "      rows: [{run_id: import, status: completed}]\n"
            "  - query:\n"
            "      agent: parent\n"
            "      run_id: lookup\n"
            "      child: scripted\n"
            "      sql: SELECT run_id, status FROM child_runs\n"
            "      rows: [{run_id: lookup, status: completed}]\n"
            "  - state: {agent: parent/lookup, equals: null}\n"
        )
    )
    assert result.passed, result.failures


def test_a_wrong_sub_agent_query_names_the_sub_agent() -> None:
    result = run(
        tools(
            "  - query:\n"
            "      agent: parent/import\n"
            "      sql: SELECT status FROM child_runs\n"
            "      rows: [{status: running}]\n"
        )
    )
    (failure,) = result.failures
    assert failure.startswith(
        "x.yaml:36: expect 1 (query): the query 'SELECT status FROM child_runs' on parent/import "
        "returned [{'status': 'completed'}], expected [{'status': 'running'}]"
    )


def test_a_sub_agent_never_created_is_a_failure_naming_those_that_were() -> None:
    """A nested name below a child that has none: the sentence lists the sub-agents there."""
    result = run(tools("  - state: {agent: parent/import/deeper, equals: {}}\n"))
    (failure,) = result.failures
    assert failure == (
        "x.yaml:36: expect 1 (state): cannot read parent/import/deeper: "
        "ToolsWorkload/parent/ScriptedToolChild/import has no sub-agent named 'deeper' at "
        "00:17:20.000 (its sub-agents: [])"
    )


def test_an_unknown_run_of_a_tools_workload_is_refused_at_load_time() -> None:
    text = tools("  - state: {agent: parent/nosuch, equals: {}}\n")
    assert "agent 'parent' has no run 'nosuch'" in problem(text)


# -- timing ---------------------------------------------------------------------------------------
def counter_timing(expect: str) -> str:
    return edit("expect:\n", "expect:\n" + expect)


def test_timing_within_and_at_least_hold() -> None:
    """The base run: a call at 0, an idle eviction 70-140 s later, then an explicit one."""
    text = counter_timing(
        "  - timing:\n"
        "      first: {event: rpc, agent: counter}\n"
        "      then: {event: incarnation:end, agent: counter}\n"
        "      within: 140s\n"
        "      at_least: 70s\n"
    )
    assert run(text).passed


def test_timing_names_each_record_that_came_too_late() -> None:
    text = counter_timing(
        "  - timing:\n"
        "      first: {event: rpc, agent: counter}\n"
        "      then: {event: incarnation:end, agent: counter, fields: {reason: idle}}\n"
        "      within: 10s\n"
    )
    (failure,) = run(text).failures
    assert failure == (
        "x.yaml:13: expect 1 (timing): expected each record 'rpc' of counter to be followed by "
        "'incarnation:end' of counter with reason='idle' within 10s; of 1, 1 were not: "
        "#2 at 00:00:00.000 was followed after 1m52s, #6 at 00:01:52.937"
    )


def test_timing_without_then_checks_consecutive_gaps() -> None:
    """Two increments 5 s apart keep `at_least: 5s` between consecutive `rpc` records, and
    break `at_least: 10s`."""
    twice = edit(
        "  - run_for: 3m\n",
        "  - at: 5s\n    call: {agent: counter, method: increment}\n  - run_for: 3m\n",
    ).replace("count: 1}", "count: 2}")
    gap = "expect:\n  - timing: {first: {event: rpc, agent: counter}, at_least: %s}\n"
    assert run(edit("expect:\n", gap % "5s", twice)).passed
    (failure,) = run(edit("expect:\n", gap % "10s", twice)).failures
    assert "to be followed by the next such record no sooner than 10s; of 2, 1 were not" in (
        failure
    )


def test_timing_without_a_first_record_fails() -> None:
    text = counter_timing("  - timing: {first: {event: alarm:fired}, within: 1s}\n")
    assert run(text).failures == (
        "x.yaml:13: expect 1 (timing): expected records 'alarm:fired'; no record matches it",
    )


def test_timing_needs_a_bound() -> None:
    text = counter_timing("  - timing: {first: {event: rpc}, then: {event: rpc}}\n")
    assert "neither within: nor at_least:" in problem(text)


# -- contains -------------------------------------------------------------------------------------
def test_contains_is_a_subset_match_at_any_depth() -> None:
    assert contains(
        {"a": {"b": 1, "c": [1, {"d": 2, "e": 3}]}, "z": 0}, {"a": {"c": [1, {"d": 2}]}}
    )
    assert not contains({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}})
    assert not contains({"a": [1, 2]}, {"a": [1]})
    assert not contains({"a": 1}, {"a": True})
    assert not contains([1], {"a": 1})


def test_an_event_matcher_with_contains_matches_nested_fields() -> None:
    """A frame's nested event is matched by the keys given alone; `fields:` would need all."""
    finished = "{frame: {type: agent-tool-event, event: {kind: finished, runId: lookup}}}"
    text = tools(
        "  - event: connection:frame\n"
        "    agent: parent\n"
        f"    contains: {finished}\n"
        "    count: {exactly: 2}\n"
    )
    assert run(text).passed, run(text).failures
    strict = text.replace("contains:", "fields:")
    (failure,) = run(strict).failures
    assert "expected exactly 2 'connection:frame' records of parent" in failure
    assert "; found 0;" in failure


def test_contains_in_order_matchers() -> None:
    text = tools(
        "  - order:\n"
        "      - {event: connection:frame, contains: {frame: {event: {kind: started}}}}\n"
        "      - {event: connection:frame, contains: {frame: {event: {kind: finished}}}}\n"
    )
    assert run(text).passed


def test_contains_refuses_the_reserved_keys() -> None:
    text = counter_timing("  - {event: rpc, contains: {agent: x}}\n")
    assert "contains: 'agent' is not a field of the record" in problem(text)


def test_base_scenario_is_untouched() -> None:
    """The helpers' base still runs as the other tests expect (a guard for the edits above)."""
    assert run(BASE).passed
