"""Conformance: chat notifications of detached runs — `notify`, `on_milestones`, the default
texts and their dedupe (spec agent-tools §4.9, §4.10, catalogue group F: T-65, T-66, T-81, T-82,
T-85, T-86, and seed decision S3).

`ChatParent` stands in for a chat host: it implements the two notify hooks and records what it
would inject, keyed by the SDK's idempotency keys. T-76 … T-79 (what Think and AIChatAgent do
with those hooks) are covered with the chat hosts.
"""

from __future__ import annotations

import json
from typing import Any

from agents_core.agent_tools.backbone import DETACHED_RECONCILE_CALLBACK as TICK
from agents_core.agent_tools.registry import AgentToolRunInfo
from sim import Simulation
from tests.conformance.test_detached import (
    ChatParent,
    Parent,
    SilentChatParent,
    hooks,
    run_row,
)
from tests.releases import on_both_releases

LABEL = 'Background task "ScriptedChild" (run r1)'


def injected(sim: Simulation, ref: Any) -> list[dict[str, Any]]:
    rows = sim.query(ref, "SELECT * FROM injected ORDER BY at, key")
    return [{**r, "metadata": json.loads(r["metadata"])} for r in rows]


def inject_calls(sim: Simulation, ref: Any, kind: str) -> list[tuple[str, int]]:
    rows = sim.query(ref, "SELECT key, at FROM inject_calls WHERE kind = ? ORDER BY seq", kind)
    return [(r["key"], r["at"]) for r in rows]


def run_info(run_id: str = "r1", agent_type: str = "ScriptedChild") -> AgentToolRunInfo:
    return AgentToolRunInfo(run_id, None, agent_type, None, "running", None, 0, 0)


def test_T065_an_explicit_on_finish_wins_over_notify(sim: Simulation) -> None:
    """With both on_finish and notify, only the named method runs (no notification), and the
    notify source is still stored and surfaced on the run."""
    ref = sim.agent(ChatParent, "p")
    sim.call(
        ref,
        "dispatch",
        "r1",
        [["finish", "completed", "ok"]],
        {"on_finish": "on_detached_done", "notify": {"source": "bg"}},
    )
    sim.run_for(1_000)
    row = run_row(sim, ref, "r1")
    assert (row["detached_on_finish"], row["detached_notify_source"]) == ("on_detached_done", "bg")
    assert hooks(sim, ref) == [
        ("on_agent_tool_finish", "completed", None),
        ("on_detached_done", "completed", None),
    ]
    assert injected(sim, ref) == []
    sources = sim.query(ref, "SELECT notify_source FROM hook_log")
    assert [r["notify_source"] for r in sources] == ["bg", "bg"]


def test_T066_notify_on_a_plain_agent_fires_only_the_global_hook(sim: Simulation) -> None:
    """A plain Agent has no notify hook: notify stores no callback and only
    on_agent_tool_finish fires."""
    ref = sim.agent(Parent, "p")
    sim.call(ref, "dispatch", "r1", [["finish", "completed", "ok"]], {"notify": True})
    sim.run_for(1_000)
    row = run_row(sim, ref, "r1")
    assert row["detached_on_finish"] is None
    assert row["finish_delivered_at"] is not None
    assert hooks(sim, ref) == [("on_agent_tool_finish", "completed", None)]


