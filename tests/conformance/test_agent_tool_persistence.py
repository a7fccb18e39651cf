"""Agent tools: persistence and replay of terminal causes (group J), progress observation on
the parent (T-95, T-96), forwarding robustness (T-27), nested caps and detached slots (T-49,
T-50) and the detached re-issue's backbone (T-42)."""

from __future__ import annotations

import json
from typing import Any

from agents_core import Agent
from agents_core.agent_tools import AgentToolEvents
from sim import Simulation
from tests.agent_tools.scripted_child import ScriptedChild
from tests.conformance.test_reattach import (
    HANG,
    dispatch,
    parent_with,
    restart,
    row_of,
)
from tests.releases import on_both_releases

pytestmark = on_both_releases

QUICK = [["text", "Hello "], ["sleep", 50], ["text", "world"], ["finish", "completed", "done"]]


def frames_of(client) -> list[dict[str, Any]]:
    return [f for f in client.frames if f.get("type") == "agent-tool-event"]


# -- J. persistence and replay --------------------------------------------------------------------
def test_T124_interrupted_causes_are_persisted_and_replayed_as_they_were(sim: Simulation) -> None:
    """A no-progress give-up (child still running) and a window-exceeded teardown (child gone)
    read back and replay with the same reason and childStillRunning."""
    soft = sim.agent(parent_with(agent_tool_reattach_no_progress_timeout_ms=200), "soft")
    hard = sim.agent(
        parent_with(
            agent_tool_reattach_no_progress_timeout_ms=5_000, agent_tool_reattach_max_window_ms=200
        ),
        "hard",
    )
    dispatch(sim, soft, "r", [["text", "a"], *HANG], HANG)
    dispatch(sim, hard, "r", [["text", "a"], *HANG], HANG)
    restart(sim, soft)
    sim.agent(hard.cls, hard.name)
    sim.run_for(5_000)
    for ref, cause in ((soft, ("no-progress", True)), (hard, ("window-exceeded", False))):
        row = row_of(sim, ref, "r")
        assert (row["interrupted_reason"], bool(row["child_still_running"])) == cause
        (terminal,) = [
            f["event"] for f in frames_of(sim.connect(ref)) if f["event"]["kind"] == "interrupted"
        ]
        assert (terminal["reason"], terminal["childStillRunning"]) == cause
        assert terminal["error"] == row["error_message"]


def test_T126_a_repaired_run_reads_and_replays_completed_without_a_cause(sim: Simulation) -> None:
    """A run sealed interrupted and later repaired by a re-issue reads back and replays as
    completed with its summary and no reason or childStillRunning."""
    cls = parent_with(agent_tool_reattach_no_progress_timeout_ms=200)
    p = sim.agent(cls, "p")
    dispatch(sim, p, "r", [["text", "a"], *HANG], [["sleep", 1_000], ["finish", "completed", "ok"]])
    restart(sim, p)
    sim.run_for(500)
    assert row_of(sim, p, "r")["status"] == "interrupted"
    sim.run_for(2_000)  # the resumed child finishes meanwhile
    assert sim.call(p, "go", "ResumingChild", "r", HANG)["status"] == "completed"
    row = row_of(sim, p, "r")
    assert (
        row["status"],
        row["summary"],
        row["interrupted_reason"],
        row["child_still_running"],
    ) == ("completed", "ok", None, None)
    (terminal,) = [
        f["event"]
        for f in frames_of(sim.connect(p))
        if f["event"]["kind"] in ("finished", "interrupted")
    ]
    assert terminal == {"kind": "finished", "runId": "r", "summary": "ok"}


class Live(Agent):
    async def go(self, steps: list[Any]) -> None:
        await self.run_agent_tool(
            ScriptedChild, input={"steps": steps}, run_id="r", parent_tool_call_id="tc"
        )


