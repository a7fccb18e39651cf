"""The Tasks capability as an agent author uses it on SDK 0.32.0 (spec sdk-0.32 §6.5; the
0.32.0 dist's `tasks` module): definitions declared in `task_definitions`, `self.tasks.run`
with its options, the run's rows and events, sleeps written as text, `get`, `list`, a
definition's handle, `delete` and the retention of settled runs; and that 0.21.0 has none of
it (`agents_core/releases/v0_32/tasks.py`)."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

import pytest

from agents_core import Agent
from agents_core.errors import InvalidArgument
from agents_core.releases.v0_32.task_errors import NonRetryableError
from sim import AgentRef, Simulation

on_0_32 = pytest.mark.parametrize("sim", ["0.32.0"], indirect=True)


class Reports(Agent):
    """Declares `report` (a step `fetch`, a sleep of `input.nap`, a step `render`), `flaky`
    (a step that fails `input.failures` times, then answers) and `doomed` (a step raising
    `NonRetryableError`). Every step callback journals its call in `calls` (the table
    survives eviction)."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql("CREATE TABLE IF NOT EXISTS calls (step TEXT, attempt INTEGER, t INTEGER)")

    @property
    def task_definitions(self) -> Mapping[str, Any]:
        return {"report": self._report, "flaky": self._flaky, "doomed": self._doomed}

    def _journal(self, step: str, attempt: int) -> None:
        self.sql("INSERT INTO calls VALUES (?, ?, ?)", step, attempt, self.host.clock.now_ms())

    async def _report(self, input: Any, step: Any) -> dict[str, Any]:
        async def fetch(context: Any) -> list[int]:
            self._journal("fetch", context.attempt)
            return [1, 2, 3]

        async def render(context: Any) -> str:
            self._journal("render", context.attempt)
            return f"{input['title']}: {sum(rows)}"

        rows = await step.do("fetch", fetch)
        await step.sleep("nap", input["nap"])
        text = await step.do("render", {"retries": {"limit": 1}}, render)
        return {"text": text, "key": step.idempotency_key("render")}

    async def _flaky(self, input: Any, step: Any) -> str:
        async def call(context: Any) -> str:
            self._journal("call", context.attempt)
            if context.attempt <= input["failures"]:
                raise RuntimeError(f"upstream down (attempt {context.attempt})")
            return "ok"

        config = {"retries": {"limit": 3, "delay": "2 seconds", "backoff": "linear"}}
        return str(await step.do("call", config, call))

    async def _doomed(self, input: Any, step: Any) -> None:
        async def call(context: Any) -> None:
            self._journal("call", context.attempt)
            raise NonRetryableError("the account is closed")

        await step.do("call", call)

    async def start(self, definition: str, input: Any = None, **options: Any) -> dict[str, Any]:
        return dict(await self.tasks.run(definition, input, **options))

    async def get(self, run_id: str) -> dict[str, Any] | None:
        return await self.tasks.get(run_id)

    async def get_by_key(self, key: str) -> dict[str, Any] | None:
        return await self.tasks.get_by_idempotency_key(key)

    async def list_runs(self, **options: Any) -> list[dict[str, Any]]:
        return await self.tasks.list(**options)

    async def cancel(self, run_id: str, reason: str | None = None) -> bool:
        return await self.tasks.cancel(run_id, reason)

    async def delete(self, **options: Any) -> int:
        return await self.tasks.delete(**options)

    async def through_handle(self, definition: str, op: str, *args: Any) -> Any:
        handle = self.tasks.handle(definition)
        return await getattr(handle, op)(*args)


def run_row(sim: Simulation, ref: AgentRef, run_id: str) -> dict[str, Any] | None:
    rows = sim.query(ref, "SELECT * FROM cf_agents_task_runs WHERE run_id = ?", run_id)
    return rows[0] if rows else None


def step_rows(sim: Simulation, ref: AgentRef, run_id: str) -> list[tuple[Any, ...]]:
    rows = sim.query(
        ref,
        "SELECT step_name, kind, state, attempt FROM cf_agents_task_steps WHERE run_id = ? "
        "ORDER BY created_at, step_name",
        run_id,
    )
    return [(r["step_name"], r["kind"], r["state"], r["attempt"]) for r in rows]


def task_events(sim: Simulation, run_id: str) -> list[str]:
    return [r.event for r in sim.trace.select("task:*", runId=run_id)]


def calls(sim: Simulation, ref: AgentRef) -> list[tuple[str, int]]:
    return [(r["step"], r["attempt"]) for r in sim.query(ref, "SELECT * FROM calls")]


