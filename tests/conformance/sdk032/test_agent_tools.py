"""Conformance on SDK 0.32.0: agent tools' `event_delivery`, positionless chunks and the
numbering of a replay and a re-attach (spec sdk-0.32 §7, catalogue J-77 … J-80)."""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

import pytest

from agents_core import Agent
from agents_core.agent_tools import AgentToolEvents, parts_text
from agents_core.chat import CHAT_RESPONSE_TYPE, ChatAgent
from agents_core.errors import InvalidArgument
from sim import AgentRef, Simulation
from sim.model import ScriptedModel, continuing, text, when
from tests.agent_tools.scripted_child import NoTailChild, ScriptedChild
from tests.chat.chat_agents import (
    HOSTS,
    AiChatChild,
    chunk_types,
    read_tail,
    row,
    wait_settled,
    worker_model,
)
from tests.conformance.test_reattach import HANG, dispatch, restart
from tests.conformance.test_reattach import Parent as ReattachParent
from tests.conformance.test_reattach import frames_of as reattach_frames
from tests.conformance.test_reattach import row_of as reattach_row

SCRIPT = [
    ["sleep", 50],
    ["text", "Hello "],
    ["progress", {"fraction": 0.5, "message": "half"}],
    ["milestone", "drafted", {"pages": 2}],
    ["text", "world"],
    ["finish", "completed", "all done"],
]
"""Its first step waits until the parent's tail is open (progress is live only)."""


class TellingChild(ScriptedChild):
    """Records the `event_delivery` its parent told it."""

    async def start_agent_tool_run(
        self, input: Any, run_id: str, event_delivery: str | None = None
    ) -> dict[str, Any]:
        self.host.trace.emit("test:child_started", runId=run_id, eventDelivery=event_delivery)
        return await super().start_agent_tool_run(input, run_id, event_delivery)


class Parent(Agent):
    async def go(self, steps: list[Any], run_id: str, **options: Any) -> dict[str, Any]:
        result = await self.run_agent_tool(
            TellingChild, input={"steps": steps}, run_id=run_id, **options
        )
        return result.to_dict()


def frames(sim: Simulation, client: Any, run_id: str) -> list[dict[str, Any]]:
    out = []
    for raw in client.frames:
        message = json.loads(raw) if isinstance(raw, str) else raw
        if message.get("type") == "agent-tool-event" and message["event"]["runId"] == run_id:
            out.append(message)
    return out


def bodies(messages: list[dict[str, Any]]) -> list[tuple[int, str, str | None]]:
    """(sequence, kind, part type of a chunk) per frame."""
    out = []
    for m in messages:
        event = m["event"]
        part = json.loads(event["body"]).get("type") if event["kind"] == "chunk" else None
        out.append((m["sequence"], event["kind"], part))
    return out


def tool_row(sim: Simulation, ref: AgentRef, run_id: str) -> dict[str, Any]:
    (row,) = sim.query(ref, "SELECT * FROM cf_agent_tool_runs WHERE run_id = ?", run_id)
    return row


def test_J077_terminal_delivery_is_refused_for_a_detached_run(sim: Simulation) -> None:
    """`event_delivery="terminal"` with `detached` throws, before the run id is looked up (so
    for an existing run id too), and no row or child is made."""
    parent = sim.agent(Parent, "p")
    message = 'runAgentTool: eventDelivery "terminal" is not supported for detached runs.'
    with pytest.raises(InvalidArgument) as raised:
        sim.call(parent, "go", SCRIPT, "d1", event_delivery="terminal", detached=True)
    assert str(raised.value) == message
    assert sim.query(parent, "SELECT run_id FROM cf_agent_tool_runs") == []
    sim.call(parent, "go", SCRIPT, "done")
    with pytest.raises(InvalidArgument, match="not supported for detached runs"):
        sim.call(parent, "go", SCRIPT, "done", event_delivery="terminal", detached=True)


