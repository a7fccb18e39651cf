"""What the tools area draws: at the input preview's limit, a step-less scripted run's brief
puts its input's JSON one short of 500 characters, at 500 or one past, counted as JavaScript
counts them (an emoji is two); a detached run that may stall gets a liveness limit past its
absolute budget's ceiling."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from scenarios.generate.strategy import scenarios
from scenarios.language.loader import parse_scenario
from scenarios.run.runner import run_scenario

FOUND = Path(__file__).parents[1] / "checkers" / "found"


def _js_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@given(generated=scenarios(st, ("tools",)))
@settings(
    max_examples=80,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_a_step_less_scripted_run_s_brief_aims_at_the_preview_limit(generated) -> None:
    scenario = parse_scenario(generated.text(), "generated.yaml")
    for alias, agent in generated.agents.items():
        for run in agent.get("runs", ()):
            if "brief" not in run or "steps" in run:
                continue
            (spec,) = [s for s in scenario.agents if s.alias == alias]
            (plan,) = [p for p in spec.cls.runs if p.run_id == run["run_id"]]
            text = json.dumps(plan.child_input(), separators=(",", ":"), ensure_ascii=False)
            assert _js_length(text) in (499, 500, 501)


def test_a_detached_run_that_may_stall_gets_a_limit_past_the_ceiling() -> None:
    """A detached run whose scripted child stays silent after a restart (`resume: false`),
    with no drawn `max_budget`, ends only at the 24 h default ceiling if a fault kills its
    child before it signals: the drawn liveness limit covers that, and a margin."""
    generated = find(
        scenarios(st, ("tools",)),
        lambda g: any(
            run.get("resume") is False
            and run.get("detached")
            and "max_budget" not in (run["detached"] if isinstance(run["detached"], dict) else {})
            for agent in g.agents.values()
            for run in agent.get("runs", ())
        ),
        settings=settings(database=None, derandomize=True, max_examples=500),
    )
    assert generated.liveness_ms >= 25 * 3_600_000


def test_a_stalled_detached_run_is_given_up_at_its_ceiling() -> None:
    """The story generate found with too short a limit: the killed child never resumes, the
    backbone gives the run up (`interrupted`) once the 24 h ceiling passes, and the run settles
    within the limit generate now draws."""
    path = FOUND / "detached-run-stalled-until-its-ceiling.yaml"
    result = run_scenario(parse_scenario(path.read_text(), str(path)))
    assert result.passed, result.failures
    gave_up = [
        r
        for r in result.trace
        if r.event == "hook:on_agent_tool_finish" and r.fields.get("runId") == "r3"
    ]
    assert gave_up and {r.fields["slot"] for r in gave_up} == {"give_up"}
    assert gave_up[0].t_ms >= 86_400_000
