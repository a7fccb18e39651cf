"""The held-apart report: which hunter a bug counts for, the per-bug line and the totals line.
Hunt results are built by hand, so no tool runs here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tests.bugzoo.catalogue import HELD_APART
from tests.bugzoo.generate_hunt import generate_areas
from tests.bugzoo.held_apart_report import held_apart_lines, row_of
from tests.bugzoo.hunting import HuntResult, StoryOutcome
from tests.bugzoo.model import Bug

BUG = HELD_APART[0]


@dataclass
class _Result:
    bug: Bug
    hunts: dict[str, HuntResult] = field(default_factory=dict)
    error: str = ""


def _hunt(
    tool: str, seconds: float, *, base: Sequence[StoryOutcome] = (), beyond: str | None = None
) -> HuntResult:
    result = HuntResult(tool, 3, (10,), seconds=seconds)
    result.base_findings = list(base)
    result.base_failed = [outcome.story for outcome in base]
    if base:
        result.found_in = base[0]
    if beyond is not None:
        result.beyond = StoryOutcome(beyond, True, 1.0)
        result.found_in = result.found_in or result.beyond
    return result


def _found(story: str, *, base: bool) -> StoryOutcome:
    return StoryOutcome(story, True, 1.0, base=base)


def test_a_plain_base_run_is_the_library_and_a_drawn_fault_is_beyond() -> None:
    result = _Result(
        BUG,
        {
            "fuzz": _hunt("fuzz", 12.0, base=[_found("s1", base=False)]),
            "explore": _hunt("explore", 30.0, base=[_found("s2", base=True)], beyond="s3"),
        },
    )
    row = row_of(result)
    assert row.library == "s2"
    assert row.beyond == {"fuzz": "s1", "explore": "s3"}
    assert row.seconds == {"fuzz": 12.0, "explore": 30.0}


def test_a_missed_bug_counts_for_no_hunter() -> None:
    row = row_of(_Result(BUG, {"fuzz": _hunt("fuzz", 60.0), "explore": _hunt("explore", 60.0)}))
    assert row.library is None and row.beyond == {} and not row.caught


def test_the_totals_line_counts_each_column_and_the_time() -> None:
    caught = _Result(BUG, {"fuzz": _hunt("fuzz", 10.0, beyond="s1")})
    library = _Result(HELD_APART[1], {"fuzz": _hunt("fuzz", 5.0, base=[_found("s", base=True)])})
    missed = _Result(HELD_APART[2], {"fuzz": _hunt("fuzz", 60.0)})
    failed = _Result(HELD_APART[3], error="hunk 1 occurs 0 times")
    lines = held_apart_lines([caught, library, missed, failed], ["fuzz"], "not measured (x)")
    assert len(lines) == 6
    assert BUG.id in lines[1] and "beyond: fuzz in s1" in lines[1]
    assert "error: hunk 1 occurs 0 times" in lines[4]
    assert lines[-1] == (
        "bugzoo held-apart: library base runs caught 1/3, fuzz beyond the base runs 1/3, "
        "generate: not measured (x), any 2/3; hunts took 75 s (fuzz 75 s)"
    )


def test_generate_is_a_column_of_its_own() -> None:
    generated = _hunt("generate", 100.0)
    generated.found_in = StoryOutcome("generate-0-1", True, 100.0)
    alone = _Result(BUG, {"fuzz": _hunt("fuzz", 10.0), "generate": generated})
    missed = _Result(
        HELD_APART[1], {"fuzz": _hunt("fuzz", 10.0), "generate": _hunt("generate", 300.0)}
    )
    row = row_of(alone)
    assert row.generate == "generate-0-1" and row.beyond == {} and row.caught
    lines = held_apart_lines([alone, missed], ["fuzz", "generate"], "seed 0, at most 300 s")
    assert "generate: generate-0-1" in lines[1]
    assert lines[-1] == (
        "bugzoo held-apart: library base runs caught 0/2, fuzz beyond the base runs 0/2, "
        "generate alone 1/2 (seed 0, at most 300 s), any 1/2; "
        "hunts took 420 s (fuzz 20 s, generate 400 s)"
    )


def test_a_bugs_areas_map_onto_generates() -> None:
    assert generate_areas(("fibers", "keepalive")) == ("fibers",)
    assert generate_areas(("chat", "schedules", "agent_tools")) == ("schedules", "tools", "chat")
    assert generate_areas(("schedules", "facets")) == ("schedules", "facets")
    assert generate_areas(("all",)) is None


def test_the_v0_32_set_has_its_own_title_and_last_line() -> None:
    lines = held_apart_lines(
        [_Result(BUG, {"fuzz": _hunt("fuzz", 5.0)})],
        ["fuzz"],
        "not measured (x)",
        title="SDK 0.32.0 set:",
        label="v0_32",
    )
    assert lines[0] == "SDK 0.32.0 set:"
    assert lines[-1].startswith("bugzoo v0_32: library base runs caught 0/1")
