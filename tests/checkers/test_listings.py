"""`listings_match` and its model: listFibers, deleteFibers and listSchedules as the spec says
(fibers §5.8, §4.5), the model's rules one by one, the workloads' records on both releases, and
a runtime that lists or deletes otherwise caught."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agents_core.fiber_ledger import FiberLedger
from scenarios import parse_scenario, run_scenario
from sim.checkers import CheckContext, check
from sim.checkers.models.listings import (
    deleted_fibers,
    listed_fibers,
    listed_schedules,
    start_answer,
)


def fiber(fiber_id: str, status: str, created: int, settled: int | None = None, name: str = "f"):
    return {
        "fiber_id": fiber_id,
        "name": name,
        "status": status,
        "created_at": created,
        "completed_at": settled,
    }


ROWS = [
    fiber("a", "completed", 1, 10),
    fiber("b", "aborted", 2, 20, name="g"),
    fiber("c", "interrupted", 3, 30),
    fiber("d", "running", 4),
    fiber("e", "completed", 5, 20),
]


def test_fibers_are_listed_newest_first_by_status_name_and_a_clamped_limit() -> None:
    assert listed_fibers(ROWS) == ["e", "d", "c", "b", "a"]
    assert listed_fibers(ROWS, status=["completed", "aborted"], limit=2) == ["e", "b"]
    assert listed_fibers(ROWS, status=[]) == []
    assert listed_fibers(ROWS, name="g") == ["b"]
    assert listed_fibers(ROWS, name="") == listed_fibers(ROWS)
    assert listed_fibers(ROWS, limit=0) == ["e"]  # clamped to 1
    many = [fiber(f"x{n:03}", "completed", n, n) for n in range(120)]
    assert len(listed_fibers(many)) == 50 and len(listed_fibers(many, limit=500)) == 100


def test_a_deletion_takes_terminal_rows_settled_strictly_before_oldest_first() -> None:
    everything = deleted_fibers(ROWS)
    assert everything.count == 3  # interrupted only when asked for, running never
    assert everything.required == everything.allowed == {"a", "b", "e"}
    assert deleted_fibers(ROWS, settled_before_ms=20).allowed == {"a"}  # strictly before
    assert deleted_fibers(ROWS, status=["interrupted", "running"]).allowed == {"c"}
    assert deleted_fibers(ROWS, status="running").count == 0
    tied = deleted_fibers(ROWS, limit=2)  # a (10), then b and e tied at 20: created_at decides
    assert (tied.count, tied.required, tied.allowed) == (2, {"a", "b"}, {"a", "b"})
    same = [fiber("p", "completed", 1, 5), fiber("q", "completed", 1, 5)]
    edge = deleted_fibers(same, limit=1)
    assert (edge.count, edge.required, edge.allowed) == (1, frozenset(), {"p", "q"})


def test_schedules_are_listed_in_a_range_inclusive_at_both_ends_in_whole_seconds() -> None:
    rows = [
        {"id": "s1", "type": "delayed", "time": 60},
        {"id": "s2", "type": "cron", "time": 120},
    ]
    assert listed_schedules(rows, end_ms=60_000) == ["s1"]
    assert listed_schedules(rows, end_ms=59_999) == []
    assert listed_schedules(rows, start_ms=60_999, end_ms=120_000) == ["s1", "s2"]
    assert listed_schedules(rows, type="cron") == ["s2"]


SCENARIO = """
name: listings
description: the ledger and the schedules listed and deleted
seed: 1
agents:
  w:
    workload: fibers
    fibers:
      - {name: f1, steps: 1, step: 1s, managed: true}
      - {name: f2, steps: 2, step: 1s, managed: true}
      - {name: f3, steps: 3, step: 1s, managed: true}
  s:
    workload: schedules
    schedules:
      - {name: a, after: 60s}
      - {name: b, cron: "*/5 * * * *", runs: 1}
