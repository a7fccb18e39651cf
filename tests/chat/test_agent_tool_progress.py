"""Conformance, progress and milestones on the child (spec agent-tools §5, catalogue group G),
with seed decisions S2 (milestones are stored in the child's stream) and S4 (coalescing keeps
the latest value and flushes it after the 200 ms window)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sim import Simulation
from sim.model import (
    ScriptedModel,
    after_tool,
    call,
    offers,
    text,
    tool_calls,
    when,
)
from tests.chat.chat_agents import (
    HOSTS,
    chunk_types,
    journal,
    progress_frames,
    row,
    user,
    wait_settled,
    worker_model,
)
from tests.releases import on_both_releases

pytestmark = pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)


def run_worker(sim: Simulation, host: type, steps: list[Any], client: bool = True) -> tuple:
    """Start run-1 whose tool runs `steps`; run it to its end. (ref, client, start time)."""
    worker_model(sim, steps)
    ref = sim.agent(host, "c")
    connected = sim.connect(ref) if client else None
    started = sim.now_ms
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    wait_settled(sim, ref, "run-1")
    return ref, connected, started


def outcomes(sim: Simulation, ref) -> list[str]:
    return [entry["outcome"] for entry in journal(sim, ref)]


def milestone_rows(sim: Simulation, ref) -> list[dict[str, Any]]:
    table = ref.cls._agent_tool_milestones_table
    return sim.query(ref, f"SELECT * FROM {table} ORDER BY run_id, sequence")


def test_T087_outside_a_run_progress_is_inactive_and_only_warns(
    sim: Simulation, host: type
) -> None:
    """Called over RPC, or from a plain chat turn's tool, `report_progress` answers `inactive`,
    logs a warning, and broadcasts and persists nothing."""
    worker_model(sim, [["progress", {"fraction": 0.3}], ["progress", {"milestone": "m"}]])
    ref = sim.agent(host, "c")
    client = sim.connect(ref)
    assert sim.call(ref, "report_progress", fraction=0.5) == "inactive"
    assert sim.call(ref, "save_messages", [user("plain chat")])["status"] == "completed"
    assert outcomes(sim, ref) == ["inactive", "inactive"]
    warnings = sim.trace.select("console:warn", agent=ref.path)
    assert len(warnings) == 3
    assert all("outside an active agent-tool run" in w.get("message") for w in warnings)
    assert progress_frames(client.frames) == []
    assert progress_frames(client.frames, "data-agent-milestone") == []
    tables = {r["name"] for r in sim.query(ref, "SELECT name FROM sqlite_master")}
    if ref.cls._agent_tool_milestones_table in tables:
        assert milestone_rows(sim, ref) == []


def test_T088_progress_is_one_transient_frame_and_one_snapshot(sim: Simulation, host: type) -> None:
    """In an active run, progress {fraction 0.4, phase, message} broadcasts one transient
    `data-agent-progress` frame under the run's request id and persists one snapshot."""
    report = {"fraction": 0.4, "phase": "fetch", "message": "reading sources"}
    ref, client, _ = run_worker(sim, host, [["sleep", 30], ["progress", report]])
    (entry,) = journal(sim, ref)
    (frame,) = progress_frames(client.frames)
    stored = row(sim, ref, "run-1")
    assert frame["id"] == stored["request_id"]
    assert frame["parsed"] == {"type": "data-agent-progress", "transient": True, "data": report}
    assert json.loads(stored["progress_json"]) == report
    assert stored["last_signal_at"] == entry["t"]
    inspection = sim.call(ref, "inspect_agent_tool_run", "run-1")
    assert inspection["progress"] == {**report, "at": entry["t"]}
    assert "data-agent-progress" not in chunk_types(sim.call(ref, "get_agent_tool_chunks", "run-1"))


@on_both_releases
def test_T090_bursts_coalesce_but_a_done_fraction_is_sent_at_once(
    sim: Simulation, host: type
) -> None:
    """A second report within 200 ms is `coalesced`; a `fraction: 1` right after is `emitted`."""
    steps = [
        ["progress", {"fraction": 0.1}],
        ["progress", {"fraction": 0.2}],
        ["progress", {"fraction": 1}],
    ]
    ref, client, _ = run_worker(sim, host, steps)
    assert outcomes(sim, ref) == ["emitted", "coalesced", "emitted"]
    fractions = [f["parsed"]["data"]["fraction"] for f in progress_frames(client.frames)]
    assert fractions == [0.1, 1]
    assert json.loads(row(sim, ref, "run-1")["progress_json"]) == {"fraction": 1}