def test_J078_an_unknown_event_delivery_is_refused(sim: Simulation) -> None:
    """`event_delivery="partial"` throws with the value as JSON, even for an existing run id;
    `"full"` is accepted and stores nothing."""
    parent = sim.agent(Parent, "p")
    expected = 'runAgentTool: eventDelivery must be "full" or "terminal", got "partial".'
    with pytest.raises(InvalidArgument) as raised:
        sim.call(parent, "go", SCRIPT, "r1", event_delivery="partial")
    assert str(raised.value) == expected
    assert sim.call(parent, "go", SCRIPT, "r1", event_delivery="full")["status"] == "completed"
    assert tool_row(sim, parent, "r1")["event_delivery"] is None
    with pytest.raises(InvalidArgument, match='got "partial"'):
        sim.call(parent, "go", SCRIPT, "r1", event_delivery="partial")


def test_J079_a_terminal_run_shows_only_lifecycle_chunks_and_its_ends(sim: Simulation) -> None:
    """A terminal-delivery run stores `event_delivery = 'terminal'`, tells its child, and its
    parent broadcasts `started`, the progress and milestone chunks and `finished`, but no text
    chunk; a default run stores NULL and shows its text. The child keeps every chunk."""
    parent = sim.agent(Parent, "p")
    client = sim.connect(parent)
    sim.run_for(10)
    assert sim.call(parent, "go", SCRIPT, "t", event_delivery="terminal")["status"] == "completed"
    assert sim.call(parent, "go", SCRIPT, "f")["status"] == "completed"
    sim.run_for(10)
    assert tool_row(sim, parent, "t")["event_delivery"] == "terminal"
    assert tool_row(sim, parent, "f")["event_delivery"] is None
    told = {r.get("runId"): r.get("eventDelivery") for r in sim.trace.select("test:child_started")}
    assert told == {"t": "terminal", "f": None}
    terminal = [(kind, part) for _, kind, part in bodies(frames(sim, client, "t"))]
    assert terminal == [
        ("started", None),
        ("chunk", "data-agent-progress"),
        ("chunk", "data-agent-milestone"),
        ("finished", None),
    ]
    full = [(kind, part) for _, kind, part in bodies(frames(sim, client, "f"))]
    assert full.count(("chunk", "text-delta")) + full.count(("chunk", "text-start")) > 0
    child = sim.facet(parent, TellingChild, "t")
    stored = sim.call(child, "get_agent_tool_chunks", "t", -1)
    texts = [c["body"] for c in stored if "Hello" in c["body"] or "world" in c["body"]]
    assert len(texts) == 2


def test_J080_progress_takes_no_position_between_two_text_chunks(sim: Simulation) -> None:
    """Forwarded text, progress, text: their sequences are 1, 2, 2 (the progress frame carries
    the next sequence without consuming it); a milestone likewise, so the terminal frame has
    the milestone's sequence."""
    parent = sim.agent(Parent, "p")
    client = sim.connect(parent)
    sim.run_for(10)
    steps = [
        ["sleep", 50],
        ["text", "one"],
        ["progress", {"fraction": 0.5}],
        ["text", "two"],
        ["milestone", "m", None],
        ["finish", "completed", "ok"],
    ]
    sim.call(parent, "go", steps, "s")
    sim.run_for(10)
    assert bodies(frames(sim, client, "s")) == [
        (0, "started", None),
        (1, "chunk", "text-delta"),
        (2, "chunk", "data-agent-progress"),
        (2, "chunk", "text-delta"),
        (3, "chunk", "data-agent-milestone"),
        (3, "finished", None),
    ]


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_forwarded_chunk_sequences_on_each_release(sdk: str) -> None:
    """0.21.0 gives every forwarded chunk the next sequence (text 1, progress 2, text 3);
    0.32.0 lets the progress frame carry the next one unconsumed (1, 2, 2)."""
    with Simulation(seed=zlib.crc32(f"positions-{sdk}".encode()), sdk=sdk) as sim:
        parent = sim.agent(Parent, "p")
        client = sim.connect(parent)
        sim.run_for(10)
        steps = [["sleep", 50], ["text", "a"], ["progress", {"fraction": 0.5}], ["text", "b"]]
        sim.call(parent, "go", [*steps, ["finish", "completed", "ok"]], "s")
        sim.run_for(10)
        chunks = [seq for seq, kind, _ in bodies(frames(sim, client, "s")) if kind == "chunk"]
        assert chunks == ([1, 2, 3] if sdk == "0.21.0" else [1, 2, 2])


