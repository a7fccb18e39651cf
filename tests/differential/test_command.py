"""`agentsim diff`'s lines and exit codes that need no real side: a named file only agentsim can
play is refused (SKIP, exit 2), a bad path is bad input, and a machine without Node says so."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from scenarios.cli import main
from scenarios.diff import workerd

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"


def test_a_named_python_only_scenario_is_refused_with_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """storage-crash-mid-turn, named on the command line, gets a SKIP line naming its step."""
    code = main(["diff", str(LIBRARY / "storage-crash-mid-turn.yaml")])
    out = capsys.readouterr().out
    assert code == 2
    assert out.startswith("SKIP     storage-crash-mid-turn  step 2 (arm_storage_fault, line 11)")
    assert "diff: 1 skip" in out


def test_a_missing_path_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    """A path that does not exist: exit 2 and one error line naming it."""
    code = main(["diff", "no/such/scenario.yaml"])
    assert code == 2
    assert "no/such/scenario.yaml" in capsys.readouterr().err


def test_without_node_the_real_side_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no `node` on the PATH, a playable scenario stops with exit 2 and the reason."""
    monkeypatch.setattr(workerd.shutil, "which", lambda name: None)
    err = io.StringIO()
    from scenarios.diff import diff_command

    code = diff_command([str(LIBRARY / "idle-eviction.yaml")], 1, None, io.StringIO(), err)
    assert code == 2
    assert "node is not installed" in err.getvalue()
