"""`agentsim diff` and the SDK release: a scenario plays the npm version `--sdk` names, else its
file's `sdk:` key, else the default release's, and the agentsim side runs the same release when
agentsim models it; a story that upgrades in the middle is refused, since the real side plays
one worker bundle per play. None of it needs the real side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agents_core.releases.registry import DEFAULT_RELEASE, RELEASES
from scenarios.cli import main
from scenarios.diff import command, workerd
from scenarios.diff.plan import UPGRADE_WHY, compile_plan
from scenarios.language.loader import load_scenario, parse_scenario

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"
OLD, NEW = list(RELEASES)[0], list(RELEASES)[-1]
UPGRADES = sorted(LIBRARY.glob("upgrade-*.yaml"))

IDLE = (LIBRARY / "idle-eviction.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize("path", UPGRADES, ids=lambda p: p.stem)
def test_a_story_that_upgrades_is_refused_at_its_deploy_step(path: Path) -> None:
    compiled = compile_plan(load_scenario(str(path)))
    assert compiled.plan is None and compiled.skip is not None
    assert compiled.skip.where.startswith("step ") and "deploy" in compiled.skip.where
    assert compiled.skip.why == UPGRADE_WHY


def test_the_library_has_the_upgrade_stories() -> None:
    names = {path.stem for path in UPGRADES}
    assert names == {
        "upgrade-mid-chat-turn",
        "upgrade-mid-cron-and-interval",
        "upgrade-mid-detached-run",
        "upgrade-mid-fiber-resumes-from-stash",
        "upgrade-mid-sub-agent-schedule",
    }


def test_a_named_upgrade_story_is_a_skip_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["diff", str(UPGRADES[0])])
    out = capsys.readouterr().out
    assert code == 2
    assert out.startswith(f"SKIP     {UPGRADES[0].stem}  step ")
    assert "cannot load a second bundle" in out


def test_each_scenario_plays_the_version_its_key_or_the_flag_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plans are grouped by the npm version they play, each group in its own project; the
    agentsim side runs the release the real side plays."""
    (tmp_path / "plain.yaml").write_text(IDLE.replace("name: idle-eviction", "name: plain"))
    keyed = IDLE.replace("name: idle-eviction", "name: keyed").replace(
        "\nseed:", f'\nsdk: "{NEW}"\nseed:', 1
    )
    (tmp_path / "keyed.yaml").write_text(keyed)
    played: list[tuple[str | None, list[str]]] = []
    ran: dict[str, str] = {}

    def project_for(version: str | None) -> Path:
        return Path(f"/project/{version}")

    def play_plans(plans: list[dict[str, Any]], project: Path) -> dict[str, Any]:
        played.append((project.name, sorted(plan["name"] for plan in plans)))
        return {}

    real_compile = command.compile_plan

    def compile_noting(scenario: Any, repeat: int = 3) -> Any:
        ran[scenario.name] = scenario.sdk
        return real_compile(scenario, repeat)

    monkeypatch.setattr(command, "project_for", project_for)
    monkeypatch.setattr(command, "play_plans", play_plans)
    monkeypatch.setattr(command, "compile_plan", compile_noting)
    command.diff_scenarios([str(tmp_path)])
    # plain.yaml names no release: both sides play the default one.
    expected: dict[str, list[str]] = {}
    for name, version in (("keyed", NEW), ("plain", DEFAULT_RELEASE)):
        expected.setdefault(version, []).append(name)
    assert dict(played) == expected
    assert ran == {"plain": DEFAULT_RELEASE, "keyed": NEW}
    played.clear()
    command.diff_scenarios([str(tmp_path)], sdk=OLD)
    assert played == [(OLD, ["keyed", "plain"])]
    assert ran == {"plain": OLD, "keyed": OLD}
    played.clear()
    command.diff_scenarios([str(tmp_path)], sdk="0.24.0")  # an npm version agentsim does not model
    assert played == [("0.24.0", ["keyed", "plain"])]
    assert ran["keyed"] == NEW  # the agentsim side runs the file's own release then


def test_the_pinned_version_is_the_pinned_project() -> None:
    pinned = workerd.pinned_version()
    assert workerd.project_for(pinned) == workerd.PROJECT
    assert workerd.project_for(None) == workerd.PROJECT
    assert parse_scenario(IDLE, "x.yaml").sdk_in_file is None