def test_T081_default_completion_texts_and_an_empty_override(sim: Simulation) -> None:
    """format_detached_completion gives the SDK's texts per status; an override returning ""
    injects nothing, yet the finish is marked delivered."""
    ref = sim.agent(ChatParent, "p")
    run = run_info()
    cases = [
        ({"status": "completed"}, f"{LABEL} finished successfully."),
        ({"status": "completed", "summary": "42 rows"}, f"{LABEL} finished:\n\n42 rows"),
        ({"status": "error", "error": "x"}, f"{LABEL} failed: x"),
        ({"status": "error"}, f"{LABEL} failed."),
        ({"status": "aborted", "error": "stop"}, f"{LABEL} was cancelled."),
        (
            {"status": "interrupted", "reason": "budget-exceeded", "error": "e"},
            f"{LABEL} ran out of time before completing and was stopped.",
        ),
        (
            {
                "status": "interrupted",
                "reason": "no-progress",
                "error": "detached run went silent past its no-progress window",
            },
            f"{LABEL} was interrupted before completing: detached run went silent past its "
            "no-progress window",
        ),
        ({"status": "interrupted"}, f"{LABEL} was interrupted before completing."),
    ]
    for lifecycle, text in cases:
        assert sim.call(ref, "format_detached_completion", run, lifecycle) == text
    milestone_text = sim.call(ref, "format_detached_milestone", run, {"name": "m"})
    assert milestone_text == f'{LABEL} reached milestone "m".'

    silent = sim.agent(SilentChatParent, "s")
    sim.call(silent, "dispatch", "r1", [["finish", "completed", "ok"]], {"notify": True})
    sim.run_for(1_000)
    row = run_row(sim, silent, "r1")
    assert row["detached_on_finish"] == "_cfDetachedNotifyFinish"
    assert row["finish_delivered_at"] is not None
    assert injected(sim, silent) == []
    assert hooks(sim, silent) == [("on_agent_tool_finish", "completed", None)]


def test_T082_give_up_then_real_completion_inject_two_messages(sim: Simulation) -> None:
    """A give-up whose teardown failed, then the child's real completion, inject two distinct
    notifications keyed …:interrupted and …:completed."""
    ref = sim.agent(ChatParent, "p")
    steps = [["sleep", 30_000], ["finish", "completed", "imported 80k rows"]]
    sim.call(
        ref,
        "dispatch",
        "r1",
        steps,
        {"notify": {"source": "imports"}, "max_budget_ms": 10_000},
        child="StubbornChild",
    )
    sim.run_for(60_000)
    messages = injected(sim, ref)
    assert [(m["key"], m["role"], m["text"], m["at"]) for m in messages] == [
        (
            "detached-finish:r1:interrupted",
            "user",
            'Background task "StubbornChild" (run r1) ran out of time before completing and was '
            "stopped.",
            20_000,
        ),
        (
            "detached-finish:r1:completed",
            "user",
            'Background task "StubbornChild" (run r1) finished:\n\nimported 80k rows',
            30_000,
        ),
    ]
    assert messages[1]["metadata"] == {
        "source": "imports",
        "runId": "r1",
        "agentType": "StubbornChild",
        "status": "completed",
    }
    row = run_row(sim, ref, "r1")
    assert (row["status"], row["interrupted_reason"]) == ("completed", None)


def test_T085_a_milestone_name_notifies_once_from_reconciliation(sim: Simulation) -> None:
    """A configured milestone reached twice (sequences 0 and 1), seen only by backbone ticks,
    is notified exactly once, narrated by default."""
    ref = sim.agent(ChatParent, "p")
    steps = [
        ["milestone", "a", {"n": 1}],
        ["sleep", 10_000],
        ["milestone", "a", {"n": 2}],
        ["milestone", "b"],
        ["sleep", 200_000],
        ["finish", "completed", "ok"],
    ]
    sim.call(ref, "dispatch", "r1", steps, {"on_milestones": ["a"]}, child="NoTailChild")
    sim.run_for(400_000)
    assert inject_calls(sim, ref, "milestone") == [("detached-ms:r1:a", 5_000)]
    (message,) = injected(sim, ref)
    assert message["role"] == "assistant"
    assert message["text"] == (
        'Background task "NoTailChild" (run r1) reached milestone "a".\n\n{\n  "n": 1\n}'
    )
    assert message["metadata"] == {
        "source": "detached-agent-tool",
        "runId": "r1",
        "agentType": "NoTailChild",
        "milestone": "a",
    }
    assert run_row(sim, ref, "r1")["status"] == "completed"
    assert sim.probes["agent_tool.milestone_delivered_by_reconciliation"] == 1
    assert sim.probes["agent_tool.milestone_deduped"] >= 1


