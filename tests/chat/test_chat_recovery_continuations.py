"""Chat recovery's continuations: on 0.32.0 a top-level chat host runs each as a Task run of
`__cf_internal_chat_recovery`, never as a `_chatRecoveryContinue` schedule; a sub-agent, and
every host on 0.21.0, schedules it (spec sdk-0.32 §8.3, `chat/continuation_runners.py`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents_core import Agent
from agents_core.chat.continuation_runners import continuation_input
from agents_core.errors import InvalidArgument
from sim import AgentRef, Simulation
from sim.model import ScriptedModel, stall, text
from tests.chat.chat_agents import HOSTS, user
from tests.chat.interrupted_turns import interrupt_a_turn
from tests.releases import stored_schedules

RECOVERY = "__cf_internal_chat_recovery"
CONTINUE = "_chatRecoveryContinue"
INCIDENT_PREFIX = "cf:chat-recovery:incident:"

on_0_32 = pytest.mark.parametrize("sim", ["0.32.0"], indirect=True)
each_host = pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)


def events(sim: Simulation, ref: AgentRef, name: str, **match: Any) -> list[dict[str, Any]]:
    return [dict(r.fields) for r in sim.trace.select(name, agent=ref.path, **match)]


def recovery_runs(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    exists = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cf_agents_task_runs'"
    if not sim.query(ref, exists):
        return []
    return sim.query(
        ref,
        "SELECT run_id, input, state, metadata, idempotency_key, retain, next_at "
        "FROM cf_agents_task_runs WHERE definition = ?",
        RECOVERY,
    )


def continuation_schedules(sim: Simulation, ref: AgentRef) -> list[Any]:
    """Every trace of a `_chatRecoveryContinue` schedule, and every stored one."""
    traced = [
        r
        for name in ("schedule:create", "schedule:execute")
        for r in sim.trace.select(name)
        if r.get("callback") == CONTINUE
    ]
    return traced + [s for s in stored_schedules(sim, ref) if s["callback"] == CONTINUE]


def run_until_accepted(sim: Simulation, ref: AgentRef, count: int = 1) -> None:
    sim.run_while(lambda: len(events(sim, ref, "task:accepted", definition=RECOVERY)) < count)


@on_0_32
@each_host
def test_a_continuation_is_an_enqueued_task_run_of_the_recovery_definition(
    sim: Simulation, host: type
) -> None:
    """The wake that claims the interrupted turn enqueues one run of `__cf_internal_chat_recovery`
    (not retained; input `{callback, data, delaySeconds: 0}`; metadata `{callback, incidentId}`;
    keyed `chat-recovery:<callback>:<incidentId>`), `pending` with its wake job; no attempt runs
    in the caller. Its wake runs the step `continuation`, which hands the turn off; the run is
    gone, and the recovered turn answers."""
    ref, model = interrupt_a_turn(sim, host)
    run_until_accepted(sim, ref)
    (run,) = recovery_runs(sim, ref)
    run_id = run["run_id"]
    assert run_id.startswith("task_")
    (detected,) = events(sim, ref, "chat:recovery:detected")
    origin = detected["originRequestId"]
    data = json.loads(run["input"])
    assert (data["callback"], data["delaySeconds"]) == (CONTINUE, 0)
    assert (data["data"]["requestId"], data["data"]["originRequestId"]) == (
        detected["requestId"],
        origin,
    )
    incident_id = data["data"]["incidentId"]
    (question,) = [m for m in sim.instance_of(ref).messages if m["role"] == "user"]
    assert incident_id == f"{origin}:{question['id']}"
    assert json.loads(run["metadata"]) == {"callback": CONTINUE, "incidentId": incident_id}
    assert run["idempotency_key"] == f"chat-recovery:{CONTINUE}:{incident_id}"
    assert (run["state"], run["retain"]) == ("pending", 0)
    assert sim.query(ref, "SELECT fn FROM cf_agents_jobs WHERE id = ?", f"task:{run_id}") == [
        {"fn": "wake"}
    ]
    assert events(sim, ref, "task:attempt:started", runId=run_id) == []

    sim.run_for(60_000)
    assert recovery_runs(sim, ref) == []
    assert [e["step"] for e in events(sim, ref, "task:step:completed", runId=run_id)] == [
        "continuation"
    ]
    assert [e["runId"] for e in events(sim, ref, "task:completed", definition=RECOVERY)] == [run_id]
    assert sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX) == {}, "completed: deleted"
    assert len(model.requests) == 2
    assert sim.instance_of(ref).messages[-1]["role"] == "assistant"


@on_0_32
@each_host
def test_no_continuation_schedule_is_written_on_a_top_level_host(
    sim: Simulation, host: type
) -> None:
    """Neither a `_chatRecoveryContinue` job nor its `schedule:create`/`schedule:execute`:
    the continuation lives in the Tasks tables only."""
    ref, _ = interrupt_a_turn(sim, host)
    run_until_accepted(sim, ref)
    assert continuation_schedules(sim, ref) == []
    sim.run_for(60_000)
    assert continuation_schedules(sim, ref) == []
    assert sim.query(ref, "SELECT fn FROM cf_agents_jobs WHERE fn = ?", CONTINUE) == []


@on_0_32
@each_host
def test_the_continuation_runs_after_an_eviction_between_its_enqueue_and_its_wake(
    sim: Simulation, host: type
) -> None:
    """The isolate dies right after the run was accepted: the run and its wake job survive, the
    next isolate drives the same run (its first attempt) and the turn is recovered."""
    ref, model = interrupt_a_turn(sim, host)
    run_until_accepted(sim, ref)
    (run,) = recovery_runs(sim, ref)
    sim.evict(ref)
    assert sim.alarm_of(ref) is not None, "the wake job's alarm outlives the isolate"
    sim.run_for(60_000)  # the alarm wakes the agent
    started = events(sim, ref, "task:attempt:started", runId=run["run_id"])
    assert [e["attempt"] for e in started] == [1]
    assert sim.trace.select("task:attempt:started", runId=run["run_id"])[0].inc == 3
    assert recovery_runs(sim, ref) == []
    assert sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX) == {}, "completed: deleted"
    assert len(model.requests) == 2
    assert continuation_schedules(sim, ref) == []


@on_0_32
@each_host
def test_a_continuation_attempt_killed_midway_runs_again_in_the_next_isolate(
    sim: Simulation, host: type
) -> None:
    """The process dies as the continuation's first attempt journals its step: the claim of
    that attempt rolls back with it, the platform retries the alarm, and the next isolate
    drives the same run again, whose attempt runs the continuation once."""
    ref, model = interrupt_a_turn(sim, host)
    run_until_accepted(sim, ref)
    (run,) = recovery_runs(sim, ref)
    run_id = run["run_id"]
    sim.arm_storage_fault(ref, "crash", match=r"^INSERT INTO cf_agents_task_steps\b")
    sim.run_for(60_000)
    (crash,) = sim.trace.select("fault:crash")
    started = sim.trace.select("task:attempt:started", runId=run_id)
    assert [(r.get("attempt"), r.inc) for r in started] == [(1, crash.inc), (1, crash.inc + 1)]
    steps = sim.trace.select("task:step:completed", runId=run_id)
    assert [(r.get("step"), r.inc) for r in steps] == [("continuation", crash.inc + 1)]
    assert recovery_runs(sim, ref) == []
    assert sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX) == {}, "completed: deleted"
    assert len(model.requests) == 2


def with_options(host: type, **options: Any) -> type:
    return type(f"Opt{host.__name__}", (host,), {"chat_recovery": options})


def busy_host_recovery(sim: Simulation, host: type) -> tuple[AgentRef, type]:
    """The recovery finds a turn running (it never ends): after 10 s it is tried again 3 s
    later, a second run with `delaySeconds: 3`."""
    busy = with_options(host, max_attempts=2)
    sim.register_model(ScriptedModel(default=stall(3_600_000)))
    ref = sim.agent(busy, "c")
    sim.start_call(ref, "save_messages", [user("first")])
    sim.run_for(5_000)
    sim.evict(ref)
    sim.agent(busy, "c")
    sim.start_call(ref, "save_messages", [user("second")])
    return ref, busy


@on_0_32
@each_host
def test_the_delay_is_a_backoff_sleep_of_the_run(sim: Simulation, host: type) -> None:
    """A continuation retried 3 s after a stable timeout is a run of its own, not keyed, with
    `delaySeconds: 3`: its first attempt journals the sleep `backoff` and parks the run
    `waiting` until 3 s later; the next attempt, not before then, runs the continuation."""
    ref, _ = busy_host_recovery(sim, host)
    run_until_accepted(sim, ref, count=2)
    second = events(sim, ref, "task:accepted", definition=RECOVERY)[1]["runId"]
    (run,) = [r for r in recovery_runs(sim, ref) if r["run_id"] == second]
    assert json.loads(run["input"])["delaySeconds"] == 3
    assert run["idempotency_key"] is None
    accepted_at = sim.now_ms
    sim.run_for(100)
    (waiting,) = events(sim, ref, "task:waiting", runId=second)
    assert waiting == {
        "runId": second,
        "definition": RECOVERY,
        "reason": "sleep",
        "wakeAt": waiting["wakeAt"],
    }
    assert accepted_at + 3_000 <= waiting["wakeAt"] <= accepted_at + 3_100
    (parked,) = [r for r in recovery_runs(sim, ref) if r["run_id"] == second]
    assert (parked["state"], parked["next_at"]) == ("waiting", waiting["wakeAt"])
    assert sim.query(
        ref, "SELECT step_name, kind, state FROM cf_agents_task_steps WHERE run_id = ?", second
    ) == [{"step_name": "backoff", "kind": "sleep", "state": "waiting"}]
    sim.run_for(20_000)
    attempts = sim.trace.select("task:attempt:started", runId=second)
    assert [r.get("attempt") for r in attempts] == [1, 2]
    assert attempts[1].t_ms >= waiting["wakeAt"]
    steps = sim.trace.select("task:step:started", runId=second)
    assert [(r.get("step"), r.t_ms >= waiting["wakeAt"]) for r in steps] == [("continuation", True)]
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    assert exhausted.get("reason") == "stable_timeout"


@on_0_32
@each_host
def test_an_eviction_during_the_backoff_keeps_the_wake_time(sim: Simulation, host: type) -> None:
    """The isolate dies while the retried continuation sleeps: the next isolate's startup leaves
    the waiting run's deadline where it was, and the run wakes then, not at once."""
    ref, busy = busy_host_recovery(sim, host)
    run_until_accepted(sim, ref, count=2)
    second = events(sim, ref, "task:accepted", definition=RECOVERY)[1]["runId"]
    sim.run_while(lambda: not events(sim, ref, "task:waiting", runId=second))
    (waiting,) = events(sim, ref, "task:waiting", runId=second)
    sim.run_for(1_000)
    sim.evict(ref)
    sim.agent(busy, "c")
    sim.run_for(10)
    (parked,) = [r for r in recovery_runs(sim, ref) if r["run_id"] == second]
    assert (parked["state"], parked["next_at"]) == ("waiting", waiting["wakeAt"])
    sim.run_for(20_000)
    attempts = sim.trace.select("task:attempt:started", runId=second)
    assert [r.get("attempt") for r in attempts] == [1, 2]
    assert attempts[1].t_ms >= waiting["wakeAt"]
    assert attempts[1].inc > attempts[0].inc


