"""Chat agents in the plan: a `child: chat` run is played on the real side, and the plan carries
the scenario's scripted model as a description the real side's scripted model plays
(`scenarios/diff/model_plan.py`); a script the real side cannot play is refused, naming why."""

from __future__ import annotations

from pathlib import Path

import pytest

from scenarios.diff import plan as plan_module
from scenarios.diff.model_plan import model_description, reply_description, seeded_latency
from scenarios.diff.plan import compile_plan
from scenarios.language.loader import load_scenario, parse_scenario
from scenarios.language.schema import Scenario
from sim.model import call, fail, stall, text, tool_calls

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "scenarios" / "library"
STORY = Path(__file__).resolve().parent / "stories" / "chat-child-answers-as-a-tool.yaml"


# 0.32.0's chat players run @cloudflare/ai-chat 0.12.2, whose storage the port does not model
# yet (docs/not-built-yet.md): a chat plan is refused there, so these play on 0.21.0.
def load_on_0_21(path: str | Path) -> Scenario:
    return load_scenario(path).on_release("0.21.0")


def parse_on_0_21(text: str, path: str = "<scenario>") -> Scenario:
    return parse_scenario(text, path).on_release("0.21.0")


def test_every_reply_kind_is_described_with_its_chunks_and_delays() -> None:
    """Text, tool calls, a stall with and without a follow-up, and a failure: each reply's
    description holds what the real side needs to stream the same chunks at the same delays."""
    assert reply_description(text("a b c", 3, delay_ms=200)) == {
        "text": "a b c",
        "chunks": 3,
        "delay_ms": 200,
    }
    assert reply_description(tool_calls(call("work", {"n": 1}, id="c1"), delay_ms=5)) == {
        "tool_calls": [{"name": "work", "input": {"n": 1}, "id": "c1"}],
        "text": None,
        "delay_ms": 5,
    }
    assert reply_description(stall(30_000)) == {"stall_ms": 30_000, "then": None}
    then = reply_description(stall(100, text("ok", delay_ms=1)))
    assert then == {"stall_ms": 100, "then": {"text": "ok", "chunks": 1, "delay_ms": 1}}
    assert reply_description(fail("boom", 2, in_band=True, delay_ms=3)) == {
        "fail": "boom",
        "after_chunks": 2,
        "in_band": True,
        "partial": "partial answer",
        "delay_ms": 3,
    }


def test_a_model_section_becomes_rules_in_order_with_their_predicates() -> None:
    """The hunt story's model: its three rules in order (after_tool, then the two `asked` with
    `offers`), each reply list kept, and the default; its tool-call replies give no delay, so
    the seeded latency is named."""
    scenario = load_on_0_21(str(LIBRARY / "hunt-chat-host-tools-progress-milestones.yaml"))
    described = model_description(scenario.models)["model"]
    keys = ("asked", "offers", "after_tool", "continuing")
    rules = [tuple(r[k] for k in keys) for r in described["rules"]]
    assert rules == [
        (None, None, "work", False),
        ("research", "work", None, False),
        ("summarize", "work", None, False),
    ]
    assert described["rules"][0]["replies"][0]["chunks"] == 3
    assert described["rules"][1]["replies"][0]["tool_calls"][0]["name"] == "work"
    assert described["default"] == [{"text": "Noted.", "chunks": 2, "delay_ms": 100}]
    assert seeded_latency(model_description(scenario.models)) == "model"


def test_a_chat_child_story_compiles_with_its_model_and_runs() -> None:
    """The chat child story is played: the parent's run plans name the chat children, and the
    plan carries the model's default reply (four chunks, 700 ms apart)."""
    compiled = compile_plan(load_on_0_21(str(STORY)), repeat=1)
    assert compiled.skip is None and compiled.plan is not None
    runs = compiled.plan["agents"]["parent"]["options"]["runs"]
    assert [(r["run_id"], r["child"]) for r in runs] == [("outline", "chat"), ("summary", "chat")]
    model = compiled.plan["models"]["model"]
    assert model == {
        "rules": [],
        "default": [{"text": "one two three four", "chunks": 4, "delay_ms": 700}],
    }