# -- replay numbering (spec sdk-0.32 §7.2) --------------------------------------------------------
STORED = [
    ["sleep", 50],
    ["text", "a"],
    ["milestone", "m", {"k": 1}],
    ["text", "b"],
]
"""Three stored chunks (the milestone is one, seed decision S2) after the tail opened."""


def milestone_again(frame: dict[str, Any]) -> tuple[int, bool, dict[str, Any]]:
    """(sequence, whether it names a stored chunk, body) of a milestone frame."""
    event = frame["event"]
    return frame["sequence"], "chunkSequence" in event, json.loads(event["body"])


def test_J080_a_replay_numbers_every_stored_chunk_then_sends_the_milestones_unnumbered(
    sim: Simulation,
) -> None:
    """A client that connects after the run gets every stored chunk at its own sequence, the
    stored milestone too (1, 2, 3), then the child's milestones from its inspection, at the
    next sequence without consuming it, and the terminal frame at that same sequence."""
    parent = sim.agent(Parent, "p")
    sim.call(parent, "go", [*STORED, ["finish", "completed", "ok"]], "r")
    late = sim.connect(parent)
    replayed = frames(sim, late, "r")
    assert all(m.get("replay") is True for m in replayed)
    assert bodies(replayed) == [
        (0, "started", None),
        (1, "chunk", "text-delta"),
        (2, "chunk", "data-agent-milestone"),
        (3, "chunk", "text-delta"),
        (4, "chunk", "data-agent-milestone"),
        (4, "finished", None),
    ]
    assert replayed[2]["event"]["chunkSequence"] == 1
    sequence, stored, body = milestone_again(replayed[4])
    at = body["data"]["at"]
    assert (sequence, stored) == (4, False)
    assert body == {
        "type": "data-agent-milestone",
        "data": {"name": "m", "sequence": 0, "at": at, "data": {"k": 1}},
    }
    folded = AgentToolEvents(now_ms=lambda: sim.now_ms)
    for message in late.frames:
        folded.receive(message)
    run = folded.runs_by_id["r"]
    assert [m["name"] for m in run.milestones] == ["m"]
    assert parts_text(run.parts) == "ab"


def test_J079_a_terminal_runs_replay_keeps_the_places_of_the_chunks_it_hides(
    sim: Simulation,
) -> None:
    """Replaying a terminal-delivery run, the text chunks it does not show still take their
    sequences: the stored milestone comes at 2, the one from the inspection at 4, and the
    terminal frame at 4."""
    parent = sim.agent(Parent, "p")
    steps = [*STORED, ["finish", "completed", "ok"]]
    sim.call(parent, "go", steps, "t", event_delivery="terminal")
    replayed = frames(sim, sim.connect(parent), "t")
    assert bodies(replayed) == [
        (0, "started", None),
        (2, "chunk", "data-agent-milestone"),
        (4, "chunk", "data-agent-milestone"),
        (4, "finished", None),
    ]


class Restarted(ReattachParent):
    options = {"agent_tool_reattach_no_progress_timeout_ms": 1_000}


def test_J080_a_reattach_numbers_on_from_the_count_of_stored_chunks(sim: Simulation) -> None:
    """A parent restarted while its child runs re-attaches and numbers the chunks it forwards
    on from the three the child had stored (4), progress carrying the next one unconsumed; the
    terminal frame follows at the next sequence."""
    parent = sim.agent(Restarted, "p")
    resume = [
        ["sleep", 300],
        ["text", "c"],
        ["progress", {"fraction": 0.9}],
        ["text", "d"],
        ["finish", "completed", "done"],
    ]
    dispatch(sim, parent, "r", [*STORED[1:], *HANG], resume)
    woke = restart(sim, parent)
    sim.run_for(2_000)
    assert reattach_row(sim, parent, "r")["status"] == "completed"
    after = reattach_frames(sim, parent, "r", since_ms=woke)
    assert bodies(after) == [
        (4, "chunk", "text-delta"),
        (5, "chunk", "data-agent-progress"),
        (5, "chunk", "text-delta"),
        (6, "finished", None),
    ]


