"""Golden traces: every library scenario's run matches the short log kept beside it, and the
golden tooling says clearly what differs, what is missing and the command that fixes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents_core.releases.registry import RELEASES
from scenarios import load_scenario, parse_scenario, run_scenario
from scenarios.cli import main
from scenarios.run.golden import check_golden, golden_path, golden_text, update_golden
from tests.scenarios.helpers import BASE, LIBRARY, edit, library_files


@pytest.mark.parametrize("path", library_files(), ids=lambda p: p.stem)
def test_library_scenario_matches_its_golden_trace(path: Path) -> None:
    """The run with the file's seed gives, line for line, the short log in NAME.golden."""
    check = check_golden(path)
    if not check.ok:
        pytest.fail(check.explain(), pytrace=False)


@pytest.mark.parametrize("path", library_files(), ids=lambda p: p.stem)
def test_library_scenario_matches_its_golden_trace_on_the_other_releases(path: Path) -> None:
    """Every story runs on every release (its expectations of one release are marked `sdk:`),
    and the run on a release other than the file's own is kept in NAME.sdk-VERSION.golden:
    NAME.sdk-0.21.0.golden beside a file on the default, NAME.sdk-0.32.0.golden beside one
    whose `sdk:` key names 0.21.0."""
    own = load_scenario(path).sdk
    others = [check_golden(path, sdk=name) for name in RELEASES if name != own]
    assert [check.golden.name for check in others] == [
        f"{path.stem}.sdk-{name}.golden" for name in RELEASES if name != own
    ]
    failing = [check.explain() for check in others if not check.ok]
    if failing:
        pytest.fail("\n".join(failing), pytrace=False)


def test_every_golden_file_belongs_to_a_scenario() -> None:
    """A golden file whose scenario was renamed or removed is stale: delete or rename it."""
    orphans = [
        golden.name
        for golden in sorted(LIBRARY.glob("*.golden"))
        if not (LIBRARY / f"{golden.name.split('.')[0]}.yaml").is_file()
    ]
    assert orphans == [], f"golden files without a scenario in {LIBRARY}: {orphans}"


# -- the tooling ----------------------------------------------------------------------------------
def scenario_file(tmp_path: Path, text: str = BASE) -> Path:
    path = tmp_path / "base.yaml"
    path.write_text(text)
    return path


def test_a_missing_golden_file_is_told_with_the_command_that_creates_it(tmp_path: Path) -> None:
    """Status `missing`, and the explanation names the file and `agentsim golden --update`."""
    path = scenario_file(tmp_path)
    check = check_golden(path)
    assert check.status == "missing" and not check.ok
    assert check.explain() == (
        f"{path} has no golden trace ({tmp_path / 'base.golden'} does not exist); create it "
        f"with: agentsim golden --update {path}"
    )


def test_update_writes_the_short_log_and_a_second_update_changes_nothing(tmp_path: Path) -> None:
    """The golden file is two comment lines, then one line per trace record; no path in it."""
    path = scenario_file(tmp_path)
    golden, changed = update_golden(path)
    result = run_scenario(load_scenario(path))
    lines = golden.read_text().splitlines()
    assert changed and golden == tmp_path / "base.golden" == golden_path(path)
    assert lines[0] == (
        "# golden trace of scenario 'base', seed 7: its short log, one line per trace record "
        "(reports/README.md)"
    )
    assert len(lines) == 2 + result.events
    assert any("incarnation:end" in line and "reason=idle" in line for line in lines)
    assert lines[-1].split()[-2:] == ["quiesce:end", "quiet=true"]
    assert str(tmp_path) not in golden.read_text()
    assert all(line == line.rstrip() for line in lines)
    assert update_golden(path) == (golden, False)
    assert check_golden(path).ok


def test_a_changed_run_shows_a_unified_diff_and_the_update_command(tmp_path: Path) -> None:
    """When the trace changes, the explanation is a diff from the golden file to this run."""
    path = scenario_file(tmp_path)
    update_golden(path)
    path.write_text(edit("  - run_for: 3m\n", "  - run_for: 4m\n"))
    check = check_golden(path)
    assert check.status == "differs"
    assert check.diff.startswith(f"--- {tmp_path / 'base.golden'}\n+++ {path} (this run)\n@@ ")
    assert any(line.startswith("-") and "quiesce:begin" in line for line in check.diff.split("\n"))
    assert check.explain().endswith(
        f"if the change is intended, update it with: agentsim golden --update {path}"
    )


def test_the_golden_text_is_a_function_of_the_run_alone() -> None:
    """The same scenario loaded from two paths gives the same golden text."""
    path = LIBRARY / "idle-eviction.yaml"
    here = golden_text(run_scenario(load_scenario(path)))
    text = path.read_text()
    there = golden_text(run_scenario(parse_scenario(text, "elsewhere/idle.yaml")))
    assert here == there


def test_the_golden_command_checks_and_updates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`agentsim golden` exits 1 for a missing or stale golden file, 0 once `--update` wrote
    it."""
    path = str(scenario_file(tmp_path))
    assert main(["golden", path]) == 1
    assert "has no golden trace" in capsys.readouterr().out
    assert main(["golden", "--update", path]) == 0
    assert capsys.readouterr().out == f"wrote {tmp_path / 'base.golden'}\n"
    assert main(["golden", path]) == 0
    assert capsys.readouterr().out == f"ok {tmp_path / 'base.golden'}\n"
    Path(path).write_text(edit("  - run_for: 3m\n", "  - run_for: 4m\n"))
    assert main(["golden", path]) == 1
    out = capsys.readouterr().out
    assert "differs from its golden trace" in out and out.rstrip().endswith(
        f"agentsim golden --update {path}"
    )