@on_0_32
def test_a_run_journals_its_steps_sleeps_a_text_duration_and_completes(sim: Simulation) -> None:
    """`run` answers a `pending` receipt and starts the first attempt at once: `fetch` is
    journaled, the sleep "2 seconds" parks the run `waiting` until 2 s later; the wake job's
    attempt replays `fetch` from the journal (not called again) and completes the run, whose
    row keeps its result, metadata, idempotency key and attempt count."""
    ref = sim.agent(Reports, "r")
    receipt = sim.call(
        ref,
        "start",
        "report",
        {"title": "Q3", "nap": "2 seconds"},
        idempotency_key="q3",
        metadata={"requestedBy": "ana"},
    )
    run_id = receipt["runId"]
    assert run_id.startswith("task_")
    assert (receipt["definition"], receipt["accepted"], receipt["state"]) == (
        "report",
        True,
        "pending",
    )
    (waiting,) = sim.trace.select("task:waiting", runId=run_id)
    assert (waiting.get("reason"), waiting.get("wakeAt")) == ("sleep", receipt["createdAt"] + 2_000)
    assert sim.call(ref, "get", run_id) == {
        "runId": run_id,
        "definition": "report",
        "state": "waiting",
        "createdAt": receipt["createdAt"],
        "metadata": {"requestedBy": "ana"},
        "reason": "sleep",
        "wakeAt": receipt["createdAt"] + 2_000,
    }
    assert step_rows(sim, ref, run_id) == [
        ("fetch", "do", "completed", 1),
        ("nap", "sleep", "waiting", 0),
    ]
    sim.run_for(3_000)
    assert task_events(sim, run_id) == [
        "task:accepted",
        "task:attempt:started",
        "task:step:started",
        "task:step:completed",
        "task:waiting",
        "task:attempt:started",
        "task:step:started",
        "task:step:completed",
        "task:completed",
    ]
    assert calls(sim, ref) == [("fetch", 1), ("render", 1)]
    row = run_row(sim, ref, run_id)
    assert row is not None
    assert (row["state"], row["attempt"], row["idempotency_key"], row["generation"]) == (
        "completed",
        2,
        "q3",
        None,
    )
    assert json.loads(row["result"]) == {"text": "Q3: 6", "key": f"{run_id}:render"}
    assert step_rows(sim, ref, run_id)[1:] == [
        ("nap", "sleep", "completed", 0),
        ("render", "do", "completed", 1),
    ]
    assert sim.query(ref, "SELECT id FROM cf_agents_jobs WHERE capability = 'tasks'") == []
    snapshot = sim.call(ref, "get_by_key", "q3")
    assert (snapshot["state"], snapshot["result"]["text"], snapshot["settledAt"]) == (
        "completed",
        "Q3: 6",
        row["settled_at"],
    )


@on_0_32
def test_a_step_retries_with_its_backoff_then_a_non_retryable_error_fails_at_once(
    sim: Simulation,
) -> None:
    """`flaky` fails twice under a linear 2 s backoff: its run waits 2 s, then 4 s (reason
    `retry`), and its third attempt answers. `doomed` raises NonRetryableError on its first
    call: its step and its run fail with that name, with four retries left."""
    ref = sim.agent(Reports, "r")
    flaky = sim.call(ref, "start", "flaky", {"failures": 2})["runId"]
    sim.run_for(10_000)
    waits = sim.trace.select("task:waiting", runId=flaky)
    assert [(w.get("reason"), w.get("wakeAt") - w.t_ms) for w in waits] == [
        ("retry", 2_000),
        ("retry", 4_000),
    ]
    assert [r.get("attempt") for r in sim.trace.select("task:step:retry", runId=flaky)] == [2, 3]
    assert sim.call(ref, "get", flaky)["result"] == "ok"
    doomed = sim.call(ref, "start", "doomed")["runId"]
    sim.run_for(10_000)
    assert sim.call(ref, "get", doomed)["error"] == {
        "name": "NonRetryableError",
        "message": "the account is closed",
    }
    assert step_rows(sim, ref, doomed) == [("call", "do", "failed", 1)]
    assert [r.get("error") for r in sim.trace.select("task:failed", runId=doomed)] == [
        "NonRetryableError"
    ]


@on_0_32
def test_run_refuses_reserved_and_undeclared_names_and_joins_a_held_key(sim: Simulation) -> None:
    """The public `run` takes only declared, unreserved definitions; an idempotency key already
    held joins its run (`accepted` false) whatever its state."""
    ref = sim.agent(Reports, "r")
    with pytest.raises(InvalidArgument, match='must not use the reserved "__cf" prefix'):
        sim.call(ref, "start", "__cf_internal_chat_turn")
    with pytest.raises(InvalidArgument, match='Unknown Task definition "nope"'):
        sim.call(ref, "start", "nope")
    first = sim.call(ref, "start", "report", {"title": "A", "nap": 0}, idempotency_key="k")
    sim.run_for(1_000)
    again = sim.call(ref, "start", "report", {"title": "B", "nap": 0}, idempotency_key="k")
    assert (again["runId"], again["accepted"], again["state"]) == (
        first["runId"],
        False,
        "completed",
    )
    assert len(sim.query(ref, "SELECT run_id FROM cf_agents_task_runs")) == 1


