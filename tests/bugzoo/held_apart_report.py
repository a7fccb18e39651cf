"""The held-apart set's report: per bug, whether a library story's base run shows it, what fuzz and
explore find beyond the base runs, and how long each hunt took; then the set's totals.

A held-apart bug is always hunted beyond the base runs (`hunting.hunt(..., beyond_base=True)`):
every story's base pass runs, and the full hunts go on over the stories whose base pass did not
show the bug. `library` is a base run that fails with no drawn fault at all (the story as
written); `beyond` is a finding of a drawn fault or an enumerated point, in a story whose plain
run passes: fuzz's one example of the base pass counts there, as do the full hunts. `generate`
(`generate_hunt.py`, when the tree has `agentsim generate`) is its own column: what it found
alone, without any story. A finding counts only when its reproducer passes on the clean tree (as
for every zoo bug).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.bugzoo.hunting import HuntResult

__all__ = ["GENERATE", "HELD_APART_TITLE", "HeldApartRow", "held_apart_lines", "row_of"]

GENERATE = "generate"


@dataclass(frozen=True)
class HeldApartRow:
    """One held-apart bug's outcome, hunter by hunter."""

    bug_id: str
    library: str | None
    """The first story whose base run shows the bug, or None."""
    beyond: dict[str, str]
    """Tool name -> the story where it found the bug beyond the base runs."""
    seconds: dict[str, float]
    """Tool name -> the wall time its hunt took (to the finding beyond the base runs, or all)."""
    generate: str | None = None
    """The reproducer of generate's finding, or None (not found, or not run)."""
    error: str = ""

    @property
    def caught(self) -> bool:
        return self.library is not None or bool(self.beyond) or self.generate is not None


def _library_story(hunts: dict[str, HuntResult]) -> str | None:
    for found in hunts.values():
        for outcome in found.base_findings:
            if outcome.base:
                return outcome.story
        if found.found_in is not None and found.found_in.base and not found.base_findings:
            return found.found_in.story  # a hunt run without beyond_base
    return None


def _beyond_story(found: HuntResult) -> str | None:
    if found.beyond is not None:
        return found.beyond.story
    drawn = [outcome for outcome in found.base_findings if not outcome.base]
    return drawn[0].story if drawn else None


def row_of(result: Any) -> HeldApartRow:
    """The row of one `run.BugResult` (its bug, its hunts by tool, its planting error)."""
    all_hunts: dict[str, HuntResult] = result.hunts
    hunts = {name: found for name, found in all_hunts.items() if name != GENERATE}
    beyond = {
        name: story for name, found in hunts.items() if (story := _beyond_story(found)) is not None
    }
    generated = all_hunts.get(GENERATE)
    return HeldApartRow(
        result.bug.id,
        _library_story(hunts),
        beyond,
        {name: found.seconds for name, found in all_hunts.items()},
        generated.found_in.story if generated and generated.found_in else None,
        result.error,
    )


def _cell(row: HeldApartRow, tools: Sequence[str], generated: bool) -> str:
    library = f"library: {row.library or '-'}"
    beyond = ", ".join(f"{name} in {row.beyond[name]}" for name in tools if name in row.beyond)
    shown = [*tools, GENERATE] if generated else list(tools)
    times = ", ".join(f"{name} {row.seconds.get(name, 0.0):.0f} s" for name in shown)
    cell = f"{library:<40} beyond: {beyond or '-':<52}"
    if generated:
        cell += f" generate: {row.generate or '-':<20}"
    return f"{cell} ({times})"


HELD_APART_TITLE = (
    "held-apart set (written without reading the stories; hunted beyond the base runs):"
)


def held_apart_lines(
    results: Sequence[Any],
    names: Sequence[str],
    generate_note: str,
    *,
    title: str = HELD_APART_TITLE,
    label: str = "held-apart",
) -> list[str]:
    """The held-apart section: a line per bug, then the totals line (`bugzoo held-apart: ...`).
    `names` are the hunters that ran (`generate` among them when it did); `generate_note` says
    how generate ran, or why it has no column. Another set written in the same style (the SDK
    0.32.0 set) has its own `title` and `label` (`bugzoo v0_32: ...`)."""
    rows = [row_of(result) for result in results]
    generated = GENERATE in names
    tools = [name for name in names if name != GENERATE]
    lines = [title]
    for row in rows:
        text = f"  error: {row.error}" if row.error else _cell(row, tools, generated)
        lines.append(f"  {row.bug_id:<46} {text}")
    planted = [row for row in rows if not row.error]
    total = len(planted)
    library = sum(row.library is not None for row in planted)
    beyond = sum(bool(row.beyond) for row in planted)
    either = sum(row.caught for row in planted)
    per_tool = {name: sum(row.seconds.get(name, 0.0) for row in planted) for name in names}
    times = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in per_tool.items())
    if generated:
        alone = sum(row.generate is not None for row in planted)
        generate_note = f"generate alone {alone}/{total} ({generate_note})"
    else:
        generate_note = f"generate: {generate_note}"
    lines.append(
        f"bugzoo {label}: library base runs caught {library}/{total}, "
        f"{' + '.join(tools) or 'no hunter'} beyond the base runs {beyond}/{total}, "
        f"{generate_note}, "
        f"any {either}/{total}; hunts took {sum(per_tool.values()):.0f} s ({times})"
    )
    return lines