def test_T128_a_reconnect_replay_is_deduped_and_text_is_not_doubled(sim: Simulation) -> None:
    """A client that saw a run live and then reconnects shows its text exactly once."""
    ref = sim.agent(Live, "p")
    client = sim.connect(ref)
    sim.call(
        ref,
        "go",
        [
            ["text", "A"],
            ["sleep", 10],
            ["progress", {"fraction": 0.5}],
            ["text", "B"],
            ["finish", "completed", "AB"],
        ],
    )
    sim.reconnect(client)
    events = AgentToolEvents(now_ms=lambda: sim.now_ms)
    for message in client.frames:
        events.receive(message)
    (run,) = events.get_runs_for_tool_call("tc")
    text = "".join(p.get("text", "") for p in run.parts if p.get("type") == "text")
    assert (run.status, text) == ("completed", "AB")
    replayed = [f for f in frames_of(client) if f.get("replay")]
    assert len(replayed) == 4  # started, A, B, finished: the frames were there twice


# -- progress observation -------------------------------------------------------------------------
class Observer(Agent):
    async def run(self, steps: list[Any], detached: bool) -> None:
        await self.run_agent_tool(
            ScriptedChild, input={"steps": steps}, run_id="r", detached=True if detached else None
        )

    async def on_progress(self, run, snapshot) -> None:
        self.host.trace.emit("user:progress", runId=run.run_id, snapshot=snapshot)
        if snapshot.get("message") == "boom":
            raise RuntimeError("observer failed")


PROGRESS = [
    ["sleep", 10],
    ["progress", {"fraction": 0.25, "message": "boom"}],
    ["sleep", 10],
    ["progress", {"fraction": 0.5}],
    ["sleep", 10],
    ["finish", "completed", "x"],
]


def test_T095_forwarded_progress_updates_detached_rows_and_calls_on_progress(
    sim: Simulation,
) -> None:
    """A detached run's forwarded progress stamps last_progress_at and calls on_progress with
    the parent's time; an awaited run gets on_progress but no stamp; a throwing on_progress is
    only logged and forwarding goes on."""
    detached = sim.agent(Observer, "d")
    sim.call(detached, "run", PROGRESS, True)
    sim.run_for(1_000)
    seen = sim.trace.select("user:progress", agent="Observer/d")
    assert [s.get("snapshot") for s in seen] == [
        {"fraction": 0.25, "message": "boom", "at": 10},
        {"fraction": 0.5, "at": 20},
    ]
    assert row_of(sim, detached, "r")["last_progress_at"] == 20
    assert sim.trace.select("console:warn", agent="Observer/d")
    awaited = sim.agent(Observer, "a")
    sim.call(awaited, "run", PROGRESS, False)
    assert len(sim.trace.select("user:progress", agent="Observer/a")) == 2
    assert row_of(sim, awaited, "r")["last_progress_at"] is None
    assert row_of(sim, awaited, "r")["status"] == "completed"


def test_T096_a_forwarded_milestone_reaches_on_progress_with_its_name_and_data(
    sim: Simulation,
) -> None:
    """on_progress receives a milestone snapshot carrying the milestone name and its data."""
    ref = sim.agent(Observer, "m")
    sim.call(
        ref,
        "run",
        [["sleep", 10], ["milestone", "sources", {"count": 3}], ["finish", "completed", "x"]],
        False,
    )
    (seen,) = sim.trace.select("user:progress")
    assert seen.get("snapshot") == {"milestone": "sources", "data": {"count": 3}, "at": 10}


# -- forwarding -----------------------------------------------------------------------------------
class SloppyTail(ScriptedChild):
    """A child whose tail mixes malformed records between good ones."""

    async def read_agent_tool_tail(self, tail_id: str) -> list[Any] | None:
        batch = await super().read_agent_tool_tail(tail_id)
        if not batch:
            return batch
        return ["not a record", {"sequence": 9}, {"body": ""}, *batch, {"body": None}]


class Sloppy(Agent):
    async def go(self) -> None:
        await self.run_agent_tool(
            SloppyTail,
            input={
                "steps": [
                    ["sleep", 10],
                    ["text", "one"],
                    ["sleep", 10],
                    ["text", "two"],
                    ["finish", "completed", "x"],
                ]
            },
            run_id="r",
        )


