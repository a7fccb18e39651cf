"""The plan compiler turns a scenario and its agentsim run into timed actions, exports the
evictions the simulator drew, and refuses what only agentsim can do, naming the step."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from scenarios.diff import plan as plan_module
from scenarios.diff.plan import compile_plan
from scenarios.language.loader import load_scenario

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"
DIVERGENCES = Path(__file__).resolve().parents[2] / "docs" / "divergences.md"


def _compile(name: str):
    return compile_plan(load_scenario(str(LIBRARY / f"{name}.yaml")))


def test_idle_eviction_is_exported_at_the_instant_agentsim_drew() -> None:
    """The idle timeout agentsim drew becomes an evict action between the two calls."""
    compiled = _compile("idle-eviction")
    assert compiled.skip is None and compiled.plan is not None
    ends = [t for t, _seq, _alias, reason in compiled.python.evictions if reason == "idle"]
    actions = [(a["t"], a["do"]) for a in compiled.plan["actions"] if a["do"] != "snapshot"]
    assert actions == [(0, "call"), (ends[0], "evict"), (300_000, "call"), (ends[1], "evict")]
    assert 70_000 <= ends[0] <= 140_000


def test_a_scripted_deploy_evicts_at_its_step() -> None:
    """deploy-mid-work: the deploy at 70 s is an evict action of the worker at 70 s, before
    the call 30 s later."""
    compiled = _compile("deploy-mid-work")
    assert compiled.plan is not None
    actions = [(a["t"], a["do"], a.get("agent")) for a in compiled.plan["actions"]]
    assert (70_000, "evict", "worker") in actions
    assert actions.index((70_000, "evict", "worker")) < actions.index((100_000, "call", "worker"))
    assert compiled.plan["agents"]["worker"] == {"class": "Counter", "options": {"step_ms": 20_000}}


def test_a_storage_fault_step_is_refused_naming_the_step() -> None:
    """storage-crash-mid-turn is skipped at its arm_storage_fault step, as Python-only."""
    compiled = _compile("storage-crash-mid-turn")
    assert compiled.plan is None
    assert "arm_storage_fault" in compiled.skip.where
    assert "Python-only" in compiled.skip.why or "only in agentsim" in compiled.skip.why


def test_the_alarm_limit_kill_is_refused() -> None:
    """alarm-limit-kills-long-handler needs the 15-minute kill, which workerd's pool lacks."""
    compiled = _compile("alarm-limit-kills-long-handler")
    assert compiled.plan is None
    assert "15-minute" in compiled.skip.why


def test_an_agent_without_a_player_is_refused() -> None:
    """A scenario whose agent class has no player on the real side is skipped, naming it."""
    compiled = _compile("milestones-narrated-and-reacted")
    assert compiled.plan is None
    assert "NarratingParent has no player" in compiled.skip.why


def test_a_story_that_pins_a_divergence_is_refused_naming_its_row() -> None:
    """child-reset-is-retryable tells S6 and clear-runs-and-gate-drill-in meets A19, after which
    the two runtimes go different ways; each names a row of docs/divergences.md."""
    divergences = DIVERGENCES.read_text()
    for name, row in (("child-reset-is-retryable", "S6"), ("clear-runs-and-gate-drill-in", "A19")):
        compiled = _compile(name)
        assert compiled.plan is None and f"divergence {row} " in compiled.skip.why
        assert f"\n| {row} |" in divergences


