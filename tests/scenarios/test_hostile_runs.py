"""Valid but hostile scenario files (`tests.scenarios.hostile`): each run ends, under its
budgets, with exit 0, 1 or 2, no traceback and no control character of its own on the
terminal. A few dozen here; `tests/bench/test_hostile_runs.py` runs 10,000."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from scenarios import InvalidScenario, parse_scenario
from tests.scenarios.hostile import hostile_files, run_hostile

HOSTILE = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def check_hostile_run(text: str, tmp_path: Path) -> int:
    """Run one file and check what came out; its exit code."""
    code, out, err = run_hostile(text, tmp_path)
    assert code in (0, 1, 2), (code, out, err)
    assert "Traceback" not in out + err
    assert "\x07" not in out + err and "\x1b" not in out + err
    if code == 2:
        with pytest.raises(InvalidScenario):
            parse_scenario(text, "hostile.yaml")
    else:
        assert out.splitlines()[-1] in ("1 passed, 0 failed", "0 passed, 1 failed"), out
    return code


@HOSTILE
@given(hostile_files())
def test_hostile_files_end_with_0_1_or_2_and_no_traceback(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    check_hostile_run(text, tmp_path_factory.mktemp("hostile"))