def failing_continuation(host: type, failures: int) -> type:
    """`host` whose continuation callback raises for its first `failures` calls."""

    async def _chat_recovery_continue(self: Any, payload: Any, _row: Any = None) -> None:
        cls = type(self)
        cls.calls += 1
        if cls.calls <= failures:
            raise RuntimeError(f"continuation failed ({cls.calls})")
        await host._chat_recovery_continue(self, payload, _row)

    return type(
        f"Failing{failures}{host.__name__}",
        (host,),
        {"calls": 0, "_chat_recovery_continue": _chat_recovery_continue},
    )


@on_0_32
@each_host
def test_a_failed_continuation_step_is_retried_100_ms_later(sim: Simulation, host: type) -> None:
    """The callback raises once: the step waits its retry delay (100 ms), the run is parked
    `waiting` (`retry`), and the run's next attempt retries the step (`task:step:retry`,
    attempt 2), which hands the turn off."""
    flaky = failing_continuation(host, 1)
    ref, model = interrupt_a_turn(sim, flaky)
    run_until_accepted(sim, ref)
    (run,) = recovery_runs(sim, ref)
    run_id = run["run_id"]
    sim.run_for(60_000)
    (failed_at,) = [r.t_ms for r in sim.trace.select("task:step:started", runId=run_id, attempt=1)]
    (waiting,) = events(sim, ref, "task:waiting", runId=run_id)
    assert (waiting["reason"], waiting["wakeAt"]) == ("retry", failed_at + 100)
    (retry,) = sim.trace.select("task:step:retry", runId=run_id)
    assert (retry.get("step"), retry.get("attempt")) == ("continuation", 2)
    assert retry.t_ms >= failed_at + 100
    started = events(sim, ref, "task:attempt:started", runId=run_id)
    assert [e["attempt"] for e in started] == [1, 2]
    assert [e["attempt"] for e in events(sim, ref, "task:step:completed", runId=run_id)] == [2]
    assert flaky.calls == 2
    assert recovery_runs(sim, ref) == []
    assert sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX) == {}, "completed: deleted"
    assert len(model.requests) == 2


