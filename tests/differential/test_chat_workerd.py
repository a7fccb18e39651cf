"""Chat agents on the real SDK: the `child: chat` runs are the SDK's own AIChatAgent answering
from the scripted model the plan describes (needs Node and `npm ci` in differential/; skipped
with the reason otherwise)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scenarios.diff import diff_scenarios
from scenarios.diff import plan as plan_module
from scenarios.diff.compare import compare
from scenarios.diff.normalise import Story, normalise
from scenarios.diff.plan import compile_plan
from scenarios.diff.workerd import missing_reason, play_plans
from scenarios.language.loader import load_scenario

OLD = "0.21.0"
LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"
STORIES = Path(__file__).resolve().parent / "stories"
STORY = STORIES / "chat-child-answers-as-a-tool.yaml"
HOST = STORIES / "chat-host-narrates-a-detached-finish.yaml"
WORKLOAD = STORIES / "chat-workload-answers-in-turn.yaml"
RECOVERY = "chat-child-recovered-keeps-chunk-numbers"
REASON = missing_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"real side unavailable: {REASON}")


def _live_deltas(story: Story, after_ms: int) -> list[str]:
    """The text deltas a client received live (not replayed) after `after_ms`."""
    out = []
    for t, _agent, kind, payload in story.records:
        frame = payload.get("frame") if kind == "harness:frame" else None
        if t <= after_ms or not isinstance(frame, dict) or frame.get("replay"):
            continue
        body = (frame.get("event") or {}).get("body") or {}
        if isinstance(body, dict) and body.get("type") == "text-delta":
            out.append(body["delta"])
    return out


def _sides(compiled: Any, play: dict[str, Any]) -> tuple[Story, Story]:
    ours = normalise(compiled.python.records, compiled.python.tables, real=False)
    return ours, normalise(play["records"], play["tables"], real=True)


def test_the_chat_stories_agree_and_another_script_differs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SDK's AIChatAgent, run as an agent tool and answering from the plan's model script,
    streams the chunks the port's chat child streams, and as a tools parent narrates a detached
    finish in its chat as the port's does: both stories agree over two plays (among the chat
    rows only T11, T12 and T13 forgiven). With the model's text changed on the real side
    alone, the forwarded chunks and the runs' summaries differ. And the recovery story, played
    despite its refusal, shows T11: the SDK's children lost the chunks they had streamed before
    the deploy (still in the stream's buffer), so chat recovery retried their answers from the
    first chunk, where the port's continued them; and T14: the second child's recovery waited
    for the first's recovered answer to end. The chat workload answers three messages in turn
    on both sides, each persisted when its turn starts."""
    # The chat players run ai-chat 0.10.2, 0.21.0's: 0.32.0 refuses chat (docs/not-built-yet.md).
    verdicts, _refused = diff_scenarios([str(STORY), str(HOST)], repeat=2, sdk=OLD)
    assert [v.word for v in verdicts] == ["AGREE", "AGREE"], "\n".join(v.text() for v in verdicts)
    assert "T11" in verdicts[0].detail and "T12" in verdicts[0].detail
    assert "T13" in verdicts[1].detail

    compiled = compile_plan(load_scenario(str(STORY)).on_release(OLD), repeat=1)
    changed = json.loads(json.dumps(compiled.plan))
    changed["models"]["model"]["default"][0]["text"] = "five six seven eight"
    monkeypatch.delitem(plan_module.DIVERGENT_STORIES, RECOVERY)
    recovery = compile_plan(
        load_scenario(str(LIBRARY / f"{RECOVERY}.yaml")).on_release(OLD), repeat=1
    )
    assert recovery.plan is not None
    workload = compile_plan(load_scenario(str(WORKLOAD)).on_release(OLD), repeat=1)
    assert workload.plan is not None
    played = play_plans([changed, recovery.plan, workload.plan])

    ours, theirs = _sides(compiled, played[changed["name"]].plays[0])
    outcome = compare(ours, theirs, changed["name"], limit=12)
    assert not outcome.agree
    text = "\n".join(outcome.differences)
    assert '"delta":"five ' in text and "five six seven eight" in text

    ours, theirs = _sides(recovery, played[RECOVERY].plays[0])
    # Which child the SDK recovers first is its own affair (its order varies from play to play),
    # so the retry is read from the callbacks the recovery scheduled and from the first run's
    # deltas after the deploy, live or replayed: the retried answer starts at its first chunk.
    assert "one t" not in _live_deltas(ours, 3_500)
    assert _recovery_callbacks(ours) == ["_chatRecoveryContinue"] * 2
    assert _recovery_callbacks(theirs) == ["_chatRecoveryRetry"] * 2
    assert "one t" in _run_deltas(theirs, "#1", 3_500)
    # T14: the root's alarm awaits each child's recovery callback, which awaits its turn, so the
    # second child's recovered turn starts once the first's retried answer (9 s) has ended.
    assert _recovered_turns(ours) == [5_001, 5_001]
    first, second = _recovered_turns(theirs)
    assert first == 5_001 and second >= first + 9_000

    # Three messages said in a row: both sides answer them one at a time, in order, and persist
    # each message when its turn starts (`@cloudflare/ai-chat` dist/index.js, `saveMessages`
    # persists inside `_runExclusiveChatTurn`), so both transcripts alternate question and
    # answer. (The port persisted each when it was called until this play showed otherwise.)
    ours, theirs = _sides(workload, played[workload.plan["name"]].plays[0])
    for story in (ours, theirs):
        answered = [p for _t, _a, kind, p in story.records if kind == "workload:answered"]
        assert [(a["status"], a["text"]) for a in answered] == [
            ("completed", "Happy to help with that.")
        ] * 3
        assert _final_roles(story) == ["user", "assistant"] * 3


def _final_roles(story: Story) -> list[str]:
    """The roles of the transcript the last chat-messages frame a client received carried."""
    frames = [
        p["frame"]
        for _t, _a, kind, p in story.records
        if kind == "harness:frame" and p["frame"].get("type") == "cf_agent_chat_messages"
    ]
    return [m["role"] for m in frames[-1]["messages"]]


def _recovery_callbacks(story: Story) -> list[str]:
    """The chat-recovery callbacks the agents' schedules ran."""
    return [
        payload["callback"]
        for _t, _agent, kind, payload in story.records
        if kind == "schedule:execute" and payload.get("callback", "").startswith("_chatRecovery")
    ]


def _run_deltas(story: Story, run_id: str, after_ms: int) -> list[str]:
    """The text deltas of one run a client received after `after_ms`, live or replayed."""
    out = []
    for t, _agent, kind, payload in story.records:
        frame = payload.get("frame") if kind == "harness:frame" else None
        event = (frame or {}).get("event") if isinstance(frame, dict) else None
        if t <= after_ms or not isinstance(event, dict) or event.get("runId") != run_id:
            continue
        body = event.get("body") or {}
        if isinstance(body, dict) and body.get("type") == "text-delta":
            out.append(body["delta"])
    return out


def _recovered_turns(story: Story) -> list[int]:
    """When the chat turns started after the deploy at 3.5 s."""
    return sorted(
        t
        for t, _agent, kind, payload in story.records
        if kind == "fiber:run:started" and t > 3_500 and "chat_turn" in payload["fiberName"]
    )
