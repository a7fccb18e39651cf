"""Every story a hunt found and a fix answered (`tests/checkers/found/`) passes as a file, its
invariants and steps both: a drawn fault's refusals are written `may_fail_with` or
`if_present`, and the finding it was kept for no longer fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from scenarios import load_scenario, run_scenario

FOUND = Path(__file__).parent / "found"


@pytest.mark.parametrize("path", sorted(FOUND.glob("*.yaml")), ids=lambda p: p.stem)
def test_a_found_story_passes_as_a_file(path: Path) -> None:
    result = run_scenario(load_scenario(str(path)))
    assert result.passed, result.report()
