"""End to end on the real SDK: library stories played in workerd agree with agentsim, and a
plan that leaves out a step is caught as a difference (needs Node and `npm ci` in
differential/; skipped with the reason otherwise)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scenarios.diff import diff_scenarios
from scenarios.diff.compare import compare
from scenarios.diff.normalise import normalise
from scenarios.diff.plan import compile_plan
from scenarios.diff.workerd import missing_reason, play_plans
from scenarios.language.loader import load_scenario

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"
REASON = missing_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"real side unavailable: {REASON}")


def test_library_stories_agree_with_the_real_sdk() -> None:
    """A counter idled out, a fiber resumed across two deploys, a managed export cancelled and
    a poisoned fiber watched by a reconnecting client (its frames compared) behave the same in
    agentsim and in workerd, over two stable plays each."""
    names = [
        "idle-eviction",
        "deploy-mid-fiber-resumes-from-stash",
        "cancel-managed-fiber",
        "poison-fiber-backoff-capped-while-watched",
    ]
    verdicts, refused = diff_scenarios([str(LIBRARY / f"{n}.yaml") for n in names], repeat=2)
    assert not refused
    assert [(v.name, v.word) for v in verdicts] == [(n, "AGREE") for n in names], "\n".join(
        v.text() for v in verdicts
    )


def test_a_play_missing_a_call_differs_in_the_counts_table() -> None:
    """The real side plays idle-eviction without its second call: the counts differ, and the
    difference names the table and the row only agentsim has."""
    compiled = compile_plan(load_scenario(str(LIBRARY / "idle-eviction.yaml")), repeat=1)
    plan = dict(compiled.plan)
    calls = [a for a in plan["actions"] if a["do"] == "call"]
    plan["actions"] = [a for a in plan["actions"] if a is not calls[-1]]
    played = play_plans([plan])[plan["name"]]
    assert played.error is None
    ours = normalise(compiled.python.records, compiled.python.tables, real=False)
    theirs = normalise(played.plays[0]["records"], played.plays[0]["tables"], real=True)
    outcome = compare(ours, theirs, plan["name"])
    assert not outcome.agree
    tables = [d for d in outcome.differences if d.startswith("table counter.counts:")]
    assert tables and '"at_ms":300000' in tables[0]


def test_the_tools_player_agrees_and_a_changed_script_differs() -> None:
    """sub-agent-storage-and-nested-frames on the real SDK: its parent and scripted children,
    played from the port's run plans, agree with agentsim (the child evicted at one minute
    resumes its script). The same plan with the lookup's summary changed on the real side only
    differs in the awaited call's answer, the frames and both sides' tables."""
    name = "sub-agent-storage-and-nested-frames"
    verdicts, _refused = diff_scenarios([str(LIBRARY / f"{name}.yaml")], repeat=2)
    assert [(v.name, v.word) for v in verdicts] == [(name, "AGREE")], verdicts[0].text()
    compiled = compile_plan(load_scenario(str(LIBRARY / f"{name}.yaml")), repeat=1)
    plan = json.loads(json.dumps(compiled.plan))
    lookup = next(r for r in plan["agents"]["parent"]["options"]["runs"] if r["run_id"] == "lookup")
    assert lookup["steps"][-1] == ["finish", "completed", "found"]
    lookup["steps"][-1] = ["finish", "completed", "found elsewhere"]
    played = play_plans([plan])[plan["name"]]
    assert played.error is None
    ours = normalise(compiled.python.records, compiled.python.tables, real=False)
    theirs = normalise(played.plays[0]["records"], played.plays[0]["tables"], real=True)
    outcome = compare(ours, theirs, plan["name"], limit=12)
    assert not outcome.agree
    text = "\n".join(outcome.differences)
    assert "found elsewhere" in text and "table parent/lookup.child_runs:" in text


STORIES = Path(__file__).resolve().parent / "stories"


def test_an_alarm_handler_cut_short_is_retried_as_the_platform_does() -> None:
    """A deploy kills a batch job mid-way through its alarm handler: the platform retries the
    handler 2 s later and it finishes the batches. workerd's test pool retries nothing, so the
    runner retries with the port's constants from the plan; the two sides agree, and with the
    retry limit set to 0 on the real side the retried handler's batches are missing. On 0.32.0
    the handler's deadman alarm is overdue at the deploy and wakes the next incarnation at once:
    both sides read the alarm that incarnation re-armed."""
    path = STORIES / "deploy-mid-alarm-handler-retried.yaml"
    for sdk in ("0.21.0", "0.32.0"):
        verdicts, _refused = diff_scenarios([str(path)], repeat=2, sdk=sdk)
        assert [v.word for v in verdicts] == ["AGREE"], verdicts[0].text()
    compiled = compile_plan(load_scenario(str(path)).on_release("0.21.0"), repeat=1)
    plan = json.loads(json.dumps(compiled.plan))
    plan["alarm_retry"]["limit"] = 0
    played = play_plans([plan])[plan["name"]]
    ours = normalise(compiled.python.records, compiled.python.tables, real=False)
    theirs = normalise(played.plays[0]["records"], played.plays[0]["tables"], real=True)
    outcome = compare(ours, theirs, plan["name"])
    assert not outcome.agree
    assert outcome.differences[0].startswith("at 00:03:32.000:")
    assert "agentsim only: batcher story:handler-start" in outcome.differences[0]


def test_the_sdks_clear_leaves_the_childrens_facets_in_workerd(monkeypatch) -> None:
    """A19, seen on the real SDK: clear-runs-and-gate-drill-in played anyway. The drill-ins are
    gated alike on both sides, but after both clears the SDK's registry still lists both
    children and the running child was never cancelled, where the port deleted both."""
    from scenarios.diff import plan as plan_module

    name = "clear-runs-and-gate-drill-in"
    monkeypatch.delitem(plan_module.DIVERGENT_STORIES, name)
    compiled = compile_plan(load_scenario(str(LIBRARY / f"{name}.yaml")), repeat=1)
    assert compiled.plan is not None
    played = play_plans([compiled.plan])[name]
    real = normalise(played.plays[0]["records"], played.plays[0]["tables"], real=True)
    ours = normalise(compiled.python.records, compiled.python.tables, real=False)
    assert ours.tables["parent"]["cf_agents_sub_agents"] == []
    assert sorted(r["name"] for r in real.tables["parent"]["cf_agents_sub_agents"]) == [
        "report-1",
        "watch-1",
    ]
    cancelled = [r for r in ours.records if r[2] == "story:child-cancelled"]
    assert cancelled and not [r for r in real.records if r[2] == "story:child-cancelled"]
    drill_ins = sorted(str(r[3]) for r in ours.records if r[2] == "story:drill-in")
    assert drill_ins == sorted(str(r[3]) for r in real.records if r[2] == "story:drill-in")


def test_the_sdks_timeouts_run_on_virtual_time() -> None:
    """reattach-ceiling-tears-down-an-endless-child: the SDK's re-attach window is a setTimeout,
    which the real side runs on the play's virtual clock, so the parent gives up at 2m2s on both
    sides. With the window raised to 3 minutes on the real side alone, it gives up a minute
    later and the two differ at 2m2s."""
    name = "reattach-ceiling-tears-down-an-endless-child"
    verdicts, _refused = diff_scenarios([str(LIBRARY / f"{name}.yaml")], repeat=2)
    assert [v.word for v in verdicts] == ["AGREE"], verdicts[0].text()
    compiled = compile_plan(load_scenario(str(LIBRARY / f"{name}.yaml")), repeat=1)
    plan = json.loads(json.dumps(compiled.plan))
    options = plan["agents"]["parent"]["options"]
    assert options["agent_tool_reattach_max_window_ms"] == 120_000
    options["agent_tool_reattach_max_window_ms"] = 180_000
    played = play_plans([plan])[name]
    ours = normalise(compiled.python.records, compiled.python.tables, real=False)
    theirs = normalise(played.plays[0]["records"], played.plays[0]["tables"], real=True)
    outcome = compare(ours, theirs, name)
    assert not outcome.agree
    assert outcome.differences[0].startswith("at 00:02:02.000:")
    assert "agentsim only: parent story:finish" in outcome.differences[0]


STORIES = Path(__file__).resolve().parent / "stories"


def test_agents_of_one_workload_play_their_own_options() -> None:
    """worker and worker2 play one class on the real side with different options (when to
    start, the keepAlive interval): each keeps its own, and the alarms their calls sent at one
    instant show are those the port shows; the story agrees."""
    story = STORIES / "fiber-workers-options-of-their-own.yaml"
    verdicts, refused = diff_scenarios([str(story)], repeat=2)
    assert not refused
    assert [v.word for v in verdicts] == ["AGREE"], "\n".join(v.text() for v in verdicts)


def test_two_files_of_one_name_play_apart(tmp_path: Path) -> None:
    """Two scenario files that share a `name:` but not their agents' options each get a play of
    their own (the real side names its objects and its results after the plan)."""
    text = (STORIES / "fiber-workers-options-of-their-own.yaml").read_text()
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(text.replace("name: fiber-workers-options-of-their-own", "name: same"))
    second.write_text(
        text.replace("name: fiber-workers-options-of-their-own", "name: same").replace(
            'keep_alive_interval: "5s"', 'keep_alive_interval: "3s"'
        )
    )
    verdicts, refused = diff_scenarios([str(first), str(second)], repeat=1)
    assert not refused
    assert [v.word for v in verdicts] == ["AGREE", "AGREE"], "\n".join(v.text() for v in verdicts)


def test_previews_at_the_limit_and_keep_alive_by_hand_agree_with_the_sdk() -> None:
    """Two surfaces generate draws, played on the SDK. Scripted children whose inputs carry a
    brief (`brief:`), making the input's JSON exactly 500 characters, 501 ending in an emoji,
    and short with a whole float: the SDK's previews (whole, cut to 497 and '...' mid-emoji,
    the float written as an integer) are the port's. And keepAlive by hand (`hold`): nested
    leases around work that raises, disposers called twice, the heartbeat while any is held."""
    paths = [
        STORIES / "scripted-inputs-at-the-preview-limit.yaml",
        STORIES / "keep-alive-by-hand.yaml",
    ]
    verdicts, _refused = diff_scenarios([str(p) for p in paths], repeat=1)
    assert [v.word for v in verdicts] == ["AGREE", "AGREE"], "\n".join(v.text() for v in verdicts)


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_schedules_recreated_and_asked_again_agree_with_the_sdk(sdk: str) -> None:
    """Two calls of the schedules workload generate draws, played on the SDK: `recreate` (a
    schedule cancelled and created again as a new row) and `every_again` (the interval asked
    for once more: the same period answers the row there, another makes a row of its own,
    which the workload cancels by the id its callback runs under once its runs are done)."""
    story = STORIES / "schedules-recreated-and-re-every.yaml"
    verdicts, refused = diff_scenarios([str(story)], repeat=1, sdk=sdk)
    assert not refused
    assert [v.word for v in verdicts] == ["AGREE"], "\n".join(v.text() for v in verdicts)
