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


def _play(*steps: str) -> dict:
    records = [{"t": 10, "agent": "a", "type": f"story:{s}", "payload": {}} for s in steps]
    return {"records": records, "tables": {}, "errors": []}


def test_plays_that_disagree_among_themselves_are_unstable_not_different() -> None:
    """Two plays of the real side that differ give UNSTABLE (naming the plays), whatever
    agentsim did; plays that agree with each other and with agentsim give AGREE; plays that
    agree with each other but not with agentsim give DIFFER with both sides' records."""
    from scenarios.diff.command import verdict as _verdict
    from scenarios.diff.plan import Compiled, PythonRun

    ours = Compiled({"name": "s"}, None, PythonRun(_play("x")["records"], {}, 10))
    unstable = _verdict("s", ours, [_play("x"), _play("y")], None)
    assert unstable.word == "UNSTABLE"
    assert any("play 2 only: a story:y" in line for line in unstable.lines)
    assert _verdict("s", ours, [_play("x"), _play("x")], None).word == "AGREE"
    differ = _verdict("s", ours, [_play("y"), _play("y")], None)
    assert differ.word == "DIFFER"
    assert "agentsim only: a story:x {}" in differ.lines[0]
    assert "workerd only: a story:y {}" in differ.lines[0]


def test_another_sdk_release_plays_with_the_current_runner(tmp_path, monkeypatch) -> None:
    """`--sdk VERSION` installs the release once into differential/.sdk/VERSION, but copies the
    worker, its agents and the runner afresh each time: a file changed since is played as it
    is now, and one removed since is gone."""
    project = tmp_path / "differential"
    (project / "src").mkdir(parents=True)
    (project / "package.json").write_text('{"devDependencies": {"agents": "0.21.0"}}')
    (project / "src" / "worker.ts").write_text("export const v = 1;")
    (project / "src" / "old.ts").write_text("export const gone = true;")
    installed = project / ".sdk" / "9.9.9" / "node_modules" / "agents"
    installed.mkdir(parents=True)
    monkeypatch.setattr(workerd, "PROJECT", project)
    monkeypatch.setattr(workerd.shutil, "which", lambda _name: "/usr/bin/npm")
    target = workerd.project_for("9.9.9")
    assert (target / "src" / "worker.ts").read_text() == "export const v = 1;"
    (project / "src" / "worker.ts").write_text("export const v = 2;")
    (project / "src" / "old.ts").unlink()
    assert workerd.project_for("9.9.9") == target
    assert (target / "src" / "worker.ts").read_text() == "export const v = 2;"
    assert not (target / "src" / "old.ts").exists()
    assert installed.is_dir()
