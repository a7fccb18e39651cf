"""Checking a scenario's `expect` list against the trace and the final storage of a run.

Each expectation that does not hold becomes one sentence saying what was expected and what was
found, with enough context (record times, near misses) to start debugging from the sentence
alone; `invariants` give one sentence per violation the named checkers found. Values are
compared as JSON: `true` is not `1`, `1` is `1.0`. Hook counts, record order and client
timelines are in `scenarios.run.expect_timeline`; like the checkers, they read only the trace.
Queries and states are read with `Simulation.read`, which refuses anything but a read, so no
expectation can change what a later one sees; one naming a sub-agent (`parent/r1`) finds it
among those its parent created, as an `evict` step does. `contains:` matches fields as subsets
(`scenarios.run.records.contains`).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from agents_core.state_store import STATE_ROW_ID
from scenarios.language.fields import show
from scenarios.language.schema import (
    CallStep,
    Count,
    EventExpectation,
    Expectation,
    InvariantsExpectation,
    ProbesExpectation,
    QueryExpectation,
    Scenario,
    StateExpectation,
    StorageExpectation,
)
from scenarios.run.expect_timeline import TIMELINE_CHECKS
from scenarios.run.failure import EXPECTATION, Failure, RaisedError
from scenarios.run.records import (
    expected_text,
    fields_match,
    json_equal,
    name_matches,
    records_text,
)
from scenarios.run.steps import find_sub_agent
from sim import AgentRef, Simulation, TraceRecord, format_sim_time
from sim.checkers import Violation, check, context_from
from sim.probes import ALL_PROBES

__all__ = ["check_expectations", "json_equal", "name_matches", "read_state", "records_text"]


def check_expectations(
    sim: Simulation, scenario: Scenario, calls: Sequence[tuple[CallStep, bool]] = ()
) -> list[Failure]:
    """One failure per expectation that does not hold (per violation, for invariants), in file
    order. Call it after the liveness phase: invariants read the run as it is then. `calls`:
    each call step the run made and whether it returned (what a `per_accepted_call` count is
    relative to)."""
    failures = []
    for expectation in scenario.expect:
        if expectation.sdk is not None and expectation.sdk != scenario.sdk:
            continue
        expectation, note = _for_calls(expectation, calls)
        error: RaisedError | None = None
        try:
            timeline = TIMELINE_CHECKS.get(type(expectation))
            if isinstance(expectation, InvariantsExpectation):
                violations = _check_invariants(sim, scenario, expectation)
                failures += [
                    Failure(
                        EXPECTATION,
                        scenario.path,
                        f"{violation}{note}",
                        expectation.line,
                        expectation.label,
                        expectation.index,
                        invariant=violation.invariant,
                    )
                    for violation in violations
                ]
                continue
            elif isinstance(expectation, ProbesExpectation):
                problems = _check_probes(sim, expectation)
            elif timeline is not None:
                problems = [timeline(sim, scenario, expectation)]
            else:
                problems = [_check(sim, scenario, expectation)]
        except Exception as exc:  # a broken expectation is reported with the others
            problems = [f"could not be checked: {type(exc).__name__}: {exc}"]
            error = RaisedError.of(exc)
        failures += [
            Failure(
                EXPECTATION,
                scenario.path,
                f"{problem}{note}",
                expectation.line,
                expectation.label,
                expectation.index,
                error=error,
            )
            for problem in problems
            if problem
        ]
    return failures


def _for_calls(
    expectation: Expectation, calls: Sequence[tuple[CallStep, bool]]
) -> tuple[Expectation, str]:
    """`expectation` with a `per_accepted_call` count made absolute by the run's calls, and
    the note saying how (nothing for any other expectation)."""
    count: Count | None = getattr(expectation, "count", None)
    if count is None or count.per_call is None:
        return expectation, ""
    chosen = [returned for step, returned in calls if count.per_call.selects(step)]
    accepted = sum(chosen)
    refused = len(chosen) - accepted
    absolute = count.for_calls(accepted, refused)
    counted = dataclasses.replace(expectation, count=absolute)  # type: ignore[call-arg]
    return counted, count.per_call_note(accepted, refused)


def _check_invariants(
    sim: Simulation, scenario: Scenario, expectation: InvariantsExpectation
) -> list[Violation]:
    return check(context_from(sim, scenario=scenario.path), expectation.names)


def _check_probes(sim: Simulation, expectation: ProbesExpectation) -> list[str]:
    hits = sim.probes
    missing = [name for name in expectation.names if not hits.get(name)]
    if not missing:
        return []
    reached = ", ".join(f"{name} ({count})" for name, count in hits.items()) or "none"
    return [
        f"probe {name!r} was never reached: the run did not take the rare path it marks "
        f"({ALL_PROBES.get(name, 'a probe of the agents own code')}); probes reached: {reached}"
        for name in missing
    ]


def _check(sim: Simulation, scenario: Scenario, expectation: Expectation) -> str:
    if isinstance(expectation, EventExpectation):
        return _check_event(sim, scenario, expectation)
    if not isinstance(expectation, StorageExpectation):
        raise TypeError(f"unknown expectation {expectation!r}")
    spec = scenario.agent(expectation.agent)
    ref, why = find_sub_agent(
        sim, AgentRef(spec.cls, spec.alias), expectation.child, expectation.child_class
    )
    if ref is None:
        return f"cannot read {expectation.target}: {why}"
    who = expectation.target
    if isinstance(expectation, QueryExpectation):
        try:
            rows = sim.read(ref, expectation.sql, *expectation.params)
        except Exception as exc:
            return f"the query {expectation.sql!r} on {who} failed: {exc}"
        if not json_equal(rows, list(expectation.rows)):
            return (
                f"the query {expectation.sql!r} on {who} returned {show(rows)}, "
                f"expected {show(list(expectation.rows))}"
            )
        return ""
    assert isinstance(expectation, StateExpectation)
    state = read_state(sim, ref)
    if not json_equal(state, expectation.equals):
        return f"the state of {who} is {show(state)}, expected {show(expectation.equals)}"
    return ""


def read_state(sim: Simulation, ref: AgentRef) -> Any:
    """The persisted state as the agent's next incarnation would read it."""
    try:
        rows = sim.read(ref, "SELECT state FROM cf_agents_state WHERE id = ?", STATE_ROW_ID)
    except Exception:  # no state table yet: the agent never ran
        rows = []
    if rows:
        return json.loads(rows[0]["state"])
    return copy.deepcopy(ref.cls.initial_state)