@on_both_releases
def test_T090_S4_the_latest_coalesced_value_is_flushed_after_the_window(
    sim: Simulation, host: type
) -> None:
    """Seed S4: of a burst, the first is sent, the middle one is dropped, and the latest is sent
    when the 200 ms window ends — broadcast and persisted."""
    steps = [
        ["progress", {"fraction": 0.1}],
        ["progress", {"fraction": 0.2}],
        ["progress", {"fraction": 0.3, "phase": "late"}],
        ["sleep", 500],
    ]
    ref, client, _ = run_worker(sim, host, steps)
    first_t = journal(sim, ref)[0]["t"]
    sent = [(f["parsed"]["data"], f) for f in progress_frames(client.frames)]
    assert [data for data, _ in sent] == [{"fraction": 0.1}, {"fraction": 0.3, "phase": "late"}]
    flushes = [
        r
        for r in sim.trace.select("connection:frame", agent=ref.path)
        if "data-agent-progress" in str(r.get("frame")) and '"late"' in str(r.get("frame"))
    ]
    assert [r.t_ms for r in flushes] == [first_t + 200]
    assert json.loads(row(sim, ref, "run-1")["progress_json"]) == {"fraction": 0.3, "phase": "late"}
    assert row(sim, ref, "run-1")["last_signal_at"] == first_t + 200
    assert sim.probes["chat.progress_trailing_flush"] >= 1


@on_both_releases
def test_T090_S4_a_value_pending_when_the_run_ends_is_not_lost(sim: Simulation, host: type) -> None:
    """Seed S4: a coalesced value still pending when the run settles is flushed before the
    terminal write, never after it."""
    ref, client, _ = run_worker(
        sim, host, [["progress", {"fraction": 0.5}], ["progress", {"fraction": 0.9}]]
    )
    fractions = [f["parsed"]["data"]["fraction"] for f in progress_frames(client.frames)]
    assert fractions == [0.5, 0.9]
    assert json.loads(row(sim, ref, "run-1")["progress_json"]) == {"fraction": 0.9}


@on_both_releases
def test_T091_a_milestone_is_never_coalesced_and_is_persisted(sim: Simulation, host: type) -> None:
    """Right after a progress report a milestone is still `emitted`: a milestone row (the
    snapshot untouched), a frame with no transient flag and data {name, sequence 0, at, data},
    and (S2) a chunk stored in the run's stream and a part of the persisted answer."""
    steps = [
        ["progress", {"fraction": 0.2}],
        ["progress", {"milestone": "sources-gathered", "data": {"n": 3}}],
    ]
    ref, client, _ = run_worker(sim, host, steps)
    assert outcomes(sim, ref) == ["emitted", "emitted"]
    at = journal(sim, ref)[1]["t"]
    (milestone,) = milestone_rows(sim, ref)
    assert (milestone["sequence"], milestone["name"], json.loads(milestone["data_json"])) == (
        0,
        "sources-gathered",
        {"n": 3},
    )
    assert json.loads(row(sim, ref, "run-1")["progress_json"]) == {"fraction": 0.2}
    (frame,) = progress_frames(client.frames, "data-agent-milestone")
    assert "transient" not in frame["parsed"]
    assert frame["parsed"]["data"] == {
        "name": "sources-gathered",
        "sequence": 0,
        "at": at,
        "data": {"n": 3},
    }
    stored = sim.call(ref, "get_agent_tool_chunks", "run-1")
    assert chunk_types(stored).count("data-agent-milestone") == 1
    assert [c["body"] for c in stored if "agent-milestone" in c["body"]] == [frame["body"]]
    answer = json.loads(
        sim.query(ref, "SELECT message FROM cf_ai_chat_agent_messages ORDER BY rowid DESC LIMIT 1")[
            0
        ]["message"]
    )
    assert [p["data"]["name"] for p in answer["parts"] if p["type"] == "data-agent-milestone"] == [
        "sources-gathered"
    ]


