"""A chat host as the parent: its model decides to call agent tools whose children are chat
hosts, and an eviction of the whole isolate mid-tool is healed by both sides' chat recovery."""

from __future__ import annotations

import json
from typing import Any

from agents_core.agent_tools import agent_tool
from agents_core.chat import ChatAgent, ThinkAgent
from sim import Simulation
from sim.model import (
    ScriptedModel,
    after_tool,
    call,
    continuing,
    offers,
    text,
    tool_calls,
    when,
)
from tests.chat.chat_agents import user


class Researcher(ThinkAgent):
    pass


class Assistant(ChatAgent):
    def get_tools(self) -> dict[str, Any]:
        return {
            "researcher": agent_tool(
                Researcher,
                description="Research a topic.",
                input_schema={"type": "object", "properties": {"topic": {"type": "string"}}},
            )
        }


def transcript(sim: Simulation, ref: Any) -> list[dict[str, Any]]:
    rows = sim.query(ref, "SELECT message FROM cf_ai_chat_agent_messages ORDER BY rowid")
    return [json.loads(r["message"]) for r in rows]


def test_a_parent_model_fans_out_two_researchers_and_both_summaries_return(
    sim: Simulation,
) -> None:
    """The parent model calls the researcher twice in one step; both children run side by side
    and the model is called back with both summaries."""
    model = sim.register_model(
        ScriptedModel(
            rules=[
                when(after_tool("researcher"), reply=text("Both summaries are in.")),
                when(
                    offers("researcher"),
                    reply=tool_calls(
                        call("researcher", {"topic": "x"}), call("researcher", {"topic": "y"})
                    ),
                ),
            ],
            default=text("Findings.", chunks=3, delay_ms=1_000),
        )
    )
    parent = sim.agent(Assistant, "p")
    start = sim.now_ms
    assert sim.call(parent, "save_messages", [user("research x and y")])["status"] == "completed"
    assert sim.now_ms - start < 8_000  # in parallel: one child takes ~5 s
    answer = transcript(sim, parent)[-1]
    outputs = [p["output"] for p in answer["parts"] if p["type"] == "tool-researcher"]
    assert outputs == ["Findings.", "Findings."]
    last = model.requests[-1]["messages"][-1]
    assert [p.get("state") for p in last["parts"]] == ["output-available", "output-available"]
    runs = sim.query(parent, "SELECT status FROM cf_agent_tool_runs")
    assert runs == [{"status": "completed"}, {"status": "completed"}]


def test_an_isolate_evicted_mid_tool_is_healed_on_both_sides(sim: Simulation) -> None:
    """Parent and child die together while the child streams; after the restart the parent's
    turn is continued, re-issues the same tool call (same run id), the child's own recovery
    finishes its answer, and the parent's model answers with the summary."""
    sim.register_model(
        ScriptedModel(
            rules=[
                when(after_tool("researcher"), reply=text("Summary is in.")),
                when(offers("researcher"), reply=tool_calls(call("researcher", {"topic": "x"}))),
                when(continuing(), reply=text(" and more.", delay_ms=500)),
            ],
            default=text("Findings", chunks=4, delay_ms=1_000),
        )
    )
    parent = sim.agent(Assistant, "p")
    sim.start_call(parent, "save_messages", [user("research x")])
    sim.run_for(3_500)
    sim.evict(parent)
    sim.agent(Assistant, "p")
    sim.run_for(60_000)
    (run,) = sim.query(parent, "SELECT run_id, status, summary FROM cf_agent_tool_runs")
    assert run["status"] == "completed" and run["summary"].endswith("and more.")
    answer = transcript(sim, parent)[-1]
    assert [p["type"] for p in answer["parts"]] == ["tool-researcher", "text"]
    assert answer["parts"][1]["text"] == "Summary is in."
    attempts = sim.trace.select("chat:recovery:attempt")
    assert sorted(r.agent for r in attempts) == [
        "Assistant/p",
        f"Assistant/p/Researcher/{run['run_id']}",
    ]


def test_the_same_seed_gives_the_same_trace() -> None:
    """Two runs of the eviction story with one seed have byte-identical traces; another seed
    (other latencies and ids) does not."""

    def digest(seed: int) -> str:
        sim = Simulation(seed=seed)
        sim.register_model(
            ScriptedModel(
                rules=[
                    when(after_tool("researcher"), reply=text("Summary is in.")),
                    when(
                        offers("researcher"), reply=tool_calls(call("researcher", {"topic": "x"}))
                    ),
                ],
                default=text("Findings", chunks=4),
            )
        )
        parent = sim.agent(Assistant, "p")
        sim.start_call(parent, "save_messages", [user("research x")])
        sim.run_for(300)
        sim.evict(parent)
        sim.agent(Assistant, "p")
        sim.run_for(60_000)
        return sim.digest()

    assert digest(7) == digest(7) != digest(8)
