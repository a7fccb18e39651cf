"""Conformance on SDK 0.32.0: fibers (spec sdk-0.32 §5, catalogue J-62 … J-68). A fiber's
run row records how its body ended before the row is deleted; a failed delete is logged and
left for the scan, which deletes a finished row (and a stale one beside a terminal ledger row)
without events or hook."""

from __future__ import annotations

import zlib
from typing import Any

import pytest

from sim import AgentRef, Simulation
from tests.conformance.fiber_agents import (
    Recorder,
    fail,
    hook_calls,
    returns,
    sleep,
    stash,
)
from tests.conformance.sub_agent_fixtures import Child, Root, facet_runs

OUTCOME_COLUMNS = "id, name, snapshot, created_at, completed_at, outcome, error_message"
DELETE_RUN_ROW = r"^DELETE FROM cf_agents_runs"


def runs(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    return sim.query(ref, f"SELECT {OUTCOME_COLUMNS} FROM cf_agents_runs ORDER BY rowid")


TRACE_ONLY = ("fiber:recovery:pass", "fiber:recovery:backoff")
"""The harness's own records of a recovery pass (not SDK events)."""


def fiber_events(sim: Simulation, ref: AgentRef, since: int = 0) -> list[str]:
    """The SDK's `fiber:*` events of `ref` from the `since`-th record of the trace on."""
    return [
        r.event
        for r in list(sim.trace.records)[since:]
        if r.agent == ref.path and r.event.startswith("fiber:") and r.event not in TRACE_ONLY
    ]


def ledger(sim: Simulation, ref: AgentRef, fiber_id: str) -> dict[str, Any]:
    (row,) = sim.query(ref, "SELECT * FROM cf_agents_fibers WHERE fiber_id = ?", fiber_id)
    return row


def test_J062_a_completed_fiber_writes_its_outcome_before_the_row_is_deleted(
    sim: Simulation,
) -> None:
    """The run row of a fiber that completed holds `outcome = 'completed'`, its
    `completed_at` and a NULL error when the delete runs: a failed delete shows it left
    behind; without a fault the row is gone."""
    ref = sim.agent(Recorder, "f")
    assert sim.call(ref, "run", "clean", [sleep(100), returns(1)]) == 1
    assert runs(sim, ref) == []
    sim.arm_storage_fault(ref, "error", match=DELETE_RUN_ROW)
    started = sim.now_ms
    pending = sim.start_call(ref, "run", "work", [stash({"step": 1}), sleep(200), returns(7)])
    assert sim.wait(pending) == 7
    (row,) = runs(sim, ref)
    assert (row["name"], row["outcome"], row["error_message"]) == ("work", "completed", None)
    assert row["completed_at"] == started + 200
    assert row["snapshot"] == '{"step": 1}' or row["snapshot"] == '{"step":1}'


def test_J063_a_throwing_fiber_records_error_and_an_aborted_one_aborted(
    sim: Simulation,
) -> None:
    """A callback that throws "x" leaves outcome `error` with `error_message = 'x'`; a managed
    fiber whose signal was aborted (cancelled) and then throws leaves `aborted`."""
    ref = sim.agent(Recorder, "f")
    sim.arm_storage_fault(ref, "error", match=DELETE_RUN_ROW, count=2)
    with pytest.raises(RuntimeError, match="^x$"):
        sim.call(ref, "run", "thrower", [sleep(100), fail("x")])
    sim.start_call(ref, "start", "cancelled", [sleep(1_000), fail("stopped")], fiber_id="m")
    sim.run_for(200)
    assert sim.call(ref, "cancel_fiber", "m", "operator") is True
    sim.run_for(2_000)
    by_name = {row["name"]: row for row in runs(sim, ref)}
    assert (by_name["thrower"]["outcome"], by_name["thrower"]["error_message"]) == ("error", "x")
    assert by_name["cancelled"]["outcome"] == "aborted"
    assert by_name["cancelled"]["error_message"] == "stopped"


def test_J064_a_finished_unmanaged_row_is_deleted_without_hook_or_events(
    sim: Simulation,
) -> None:
    """A finished fiber whose row delete failed: the next scan (a new incarnation's startup)
    deletes its row, calls no `on_fiber_recovered` and emits no `fiber:*` event."""
    ref = sim.agent(Recorder, "f")
    sim.arm_storage_fault(ref, "error", match=DELETE_RUN_ROW)
    assert sim.call(ref, "run", "work", [sleep(100), returns("ok")]) == "ok"
    assert [row["outcome"] for row in runs(sim, ref)] == ["completed"]
    sim.evict(ref, "deploy")
    woke = len(sim.trace.records)
    sim.fetch(ref)
    assert runs(sim, ref) == []
    assert hook_calls(sim, ref) == []
    assert fiber_events(sim, ref, since=woke) == []
    assert sim.probes["fiber.finished_run_row_settled"] == 1


def test_J065_a_finished_run_row_settles_a_running_ledger_row_without_hook(
    sim: Simulation,
) -> None:
    """A managed ledger row still `running` beside a run row whose outcome is `completed`:
    the scan makes the ledger `completed` with the run row's `completed_at`, a waiter
    resolves, and no hook runs."""
    ref = sim.agent(Recorder, "f")
    sim.run_for(10)
    sim.query(
        ref,
        "INSERT INTO cf_agents_fibers (fiber_id, name, status, created_at, started_at) "
        "VALUES ('m', 'job', 'running', 10, 10)",
    )
    sim.query(
        ref,
        "INSERT INTO cf_agents_runs (id, name, snapshot, created_at, completed_at, outcome, "
        "error_message) VALUES ('m', 'job', NULL, 10, 4321, 'completed', NULL)",
    )
    sim.evict(ref, "deploy")
    # A waiting duplicate start on a stub from before the eviction (no startup): its wait
    # runs the scan, which settles the row.
    waited = sim.call(ref, "start", "job", [returns(None)], fiber_id="m", wait_for_completion=True)
    assert (waited.status, waited.accepted) == ("completed", False)
    row = ledger(sim, ref, "m")
    assert (row["status"], row["completed_at"], row["error_message"]) == (
        "completed",
        4321,
        None,
    )
    assert runs(sim, ref) == []
    assert hook_calls(sim, ref) == []
    assert "fiber:recovery:attempt" not in fiber_events(sim, ref)


def test_J066_a_stale_run_row_beside_a_terminal_ledger_row_emits_nothing(
    sim: Simulation,
) -> None:
    """An aborted managed fiber's leftover run row (its isolate died before the body ended) is
    deleted by the scan with no `fiber:recovery:detected` / `fiber:run:interrupted`."""
    ref = sim.agent(Recorder, "f")
    sim.start_call(ref, "start", "job", [stash({"n": 1}), sleep(600_000)], fiber_id="j")
    sim.run_for(200)
    assert sim.call(ref, "cancel_fiber", "j", "operator stop") is True
    sim.run_for(300)
    before = ledger(sim, ref, "j")
    sim.evict(ref, "deploy")
    woke = len(sim.trace.records)
    sim.fetch(ref)
    assert runs(sim, ref) == []
    assert ledger(sim, ref, "j") == before
    assert hook_calls(sim, ref) == []
    assert fiber_events(sim, ref, since=woke) == []
    assert sim.probes["fiber.stale_terminal_run_row_dropped"] == 1


def test_J067_a_failed_delete_in_finally_is_logged_and_the_result_goes_on(
    sim: Simulation,
) -> None:
    """The run-row delete throws in `finally`: the fiber's value (and, for a throwing body,
    its own error) reaches the caller unchanged, "Failed to finalize fiber" is logged, the
    keepAlive lease is given back, and a sub-agent's lease on its root is kept."""
    ref = sim.agent(Recorder, "f")
    sim.arm_storage_fault(ref, "error", match=DELETE_RUN_ROW, count=2)
    assert sim.call(ref, "run", "work", [sleep(100), returns({"total": 3})]) == {"total": 3}
    with pytest.raises(RuntimeError, match="^own error$"):
        sim.call(ref, "run", "broken", [sleep(100), fail("own error")])
    logged = [r.get("message") for r in sim.trace.select("console:error", agent=ref.path)]
    finalize = [m for m in logged if "Failed to finalize fiber" in str(m)]
    assert len(finalize) == 2
    assert finalize[0].startswith('[Agent] Failed to finalize fiber "work" (')
    assert sim.instance_of(ref)._keep_alive_refs == 0

    root = sim.agent(Root, "r")
    sim.call(root, "at", [(Child, "c")], "note_all", "made", [1])
    child = sim.facet(root, Child, "c")
    sim.arm_storage_fault(child, "error", match=DELETE_RUN_ROW)
    fiber_id = sim.call(root, "at", [(Child, "c")], "spawn", "leased", {"n": 1}, 100)
    sim.run_for(1_000)
    assert [row["outcome"] for row in runs(sim, child)] == ["completed"]
    assert [row["run_id"] for row in facet_runs(sim, root)] == [fiber_id]


def test_J068_the_run_rows_of_a_0_21_database_gain_the_outcome_columns(sim: Simulation) -> None:
    """A 0.21.0 database (schema 11 in `cf_agents_state`, `cf_agents_runs` of four columns,
    one row): when the agent constructs, the table has `completed_at`, `outcome` and
    `error_message`, and the row keeps its data with NULLs there."""
    ref = sim.agent(Recorder, "f")
    sim.run_for(10)
    sim.query(ref, "DROP TABLE cf_agents_runs")
    sim.query(
        ref,
        "CREATE TABLE cf_agents_runs (id TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL, "
        "snapshot TEXT, created_at INTEGER NOT NULL)",
    )
    sim.query(ref, "INSERT INTO cf_agents_runs VALUES ('old', 'legacy', '{\"n\":1}', 5)")
    sim.query(ref, "DELETE FROM _cf_KV WHERE key = 'cf_agents:schema_version'")
    sim.query(ref, "INSERT INTO cf_agents_state (id, state) VALUES ('cf_schema_version', '11')")
    sim.evict(ref, "deploy")
    # A stub from before, to a synchronous method: constructs, no startup scan (an async
    # method would run startup first on 0.32.0, §1.3).
    assert sim.call(ref, "ping_sync") == "pong"
    columns = [c["name"] for c in sim.query(ref, "PRAGMA table_info(cf_agents_runs)")]
    assert columns == OUTCOME_COLUMNS.split(", ")
    assert runs(sim, ref) == [
        {
            "id": "old",
            "name": "legacy",
            "snapshot": '{"n":1}',
            "created_at": 5,
            "completed_at": None,
            "outcome": None,
            "error_message": None,
        }
    ]


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_a_finished_fiber_whose_row_delete_failed_on_each_release(sdk: str) -> None:
    """0.21.0 lets the failed delete escape to the caller and later recovers the row as an
    interrupted fiber (detected, hook); 0.32.0 returns the fiber's value and deletes the
    finished row quietly."""
    seed = zlib.crc32(f"finished-row-{sdk}".encode())
    with Simulation(seed=seed, sdk=sdk) as sim:
        ref = sim.agent(Recorder, "f")
        sim.arm_storage_fault(ref, "error", match=DELETE_RUN_ROW)
        pending = sim.start_call(ref, "run", "work", [sleep(200), returns(1)])
        sim.run_for(1_000)
        if sdk == "0.21.0":
            with pytest.raises(Exception, match="injected storage fault"):
                sim.wait(pending)
        else:
            assert sim.wait(pending) == 1
        assert sim.instance_of(ref)._keep_alive_refs == 0
        sim.run_for(600_000)
        assert sim.query(ref, "SELECT id FROM cf_agents_runs") == []
        detected = [r.get("fiberName") for r in sim.trace.select("fiber:recovery:detected")]
        assert detected == (["work"] if sdk == "0.21.0" else [])
        assert len(hook_calls(sim, ref)) == (1 if sdk == "0.21.0" else 0)
        assert sim.alarm_of(ref) is None