@on_both_releases
def test_T091_S2_a_milestone_survives_an_eviction_in_the_answer(
    sim: Simulation, host: type
) -> None:
    """Seed S2: a milestone reached before an eviction is still in the child's answer after chat
    recovery continued the turn, and still in `inspect().milestones`."""
    steps = [["progress", {"milestone": "half-way"}]]
    sim.register_model(
        ScriptedModel(
            rules=[
                when(after_tool("work"), reply=text("wxyz", chunks=4, delay_ms=1_000)),
                when(offers("work"), reply=tool_calls(call("work", {"steps": steps}), delay_ms=10)),
            ]
        )
    )
    ref = sim.agent(host, "c")
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    sim.run_for(2_000)
    sim.evict(ref)
    sim.agent(host, "c")
    sim.run_for(30_000)
    inspection = sim.call(ref, "inspect_agent_tool_run", "run-1")
    assert inspection["status"] == "completed"
    assert [m["name"] for m in inspection["milestones"]] == ["half-way"]
    answer = json.loads(
        sim.query(ref, "SELECT message FROM cf_ai_chat_agent_messages ORDER BY rowid DESC LIMIT 1")[
            0
        ]["message"]
    )
    types = [p["type"] for p in answer["parts"]]
    assert types[:2] == ["tool-work", "data-agent-milestone"] and set(types[2:]) == {"text"}
    assert len(sim.trace.select("chat:recovery:attempt", mode="continue")) == 1


def test_T092_progress_right_after_a_milestone_is_coalesced(sim: Simulation, host: type) -> None:
    """A milestone starts the 200 ms window: progress reported within it is `coalesced` (and,
    S4, flushed when the window ends)."""
    steps = [["progress", {"milestone": "a"}], ["progress", {"fraction": 0.5}], ["sleep", 300]]
    ref, client, _ = run_worker(sim, host, steps)
    assert outcomes(sim, ref) == ["emitted", "coalesced"]
    milestone_t = journal(sim, ref)[0]["t"]
    flushed = [
        r.t_ms
        for r in sim.trace.select("connection:frame", agent=ref.path)
        if "data-agent-progress" in str(r.get("frame"))
    ]
    assert flushed == [milestone_t + 200]


def test_T093_milestones_count_from_zero_and_bump_only_the_signal_time(
    sim: Simulation, host: type
) -> None:
    """Milestones "a" then "b" get sequences 0 and 1; `last_signal_at` is b's time while
    `progress_json` keeps the last ephemeral progress."""
    steps = [
        ["progress", {"fraction": 0.1}],
        ["sleep", 300],
        ["progress", {"milestone": "a"}],
        ["sleep", 50],
        ["progress", {"milestone": "b", "data": [1, 2]}],
    ]
    ref, _, _ = run_worker(sim, host, steps, client=False)
    b_time = journal(sim, ref)[-1]["t"]
    assert [(m["name"], m["sequence"]) for m in milestone_rows(sim, ref)] == [("a", 0), ("b", 1)]
    stored = row(sim, ref, "run-1")
    assert stored["last_signal_at"] == b_time
    assert json.loads(stored["progress_json"]) == {"fraction": 0.1}
    inspection = sim.call(ref, "inspect_agent_tool_run", "run-1")
    assert inspection["milestones"] == [
        {"name": "a", "sequence": 0, "at": b_time - 50},
        {"name": "b", "sequence": 1, "at": b_time, "data": [1, 2]},
    ]
    assert inspection["progress"] == {"fraction": 0.1, "at": b_time}


@on_both_releases
def test_T091_S2_a_milestone_whose_write_fails_leaves_no_row_without_its_chunk(
    sim: Simulation, host: type
) -> None:
    """S2 keeps a milestone's row and its stored chunk together. When the signal-time bump after
    the row fails (a storage error; nothing rolls the turn back), the report raises and takes
    its row back out: no milestone is listed that the stream does not hold."""
    steps = [["progress", {"milestone": "a"}]]
    worker_model(sim, steps)
    ref = sim.agent(host, "c")
    sim.arm_storage_fault(ref, "error", match=r"^UPDATE \w+ SET last_signal_at\b")
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    wait_settled(sim, ref, "run-1")
    assert len(sim.trace.select("fault:storage_error", agent=ref.path)) == 1
    assert milestone_rows(sim, ref) == []
    stored = sim.call(ref, "get_agent_tool_chunks", "run-1")
    assert "data-agent-milestone" not in chunk_types(stored)
    assert "milestones" not in sim.call(ref, "inspect_agent_tool_run", "run-1")