def test_J080_a_run_settled_from_its_childs_inspection_sends_its_milestones_again(
    sim: Simulation,
) -> None:
    """A child that cannot be tailed is given up at the parent's restart: its stored chunks
    are broadcast again live, numbered from 1 (the milestone at 2), then its milestones from
    the inspection at 4, unnumbered, and the `interrupted` frame at 4."""
    parent = sim.agent(Restarted, "p")
    sim.call(parent, "begin", NoTailChild.__name__, "n", [*STORED[1:], *HANG])
    woke = restart(sim, parent)
    sim.run_for(2_000)
    assert reattach_row(sim, parent, "n")["interrupted_reason"] == "not-tailable"
    after = reattach_frames(sim, parent, "n", since_ms=woke)
    assert not any(f.get("replay") for f in after)
    assert bodies(after) == [
        (1, "chunk", "text-delta"),
        (2, "chunk", "data-agent-milestone"),
        (3, "chunk", "text-delta"),
        (4, "chunk", "data-agent-milestone"),
        (4, "interrupted", None),
    ]
    assert milestone_again(after[3])[1] is False


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_replay_numbering_on_each_release(sdk: str) -> None:
    """0.21.0's replay numbers the stored chunks 1, 2, 3 and sends nothing after them (the
    terminal frame at 4); 0.32.0 numbers them alike, then sends the milestone again at 4."""
    with Simulation(seed=zlib.crc32(f"replay-{sdk}".encode()), sdk=sdk) as sim:
        parent = sim.agent(Parent, "p")
        sim.call(parent, "go", [*STORED, ["finish", "completed", "ok"]], "r")
        replayed = bodies(frames(sim, sim.connect(parent), "r"))
        again = [] if sdk == "0.21.0" else [(4, "chunk", "data-agent-milestone")]
        assert replayed == [
            (0, "started", None),
            (1, "chunk", "text-delta"),
            (2, "chunk", "data-agent-milestone"),
            (3, "chunk", "text-delta"),
            *again,
            (4, "finished", None),
        ]


class StaleChatChild(ChatAgent):
    """A chat child holding a run whose row outlived its turn (stale: no controller)."""

    def plant_stale_run(self, run_id: str) -> None:
        now = self.host.clock.now_ms()
        self.sql(
            "INSERT INTO cf_ai_chat_agent_tool_runs (run_id, status, started_at) "
            "VALUES (?, 'running', ?)",
            run_id,
            now,
        )
        self.sql(
            "INSERT INTO cf_ai_chat_agent_tool_milestones (run_id, sequence, name, at) "
            "VALUES (?, 0, 'm', ?)",
            run_id,
            now,
        )


class ChatParent(Agent):
    async def adopt(self, run_id: str) -> None:
        """A running run of a chat child, as an earlier incarnation left it."""
        child = await self.sub_agent(StaleChatChild, run_id)
        await child.call("plant_stale_run", run_id)
        self.sql(
            "INSERT INTO cf_agent_tool_runs (run_id, agent_type, status, started_at, detached) "
            "VALUES (?, ?, 'running', ?, 0)",
            run_id,
            StaleChatChild.__name__,
            self.host.clock.now_ms(),
        )