def test_a_story_measured_unstable_on_the_real_side_is_refused_with_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A story listed as unstable on the real side is refused with that reason instead of a
    verdict that depends on luck. reattach-after-parent-restart, listed until its real side was
    made deterministic, is played: a deploy at 200 ms, then the reconnect at 250 ms."""
    compiled = _compile("reattach-after-parent-restart")
    assert compiled.skip is None and compiled.plan is not None
    actions = [(a["t"], a["do"]) for a in compiled.plan["actions"] if a["do"] != "snapshot"]
    assert actions == [(0, "connect"), (0, "call"), (200, "evict"), (250, "connect")]
    why = "the real side is not stable here: measured"
    monkeypatch.setitem(plan_module.UNSTABLE_STORIES, "reattach-after-parent-restart", why)
    refused = _compile("reattach-after-parent-restart")
    assert refused.plan is None and refused.skip is not None and refused.skip.why == why


def test_the_tools_workload_hands_the_ports_run_plans_to_the_real_side() -> None:
    """The real side's parent gets the same run plans the port's class carries (one declarative
    description, two players); a scripted child's eviction is an action on the child, through
    its parent; the children's tables are kept for the comparison."""
    compiled = _compile("sub-agent-storage-and-nested-frames")
    assert compiled.skip is None and compiled.plan is not None
    agent = compiled.plan["agents"]["parent"]
    spec = load_scenario(str(LIBRARY / "sub-agent-storage-and-nested-frames.yaml")).agent("parent")
    ours = [json.loads(json.dumps(dataclasses.asdict(run))) for run in spec.cls.runs]
    assert agent["class"] == "ToolsWorkload" and agent["options"]["runs"] == ours
    assert ours[0]["steps"][0] == ["progress", {"fraction": 0.5, "message": "reading"}]
    evictions = [a for a in compiled.plan["actions"] if a["do"] == "evict"]
    assert evictions == [
        {
            "t": 60_000,
            "do": "evict",
            "agent": "parent",
            "child": "import",
            "child_class": "ScriptedToolChild",
            "reason": "explicit",
        }
    ]
    assert {"parent", "parent/import", "parent/lookup"} <= set(compiled.python.tables)
    assert compiled.python.tables["parent/import"]["child_runs"][0]["status"] == "completed"


def test_the_chat_stories_are_refused_naming_why() -> None:
    """The chat child's recovery story pins T9, and on the SDK T11 (chunks lost from the
    stream's buffer) comes first; a Think-like host has no player yet."""
    chat_child = _compile("chat-child-recovered-keeps-chunk-numbers").skip
    assert chat_child is not None and "T9" in chat_child.why and "T11" in chat_child.why
    think_host = _compile("hunt-chat-host-tools-progress-milestones").skip
    assert think_host is not None and "Think-like chat host" in think_host.why


def test_keyword_arguments_are_bound_by_the_ports_signature() -> None:
    """run_awaited(m2, steps, child=MiddleChild) reaches the real side as positional arguments,
    the default retries (0) filled in before the child."""
    compiled = _compile("nested-agent-tools-own-caps")
    assert compiled.plan is not None
    call = next(a for a in compiled.plan["actions"] if a.get("method") == "run_awaited")
    assert call["args"][0] == "m2" and call["args"][2:] == [0, "MiddleChild"]


def test_a_re_attach_given_up_on_its_timers_is_played() -> None:
    """A re-attach given up on its timers is played (the SDK's timeouts run on virtual time).
    (Runs that retry a schedule callback are played too: tests/differential/test_schedules.py.)"""
    window = _compile("reattach-ceiling-tears-down-an-endless-child")
    assert window.skip is None and window.plan is not None


def test_a_root_that_ends_with_its_sub_agents_is_one_eviction() -> None:
    """The deploy at 200 ms ends the parent and its child at one instant: one evict action, of
    the parent (workerd's abort of a root takes its facets); the call cut short is noted with
    its error, and the browser's connection closes with 1006."""
    compiled = _compile("reattach-after-parent-restart")
    assert compiled.plan is not None
    evictions = [
        (a["t"], a["agent"], a.get("child")) for a in compiled.plan["actions"] if a["do"] == "evict"
    ]
    assert evictions == [(200, "parent", None)]
    payloads = {
        r["type"]: r["payload"]
        for r in compiled.python.records
        if r["type"].startswith("harness:") and r["type"] in ("harness:outcome", "harness:close")
    }
    assert payloads["harness:outcome"] == {"step": 2, "ok": False, "error": {"reset": "deploy"}}
    assert payloads["harness:close"] == {"client": "browser", "code": 1006}