def test_the_chat_child_recovery_story_compiles_once_its_refusal_is_lifted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Refused only as a divergence story: without that refusal it compiles, the deploy at
    3.5 s evicting the parent (which takes its chat children with it)."""
    name = "chat-child-recovered-keeps-chunk-numbers"
    monkeypatch.delitem(plan_module.DIVERGENT_STORIES, name)
    compiled = compile_plan(load_on_0_21(str(LIBRARY / f"{name}.yaml")), repeat=1)
    assert compiled.skip is None and compiled.plan is not None
    evictions = [(a["t"], a["agent"]) for a in compiled.plan["actions"] if a["do"] == "evict"]
    assert evictions == [(3_500, "parent")]


_SEEDED = """
name: chat-child-at-seeded-latency
description: A chat child answers from a model whose reply gives no delay.
seed: 1
faults: none
agents:
  parent:
    workload: tools
    runs:
      - {run_id: a, child: chat, input: "hello"}
model:
  default: {text: "hi there", chunks: 2}
steps:
  - call: {agent: parent, method: dispatch, args: [a]}
  - run_until: 1m
"""


def test_a_chat_child_whose_model_has_no_delay_is_refused_naming_the_service() -> None:
    """A reply without `delay` streams at the port's seeded latency, which the real side's
    scripted model cannot draw: refused before agentsim runs, naming the model service. With a
    delay the same story compiles."""
    compiled = compile_plan(parse_on_0_21(_SEEDED), repeat=1)
    assert compiled.skip is not None and compiled.python is None
    assert compiled.skip.where == "model service model"
    assert "seeded latency" in compiled.skip.why
    timed = _SEEDED.replace("chunks: 2}", "chunks: 2, delay: 250ms}")
    assert compile_plan(parse_on_0_21(timed), repeat=1).plan is not None


def test_a_chat_host_parent_is_played_as_the_sdks_chat_agent() -> None:
    """`host: chat` makes the tools parent AiChatToolsWorkload on the real side (the SDK's
    AIChatAgent); a chat host's model is checked for seeded latency as a chat child's is; a
    Think-like host is refused, naming the SDK's Think that the real side lacks. The story that
    crashes its chat host is refused for its storage fault, which only agentsim can play."""
    story = _SEEDED.replace("    runs:", "    host: chat\n    runs:")
    story = story.replace('{run_id: a, child: chat, input: "hello"}', "{run_id: a, detached: true}")
    compiled = compile_plan(parse_on_0_21(story), repeat=1)
    assert compiled.skip is not None and compiled.skip.where == "model service model"
    timed = story.replace("chunks: 2}", "chunks: 2, delay: 250ms}")
    plan = compile_plan(parse_on_0_21(timed), repeat=1).plan
    assert plan is not None and plan["agents"]["parent"]["class"] == "AiChatToolsWorkload"
    think = compile_plan(parse_on_0_21(timed.replace("host: chat", "host: think")), repeat=1)
    assert think.skip is not None and "@cloudflare/think" in think.skip.why
    crash = load_on_0_21(str(LIBRARY / "chat-reply-complete-at-crash-not-repeated.yaml"))
    skip = compile_plan(crash, repeat=1).skip
    assert skip is not None and "arm_storage_fault" in skip.where


def test_a_chat_workload_streams_from_its_own_model_service() -> None:
    """`workload: chat, host: chat` plays AiChatWorkload with the service of its own model
    (`model/<alias>`); only that service's script is checked for seeded latency (the scenario's
    default `model`, never asked, has none given). A Think-like chat workload is refused."""
    story = STORY.parent / "chat-workload-answers-in-turn.yaml"
    compiled = compile_plan(load_on_0_21(str(story)), repeat=1)
    assert compiled.skip is None and compiled.plan is not None
    support = compiled.plan["agents"]["support"]
    assert support["class"] == "AiChatWorkload"
    assert support["options"]["model_service"] == "model/support"
    reply = compiled.plan["models"]["model/support"]["default"]
    assert reply == [{"text": "Happy to help with that.", "chunks": 3, "delay_ms": 400}]
    think = story.read_text().replace("host: chat", "host: think")
    refused = compile_plan(parse_on_0_21(think), repeat=1).skip
    assert refused is not None and "Think-like chat workload" in refused.why


def test_a_think_child_is_still_refused() -> None:
    """Only the AIChatAgent child has a player: a `child: think` run is refused, naming it."""
    story = _SEEDED.replace("child: chat", "child: think").replace(
        "chunks: 2}", "chunks: 2, delay: 250ms}"
    )
    compiled = compile_plan(parse_on_0_21(story), repeat=1)
    assert compiled.skip is not None and "think child" in compiled.skip.why
