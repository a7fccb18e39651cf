"""`agentsim run DIR` leaves agentsim's own output folders out (and says so), and every output
path a flag names is checked before the first run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scenarios.cli import main
from scenarios.cli.inputs import OUTPUT_FOLDERS
from tests.scenarios.helpers import BASE, edit, without_release_notes

FAILING = edit("equals: {count: 1}", "equals: {count: 99}").replace("name: base", "name: repro")


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _project(root: Path) -> Path:
    """A user's folder: one scenario of theirs, and a failing reproducer in each output folder."""
    (root / "scenarios").mkdir(parents=True)
    (root / "scenarios" / "mine.yaml").write_text(BASE)
    for number, folder in enumerate(OUTPUT_FOLDERS):
        (root / folder).mkdir()
        text = FAILING.replace("name: repro", f"name: repro-{number}")
        (root / folder / f"repro-{number}.yaml").write_text(text)
    return root


def test_a_directory_walk_skips_the_output_folders_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the user's scenario runs; one line on stderr names the folders left out."""
    root = _project(tmp_path / "project")
    code = main(["run", str(root)])
    out, err = capsys.readouterr()
    assert code == 0, out
    assert "1 passed, 0 failed" in out and "repro" not in out
    note = [line for line in err.splitlines() if "skipped" in line]
    assert len(note) == 1
    assert note[0].startswith("agentsim run: skipped 4 files in agentsim's own output folders (")
    for folder in OUTPUT_FOLDERS:
        assert f"{os.path.join(str(root), folder)}/" in note[0]


def test_a_reproducer_named_or_its_folder_named_still_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Named on the command line, a file or an output folder itself is the user's choice."""
    root = _project(tmp_path / "project")
    assert main(["run", str(root / "agentsim-fuzz" / "repro-2.yaml")]) == 1
    assert "FAIL repro-2" in capsys.readouterr().out
    assert main(["run", str(root / "agentsim-explore")]) == 1
    out, err = capsys.readouterr()
    assert "FAIL repro-0" in out and "skipped" not in err


def test_validate_skips_them_too_and_a_folder_of_only_those_says_why_it_is_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path / "project")
    assert main(["validate", str(root)]) == 0
    out, err = capsys.readouterr()
    assert out.count("ok ") == 1 and "skipped 4 files" in err
    (root / "scenarios" / "mine.yaml").unlink()
    (root / "scenarios").rmdir()
    assert main(["run", str(root)]) == 2
    err = capsys.readouterr().err
    assert "no *.yaml or *.yml scenario files in directory" in err
    assert "skipped 4 files in agentsim's own output folders" in err


@pytest.mark.parametrize(
    ("flag", "value", "why"),
    [
        ("--junit", "blocker/junit.xml", "'blocker' is a file, not a directory"),
        ("--junit", "blocker/deeper/junit.xml", "'blocker' is a file, not a directory"),
        ("--trace", "blocker", "it is a file, not a directory"),
        ("--html", "blocker/html", "'blocker' is a file, not a directory"),
        ("--failures", "blocker", "it is a file, not a directory"),
    ],
)
def test_an_output_path_that_cannot_be_written_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, why: str
) -> None:
    """Exit 2 with the flag, the path and why, and no run made (no result line)."""
    (tmp_path / "blocker").write_text("a file where a folder should be")
    (tmp_path / "base.yaml").write_text(BASE)
    code = main(["run", "base.yaml", flag, value])
    out, err = capsys.readouterr()
    assert code == 2
    assert (
        without_release_notes(err).strip()
        == f"agentsim run: error: {flag} {value!r} cannot be written: {why}"
    )
    assert out == ""


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_folder_without_write_permission_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    (tmp_path / "base.yaml").write_text(BASE)
    try:
        assert main(["run", "base.yaml", "--junit", "locked/junit.xml"]) == 2
    finally:
        locked.chmod(0o700)
    err = capsys.readouterr().err
    assert "--junit 'locked/junit.xml' cannot be written: 'locked' takes no new file" in err


def test_writable_paths_are_left_as_they_were_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check creates nothing: a run that passes writes no failure folder, no probe file."""
    (tmp_path / "base.yaml").write_text(BASE)
    assert main(["run", "base.yaml", "--failures", "fails", "--junit", "j/junit.xml"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.yaml", "j"]
    assert [p.name for p in (tmp_path / "j").iterdir()] == ["junit.xml"]