steps:
  - call: {agent: w, method: status}
  - call: {agent: s, method: status}
  - at: 10s
    call: {agent: w, method: listing, args: [null, null, 2]}
  - at: 10s
    call: {agent: w, method: listing, args: [["completed"]]}
  - at: 10s
    call: {agent: s, method: listing, args: [null, null, 60000]}
  - at: 10s
    call: {agent: s, method: listing, args: ["cron"]}
  - at: 10s
    call: {agent: w, method: forget, args: [null, 3000, 1]}
  - at: 10s
    call: {agent: w, method: forget}
expect:
  - invariants: [listings_match]
"""


def run(sdk: str) -> Any:
    return run_scenario(parse_scenario(f"sdk: {sdk!r}\n{SCENARIO}", "listings.yaml"))


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_the_workloads_listings_hold_on_both_releases(sdk: str) -> None:
    result = run(sdk)
    assert result.passed, result.failures
    events = [r.event for r in result.trace.records]
    assert events.count("workload:listed") == 4 and events.count("workload:deleted") == 2
    (first, everything) = [r for r in result.trace.records if r.event == "workload:deleted"]
    assert first.get("got") == 1 and len(everything.get("gone")) == 2


def test_a_ledger_listed_oldest_first_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    listed = FiberLedger.list

    def oldest_first(self: FiberLedger, **given: Any) -> Any:
        return list(reversed(listed(self, **given)))

    monkeypatch.setattr(FiberLedger, "list", oldest_first)
    failures = [str(f) for f in run("0.21.0").failures]
    assert any("listings_match: list_fibers(limit=2) on FiberWorkload/w" in f for f in failures)


def test_a_deletion_past_its_limit_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    delete = FiberLedger.delete

    def unbounded(self: FiberLedger, *, limit: Any = None, **given: Any) -> int:
        return delete(self, **given)

    monkeypatch.setattr(FiberLedger, "delete", unbounded)
    failures = [str(f) for f in run("0.21.0").failures]
    assert any("delete_fibers(limit=1, settled_before=3000)" in f for f in failures), failures


def test_a_start_under_an_explicit_id_is_refused_when_the_key_names_another_fiber() -> None:
    rows = [{**fiber("a", "running", 1), "idempotency_key": "k"}]
    assert start_answer(rows, "b", "k") == {"refused": True}
    assert start_answer(rows, "a", "k") == {"id": "a", "accepted": False}
    assert start_answer(rows, "a", "other") == {"id": "a", "accepted": False}
    assert start_answer(rows, "b", "new") == {"id": "b", "accepted": True}


STARTS = """
name: explicit-ids
description: managed fibers started again under explicit ids
seed: 1
agents:
  w:
    workload: fibers
    start: call
    fibers:
      - {name: f1, steps: 2, step: 1s, managed: true, idempotency_key: k1}
      - {name: f2, steps: 1, step: 1s, managed: true, idempotency_key: k2}
steps:
  - call: {agent: w, method: start, args: [f1]}
  - at: 1s
    call: {agent: w, method: start_as, args: [f1, x1]}
  - at: 1s
    call: {agent: w, method: start_as, args: [f2, x2]}
  - at: 5s
    call: {agent: w, method: start_as, args: [f2, x2]}
expect:
  - invariants: all
"""


def test_explicit_ids_answer_as_the_spec_says_and_a_wrong_answer_is_caught() -> None:
    result = run_scenario(parse_scenario(STARTS, "starts.yaml"))
    assert result.passed, result.failures
    answers = [r.get("got") for r in result.trace.records if r.get("api") == "start_fiber"]
    assert answers == [
        {"refused": True},
        {"id": "x2", "accepted": True},
        {"id": "x2", "accepted": False},
    ]
    first = next(r for r in result.trace.records if r.get("api") == "start_fiber")
    wrong = dataclasses.replace(
        first, fields={**first.fields, "got": {"id": "a", "accepted": False}}
    )
    context = CheckContext(records=[wrong])
    (violation,) = check(context, ["listings_match"])
    assert "start_fiber(fiber_id='x1', idempotency_key='k1')" in violation.message
    assert "the spec's answer over the same rows is {'refused': True}" in violation.message
