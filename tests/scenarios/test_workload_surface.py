"""The workloads' ledger-surface calls and options that generated scenarios use: a schedule's
own backoff and idempotency, `recreate`; a fiber's padded stash, `start_again`, `resolve`,
`forget`; a tools parent's `clear`."""

from __future__ import annotations

import pytest

from scenarios.language.errors import InvalidScenario
from scenarios.language.loader import parse_scenario
from scenarios.run.runner import run_scenario


def _run(agents: str, steps: str) -> tuple[object, list[dict]]:
    text = (
        "name: surface\ndescription: d\nseed: 1\nagents:\n"
        + agents
        + "steps:\n"
        + steps
        + "expect:\n  - invariants: all\n"
    )
    result = run_scenario(parse_scenario(text, "surface.yaml"))
    return result, [r.to_dict() for r in result.trace]


def test_a_recreated_schedule_is_a_new_row_and_the_old_one_is_cancelled() -> None:
    """recreate cancels the row it made and makes another: two `workload:scheduled` records
    with different ids, one cancel by `recreate`, and the run passes every invariant."""
    result, records = _run(
        "  s:\n    workload: schedules\n"
        "    schedules:\n"
        "      - {name: s1, after: 60s, backoff: 1ms, max_backoff: 3ms, idempotent: false}\n",
        "  - call: {agent: s, method: status}\n"
        "  - at: 10s\n    call: {agent: s, method: recreate, args: [s1], returns: true}\n",
    )
    assert result.passed, result.failures
    ids = [r["scheduleId"] for r in records if r["event"] == "workload:scheduled"]
    assert len(ids) == 2 and ids[0] != ids[1]
    cancels = [r for r in records if r["event"] == "workload:schedule_cancelled"]
    assert [(r["by"], r["found"]) for r in cancels] == [("recreate", True)]
    assert sum(r["event"] == "workload:schedule_done" for r in records) == 1


def test_schedule_backoff_and_idempotent_are_checked_by_the_loader() -> None:
    """A backoff above its maximum, and idempotent on an every schedule, are refused at their
    key."""
    base = "name: x\ndescription: d\nseed: 1\nsteps: [{run_for: 1s}]\nagents:\n  s:\n"
    with pytest.raises(InvalidScenario, match="max_backoff.*at least the backoff"):
        parse_scenario(
            base + "    workload: schedules\n"
            "    schedules: [{name: a, after: 1s, backoff: 5s, max_backoff: 1s}]\n"
        )
    with pytest.raises(InvalidScenario, match="idempotent.*always idempotent"):
        parse_scenario(
            base + "    workload: schedules\n"
            "    schedules: [{name: a, every: 1s, runs: 1, idempotent: true}]\n"
        )


def test_a_duplicate_start_under_the_key_runs_the_fiber_once() -> None:
    """start_again with the fiber's key is answered by the ledger with the execution it has:
    the fiber's steps run once, its stash carries the padding, and forget deletes its row."""
    result, records = _run(
        "  w:\n    workload: fibers\n"
        "    fibers: [{name: f, steps: 2, step: 10s, managed: true, idempotency_key: k, "
        "stash_bytes: 2000}]\n",
        "  - call: {agent: w, method: status}\n"
        "  - at: 5s\n    call: {agent: w, method: start_again, args: [f]}\n"
        "  - at: 1m\n    call: {agent: w, method: forget, returns: 1}\n"
        "  - call: {agent: w, method: resolve, args: [f], returns: false}\n",
    )
    assert result.passed, result.failures
    assert sum(r["event"] == "workload:stashed" for r in records) == 2
    assert sum(r["event"] == "workload:fiber_done" for r in records) == 1


def test_clear_deletes_the_runs_and_a_run_id_can_be_dispatched_again() -> None:
    """clear returns how many runs went; dispatching the same run id after it runs it again."""
    result, records = _run(
        "  p:\n    workload: tools\n    runs: [{run_id: r1, steps: [{finish: completed}]}]\n",
        "  - call: {agent: p, method: dispatch}\n"
        "  - call: {agent: p, method: clear, returns: 1}\n"
        "  - call: {agent: p, method: dispatch, args: [r1]}\n"
        "  - call: {agent: p, method: clear, args: [error], returns: 0}\n",
    )
    assert result.passed, result.failures
    finishes = [r for r in records if r["event"] == "hook:on_agent_tool_finish"]
    assert len(finishes) == 2


def test_a_recurring_schedule_whose_setup_failed_midway_still_stops_at_its_runs() -> None:
    """Setup created the row and failed writing it down (a storage error on the workload's own
    INSERT): the schedule still cancels itself after its runs, and the agent settles."""
    result, records = _run(
        "  s:\n    workload: schedules\n    setup: call\n"
        "    schedules: [{name: s1, every: 10s, runs: 2}]\n",
        "  - arm_storage_fault: {agent: s, kind: error, match: '^INSERT INTO workload_schedules'}\n"
        "  - call: {agent: s, method: setup, expect_error: StorageError}\n",
    )
    assert result.passed, result.failures
    cancels = [r for r in records if r["event"] == "workload:schedule_cancelled"]
    assert [(r["name"], r["by"], r["found"]) for r in cancels] == [("s1", "runs", True)]
    assert sum(r["event"] == "workload:schedule_done" for r in records) == 2