def test_J080_a_replay_reads_the_milestones_without_reconciling_the_child(
    sim: Simulation,
) -> None:
    """The replay's inspection asks the child not to reconcile: a chat child's stale row stays
    `running` while its milestone is sent again; an ordinary inspection then reconciles it."""
    parent = sim.agent(ChatParent, "p")
    sim.call(parent, "adopt", "s")
    replayed = frames(sim, sim.connect(parent), "s")
    assert bodies(replayed) == [(0, "started", None), (1, "chunk", "data-agent-milestone")]
    child = sim.facet(parent, StaleChatChild, "s")
    assert sim.query(child, "SELECT status FROM cf_ai_chat_agent_tool_runs") == [
        {"status": "running"}
    ]
    assert sim.trace.select("chat:child_run:reconciled") == []
    assert sim.call(child, "inspect_agent_tool_run", "s")["status"] == "error"
    assert len(sim.trace.select("chat:child_run:reconciled")) == 1


# -- a chat child's side of a terminal run and of a chunk too large to store (§7.1, §7.2) --------
def chat_frames(client: Any, request_id: str) -> list[dict[str, Any]]:
    """The chat-response frames of one request a client got."""
    out = []
    for raw in client.frames:
        message = json.loads(raw) if isinstance(raw, str) else raw
        if message.get("type") == CHAT_RESPONSE_TYPE and message.get("id") == request_id:
            out.append(message)
    return out


def shown_parts(frames: list[dict[str, Any]]) -> list[str]:
    """The part types of the chunk frames among `frames` (a body that is not an error)."""
    return [json.loads(f["body"])["type"] for f in frames if f.get("body") and not f.get("error")]


WORK = [["progress", {"fraction": 0.5}], ["progress", {"milestone": "half"}]]
"""The child's tool reports progress, then a milestone."""


def terminal_and_full_runs(sim: Simulation, host: type) -> tuple[AgentRef, Any]:
    """A chat child with a client, that served run `t` with terminal delivery, then run `f`
    with the default; each run's tail read to its close."""
    worker_model(sim, WORK, answer="all done")
    ref = sim.agent(host, "c")
    client = sim.connect(ref)
    for run_id, delivery in (("t", "terminal"), ("f", None)):
        sim.call(ref, "start_agent_tool_run", "go", run_id, delivery)
        records = read_tail(sim, ref, sim.call(ref, "open_agent_tool_tail", run_id))
        assert "text-delta" in chunk_types(records)
        assert {"data-agent-progress", "data-agent-milestone"} <= set(chunk_types(records))
        wait_settled(sim, ref, run_id)
    return ref, client


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_J079_a_chat_child_keeps_a_terminal_runs_chunks_from_its_own_clients(
    sim: Simulation, host: type
) -> None:
    """A chat child told `event_delivery="terminal"` writes it on its run's row and broadcasts
    none of that run's chunks to its own clients (as the SDK, progress and milestone parts
    neither): only the done frame. Its tail still gets every chunk, the child stores them all,
    and a run with the default delivery shows its chunks, progress and milestone included."""
    ref, client = terminal_and_full_runs(sim, host)
    terminal, full = row(sim, ref, "t"), row(sim, ref, "f")
    assert terminal is not None and full is not None
    assert terminal["status"] == full["status"] == "completed"
    assert terminal["event_delivery"] == "terminal"
    assert full["event_delivery"] is None
    hidden = chat_frames(client, terminal["request_id"])
    assert [(f.get("body"), f.get("done")) for f in hidden] == [("", True)]
    shown = shown_parts(chat_frames(client, full["request_id"]))
    assert {"text-delta", "data-agent-progress", "data-agent-milestone"} <= set(shown)
    stored = chunk_types(sim.call(ref, "get_agent_tool_chunks", "t"))
    assert "text-delta" in stored and "data-agent-milestone" in stored


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_a_chat_childs_own_clients_see_a_terminal_runs_chunks_on_0_21_only(sdk: str) -> None:
    """0.21.0's chat child knows nothing of `event_delivery`: its clients get every chunk of a
    run told "terminal", and its row has no such column; 0.32.0 keeps them back."""
    with Simulation(seed=zlib.crc32(f"child-clients-{sdk}".encode()), sdk=sdk) as sim:
        ref, client = terminal_and_full_runs(sim, AiChatChild)
        terminal = row(sim, ref, "t")
        assert terminal is not None
        shown = shown_parts(chat_frames(client, terminal["request_id"]))
        if sdk == "0.21.0":
            assert "event_delivery" not in terminal
            assert {"text-delta", "data-agent-progress", "data-agent-milestone"} <= set(shown)
        else:
            assert terminal["event_delivery"] == "terminal"
            assert shown == []


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_J079_a_chat_child_restarted_mid_run_still_keeps_its_chunks_back(
    sim: Simulation, host: type
) -> None:
    """A terminal run's child evicted mid-answer learns again from the run's row, when its
    recovered turn is bound to the run, that the run is terminal: the recovered turn's chunks
    (stored, and handed to a tail) reach no client of the restarted child."""
    first = text("AAAABBBBCCCCDDDD", chunks=4, delay_ms=1_000)
    recovered = text("wxyz", chunks=4, delay_ms=500)
    sim.register_model(
        ScriptedModel(rules=[when(continuing(), reply=recovered)], default=[first, recovered])
    )
    ref = sim.agent(host, "c")
    before = sim.connect(ref)
    sim.call(ref, "start_agent_tool_run", "go", "run-1", "terminal")
    sim.run_for(2_500 - sim.now_ms)
    sim.evict(ref)
    woken = sim.agent(host, "c")
    after = sim.connect(woken)
    later = read_tail(sim, woken, sim.call(woken, "open_agent_tool_tail", "run-1"))
    wait_settled(sim, woken, "run-1")
    (attempt,) = [r.fields for r in sim.trace.select("chat:recovery:attempt")]
    assert attempt["mode"] == "continue"
    deltas = [json.loads(r["body"]).get("delta") for r in later]
    assert "".join(d for d in deltas if d).endswith("wxyz")
    (rebound,) = [r.fields for r in sim.trace.select("chat:recovery:rebind")]
    assert rebound["runId"] == "run-1"
    for client in (before, after):
        for raw in client.frames:
            message = json.loads(raw) if isinstance(raw, str) else raw
            if message.get("type") == CHAT_RESPONSE_TYPE:
                assert not message.get("body"), message


