"""Conformance: unmanaged fibers, `run_fiber` and `stash` (spec fibers §5.2–5.4, catalogue
F-50 … F-59), and the misuse errors of `stash`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents_core import Agent
from agents_core.errors import NotInFiber
from agents_core.fibers import _current_fiber
from sim import Simulation
from tests.conformance.fiber_agents import (
    Recorder,
    fail,
    journal,
    note,
    returns,
    run_rows,
    self_stash,
    sleep,
    stash,
)
from tests.releases import on_both_releases

pytestmark = on_both_releases


def test_F050_run_fiber_returns_value_and_leaves_no_row(sim: Simulation) -> None:
    """The caller gets the callback's value, and the fiber's run row is gone afterwards."""
    ref = sim.agent(Recorder, "rf")
    pending = sim.start_call(ref, "run", "work", [sleep(1_000), returns({"total": 17})])
    sim.run_for(500)
    (row,) = run_rows(sim, ref)
    assert row["name"] == "work"
    assert sim.wait(pending) == {"total": 17}
    assert run_rows(sim, ref) == []


def test_F051_run_fiber_propagates_the_error_and_leaves_no_row(sim: Simulation) -> None:
    """A throwing callback rejects the caller with its error, and no run row remains."""
    ref = sim.agent(Recorder, "rf")
    with pytest.raises(RuntimeError, match="step 2 of 3 failed"):
        sim.call(ref, "run", "work", [stash({"step": 1}), sleep(200), fail("step 2 of 3 failed")])
    assert run_rows(sim, ref) == []


def test_F052_a_running_fiber_holds_one_keep_alive_ref(sim: Simulation) -> None:
    """While a fiber runs the keepAlive count is 1 and the heartbeat is armed; after, 0 and none."""
    ref = sim.agent(Recorder, "rf")
    pending = sim.start_call(ref, "run", "work", [sleep(5_000)])
    sim.run_for(1_000)
    assert sim.instance_of(ref)._keep_alive_refs == 1
    assert sim.alarm_of(ref) is not None
    sim.wait(pending)
    assert sim.instance_of(ref)._keep_alive_refs == 0
    assert sim.alarm_of(ref) is None


def test_F053_a_fiber_checkpoints_each_step_in_order(sim: Simulation) -> None:
    """Every step runs once, in order, each followed by its stash, and the result comes back."""
    ref = sim.agent(Recorder, "rf")
    steps = ["search", "analyze", "synthesize"]
    script = []
    for i, step in enumerate(steps):
        script += [sleep(1_000), note("step", step), stash({"completed": steps[: i + 1]})]
    pending = sim.start_call(ref, "run", "research", [*script, sleep(500), returns("report")])
    snapshots = []
    for at_ms in (1_200, 2_200, 3_200):
        sim.run_until(at_ms)
        snapshots.append(json.loads(run_rows(sim, ref)[0]["snapshot"]))
    assert sim.wait(pending) == "report"
    assert [row["data"] for row in journal(sim, ref, "step")] == steps
    assert snapshots == [{"completed": steps[:1]}, {"completed": steps[:2]}, {"completed": steps}]


def test_F054_self_stash_works_inside_a_fiber_and_throws_outside(sim: Simulation) -> None:
    """self.stash() checkpoints the current fiber; outside any fiber it raises NotInFiber."""
    ref = sim.agent(Recorder, "rf")
    pending = sim.start_call(ref, "run", "work", [self_stash({"cursor": 7}), sleep(1_000)])
    sim.run_for(500)
    assert [json.loads(row["snapshot"]) for row in run_rows(sim, ref)] == [{"cursor": 7}]
    sim.wait(pending)
    with pytest.raises(NotInFiber, match=r"^stash\(\) called outside a fiber$"):
        sim.call(ref, "stash_outside", {"cursor": 8})


def test_F054_stash_directly_inside_the_recovery_hook_throws(sim: Simulation) -> None:
    """on_fiber_recovered is not a fiber: calling self.stash() in it raises NotInFiber."""

    class StashingHook(Recorder):
        async def recover(self, ctx: Any) -> Any:
            try:
                self.stash({"resumed": ctx.snapshot})
            except NotInFiber as exc:
                self._note("hook:stash", ctx.id, str(exc))

    ref = sim.agent(StashingHook, "rf")
    sim.start_call(ref, "run", "work", [stash({"n": 1}), sleep(60_000)])
    sim.run_for(500)
    sim.evict(ref, "deploy")
    sim.fetch(ref)
    assert [row["data"] for row in journal(sim, ref, "hook:stash")] == [
        "stash() called outside a fiber"
    ]
    assert run_rows(sim, ref) == []


def test_F055_self_stash_reaches_the_right_fiber_when_two_run_at_once(sim: Simulation) -> None:
    """Two concurrent fibers using self.stash each write only their own row; both rows go."""
    ref = sim.agent(Recorder, "rf")
    a = sim.start_call(ref, "run", "a", [sleep(100), self_stash({"who": "a"}), sleep(1_000)])
    b = sim.start_call(ref, "run", "b", [sleep(50), self_stash({"who": "b"}), sleep(1_000)])
    sim.run_for(500)
    snapshots = {row["name"]: json.loads(row["snapshot"]) for row in run_rows(sim, ref)}
    assert snapshots == {"a": {"who": "a"}, "b": {"who": "b"}}
    sim.wait(a)
    sim.wait(b)
    assert run_rows(sim, ref) == []


def test_F056_each_stash_replaces_the_snapshot_entirely(sim: Simulation) -> None:
    """A second stash replaces the first (no merge): the row holds exactly the last value."""
    ref = sim.agent(Recorder, "rf")
    script = [stash({"a": 1, "shared": "old"}), stash({"b": 2}), sleep(1_000)]
    pending = sim.start_call(ref, "run", "work", script)
    sim.run_for(500)
    assert [row["snapshot"] for row in run_rows(sim, ref)] == ['{"b":2}']
    sim.wait(pending)


def test_F057_fire_and_forget_fibers_run_concurrently(sim: Simulation) -> None:
    """Two unawaited fibers run side by side (both started before either ended); no rows remain."""
    ref = sim.agent(Recorder, "rf")
    for name in ("fetch-data", "process-queue"):
        sim.call(ref, "spawn", name, [note("begin"), sleep(3_000), note("end")])
    assert sim.now_ms == 0
    assert len(run_rows(sim, ref)) == 2
    sim.run_for(5_000)
    events = [(row["kind"], row["t"]) for row in journal(sim, ref)]
    assert events == [("begin", 0), ("begin", 0), ("end", 3_000), ("end", 3_000)]
    assert run_rows(sim, ref) == []
    assert journal(sim, ref, "spawn:failed") == []


def test_F058_the_internal_stash_wrapper_wraps_only_its_own_fiber(sim: Simulation) -> None:
    """The wrapper writes its initial snapshot and wraps user stashes; a concurrent plain fiber
    stays unwrapped; a failure after the initial snapshot leaves no row."""
    ref = sim.agent(Recorder, "rf")
    initial = {"turn": "t1", "user": None}
    wrapped = sim.start_call(
        ref, "run_wrapped", "chat", initial, [sleep(100), self_stash({"text": "hi"}), sleep(900)]
    )
    plain = sim.start_call(ref, "run", "plain", [sleep(150), stash({"text": "raw"}), sleep(900)])
    sim.run_for(50)
    assert {r["name"]: json.loads(r["snapshot"] or "null") for r in run_rows(sim, ref)} == {
        "chat": initial,
        "plain": None,
    }
    sim.run_for(150)
    assert {r["name"]: json.loads(r["snapshot"]) for r in run_rows(sim, ref)} == {
        "chat": {"turn": "t1", "user": {"text": "hi"}},
        "plain": {"text": "raw"},
    }
    sim.wait(wrapped)
    sim.wait(plain)
    with pytest.raises(RuntimeError, match="model stream broke"):
        sim.call(ref, "run_wrapped", "chat", initial, [sleep(100), fail("model stream broke")])
    assert run_rows(sim, ref) == []


def test_F059_run_events_carry_the_fiber_and_managed_false(sim: Simulation) -> None:
    """A fiber emits run:started, then run:completed (elapsedMs) or run:failed (error)."""
    ref = sim.agent(Recorder, "rf")
    sim.call(ref, "run", "ok", [sleep(700)])
    with pytest.raises(RuntimeError):
        sim.call(ref, "run", "bad", [sleep(300), fail("quota exhausted")])
    events = [(r.event, r.fields) for r in sim.trace.select("fiber:run:*", agent=ref.path)]
    ok_id, bad_id = events[0][1]["fiberId"], events[2][1]["fiberId"]
    assert ok_id != bad_id
    assert events == [
        ("fiber:run:started", {"fiberId": ok_id, "fiberName": "ok", "managed": False}),
        (
            "fiber:run:completed",
            {"fiberId": ok_id, "fiberName": "ok", "managed": False, "elapsedMs": 700},
        ),
        ("fiber:run:started", {"fiberId": bad_id, "fiberName": "bad", "managed": False}),
        (
            "fiber:run:failed",
            {
                "fiberId": bad_id,
                "fiberName": "bad",
                "managed": False,
                "error": "quota exhausted",
                "elapsedMs": 300,
            },
        ),
    ]


@pytest.mark.parametrize(
    ("data", "shown"),
    [({"when": object}, r"'when': <class 'object'>"), ([1.5, float("nan")], r"\[1\.5, nan\]")],
)
def test_stash_rejects_data_json_cannot_hold(sim: Simulation, data: object, shown: str) -> None:
    """Stash data must be JSON: the error shows the value, the fiber fails and its row goes."""
    ref = sim.agent(Recorder, "rf")
    with pytest.raises(
        TypeError, match=rf"stash data must be JSON-serialisable: .*; got .*{shown}"
    ):
        sim.call(ref, "run", "work", [stash({"ok": True}), sleep(10), stash(data)])
    assert run_rows(sim, ref) == []


def test_F051_a_failing_fiber_releases_its_keep_alive_and_leaves_no_alarm(
    sim: Simulation,
) -> None:
    """A throwing callback gives its keepAlive lease back: no ref, no heartbeat alarm left, and
    the same for a managed fiber, whose failure the ledger records instead of raising."""
    ref = sim.agent(Recorder, "rf")
    with pytest.raises(RuntimeError, match="boom"):
        sim.call(ref, "run", "work", [sleep(200), fail("boom")])
    assert sim.instance_of(ref)._keep_alive_refs == 0
    sim.run_for(1)
    assert sim.alarm_of(ref) is None
    started = sim.call(ref, "start", "managed", [sleep(200), fail("managed boom")])
    sim.run_for(1_000)
    assert sim.call(ref, "inspect_fiber", started.fiber_id).status == "error"
    assert sim.instance_of(ref)._keep_alive_refs == 0
    assert sim.alarm_of(ref) is None
    # Each fiber's own lease was given back (the trace names its holder), and the heartbeat
    # never fires afterwards.
    holders = [r.get("holder") for r in sim.trace.select("keep_alive:release")]
    fiber_ids = [r.get("fiberId") for r in sim.trace.select("fiber:run:failed")]
    assert len(fiber_ids) == 2
    assert holders == [f"fiber:{fiber_id}" for fiber_id in fiber_ids]
    sim.run_for(120_000)
    assert sim.trace.select("alarm:fired") == []


def test_a_failed_run_row_delete_still_releases_the_keep_alive_lease(sim: Simulation) -> None:
    """When the cleanup's DELETE of the run row fails, the lease is released all the same: the
    heartbeat stops, and the row left behind does not leak. On 0.21.0 the error escapes to the
    caller and the row is recovered as an orphan; on 0.32.0 the caller gets the value, the row
    holds its outcome and the next pass deletes it without a recovery (sdk-0.32 §5.2, §5.3)."""
    ref = sim.agent(Recorder, "rf")
    sim.arm_storage_fault(ref, "error", match=r"^DELETE FROM cf_agents_runs")
    if sim.release == "0.21.0":
        with pytest.raises(Exception, match="injected storage fault"):
            sim.call(ref, "run", "work", [sleep(200), returns(1)])
    else:
        assert sim.call(ref, "run", "work", [sleep(200), returns(1)]) == 1
        ((outcome,),) = [
            tuple(r.values()) for r in sim.query(ref, "SELECT outcome FROM cf_agents_runs")
        ]
        assert outcome == "completed"
    assert sim.instance_of(ref)._keep_alive_refs == 0
    sim.run_for(600_000)
    assert run_rows(sim, ref) == []
    recovered = [r.get("fiberName") for r in sim.trace.select("fiber:recovery:detected")]
    assert recovered == (["work"] if sim.release == "0.21.0" else [])
    assert sim.alarm_of(ref) is None


def test_a_fiber_closed_outside_its_task_leaves_that_context_as_it_was(sim: Simulation) -> None:
    """When the garbage collector closes a dead incarnation's inner fiber, the close runs in
    whatever context the collector happens to run in; restoring the outer fiber's frame there
    would make `stash()` outside any fiber write into a dead fiber instead of raising."""

    class Nested(Agent):
        async def nest(self) -> None:
            async def inner(ctx: Any) -> None:
                await self.host.clock.sleep(60_000)

            async def outer(ctx: Any) -> None:
                await self.run_fiber("inner", inner)

            await self.run_fiber("outer", outer)

    ref = sim.agent(Nested, "n")
    sim.start_call(ref, "nest")
    sim.run_for(1_000)
    bodies = []
    for task in list(sim.platform.kernel._live):
        coro = task.coro
        while coro is not None and hasattr(coro, "cr_frame"):
            if coro.cr_frame is not None and coro.cr_code.co_name == "_run_fiber_internal":
                bodies.append(coro)
            coro = coro.cr_await
    assert len(bodies) == 2, "the outer and the inner fiber are both running"
    assert _current_fiber.get() is None
    bodies[-1].close()  # the inner fiber, closed here as the collector would close it
    assert _current_fiber.get() is None
    with pytest.raises(NotInFiber):
        sim.instance_of(ref).stash({"late": True})
