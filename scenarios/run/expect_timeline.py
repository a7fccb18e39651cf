"""Checking the expectations about what happened when: hook counts, record order, how far
apart records are in sim time, and what a client received and what its reducer shows.

All of them read only the trace. A client's frames are the `connection:frame` records of the
connections it opened (`connection:open {client}`) to its agent, across reconnects, in order;
`reduced` feeds every one of them once, stamped with its sim time, to a fresh
`agents_core.agent_tools.AgentToolEvents` (the client-side reducer) and compares the run it ends
with.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agents_core.agent_tools import AgentToolEvents, parts_text
from scenarios.language.fields import show
from scenarios.language.schema import (
    ClientFramesExpectation,
    ClientRunExpectation,
    Expectation,
    HookExpectation,
    OrderExpectation,
    RecordMatcher,
    Scenario,
    TimingExpectation,
)
from scenarios.run.records import fields_match, json_equal, name_matches, records_text
from sim import Simulation, TraceRecord, format_sim_time
from sim.liveness import format_gap

__all__ = ["TIMELINE_CHECKS", "client_frames", "reduced_run"]


# -- hooks --------------------------------------------------------------------------------------
def _check_hook(sim: Simulation, scenario: Scenario, expectation: HookExpectation) -> str:
    path = scenario.agent(expectation.agent).path if expectation.agent is not None else None
    wanted = {
        key: value
        for key, value in (
            ("runId", expectation.run),
            ("slot", expectation.slot),
            ("status", expectation.status),
        )
        if value is not None
    }
    named = [
        record
        for record in sim.trace
        if record.event == expectation.event and (path is None or record.agent == path)
    ]
    found = [record for record in named if fields_match(record.fields, wanted)]
    if expectation.count.allows(len(found)):
        return ""
    amount = expectation.count.describe()
    text = f"expected {amount} {expectation.hook} call{'' if amount.endswith(' 1') else 's'}"
    if expectation.run is not None:
        text += f" for run {expectation.run}"
    if path is not None:
        text += f" of {expectation.agent} ({path})"
    filters = [f"{key} {wanted[key]!r}" for key in ("slot", "status") if key in wanted]
    if filters:
        text += f" with {' and '.join(filters)}"
    text += f" ({expectation.event} records); found {len(found)}"
    if found:
        return f"{text}: {records_text(found)}"
    if named:
        return f"{text}; {expectation.event} records: {records_text(named)}"
    return f"{text}; the hook never ran"


# -- order --------------------------------------------------------------------------------------
def _matches(scenario: Scenario, matcher: RecordMatcher, record: TraceRecord) -> bool:
    if not name_matches(record.event, matcher.event):
        return False
    if matcher.agent is not None and record.agent != scenario.agent(matcher.agent).path:
        return False
    if matcher.incarnation is not None and record.inc != matcher.incarnation:
        return False
    return fields_match(record.fields, matcher.fields, matcher.contains)


def _describe_matcher(matcher: RecordMatcher) -> str:
    text = repr(matcher.event)
    if matcher.agent is not None:
        text += f" of {matcher.agent}"
    if matcher.incarnation is not None:
        text += f" in incarnation {matcher.incarnation}"
    if matcher.fields:
        text += " with " + ", ".join(f"{k}={show(v)}" for k, v in matcher.fields.items())
    if matcher.contains:
        text += " and" if matcher.fields else " with"
        text += " " + ", ".join(f"{k}={show(v)}" for k, v in matcher.contains.items())
        text += " (contained)"
    return text


def _check_order(sim: Simulation, scenario: Scenario, expectation: OrderExpectation) -> str:
    records = list(sim.trace)
    after_seq, previous = -1, None
    for number, matcher in enumerate(expectation.matchers, start=1):
        candidates = [r for r in records if _matches(scenario, matcher, r)]
        later = [r for r in candidates if r.seq > after_seq]
        if later:
            after_seq, previous = later[0].seq, (matcher, later[0])
            continue
        what = f"record {number} of the order, {_describe_matcher(matcher)}"
        if not candidates:
            return f"expected {what}; no record matches it"
        assert previous is not None  # the first matcher places itself whenever it has candidates
        earlier, placed = previous
        return (
            f"expected {what}, after {_describe_matcher(earlier)} (first at "
            f"{format_sim_time(placed.t_ms)}, #{placed.seq}); it only happened before: "
            f"{records_text(candidates)}"
        )
    return ""


# -- timing -------------------------------------------------------------------------------------
def _check_timing(sim: Simulation, scenario: Scenario, expectation: TimingExpectation) -> str:
    records = list(sim.trace)
    then = expectation.then or expectation.first
    anchors = [r for r in records if _matches(scenario, expectation.first, r)]
    if not anchors:
        return f"expected records {_describe_matcher(expectation.first)}; no record matches it"
    followers = [r for r in records if _matches(scenario, then, r)]
    wrong: list[str] = []
    for anchor in anchors:
        follower = next((r for r in followers if r.seq > anchor.seq), None)
        if follower is None:
            # The last of consecutive records has no next one; a `then` record must come.
            if expectation.within_ms is not None and expectation.then is not None:
                wrong.append(f"{_at(anchor)} was never followed by one")
            continue
        gap = follower.t_ms - anchor.t_ms
        too_late = expectation.within_ms is not None and gap > expectation.within_ms
        too_soon = expectation.at_least_ms is not None and gap < expectation.at_least_ms
        if too_late or too_soon:
            wrong.append(f"{_at(anchor)} was followed after {format_gap(gap)}, {_at(follower)}")
    if not wrong:
        return ""
    bounds = []
    if expectation.within_ms is not None:
        bounds.append(f"within {format_gap(expectation.within_ms)}")
    if expectation.at_least_ms is not None:
        bounds.append(f"no sooner than {format_gap(expectation.at_least_ms)}")
    what = "the next such record" if expectation.then is None else _describe_matcher(then)
    more = f" and {len(wrong) - 3} more" if len(wrong) > 3 else ""
    return (
        f"expected each record {_describe_matcher(expectation.first)} to be followed by "
        f"{what} {' and '.join(bounds)}; of {len(anchors)}, {len(wrong)} were not: "
        f"{'; '.join(wrong[:3])}{more}"
    )


def _at(record: TraceRecord) -> str:
    return f"#{record.seq} at {format_sim_time(record.t_ms)}"


# -- clients ------------------------------------------------------------------------------------
def client_frames(sim: Simulation, agent_path: str, client: str) -> list[tuple[int, Any]]:
    """(sim time, frame) of every frame `client` received from the agent at `agent_path`."""
    connections: set[Any] = set()
    frames = []
    for record in sim.trace:
        if record.agent != agent_path:
            continue
        if record.event == "connection:open" and record.fields.get("client") == client:
            connections.add(record.fields.get("connection"))
        elif record.event == "connection:frame" and record.fields.get("connection") in connections:
            frames.append((record.t_ms, record.fields.get("frame")))
    return frames


def _decoded(frame: Any) -> Any:
    if isinstance(frame, str):
        try:
            return json.loads(frame)
        except ValueError:
            return frame
    return frame


def _frame_matches(expectation: ClientFramesExpectation, frame: Any) -> bool:
    if not isinstance(frame, dict):
        return False
    raw = frame.get("event")
    event = raw if isinstance(raw, dict) else {}
    return (
        (expectation.type is None or frame.get("type") == expectation.type)
        and (expectation.event_kind is None or event.get("kind") == expectation.event_kind)
        and (expectation.run is None or event.get("runId") == expectation.run)
        and fields_match(frame, expectation.fields)
    )


def _check_client_frames(
    sim: Simulation, scenario: Scenario, expectation: ClientFramesExpectation
) -> str:
    path = scenario.agent(expectation.agent).path
    frames = client_frames(sim, path, expectation.client)
    found = [(t, f) for t, f in frames if _frame_matches(expectation, _decoded(f))]
    if expectation.count.allows(len(found)):
        return ""
    filters = [
        f"{name} {value!r}"
        for name, value in (
            ("type", expectation.type),
            ("kind", expectation.event_kind),
            ("run", expectation.run),
        )
        if value is not None
    ]
    filters += [f"{key}={show(value)}" for key, value in expectation.fields.items()]
    amount = expectation.count.describe()
    noun = "frame" if amount.endswith(" 1") else "frames"
    text = f"expected client {expectation.client} (of {expectation.agent}) to receive {amount}"
    text += f" {noun}" + (f" with {', '.join(filters)}" if filters else "")
    text += f"; found {len(found)} of the {len(frames)} it received"
    shown = found or frames
    if shown:
        listed = "; ".join(f"at {format_sim_time(t)} {show(_decoded(f))}" for t, f in shown[:4])
        more = f" and {len(shown) - 4} more" if len(shown) > 4 else ""
        text += (": " if found else "; they were: ") + listed + more
    return text


def reduced_run(sim: Simulation, agent_path: str, client: str) -> AgentToolEvents:
    """A client-side reducer fed every frame `client` received, once, in order."""
    now = [0]
    events = AgentToolEvents(lambda: now[0])
    for t_ms, frame in client_frames(sim, agent_path, client):
        now[0] = t_ms
        events.receive(frame)
    return events


def _check_client_run(
    sim: Simulation, scenario: Scenario, expectation: ClientRunExpectation
) -> str:
    path = scenario.agent(expectation.agent).path
    events = reduced_run(sim, path, expectation.client)
    run = events.runs_by_id.get(expectation.run)
    who = f"client {expectation.client} (of {expectation.agent})"
    if run is None:
        return (
            f"{who} never saw run {expectation.run}; runs it saw: {sorted(events.runs_by_id)} "
            f"({len(client_frames(sim, path, expectation.client))} frames received)"
        )
    actual: dict[str, Any] = {
        "status": run.status,
        "text": parts_text(run.parts),
        "summary": run.summary,
        "error": run.error,
        "reason": run.reason,
        "milestones": [milestone.get("name") for milestone in run.milestones],
        "progress": run.progress,
    }
    wrong = []
    for key, wanted in expectation.reduced.items():
        found = actual[key]
        if key == "progress":
            ok = isinstance(found, dict) and fields_match(found, wanted)
        else:
            ok = json_equal(found, wanted)
        if not ok:
            wrong.append(f"{key} {show(found)} (expected {show(wanted)})")
    if not wrong:
        return ""
    return f"{who} shows run {expectation.run} with " + ", ".join(wrong)


TIMELINE_CHECKS: dict[type[Expectation], Callable[[Simulation, Scenario, Any], str]] = {
    HookExpectation: _check_hook,
    OrderExpectation: _check_order,
    TimingExpectation: _check_timing,
    ClientFramesExpectation: _check_client_frames,
    ClientRunExpectation: _check_client_run,
}
"""The checker of each timeline expectation: one sentence when it does not hold, else ''."""