def test_an_unawaited_calls_snapshot_is_taken_as_it_is_sent() -> None:
    """deploy-mid-work's first call is not waited for: the runner takes that step's alarm
    snapshot as soon as it sends the call (the port's step returns then), with no snapshot
    action of its own."""
    compiled = _compile("deploy-mid-work")
    assert compiled.plan is not None
    first = compiled.plan["actions"][0]
    assert first["do"] == "call" and first["snapshot"] == "step 1"
    labels = [a.get("label") for a in compiled.plan["actions"] if a["do"] == "snapshot"]
    assert "step 1" not in labels


def test_every_python_only_step_is_marked_in_the_schema() -> None:
    """The step kinds the plan compiler refuses say "Python-only" in the scenario schema, so a
    scenario's author sees it in the editor, not only in a SKIP line."""
    from scenarios.diff.plan import PYTHON_ONLY_STEPS
    from scenarios.language.step_shapes import STEP_SHAPES

    kinds = [step.kind for step in PYTHON_ONLY_STEPS]
    assert "arm_storage_fault" in kinds
    assert [k for k in kinds if "Python-only" not in (STEP_SHAPES[k].doc or "")] == []


def test_the_agentsim_run_notes_what_each_call_and_request_answered() -> None:
    """idle-eviction's two calls answer 1 and 2, at 0 and 5 minutes; deploy-mid-fiber's
    requests answer the default 404 the SDK gives."""
    replies = [
        (r["t"], r["payload"]["step"], r["payload"]["value"])
        for r in _compile("idle-eviction").python.records
        if r["type"] == "harness:reply"
    ]
    assert replies == [(0, 1, 1), (300_000, 3, 2)]
    bodies = [
        r["payload"]["value"]
        for r in _compile("deploy-mid-fiber-resumes-from-stash").python.records
        if r["type"] == "harness:reply" and isinstance(r["payload"]["value"], dict)
    ]
    assert bodies == [{"status": 404, "body": "Not implemented"}] * 2


def test_the_plan_carries_the_platforms_alarm_retry() -> None:
    """The runner retries an alarm handler that did not complete with the port's constants."""
    from sim.alarms import ALARM_RETRY_BASE_MS, ALARM_RETRY_LIMIT

    plan = _compile("idle-eviction").plan
    assert plan is not None
    assert plan["alarm_retry"] == {"base_ms": ALARM_RETRY_BASE_MS, "limit": ALARM_RETRY_LIMIT}


def test_a_timed_unawaited_call_asks_for_the_alarms_pending_work_left(tmp_path: Path) -> None:
    """A call not waited for at a step with `at:` runs the port to that instant first, work
    pending there included: its action says so (`settled`); a step with no time of its own
    follows at once and keeps the alarms of before the calls sent since."""
    source = Path(__file__).parent / "stories" / "fiber-workers-options-of-their-own.yaml"
    text = source.read_text().replace(
        "  - at: 0s\n    call: {agent: worker2, method: start, wait: false}\n",
        "  - call: {agent: worker2, method: start, wait: false}\n",
    )
    path = tmp_path / "timed.yaml"
    path.write_text(text)
    compiled = compile_plan(load_scenario(str(path)))
    assert compiled.plan is not None
    calls = [a for a in compiled.plan["actions"] if a["do"] == "call"]
    assert [(a["method"], a["settled"]) for a in calls] == [
        ("status", True),
        ("status", True),
        ("start", False),
        ("cancel", True),
    ]


CHAT_CUT = """
name: chat-cut
description: a chat turn asked of an AIChatAgent-like host, then the host is evicted
seed: 1
agents:
  assistant: {workload: chat, host: chat}
model:
  default: {text: "one two three", chunks: 3, delay: "1ms"}
steps:
  - {at: 1s, call: {agent: assistant, method: say, args: ["q"], wait: false}}
  - {at: 2s, evict: {agent: assistant, reason: idle}}
"""


