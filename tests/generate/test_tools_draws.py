"""What the tools area draws at the input preview's limit: a step-less scripted run's brief
puts its input's JSON one short of 500 characters, at 500 or one past, counted as JavaScript
counts them (an emoji is two)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenarios.generate.strategy import scenarios
from scenarios.language.loader import parse_scenario


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
