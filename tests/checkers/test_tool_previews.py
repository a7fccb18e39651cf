"""`input_preview_derived`: a run's preview is its input cut as the SDK cuts it, in JavaScript
characters and JSON. The preview of a string input whose 500th character is the first half of an
emoji keeps that half alone; a whole float in an object input is written as an integer; a runtime
that cuts by Python code points or writes `1.0` is caught, as is a row that stores another
preview than the frame showed."""

from __future__ import annotations

import json

import pytest

from agents_core.agent_tools import runs
from sim.checkers import CheckContext, check
from sim.checkers.tool_previews import expected_preview
from tests.checkers.agents import fails_with_a_blind_checker, scenario_context

P = "ToolsWorkload/parent"
LONG = "a" * 499 + "\U0001f642 and more"
STORY = f"""
name: previews
description: a chat child's long input, and a scripted child whose input holds whole floats
seed: 1
agents:
  parent:
    workload: tools
    runs:
      - {{run_id: r1, child: think, input: "{LONG}"}}
      - run_id: r2
        steps: [{{progress: {{fraction: 1.0}}}}, {{finish: completed}}]
clients:
  browser: {{agent: parent}}
steps:
  - connect: {{client: browser}}
  - call: {{agent: parent, method: dispatch}}
"""


def previews_run() -> CheckContext:
    return scenario_context(STORY)


def test_the_spec_preview_counts_utf16_units_and_writes_whole_floats_as_integers() -> None:
    assert expected_preview(LONG) == "a" * 499 + "\ud83d"
    assert expected_preview({"f": 1.0, "g": 0.5}) == '{"f":1,"g":0.5}'
    assert expected_preview({"s": "x" * 600}) == '{"s":"' + "x" * 491 + "..."
    assert expected_preview(None) is None


def test_the_runtime_shows_and_stores_the_spec_preview() -> None:
    context = previews_run()
    started = {
        r.get("frame")["event"]["runId"]: r.get("frame")["event"].get("inputPreview")
        for r in context.events("connection:frame", agent=P)
        if r.get("frame", {}).get("event", {}).get("kind") == "started"
    }
    assert started["r1"] == "a" * 499 + "\ud83d"
    assert '{"fraction":1}' in started["r2"]
    assert check(context, ["input_preview_derived"]) == []


def test_a_preview_cut_by_code_points_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def by_code_points(value: object) -> object:
        if isinstance(value, str):
            return value[:500]
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    monkeypatch.setattr(runs, "default_input_preview", by_code_points)
    context = previews_run()
    found = check(context, ["input_preview_derived"])
    assert sorted({v.subject for v in found}) == ["r1", "r2"]
    assert any("in its row" in v.message for v in found)  # the stored row, as well as the frame

    def caught(c: CheckContext) -> None:
        assert check(c, ["input_preview_derived"]) != []

    fails_with_a_blind_checker(monkeypatch, "input_preview_derived", caught, context)


def test_an_emoji_and_its_two_halves_held_apart_are_the_same_preview() -> None:
    """A string read from a file may hold an emoji as its two surrogates; JavaScript cannot
    tell the two apart, and neither does the checker."""
    from sim.checkers.tool_previews import _same

    assert _same("a\U0001f642", "a\ud83d\ude42")
    assert not _same("a\U0001f642", "a\ud83d")


def _brief_of(length: int) -> str:
    """A brief that makes a step-less scripted run's input JSON `length` characters long."""
    return "b" * (length - len('{"steps":[],"resume":true,"brief":""}'))


@pytest.mark.parametrize("length", [499, 500, 501])
def test_a_brief_puts_a_scripted_input_at_the_limit_and_the_preview_cuts_only_past_it(
    length: int,
) -> None:
    """A scripted run's `brief:` rides in its input; an input whose JSON is 500 characters is
    previewed whole, one of 501 is cut to 497 and '...'."""
    story = f"""
name: brief
description: a scripted child's input at the preview's limit
seed: 1
agents:
  parent:
    workload: tools
    runs: [{{run_id: r1, brief: {_brief_of(length)}}}]
clients:
  browser: {{agent: parent}}
steps:
  - connect: {{client: browser}}
  - call: {{agent: parent, method: dispatch}}
"""
    context = scenario_context(story)
    whole = json.dumps({"steps": [], "resume": True, "brief": _brief_of(length)})
    whole = whole.replace(", ", ",").replace(": ", ":")
    assert len(whole) == length
    (preview,) = [
        r.get("frame")["event"].get("inputPreview")
        for r in context.events("connection:frame", agent=P)
        if r.get("frame", {}).get("event", {}).get("kind") == "started"
    ]
    assert preview == (whole if length <= 500 else whole[:497] + "...")
    assert check(context, ["input_preview_derived"]) == []
