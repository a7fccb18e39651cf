"""The zoo's hunt loop: base runs first, then the full hunts, stopping at a finding that is the
bug's or at the end of the budget. Segments are faked, so no tool runs here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bugzoo import hunting
from tests.bugzoo.hunting import Budget, StoryOutcome, Tool

FUZZ = Tool("fuzz", (Budget("--examples", 40, 10, 80),))
STORIES = [Path("a.yaml"), Path("b.yaml")]


def _fake_segments(
    monkeypatch: pytest.MonkeyPatch,
    finds_at: int | None,
    wall: float = 1.0,
    base_finds: tuple[int, ...] = (),
):
    """Segments that find the bug in the story with index `finds_at` of the full pass, and in
    the base runs of the stories `base_finds`; they record the sizes each story ran at."""
    calls: list[tuple[str, tuple[int, ...]]] = []

    def run_segment(tree, tool, stories, shares, timeout):
        outcomes = []
        for story in stories:
            if wall * (len(outcomes) + 1) > timeout:  # the budget cuts the segment
                return outcomes, timeout, True
            calls.append((story.stem, shares))
            full = shares != tool.base_shares()
            index = STORIES.index(story)
            found = index == finds_at if full else index in base_finds
            outcomes.append(StoryOutcome(story.stem, found, wall, base=not full))
            if found:
                break
        return outcomes, wall * len(outcomes), False

    monkeypatch.setattr(hunting, "run_segment", run_segment)
    monkeypatch.setattr(hunting, "clean_tree_passes", lambda clean, tree, outcome, sdk=None: True)
    return calls


def test_full_hunts_follow_the_base_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_segments(monkeypatch, finds_at=1)
    result = hunting.hunt(Path("tree"), FUZZ, STORIES, 60.0, Path("clean"))
    assert calls == [("a", (1,)), ("b", (1,)), ("a", (20,)), ("b", (20,))]
    assert result.caught and result.found_in.story == "b"
    assert result.ran == 2


def test_a_miss_runs_every_full_hunt(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_segments(monkeypatch, finds_at=None)
    result = hunting.hunt(Path("tree"), FUZZ, STORIES, 60.0, Path("clean"))
    assert [shares for _, shares in calls] == [(1,), (1,), (20,), (20,)]
    assert not result.caught and not result.timed_out and result.ran == 2


def test_the_budget_ends_the_hunt(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_segments(monkeypatch, finds_at=None, wall=10.0)
    result = hunting.hunt(Path("tree"), FUZZ, STORIES, 25.0, Path("clean"))
    # Both base runs (20 s), then the first full hunt would pass the 25 s: cut there.
    assert calls == [("a", (1,)), ("b", (1,))]
    assert result.timed_out and not result.caught and result.seconds == 25.0


def test_beyond_the_base_runs_the_hunt_goes_on_where_the_base_run_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _fake_segments(monkeypatch, finds_at=1, base_finds=(0,))
    plain = hunting.hunt(Path("tree"), FUZZ, STORIES, 60.0, Path("clean"))
    assert plain.found_in.base and plain.beyond is None
    assert calls == [("a", (1,))]  # the base run's finding ends a plain hunt
    calls.clear()
    result = hunting.hunt(Path("tree"), FUZZ, STORIES, 60.0, Path("clean"), beyond_base=True)
    assert calls == [("a", (1,)), ("b", (1,)), ("b", (20,))]
    assert result.base_failed == ["a"] and result.found_in.story == "a"
    assert result.beyond is not None and result.beyond.story == "b"


def test_beyond_the_base_runs_a_miss_is_a_miss(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_segments(monkeypatch, finds_at=0, base_finds=(0,))
    result = hunting.hunt(Path("tree"), FUZZ, STORIES, 60.0, Path("clean"), beyond_base=True)
    assert result.caught and result.beyond is None and result.ran == 1


def test_a_tool_on_a_release_passes_sdk_and_without_one_is_unchanged() -> None:
    """`--sdk` goes to every run of a tool on a release; a tool without one runs as before."""
    out = Path("out")
    assert FUZZ.on_release(None) is FUZZ
    assert FUZZ.argv(Path("a.yaml"), (10,), out) == [
        "fuzz",
        "a.yaml",
        "--out",
        "out",
        "--examples",
        "10",
    ]
    on = FUZZ.on_release("0.32.0")
    assert on.argv(Path("a.yaml"), (10,), out)[-2:] == ["--sdk", "0.32.0"]
    assert on.describe() == "fuzz (40 examples per bug on SDK 0.32.0)"


def test_the_v0_32_set_is_selected_and_hunted_on_its_release() -> None:
    """`--set v0_32` selects the 0.32.0 set; its bugs run on 0.32.0 unless `--sdk` says
    otherwise, and a bug of the measured set runs on 0.21.0, the release it was measured on."""
    from tests.bugzoo.catalogue import BUGS, V0_32
    from tests.bugzoo.generate_hunt import _argv
    from tests.bugzoo.run import _select, sdk_of

    assert _select(None, which="v0_32") == list(V0_32)
    assert _select(None) == list(BUGS)
    assert sdk_of(V0_32[0], None) == "0.32.0"
    assert sdk_of(V0_32[0], "0.21.0") == "0.21.0"
    assert sdk_of(BUGS[0], None) == "0.21.0"  # the measured set's release, not the default
    assert _argv(None, 5, 0, Path("o"), "0.32.0")[-2:] == ["--sdk", "0.32.0"]
    assert "--sdk" not in _argv(None, 5, 0, Path("o"))