@on_0_32
def test_list_is_newest_first_and_filters_by_definition_state_and_limit(sim: Simulation) -> None:
    """`list` orders by creation, newest first (run id breaks a tie), 100 at most by default;
    `definition`, `status` (one state or several) and `limit` narrow it. A handle sees only its
    own definition's runs."""
    ref = sim.agent(Reports, "r")
    ids = []
    for index, definition in enumerate(["report", "flaky", "report"]):
        input = {"title": "T", "nap": "1 hour"} if definition == "report" else {"failures": 0}
        ids.append(sim.call(ref, "start", definition, input, run_id=f"run-{index}")["runId"])
        sim.run_for(10)
    same_ms = [sim.call(ref, "start", "flaky", {"failures": 0}, run_id=r)["runId"] for r in "ab"]
    sim.run_for(10)
    listed = sim.call(ref, "list_runs")
    assert [r["runId"] for r in listed] == ["b", "a", "run-2", "run-1", "run-0"]
    assert [r["state"] for r in listed] == [
        "completed",
        "completed",
        "waiting",
        "completed",
        "waiting",
    ]
    reports = sim.call(ref, "list_runs", definition="report")
    assert [r["runId"] for r in reports] == ["run-2", "run-0"]
    assert [r["runId"] for r in sim.call(ref, "list_runs", status="waiting")] == ids[2::-2]
    both = sim.call(ref, "list_runs", status=["waiting", "completed"], limit=2)
    assert [r["runId"] for r in both] == same_ms[::-1]
    with pytest.raises(InvalidArgument, match="unknown run state 'done'"):
        sim.call(ref, "list_runs", status="done")
    assert sim.call(ref, "get", "missing") is None
    assert sim.call(ref, "through_handle", "report", "get", "run-0")["state"] == "waiting"
    assert sim.call(ref, "through_handle", "report", "get", "run-1") is None
    assert sim.call(ref, "through_handle", "report", "cancel", "run-1") is False
    assert sim.call(ref, "through_handle", "flaky", "cancel", "run-0") is False
    assert sim.call(ref, "get", "run-0")["state"] == "waiting"


@on_0_32
def test_delete_removes_settled_runs_with_their_steps_oldest_first(sim: Simulation) -> None:
    """`delete` removes settled runs (never a live one) with their journals, oldest settlement
    first, within `status`, `settled_before` and `limit`, and emits `task:deleted` for each; a
    live state in `status` is refused."""
    ref = sim.agent(Reports, "r")
    done = sim.call(ref, "start", "flaky", {"failures": 0}, run_id="done")["runId"]
    sim.run_for(100)
    failed = sim.call(ref, "start", "doomed", run_id="failed")["runId"]
    sim.run_for(100)
    cut = sim.now_ms
    parked = sim.call(ref, "start", "report", {"title": "T", "nap": "1 day"}, run_id="parked")
    sim.call(ref, "cancel", "parked")
    live = sim.call(ref, "start", "report", {"title": "T", "nap": "1 day"}, run_id="live")
    with pytest.raises(InvalidArgument, match="takes settled states only"):
        sim.call(ref, "delete", status=["waiting"])
    assert sim.call(ref, "delete", status=["failed", "cancelled"], settled_before=cut) == 1
    assert run_row(sim, ref, failed) is None and step_rows(sim, ref, failed) == []
    assert sim.call(ref, "delete", limit=1) == 1
    assert run_row(sim, ref, done) is None
    assert sim.call(ref, "delete") == 1
    assert run_row(sim, ref, parked["runId"]) is None
    assert sim.call(ref, "delete") == 0
    assert sim.call(ref, "get", live["runId"])["state"] == "waiting"
    deleted = sim.trace.select("task:deleted")
    assert [(r.get("runId"), r.get("definition")) for r in deleted] == [
        ("failed", "doomed"),
        ("done", "flaky"),
        ("parked", "report"),
    ]


@on_0_32
def test_a_run_not_retained_is_deleted_as_it_settles(sim: Simulation) -> None:
    """`retain=False`: the run and its steps are gone once it completes (`get` answers None);
    a retained run keeps them."""
    ref = sim.agent(Reports, "r")
    gone = sim.call(ref, "start", "flaky", {"failures": 0}, retain=False)["runId"]
    kept = sim.call(ref, "start", "flaky", {"failures": 0})["runId"]
    sim.run_for(100)
    assert sim.trace.select("task:completed", runId=gone) != []
    assert sim.call(ref, "get", gone) is None
    assert step_rows(sim, ref, gone) == []
    assert sim.call(ref, "get", kept)["state"] == "completed"
    assert step_rows(sim, ref, kept) == [("call", "do", "completed", 1)]


def test_an_agent_on_0_21_has_no_tasks() -> None:
    """On 0.21.0 an agent has no `tasks` attribute (AttributeError, as an SDK 0.21.0 agent
    has no `this.tasks`), its `task_definitions` are never read and no Task table exists."""
    seed = zlib.crc32(b"test_an_agent_on_0_21_has_no_tasks")
    with Simulation(seed=seed, sdk="0.21.0") as sim:
        ref = sim.agent(Reports, "r")
        with pytest.raises(AttributeError, match="has no attribute 'tasks'.*0.21.0"):
            sim.call(ref, "start", "report", {"title": "T", "nap": 0})
        assert sim.run_in(ref, lambda agent: hasattr(agent, "tasks")) is False
        tables = sim.query(ref, "SELECT name FROM sqlite_master WHERE name LIKE 'cf_agents_task%'")
        assert tables == []