@on_both_releases
def test_T086_a_milestone_is_notified_live_before_the_run_finishes(sim: Simulation) -> None:
    """S3: a milestone forwarded live is notified at once, before the finish, even when the
    finish lands before any backbone tick; react mode posts a user turn; never twice."""
    ref = sim.agent(ChatParent, "p")
    steps = [
        ["sleep", 1_000],
        ["milestone", "needs-approval", {"sources": 2}],
        ["sleep", 1_000],
        ["finish", "completed", "ok"],
    ]
    sim.call(
        ref,
        "dispatch",
        "r1",
        steps,
        {"notify": True, "on_milestones": {"names": ["needs-approval"], "mode": "react"}},
    )
    sim.run_for(600_000)
    assert inject_calls(sim, ref, "milestone") == [("detached-ms:r1:needs-approval", 1_000)]
    assert inject_calls(sim, ref, "finish") == [("detached-finish:r1:completed", 2_000)]
    milestone = injected(sim, ref)[0]
    assert milestone["role"] == "user"
    assert milestone["text"].endswith('reached milestone "needs-approval".\n\n{\n  "sources": 2\n}')


def test_S3_a_milestone_notified_live_is_not_renotified_after_an_eviction(
    sim: Simulation,
) -> None:
    """S3: the (run, name) dedupe is durable: after an eviction the backbone sees the same
    milestone in the child's inspection and notifies nothing more."""
    ref = sim.agent(ChatParent, "p")
    steps = [["milestone", "sources-gathered"], ["hang"]]
    sim.call(ref, "dispatch", "r1", steps, {"on_milestones": ["sources-gathered"]})
    sim.run_for(1_000)
    assert inject_calls(sim, ref, "milestone") == [("detached-ms:r1:sources-gathered", 0)]
    sim.evict(ref, "idle")
    sim.run_for(300_000)
    assert sim.incarnation_of(ref) > 1, "the backbone's alarm woke the parent again"
    ticks = sim.trace.select("schedule:execute", agent="ChatParent/p", callback=TICK)
    assert len([t for t in ticks if t.t_ms > 1_000]) >= 3
    assert inject_calls(sim, ref, "milestone") == [("detached-ms:r1:sources-gathered", 0)]
    assert sim.probes["agent_tool.milestone_deduped"] >= 1


class SlowMilestoneParent(ChatParent):
    """Its milestone hook takes 10 s before it injects (a deploy can land inside it)."""

    async def _cf_detached_notify_milestone(self, run: Any, milestone: Any, mode: str) -> None:
        await self.host.clock.sleep(10_000)
        await super()._cf_detached_notify_milestone(run, milestone, mode)


def test_S3_a_milestone_claim_left_by_a_dead_isolate_is_taken_again_after_its_lease(
    sim: Simulation,
) -> None:
    """S3 with a crash: the isolate dies inside the milestone hook, leaving its claim. A
    backbone tick inside the claim's 60 s lease leaves it alone; the first tick past it takes
    the claim again and the milestone is notified, once."""
    ref = sim.agent(SlowMilestoneParent, "p")
    steps = [["milestone", "sources-gathered"], ["hang"]]
    sim.call(ref, "dispatch", "r1", steps, {"on_milestones": ["sources-gathered"]})
    sim.run_for(1_000)
    sim.evict(ref, "deploy")
    sim.run_for(60_000)
    assert inject_calls(sim, ref, "milestone") == []
    sim.run_for(300_000)
    calls = inject_calls(sim, ref, "milestone")
    assert [key for key, _ in calls] == ["detached-ms:r1:sources-gathered"]
    assert calls[0][1] > 60_000
    assert sim.probes["agent_tool.milestone_stale_claim_retaken"] == 1