BIG = "x" * 3_700_000
"""Two text deltas of 1 850 000 characters: each is over CHUNK_MAX_BYTES once stored."""
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_J080_a_chat_child_does_not_store_a_chunk_too_large_and_marks_it_unstored(
    sim: Simulation, host: type
) -> None:
    """A chunk over CHUNK_MAX_BYTES is broadcast to the child's clients and applied to its
    answer, but not stored: the stream holds start, text-start, text-end and finish at 0..3.
    The tail hands each oversized chunk on with a random `unstoredId` (distinct UUIDs) and the
    run's next live sequence, unconsumed (2, 2, then text-end at 2)."""
    sim.register_model(ScriptedModel(default=text(BIG, chunks=2, delay_ms=100)))
    ref = sim.agent(host, "c")
    client = sim.connect(ref)
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    records = read_tail(sim, ref, sim.call(ref, "open_agent_tool_tail", "run-1"))
    wait_settled(sim, ref, "run-1")
    kinds = ["start", "text-start", "text-delta", "text-delta", "text-end", "finish"]
    assert chunk_types(records) == kinds
    assert [r["sequence"] for r in records] == [0, 1, 2, 2, 2, 3]
    assert [r["chunkSequence"] for r in records] == [0, 1, None, None, 2, 3]
    ids = [r.get("unstoredId") for r in records]
    assert ids[:2] == ids[4:] == [None, None]
    assert all(isinstance(i, str) and UUID.match(i) for i in ids[2:4]) and ids[2] != ids[3]
    stored = sim.call(ref, "get_agent_tool_chunks", "run-1")
    assert [c["sequence"] for c in stored] == [0, 1, 2, 3]
    assert chunk_types(stored) == ["start", "text-start", "text-end", "finish"]
    settled = row(sim, ref, "run-1")
    assert settled is not None
    assert shown_parts(chat_frames(client, settled["request_id"])) == kinds
    assert len(sim.trace.select("console:warn", agent=ref.path)) == 2
    (message,) = [m for m in sim.instance_of(ref).messages if m["role"] == "assistant"]
    assert parts_text(message["parts"]) == BIG


