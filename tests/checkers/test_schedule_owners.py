"""`schedules_owned_by_caller` and the schedules workload's sub-agents: a root and two sub-agents
whose names differ by a digit keep the same idempotent schedules, one sub-agent is closed and
opened again; every row answered is its caller's own on both releases, and a dedupe that forgets
the owner is caught."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core.schedules import Scheduler
from scenarios import parse_scenario, run_scenario

SCENARIO = """
name: sub-agent-schedules
description: a schedules workload with sub-agents keeping the same schedules
seed: 1
agents:
  s:
    workload: schedules
    sub_agents: [w1, w10]
    schedules:
      - {name: a, after: 60s, idempotent: true}
      - {name: b, every: 30s, runs: 2, keep_alive: true, work: 5s}
      - {name: c, cron: "*/2 * * * *", runs: 1}
steps:
  - call: {agent: s, method: status}
  - at: 1s
    call: {agent: s, method: open, args: [w1]}
  - at: 1s
    call: {agent: s, method: open, args: [w10]}
  - at: 40s
    call: {agent: s, method: close, args: [w1]}
  - at: 50s
    call: {agent: s, method: open, args: [w1]}
expect:
  - invariants: all
"""


def run(sdk: str) -> Any:
    return run_scenario(parse_scenario(f"sdk: {sdk!r}\n{SCENARIO}", "subs.yaml"))


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_sub_agents_keep_schedules_of_their_own(sdk: str) -> None:
    result = run(sdk)
    assert result.passed, result.failures
    records = result.trace.records
    scheduled = {
        (r.agent.rsplit("/", 1)[-1], r.get("name"))
        for r in records
        if r.event == "workload:scheduled"
    }
    assert {("s", "a"), ("w1", "a"), ("w10", "a")} <= scheduled
    ids = [r.get("scheduleId") for r in records if r.event == "workload:scheduled"]
    assert len(ids) == len(set(ids))  # no two callers were answered one row
    assert [r.get("name") for r in records if r.event == "workload:sub_agent_opened"] == [
        "w1",
        "w10",
        "w1",
    ]


def test_a_dedupe_that_forgets_the_owner_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    find = Scheduler._find_matching_schedule

    def any_owner(self: Scheduler, timing: Any, callback: str, payload: Any, owner: Any) -> Any:
        return find(self, timing, callback, payload, None)

    monkeypatch.setattr(Scheduler, "_find_matching_schedule", any_owner)
    failures = [str(f) for f in run("0.21.0").failures]
    assert any(
        "schedules_owned_by_caller: ScheduleWorkload/s/ScheduleWorkload/w1 was answered" in f
        and "a row owned by its holder's own (held by ScheduleWorkload/s)" in f
        for f in failures
    ), failures


NESTED = SCENARIO.replace("sub_agents: [w1, w10]", "sub_agents: [w1, w1/x, w10]").replace(
    "  - at: 40s\n", "  - at: 2s\n    call: {agent: s, method: open, args: [w1/x]}\n  - at: 40s\n"
)


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_a_sub_agent_of_a_sub_agent_keeps_schedules_of_its_own(sdk: str) -> None:
    result = run_scenario(parse_scenario(f"sdk: {sdk!r}\n{NESTED}", "nested.yaml"))
    assert result.passed, result.failures
    x = "ScheduleWorkload/s/ScheduleWorkload/w1/ScheduleWorkload/x"
    records = result.trace.records
    assert [r.agent for r in records if r.event == "workload:sub_agent_opened"][:3] == [
        "ScheduleWorkload/s",
        "ScheduleWorkload/s",
        "ScheduleWorkload/s/ScheduleWorkload/w1",
    ]
    assert {r.get("name") for r in records if r.event == "workload:scheduled" and r.agent == x} == {
        "a",
        "b",
        "c",
    }
    closed = next(r for r in records if r.event == "workload:sub_agent_closed")
    assert closed.get("name") == "w1"
    assert any(  # closing w1 took x with it
        r.event == "incarnation:end"
        and r.agent == x
        and r.get("reason") == "deleted"
        and r.t_ms == closed.t_ms
        for r in records
    )
