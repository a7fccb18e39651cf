"""Every zoo bug still plants cleanly in the current tree (the hunt itself is `run.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bugzoo.catalogue import ALL_BUGS, BUGS, HELD_APART, V0_32
from tests.bugzoo.model import AREAS, Bug, PatchError, patched_text

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("bug", ALL_BUGS, ids=[bug.id for bug in ALL_BUGS])
def test_patch_applies_and_compiles(bug: Bug) -> None:
    """Each find text occurs exactly once in its file, and the patched file still compiles."""
    original = (ROOT / bug.file).read_text(encoding="utf-8")
    patched = patched_text(bug, original)
    assert patched != original
    compile(patched, str(ROOT / bug.file), "exec")


def test_catalogue_entries_are_complete() -> None:
    """Ids are unique; each bug says its story and promise and names known areas."""
    ids = [bug.id for bug in ALL_BUGS]
    assert len(ids) == len(set(ids))
    assert len(BUGS) >= 25
    for bug in ALL_BUGS:
        assert bug.story.strip() and bug.promise.strip() and bug.hunks, bug.id
        assert bug.areas and set(bug.areas) <= set(AREAS), bug.id
        assert (ROOT / bug.file).is_file(), bug.id


def test_a_find_text_that_occurs_twice_is_refused() -> None:
    """A hunk whose find text is ambiguous is an error naming the bug, not a silent patch."""
    bug = BUGS[0]
    doubled = bug.hunks[0].find * 2
    with pytest.raises(PatchError, match=f"bug {bug.id}: hunk 1 .* occurs 2 times"):
        patched_text(bug, doubled)


# Being restructured elsewhere: the held-apart set plants nothing in these files.
_NOT_PLANTED = (
    "agents_core/agent.py",
    *(
        f"agents_core/agent_tools/{name}.py"
        for name in (
            "runs",
            "admission",
            "forward",
            "ledger",
            "detached",
            "backbone",
            "notify",
            "reattach",
            "recovery_sweep",
            "retention",
            "mixin",
            "self_type",
        )
    ),
)


def test_the_held_apart_set_is_apart_and_says_what_a_user_sees() -> None:
    """At least 15 held-apart bugs, flagged as such, none in the measured set; each in
    agents_core, outside the files being restructured, saying what a user would see."""
    assert len(HELD_APART) >= 15
    assert not {bug.id for bug in HELD_APART} & {bug.id for bug in BUGS}
    assert all(bug.held_apart and not bug.release for bug in HELD_APART)
    assert not any(bug.held_apart for bug in BUGS)
    for bug in HELD_APART:
        assert bug.file.startswith("agents_core/"), bug.id
        assert bug.file not in _NOT_PLANTED, bug.id
        assert bug.seen.strip(), bug.id


def test_the_v0_32_set_is_in_the_release_components_and_hunted_on_it() -> None:
    """6 to 8 bugs of the held-apart kind, apart from both other sets, each planted in one of
    0.32.0's own components (the job queue and driver, the Lifecycle, the Scheduler, the schema
    keys, the host jobs), hunted on 0.32.0 and saying what a user would see."""
    assert 6 <= len(V0_32) <= 8
    ids = {bug.id for bug in V0_32}
    assert not ids & {bug.id for bug in (*BUGS, *HELD_APART)}
    assert not any(bug.release for bug in BUGS)
    for bug in V0_32:
        assert bug.held_apart and bug.release == "0.32.0", bug.id
        assert bug.file.startswith("agents_core/releases/v0_32/"), bug.id
        assert bug.seen.strip(), bug.id