@on_0_32
@each_host
def test_a_continuation_step_failing_three_times_fails_the_run(sim: Simulation, host: type) -> None:
    """Three attempts, 100 ms then 200 ms apart, and the step is spent: the run fails
    (`task:failed`) and, not retained, is deleted with its steps and its wake job."""
    broken = failing_continuation(host, 99)
    ref, model = interrupt_a_turn(sim, broken)
    run_until_accepted(sim, ref)
    (run,) = recovery_runs(sim, ref)
    run_id = run["run_id"]
    sim.run_for(60_000)
    starts = sim.trace.select("task:step:started", runId=run_id)
    assert [r.get("attempt") for r in starts] == [1, 2, 3]
    assert [b.t_ms - a.t_ms for a, b in zip(starts, starts[1:], strict=False)] == [100, 200]
    assert [e["error"] for e in events(sim, ref, "task:failed", runId=run_id)] == ["RuntimeError"]
    assert broken.calls == 3
    assert recovery_runs(sim, ref) == []
    assert sim.query(ref, "SELECT * FROM cf_agents_task_steps WHERE run_id = ?", run_id) == []
    assert sim.query(ref, "SELECT id FROM cf_agents_jobs WHERE id = ?", f"task:{run_id}") == []
    assert len(model.requests) == 1, "no recovered turn ran"


