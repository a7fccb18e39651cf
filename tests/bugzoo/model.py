"""What a zoo bug is, and how it is planted: exact find/replace hunks, never line numbers.

A `Bug` names one file of the tree (relative to the repository root), one or more `Hunk`s, the
mistake in one line (`story`), the promise it breaks, and the feature areas whose library
stories a developer who touched that code would hunt over (`areas`, decided from what the code
does, never from what the hunt finds); a bug of the held-apart set (`held_apart`) also says what
a user would see (`seen`), and one planted in a release's own components names that release
(`release`: it is hunted on it). A hunk's `find` text must occur exactly once in the file:
that is what makes a patch robust to unrelated edits elsewhere in the file, and what
`test_patches_apply.py` checks against the current tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["AREAS", "Bug", "Hunk", "PatchError", "apply_bug", "fix", "patched_text"]

AREAS = (
    "all",
    "alarm",
    "keepalive",
    "schedules",
    "fibers",
    "facets",
    "agent_tools",
    "chat",
)
"""Feature areas a bug may name; `all` is every library story (platform bugs)."""


class PatchError(ValueError):
    """A hunk's find text does not occur exactly once in its file."""


@dataclass(frozen=True)
class Hunk:
    """Replace the one occurrence of `find` by `replace`."""

    find: str
    replace: str


@dataclass(frozen=True)
class Bug:
    """One planted mistake."""

    id: str
    file: str
    hunks: tuple[Hunk, ...]
    story: str
    """The mistake, as the developer made it, in one line."""
    promise: str
    """The promise users rely on that it breaks."""
    areas: tuple[str, ...]
    held_apart: bool = False
    """One of the held-apart set (`bugs_held_apart.py`): written from the runtime's code and the
    spec without reading any story, and reported apart from the others."""
    seen: str = ""
    """What a user of the runtime would notice (the held-apart set says it for every bug)."""
    release: str = ""
    """The SDK release whose components the bug is planted in, and the one it is hunted on
    (`bugs_v0_32.py`: "0.32.0"); empty for a bug in the code every release shares."""


def fix(find: str, replace: str) -> Hunk:
    """A hunk (the name reads as the developer's intent: they thought they fixed something)."""
    return Hunk(find, replace)


def patched_text(bug: Bug, text: str) -> str:
    """`text` (the file's current content) with every hunk of `bug` applied, in order."""
    for number, hunk in enumerate(bug.hunks, start=1):
        found = text.count(hunk.find)
        if found != 1:
            raise PatchError(
                f"bug {bug.id}: hunk {number} of {bug.file} occurs {found} times (must be once); "
                f"update its find text: {hunk.find[:80]!r}"
            )
        text = text.replace(hunk.find, hunk.replace)
    return text


def apply_bug(bug: Bug, root: Path) -> None:
    """Plant `bug` in the tree at `root` (a scratch copy: never the working tree)."""
    path = root / bug.file
    path.write_text(patched_text(bug, path.read_text(encoding="utf-8")), encoding="utf-8")