def test_a_chat_turn_cut_by_an_eviction_is_refused_with_its_reason() -> None:
    """The real side's chat host recovers a turn cut mid-stream from batched chunks (T11),
    which the port does not model: such a plan is refused, and one without the cut is not."""
    from scenarios.diff.plan import CHAT_TURN_CUT_WHY, compile_plan
    from scenarios.language.loader import parse_scenario

    # On 0.21.0: 0.32.0 refuses every chat plan for its chat release's storage (below).
    cut = compile_plan(parse_scenario(CHAT_CUT, "chat-cut.yaml").on_release("0.21.0")).skip
    assert cut is not None and cut.why == CHAT_TURN_CUT_WHY
    whole = CHAT_CUT.replace("  - {at: 2s, evict: {agent: assistant, reason: idle}}\n", "")
    whole_plan = compile_plan(parse_scenario(whole, "chat-whole.yaml").on_release("0.21.0"))
    assert whole_plan.skip is None


JOINING = """
name: joining
description: a client joins an AIChatAgent-like chat host after a turn was asked of it
seed: 1
agents:
  assistant:
    workload: chat
    host: chat
    model: {reply: "on it", chunks: 3, chunk_delay: 4s}
clients:
  c: {agent: assistant}
steps:
  - STEPS
"""


def test_a_client_joining_a_chat_host_after_a_turn_is_refused_with_its_reason() -> None:
    """The CI sample's open finding: @cloudflare/ai-chat announces `cf_agent_stream_resuming`
    to a client that joins while a reply streams and waits for it to ask; the port streams on.
    A plan whose client connects after a `say` is refused with that reason; one whose client
    connects first is not refused for it."""
    from scenarios.diff.plan import CHAT_JOIN_MID_STREAM_WHY
    from scenarios.language.loader import parse_scenario

    say = "call: {agent: assistant, method: say, args: [hi], wait: false}"
    after = JOINING.replace("STEPS", f"{say}\n  - at: 4s\n    connect: {{client: c}}")
    before = JOINING.replace("STEPS", f"connect: {{client: c}}\n  - {say}")
    refused = compile_plan(parse_scenario(after, "a.yaml"), repeat=1)
    assert refused.plan is None and refused.skip.why == CHAT_JOIN_MID_STREAM_WHY
    played = compile_plan(parse_scenario(before, "b.yaml"), repeat=1)
    assert played.skip is None or played.skip.why != CHAT_JOIN_MID_STREAM_WHY


@pytest.mark.parametrize("host", ["chat", "workload"])
def test_a_chat_agent_is_refused_where_its_chat_release_keeps_unmodelled_tables(
    host: str,
) -> None:
    """On 0.32.0 the chat players run @cloudflare/ai-chat 0.12.2, whose session and stream-block
    tables the port does not model: a plan with a chat host or a chat child is refused there
    with that reason, and plays on 0.21.0 (ai-chat 0.10.2, which the port models)."""
    from scenarios.diff.plan import _chat_storage_skip
    from scenarios.language.loader import parse_scenario

    agent = (
        'workload: chat\n    host: chat\n    model: {reply: "on it", chunks: 3, chunk_delay: 4s}'
        if host == "chat"
        else "workload: tools\n    runs: [{run_id: r1, child: chat, input: hi}]\n"
        'model:\n  default: {text: "one two", chunks: 2}'
    )
    text = JOINING.replace("STEPS", "connect: {client: c}").replace(
        'workload: chat\n    host: chat\n    model: {reply: "on it", chunks: 3, chunk_delay: 4s}',
        agent,
    )
    scenario = parse_scenario(text, "chatty.yaml")
    assert _chat_storage_skip(scenario.on_release("0.21.0")) is None
    refused = _chat_storage_skip(scenario.on_release("0.32.0"))
    assert refused is not None and "@cloudflare/ai-chat 0.12.2" in refused.why
    scripted = text.replace(agent, "workload: tools\n    runs: [{run_id: r1, steps: [{text: a}]}]")
    assert _chat_storage_skip(parse_scenario(scripted, "s.yaml").on_release("0.32.0")) is None