def test_T027_malformed_tail_records_are_skipped(sim: Simulation) -> None:
    """Malformed records between two good chunks are skipped: exactly the two good chunk
    events are broadcast and the run completes."""
    ref = sim.agent(Sloppy, "s")
    client = sim.connect(ref)
    sim.call(ref, "go")
    chunks = [
        json.loads(f["event"]["body"])["delta"]
        for f in frames_of(client)
        if f["event"]["kind"] == "chunk"
    ]
    assert chunks == ["one", "two"]
    assert frames_of(client)[-1]["event"]["kind"] == "finished"


# -- caps -----------------------------------------------------------------------------------------
class Middle(ScriptedChild):
    """A child that is itself a parent with a cap of 1."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.max_concurrent_agent_tools = 1

    async def fan_out(self) -> list[str]:
        runs = [
            self.run_agent_tool(ScriptedChild, input={"steps": QUICK}, run_id=f"g{i}")
            for i in range(2)
        ]
        return [f"{r.status}:{r.error or ''}" for r in await self.host.tasks.gather(*runs)]


class Top(Agent):
    async def nest(self) -> list[str]:
        await self.run_agent_tool(Middle, input={"steps": QUICK}, run_id="mid")
        middle = await self.sub_agent(Middle, "mid")
        return await middle.fan_out()


def test_T049_each_nesting_level_has_its_own_cap(sim: Simulation) -> None:
    """An uncapped parent's middle child with cap 1 admits one grandchild and rejects the other."""
    ref = sim.agent(Top, "t")
    assert sim.call(ref, "nest") == ["completed:", "error:maxConcurrentAgentTools (1) exceeded"]


class OneSlot(Agent):
    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.max_concurrent_agent_tools = 1

    async def background(self) -> str:
        result = await self.run_agent_tool(
            ScriptedChild, input={"steps": HANG}, run_id="bg", detached=True
        )
        return result.status

    async def awaited(self) -> dict[str, Any]:
        return (
            await self.run_agent_tool(ScriptedChild, input={"steps": QUICK}, run_id="fg")
        ).to_dict()


def test_T050_a_live_detached_run_holds_its_slot(sim: Simulation) -> None:
    """With cap 1 and one live detached run, an awaited run is rejected."""
    ref = sim.agent(OneSlot, "o")
    assert sim.call(ref, "background") == "running"
    assert sim.call(ref, "awaited")["error"] == "maxConcurrentAgentTools (1) exceeded"


def test_T042_a_detached_reissue_keeps_the_backbone_cadence(sim: Simulation) -> None:
    """Re-issuing a running detached run keeps the armed backbone tick (no cadence reset); with
    none armed it creates one at 5 s, cadence index 0."""
    ref = sim.agent(OneSlot, "o")
    sim.call(ref, "background")
    sim.run_for(6_000)  # the first tick ran at 5 s and armed the next one (index 1, 15 s)

    table, callback = (
        ("cf_agents_schedules", "callback")
        if sim.release == "0.21.0"
        else ("cf_agents_jobs", "capability = 'scheduler' AND fn")
    )

    def ticks() -> list[tuple[int, str]]:
        # 0.32.0's job keeps the time in milliseconds and the payload inside its envelope.
        if sim.release == "0.21.0":
            scale, payload = 1, lambda text: text
        else:
            scale, payload = 1000, lambda text: json.dumps(json.loads(text)["payload"])
        return [
            (r["time"] // scale, payload(r["payload"]))
            for r in sim.query(
                ref,
                f"SELECT time, payload FROM {table} WHERE {callback} = '_cfDetachedReconcileTick'",
            )
        ]

    before = ticks()
    assert [json.loads(p)["cadenceIndex"] for _, p in before] == [1]
    assert sim.call(ref, "background") == "running"
    assert ticks() == before
    sim.query(ref, f"DELETE FROM {table} WHERE {callback} = '_cfDetachedReconcileTick'")
    assert sim.call(ref, "background") == "running"
    (tick,) = ticks()
    assert json.loads(tick[1]) == {"cadenceIndex": 0}
    assert tick[0] == sim.now_ms // 1000 + 5