class Parent(Agent):
    """A plain root whose sub-agent is a chat host."""

    async def make(self, host: str, name: str) -> None:
        (cls,) = [c for c in HOSTS if c.__name__ == host]
        await self.sub_agent(cls, name)


@on_0_32
@each_host
def test_a_sub_agent_schedules_its_continuation_as_on_0_21(sim: Simulation, host: type) -> None:
    """A sub-agent has no alarm of its own and the port does not route Task runs to its root:
    its continuation is a `_chatRecoveryContinue` schedule (a job in the root's queue), and no
    recovery run is made."""
    sim.register_model(ScriptedModel(default=text("the answer", chunks=4, delay_ms=5_000)))
    parent = sim.agent(Parent, "p")
    sim.call(parent, "make", host.__name__, "f")
    child = sim.facet(parent, host, "f")
    sim.start_call(child, "save_messages", [user("go")])
    sim.run_for(2_000)
    sim.evict(parent)
    sim.agent(Parent, "p")
    sim.run_for(60_000)
    created = [r for r in sim.trace.select("schedule:create") if r.get("callback") == CONTINUE]
    assert [r.agent for r in created] == [child.path]
    assert events(sim, child, "task:accepted", definition=RECOVERY) == []
    assert recovery_runs(sim, child) == []


@each_host
def test_on_0_21_a_continuation_is_a_schedule(host: type) -> None:
    """0.21.0 keeps its schedule (`cf_agents_schedules`, `schedule:create`/`:execute`) and makes
    no Task table."""
    with Simulation(seed=8_3, sdk="0.21.0") as sim:
        ref, model = interrupt_a_turn(sim, host)
        sim.run_for(60_000)
        executed = [
            r for r in sim.trace.select("schedule:execute") if r.get("callback") == CONTINUE
        ]
        assert len(executed) == 1
        assert recovery_runs(sim, ref) == []
        assert sim.trace.select("task:accepted") == []
        assert len(model.requests) == 2


@pytest.mark.parametrize(
    ("callback", "data", "delay", "match"),
    [
        ("_chatRecoveryGo", {}, 0, "unknown callback: '_chatRecoveryGo'"),
        (CONTINUE, [], 0, "data must be an object, got \\[\\]"),
        (CONTINUE, {}, -1, "delaySeconds must be a finite non-negative number, got -1"),
        (CONTINUE, {}, float("inf"), "finite non-negative number, got inf"),
        (CONTINUE, {}, True, "finite non-negative number, got True"),
    ],
)
def test_a_continuation_input_is_checked(callback: Any, data: Any, delay: Any, match: str) -> None:
    """The input a continuation run is made from, and runs with, is refused with what was
    wrong."""
    with pytest.raises(InvalidArgument, match=match):
        continuation_input(callback, data, delay)


def test_a_retry_callback_is_a_valid_continuation() -> None:
    assert continuation_input("_chatRecoveryRetry", {"a": 1}, 2.5) == {
        "callback": "_chatRecoveryRetry",
        "data": {"a": 1},
        "delaySeconds": 2.5,
    }