def _check_event(sim: Simulation, scenario: Scenario, expectation: EventExpectation) -> str:
    path = scenario.agent(expectation.agent).path if expectation.agent is not None else None
    named = [
        record
        for record in sim.trace
        if name_matches(record.event, expectation.event) and (path is None or record.agent == path)
    ]
    found = [record for record in named if _matches(record, expectation)]
    if expectation.count.allows(len(found)):
        return ""
    return f"{_describe(expectation, path)}; found {len(found)}{_context(found, named)}"


def _matches(record: TraceRecord, expectation: EventExpectation) -> bool:
    if expectation.incarnation is not None and record.inc != expectation.incarnation:
        return False
    if expectation.between_ms is not None:
        low, high = expectation.between_ms
        if not low <= record.t_ms <= high:
            return False
    return fields_match(record.fields, expectation.fields, expectation.contains)


def _describe(expectation: EventExpectation, path: str | None) -> str:
    count = expectation.count
    amount = count.describe()
    noun = "record" if amount.endswith(" 1") else "records"
    text = f"expected {amount} {expectation.event!r} {noun}"
    if path is not None:
        text += f" of {expectation.agent} ({path})"
    if expectation.incarnation is not None:
        text += f" in incarnation {expectation.incarnation}"
    if expectation.fields:
        pairs = ", ".join(
            f"{key}={expected_text(expectation.event, key, value)}"
            for key, value in expectation.fields.items()
        )
        text += f" with {pairs}"
    if expectation.contains:
        pairs = ", ".join(f"{key}={show(value)}" for key, value in expectation.contains.items())
        text += f" {'and' if expectation.fields else 'with'} {pairs} (contained)"
    if expectation.between_ms is not None:
        low, high = expectation.between_ms
        text += f" between {format_sim_time(low)} and {format_sim_time(high)}"
    return text


def _context(found: Sequence[TraceRecord], named: Sequence[TraceRecord]) -> str:
    """Where the matches were, or, when none matched, the records that nearly did."""
    if found:
        return f": {records_text(found)}"
    if named:
        return f"; records with that name: {records_text(named)}"
    return "; no record has that name"