class ChatChildParent(Agent):
    async def go(self, run_id: str) -> dict[str, Any]:
        result = await self.run_agent_tool(AiChatChild, input="go", run_id=run_id)
        return result.to_dict()


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_J080_a_chunk_too_large_to_store_takes_no_position_on_0_32(sdk: str) -> None:
    """Forwarded live, each chunk too large to store carries the next sequence without
    consuming it and its `unstoredId` (0.32.0: 1, 2, 3, 3, 3, 4, finished at 5), and a client
    keeps both oversized deltas though they share a sequence; a replay has only the stored
    chunks. On 0.21.0 every chunk is stored and takes the next sequence (1 … 6)."""
    with Simulation(seed=zlib.crc32(f"unstored-{sdk}".encode()), sdk=sdk) as sim:
        sim.register_model(ScriptedModel(default=text(BIG, chunks=2, delay_ms=100)))
        parent = sim.agent(ChatChildParent, "p")
        client = sim.connect(parent)
        sim.run_for(10)
        assert sim.call(parent, "go", "r")["status"] == "completed"
        sim.run_for(10)
        live = frames(sim, client, "r")
        unstored = [m["event"].get("unstoredId") for m in live]
        replayed = bodies(frames(sim, sim.connect(parent), "r"))
        kinds = ["start", "text-start", "text-delta", "text-delta", "text-end", "finish"]
        if sdk == "0.21.0":
            assert [s for s, _, _ in bodies(live)] == [0, 1, 2, 3, 4, 5, 6, 7]
            assert unstored == [None] * 8
            assert [part for _, _, part in replayed[1:-1]] == kinds
        else:
            assert [s for s, _, _ in bodies(live)] == [0, 1, 2, 3, 3, 3, 4, 5]
            assert [u is not None for u in unstored] == [False] * 3 + [True] * 2 + [False] * 3
            assert unstored[3] != unstored[4]
            assert all("chunkSequence" not in m["event"] for m in live[3:5])
            assert replayed == [
                (0, "started", None),
                (1, "chunk", "start"),
                (2, "chunk", "text-start"),
                (3, "chunk", "text-end"),
                (4, "chunk", "finish"),
                (5, "finished", None),
            ]
        folded = AgentToolEvents(now_ms=lambda: sim.now_ms)
        for message in live:
            folded.receive(message)
        assert parts_text(folded.runs_by_id["r"].parts) == BIG


def test_a_client_keeps_each_unstored_chunk_once_by_its_id() -> None:
    """Chunks too large to store share a wire sequence and have no `chunkSequence`: the client
    keeps each once by its `unstoredId` (the SDK's dedupe key), so two of them at sequence 2
    are both kept, and the same one again (a frame seen twice) is not."""

    def received(sequence: int, event: dict[str, Any]) -> dict[str, Any]:
        return {"type": "agent-tool-event", "parentToolCallId": "c", "sequence": sequence,
                "event": {"runId": "r", **event}}  # fmt: skip

    def oversized(text: str, unstored_id: str) -> dict[str, Any]:
        body = json.dumps({"type": "text-delta", "id": "t", "delta": text})
        return received(2, {"kind": "chunk", "body": body, "unstoredId": unstored_id})

    client = AgentToolEvents(now_ms=lambda: 0)
    client.receive(received(0, {"kind": "started", "agentType": "A", "order": 0}))
    start = json.dumps({"type": "text-start", "id": "t"})
    client.receive(received(1, {"kind": "chunk", "body": start, "chunkSequence": 0}))
    assert client.receive(oversized("big ", "u-1"))
    assert client.receive(oversized("bigger", "u-2"))
    assert not client.receive(oversized("big ", "u-1"))
    assert parts_text(client.runs_by_id["r"].parts) == "big bigger"
