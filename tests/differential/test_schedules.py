"""The schedules workload and the schedule retry jitter on the differential stage: the plan
carries the port's schedule description for the real side's player and every jitter fraction the
port drew, the runs that retry a schedule callback are no longer refused, and on the real SDK the
scheduler story agrees, its retries landing where the port's did only because the SDK's
`Math.random` gave the port's fractions (the real-side tests need Node and `npm ci` in
differential/, and are skipped with the reason otherwise)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from agents_core.options import RetryOptions
from scenarios.diff import diff_scenarios
from scenarios.diff.agentsim_run import run_python
from scenarios.diff.compare import compare
from scenarios.diff.normalise import normalise
from scenarios.diff.plan import compile_plan
from scenarios.diff.workerd import missing_reason, play_plans
from scenarios.language.loader import load_scenario
from scenarios.run.runner import run_scenario
from sim.prng import Seeds

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"
SCHEDULER = "hunt-scheduler-interval-cron-one-shot"
TOOLS_HUNT = "hunt-tools-parent-awaited-detached-budgets"
REASON = missing_reason()
real_side = pytest.mark.skipif(REASON is not None, reason=f"real side unavailable: {REASON}")


def _scenario(name: str):
    return load_scenario(str(LIBRARY / f"{name}.yaml"))


def _backoff(fraction: float, attempt: int) -> int:
    """The full-jitter sleep before attempt `attempt + 1`, with the default retry bounds (the
    formula both the port and the SDK's `jitterBackoff` use)."""
    retry = RetryOptions()
    return int(fraction * min(2**attempt * retry.base_delay_ms, retry.max_delay_ms))


def test_the_schedules_workload_hands_the_ports_description_to_the_real_side() -> None:
    """The scheduler story's agent is played by `ScheduleWorkload` from the port's own
    `SchedulePlan` values, set-up mode and warm-up: one description, two players."""
    scenario = _scenario(SCHEDULER)
    compiled = compile_plan(scenario)
    assert compiled.skip is None and compiled.plan is not None
    agent = compiled.plan["agents"]["scheduler"]
    cls = scenario.agent("scheduler").cls
    assert agent["class"] == "ScheduleWorkload"
    assert agent["options"]["schedules"] == [dataclasses.asdict(plan) for plan in cls.schedules]
    assert agent["options"]["setup_on"] == "on_start" and agent["options"]["warmup_ms"] == 2_000
    nightly = next(p for p in agent["options"]["schedules"] if p["name"] == "nightly")
    assert nightly["at_s"] == 390 and nightly["every_s"] is None and nightly["fail"] == 1
    json.dumps(compiled.plan)  # the plan crosses to the real side as JSON


@pytest.mark.parametrize("name", [SCHEDULER, TOOLS_HUNT])
def test_every_retry_lands_where_an_exported_draw_puts_it(name: str) -> None:
    """The Python run keeps the port's draws in order, and each `schedule:retry` of the run
    comes exactly one backoff (of the draw made when the attempt before it failed) after that
    draw: the draws are the retry jitter, all of it."""
    python = run_python(_scenario(name))
    draws = python.draws
    retries = [
        (r["t"], r["agent"], r["payload"]["attempt"])
        for r in python.records
        if r["type"] == "schedule:retry"
    ]
    assert retries and len(draws) >= len(retries)
    for t, agent, attempt in retries:
        landed = [
            d
            for d in draws
            if d["agent"] == agent and d["t"] + _backoff(d["fraction"], attempt - 1) == t
        ]
        assert landed, f"no draw puts the {agent} retry at {t} ms (attempt {attempt}): {draws}"


def test_the_plan_carries_the_draws_and_retries_are_no_longer_refused() -> None:
    """The scheduler story, which retries schedule callbacks, is played with the port's draws
    in its plan; the tools hunt is refused for divergence S8 (its backbone re-armed at other
    instants), not for the jitter."""
    compiled = compile_plan(_scenario(SCHEDULER))
    assert compiled.plan is not None and compiled.python is not None
    assert compiled.plan["jitter"] == compiled.python.draws and len(compiled.plan["jitter"]) == 4
    tools = compile_plan(_scenario(TOOLS_HUNT)).skip
    assert tools is not None and "divergence S8 " in tools.why
    assert "Math.random" not in tools.why and "jitter is the port's" in tools.why


def test_the_draws_are_the_seeded_stream_and_watching_it_moves_nothing() -> None:
    """The exported fractions are the run's `runtime` stream in order, and the run the plan
    compiler watches leaves the same trace as a plain run of the scenario."""
    scenario = _scenario(SCHEDULER)
    python = run_python(scenario)
    stream = Seeds(scenario.seed).stream("runtime")
    assert [d["fraction"] for d in python.draws] == [stream.random() for _ in python.draws]
    assert [d["t"] for d in python.draws] == [8_000, 50_000, 53_141, 391_000]
    plain = run_scenario(scenario, scenario.seed)
    ours = [(r["t"], r["type"]) for r in python.records if not r["type"].startswith("harness:")]
    assert len(plain.trace) > 0
    assert ours == [(r.t_ms, r.event) for r in plain.trace]


@real_side
def test_the_scheduler_story_agrees_on_the_real_sdk() -> None:
    """Interval, cron and one-shot schedules, a warm-up holding the input gate, a deploy mid-run,
    retries and a slot that comes due while a handler runs: both sides agree over two plays."""
    verdicts, refused = diff_scenarios([str(LIBRARY / f"{SCHEDULER}.yaml")], repeat=2)
    assert not refused
    assert [(v.name, v.word) for v in verdicts] == [(SCHEDULER, "AGREE")], verdicts[0].text()


@real_side
def test_the_sdks_retries_follow_the_exported_fractions() -> None:
    """The plan as compiled: the SDK draws exactly the port's fractions, at the port's instants.
    The same plan with other fractions on the real side only moves the SDK's first retry
    (0.9 of 200 ms: 180 ms after the failure instead of 102 ms), so the two sides differ there;
    with no fractions at all the SDK's draws are noted at the instants the port drew."""
    compiled = compile_plan(_scenario(SCHEDULER), repeat=1)
    assert compiled.plan is not None
    moved = json.loads(json.dumps(compiled.plan))
    for draw in moved["jitter"]:
        draw["fraction"] = 0.9
    bare = json.loads(json.dumps(compiled.plan))
    bare["name"] = f"{SCHEDULER}-bare"
    bare["jitter"] = []
    exact = json.loads(json.dumps(compiled.plan))
    exact["name"] = f"{SCHEDULER}-exact"
    played = play_plans([moved, bare, exact])
    # With the port's fractions the SDK asks for exactly those draws, each at the instant the
    # port drew it: no note, so no other Math.random caller took one.
    assert [e for e in played[f"{SCHEDULER}-exact"].plays[0]["errors"] if "jitter" in e] == []
    ours = normalise(compiled.python.records, compiled.python.tables, real=False)
    play = played[SCHEDULER].plays[0]
    outcome = compare(ours, normalise(play["records"], play["tables"], real=True), SCHEDULER)
    assert not outcome.agree
    first = "\n".join(outcome.differences[:3])
    assert outcome.differences[0].startswith("at 00:00:08.102:"), first
    assert "00:00:08.180" in first
    # Without the port's fractions the SDK's retries move, so only the first two failures
    # (the poller's at 8 s, the reminder's first at 50 s) are where the port's were.
    notes = [e for e in played[f"{SCHEDULER}-bare"].plays[0]["errors"] if "jitter" in e]
    instants = [note.split(" at ")[1].split(" ms")[0] for note in notes]
    assert len(notes) == 4 and instants[:2] == ["8000", "50000"], notes


@real_side
def test_the_tools_hunts_retries_land_alike_and_s8_moves_its_backbone(monkeypatch) -> None:
    """The tools hunt played anyway: the SDK retries the failing reconcile tick at the port's
    instants (315162 and 315258 ms, from the exported draws), and S8 shows where the story is
    refused: the port re-arms the tick at 315000 ms, in the pass that threw, the SDK later."""
    from scenarios.diff import plan as plan_module

    monkeypatch.delitem(plan_module.DIVERGENT_STORIES, TOOLS_HUNT)
    compiled = compile_plan(_scenario(TOOLS_HUNT), repeat=1)
    assert compiled.plan is not None and compiled.python is not None
    play = play_plans([compiled.plan])[TOOLS_HUNT].plays[0]

    def tick(records: list[dict], kind: str) -> list[int]:
        return [
            r["t"]
            for r in records
            if r["type"] == kind
            and r["payload"].get("callback") == "_cfDetachedReconcileTick"
            and 315_000 <= r["t"] <= 320_000
        ]

    assert tick(compiled.python.records, "schedule:retry") == [315_162, 315_258]
    assert tick(play["records"], "schedule:retry") == [315_162, 315_258]
    assert tick(compiled.python.records, "schedule:create") == [315_000]
    created = tick(play["records"], "schedule:create")
    assert created and min(created) >= 315_258


DEPLOY_MID_HANDLER = """\
name: deploy-mid-handler
description: a deploy ends the alarm handler while the slot it re-armed is overdue
seed: 4059
sdk: "0.21.0"
agents:
  sched:
    workload: schedules
    schedules:
      - {name: s2, after: "1m59s", work: "51s", keep_alive: true, fiber: true}
steps:
  - at: 0s
    call: {agent: sched, method: status, wait: false}
  - at: 2m28s
    evict: {agent: sched, reason: deploy}
"""


def test_a_steps_alarm_snapshot_is_read_once_its_instant_is_quiet(tmp_path: Path) -> None:
    """The handler re-armed the slot for the next millisecond and the deploy killed it: the
    overdue slot wakes the next incarnation at the deploy's instant, whose handler re-arms it
    again. The real side's runner reads the alarms after that work, so the port's snapshot of
    the evict step shows the re-armed slot; a call sent without waiting is read before anything
    it does (the status call's startup arms the schedule's alarm only after its snapshot)."""
    path = tmp_path / "deploy-mid-handler.yaml"
    path.write_text(DEPLOY_MID_HANDLER)
    python = run_python(load_scenario(str(path)))
    snapshots = {
        r["payload"]["step"]: r["payload"]["at"]
        for r in python.records
        if r["type"] == "harness:alarm" and r["agent"] == "sched"
    }
    assert snapshots == {"step 1": None, "step 2": 148_001}
