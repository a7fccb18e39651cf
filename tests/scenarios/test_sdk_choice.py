"""The SDK release a scenario runs on: the file's `sdk:` key, `--sdk` over it, a deploy step's
`sdk:` (an upgrade), and what the tools print and write for a run on another release."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents_core.releases.registry import DEFAULT_RELEASE, RELEASES, release_named
from scenarios.cli.command import main
from scenarios.language.errors import InvalidScenario
from scenarios.language.loader import parse_scenario
from scenarios.language.releases import preview_notes, releases_run
from scenarios.language.schema import DeployStep
from scenarios.run.runner import run_scenario

OLD, NEW = list(RELEASES)[0], list(RELEASES)[-1]
AGENT = "tests.unit.release_agents:ReleaseReporter"


def story(sdk_line: str = "", deploy: str = "deploy: {}", after: str | None = None) -> str:
    """A scenario whose agent says its release before and after a deploy."""
    before = after or OLD
    return f"""name: releases
description: The agent says which release it runs.
seed: 4
{sdk_line}
agents:
  a: {{class: "{AGENT}"}}
steps:
  - call: {{agent: a, method: release, returns: "{before}"}}
  - call: {{agent: a, method: child_release, returns: "{before}"}}
  - {deploy}
  - call: {{agent: a, method: release, returns: "{after or before}"}}
  - call: {{agent: a, method: child_release, returns: "{after or before}"}}
"""


def test_a_file_without_the_key_runs_the_default_release() -> None:
    scenario = parse_scenario(story(after=DEFAULT_RELEASE), "x.yaml")
    assert (scenario.sdk, scenario.sdk_in_file) == (DEFAULT_RELEASE, None)
    assert run_scenario(scenario).passed


@pytest.mark.parametrize("name", list(RELEASES))
def test_the_key_picks_the_release_the_agents_run(name: str) -> None:
    scenario = parse_scenario(story(f'sdk: "{name}"', after=name), "x.yaml")
    assert (scenario.sdk, scenario.sdk_in_file) == (name, name)
    result = run_scenario(scenario)
    assert result.passed, result.report()
    assert "--sdk" not in result.replay


@pytest.mark.parametrize("value", ['"0.99.0"', "0.32", "latest"])
def test_an_unknown_release_is_refused_naming_file_line_field_value_and_releases(
    value: str,
) -> None:
    with pytest.raises(InvalidScenario) as refused:
        parse_scenario(story(f"sdk: {value}"), "x.yaml")
    text = str(refused.value)
    assert text.startswith("x.yaml:4: sdk: ")
    assert value.strip('"') in text
    assert f"supported releases: {', '.join(RELEASES)}" in text


def test_a_deploy_step_upgrades_every_later_incarnation() -> None:
    scenario = parse_scenario(_upgrade_story(), "x.yaml")
    deploys = [step for step in scenario.steps if isinstance(step, DeployStep)]
    assert [step.sdk for step in deploys] == [NEW]
    result = run_scenario(scenario, invariants=("all",))
    assert result.passed, result.report()
    records = [r for r in result.trace if r.event == "platform:deploy"]
    assert [r.fields.get("sdk") for r in records] == [NEW]


def _upgrade_story() -> str:
    return f"""name: upgrade
description: The agent and its child run the old release, then the new one after the deploy.
seed: 4
sdk: "{OLD}"
agents:
  a: {{class: "{AGENT}"}}
steps:
  - call: {{agent: a, method: release, returns: "{OLD}"}}
  - call: {{agent: a, method: child_release, returns: "{OLD}"}}
  - deploy: {{sdk: "{NEW}"}}
  - call: {{agent: a, method: release, returns: "{NEW}"}}
  - call: {{agent: a, method: child_release, returns: "{NEW}"}}
"""


def test_a_downgrade_step_is_refused_at_its_line() -> None:
    text = _upgrade_story().replace(f'sdk: "{OLD}"\n', f'sdk: "{NEW}"\n', 1)
    text = text.replace(f'deploy: {{sdk: "{NEW}"}}', f'deploy: {{sdk: "{OLD}"}}')
    with pytest.raises(InvalidScenario) as refused:
        parse_scenario(text, "x.yaml")
    assert str(refused.value).startswith("x.yaml:10: step 3 (deploy): ")
    assert "downgrade" in str(refused.value)


def test_an_unknown_release_in_a_deploy_step_is_refused() -> None:
    text = _upgrade_story().replace(f'deploy: {{sdk: "{NEW}"}}', 'deploy: {sdk: "9.9.9"}')
    with pytest.raises(InvalidScenario) as refused:
        parse_scenario(text, "x.yaml")
    assert str(refused.value).startswith("x.yaml:10: step 3 (deploy): sdk: '9.9.9'")


def test_on_release_overrides_the_key_and_the_replay_names_it() -> None:
    scenario = parse_scenario(story(f'sdk: "{OLD}"', after=NEW), "x.yaml").on_release(NEW)
    assert scenario.sdk == NEW and scenario.sdk_overridden
    result = run_scenario(scenario)
    assert result.passed, result.report()
    assert result.replay == f"agentsim run x.yaml --seed 4 --sdk {NEW}"
    same = parse_scenario(story(f'sdk: "{NEW}"', after=NEW), "x.yaml").on_release(NEW)
    assert not same.sdk_overridden


def _write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_run_sdk_overrides_the_file_and_a_failure_replays_on_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # Passes on OLD, fails on NEW: the run and its replay must both be on NEW.
    path = _write(tmp_path, story(f'sdk: "{OLD}"'))
    assert main(["run", str(path)]) == 0
    capsys.readouterr()
    assert main(["run", str(path), "--sdk", NEW]) == 1
    out = capsys.readouterr().out
    assert f"replay: agentsim run {path} --seed 4 --sdk {NEW}" in out
    failure = next(Path("agentsim-failures").glob("*.json"))
    assert main(["replay", str(failure)]) == 1
    assert "REPRODUCED" in capsys.readouterr().out


def test_sdk_refuses_an_unknown_release_with_the_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, story())
    for command in (
        ["run", str(path)],
        ["golden", str(path)],
        ["fuzz", str(path)],
        ["explore", str(path)],
        ["generate"],
    ):
        assert main([*command, "--sdk", "0.99.0"]) == 2
        err = capsys.readouterr().err
        assert f"supported releases: {', '.join(RELEASES)}" in err, command


def test_sdk_that_makes_a_deploy_step_a_downgrade_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The file starts on OLD and deploys OLD again (a plain deploy); on NEW that is a downgrade.
    text = _upgrade_story().replace(f'deploy: {{sdk: "{NEW}"}}', f'deploy: {{sdk: "{OLD}"}}')
    path = _write(tmp_path, text)
    assert main(["run", str(path), "--sdk", NEW]) == 2
    err = capsys.readouterr().err
    assert "step 3 (deploy)" in err and "downgrade" in err and f"--sdk {NEW}" in err


def test_a_preview_release_is_named_once_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    previews = [name for name in RELEASES if release_named(name).preview]
    if not previews:
        pytest.skip("every release is modelled in full")
    preview = previews[0]
    one = _write(tmp_path, story(f'sdk: "{preview}"', after=preview), "one.yaml")
    two = _write(
        tmp_path, story(f'sdk: "{preview}"', after=preview).replace("releases", "two"), "two.yaml"
    )
    assert main(["run", str(one), str(two)]) == 0
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if "modelled in part" in line]
    assert len(notes) == 1
    count = len(release_named(preview).not_built)
    assert f"{count} part" in notes[0] and "docs/not-built-yet.md" in notes[0]
    full = [name for name in RELEASES if not release_named(name).preview]
    main(["run", str(one), "--sdk", full[0]])
    assert "modelled in part" not in capsys.readouterr().err


def test_the_releases_a_run_runs_on_count_its_upgrades() -> None:
    scenario = parse_scenario(_upgrade_story(), "x.yaml")
    assert releases_run([scenario]) == [OLD, NEW]
    assert releases_run([scenario.on_release(NEW)]) == [NEW]
    notes = preview_notes([OLD, NEW, NEW], "agentsim run")
    assert len(notes) == sum(release_named(name).preview for name in (OLD, NEW))


def test_golden_sdk_keeps_a_trace_per_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file without the key keeps its default-release run in NAME.golden and another
    release's run in NAME.sdk-VERSION.golden."""
    other = next(name for name in RELEASES if name != DEFAULT_RELEASE)
    path = _write(tmp_path, story(after=DEFAULT_RELEASE), "up.yaml")
    assert main(["golden", "--update", str(path)]) == 0
    assert (tmp_path / "up.golden").is_file()
    assert not list(tmp_path.glob("up.sdk-*.golden"))
    capsys.readouterr()
    assert main(["golden", str(path), "--sdk", other]) == 1
    out = capsys.readouterr().out
    assert f"agentsim golden --update {path} --sdk {other}" in out
    # On the other release the calls return that release: the story's expectations fail, so
    # the golden file is written and reported failing; it is the other release's.
    main(["golden", "--update", str(path), "--sdk", other])
    kept = tmp_path / f"up.sdk-{other}.golden"
    assert kept.is_file()
    assert f"on SDK release {other}" in kept.read_text(encoding="utf-8").splitlines()[0]


def release_expectations(expect: str) -> str:
    """A run that says its release, with expectations of each release's answer."""
    return f"""name: release-expectations
description: Each expectation names the release it is checked on.
seed: 4
agents:
  a: {{class: "{AGENT}"}}
steps:
  - call: {{agent: a, method: release}}
expect:
{expect}
"""


TABLES = {"0.21.0": "cf_agents_schedules", "0.32.0": "cf_agents_jobs"}
"""The table each release keeps its schedules in (the other release has no such table)."""


@pytest.mark.parametrize("name", list(RELEASES))
def test_an_expectation_with_sdk_is_checked_on_that_release_alone(name: str) -> None:
    """Each release's schedules table is queried under its own `sdk:`: a run on either release
    checks only its own query, and passes; the other's would fail (no such table)."""
    expect = "\n".join(
        f"  - {{query: {{agent: a, sql: 'SELECT count(*) AS n FROM {table}', rows: [{{n: 0}}]}}, "
        f'sdk: "{release}"}}'
        for release, table in TABLES.items()
    )
    scenario = parse_scenario(release_expectations(expect), "x.yaml").on_release(name)
    assert [e.sdk for e in scenario.expect] == list(TABLES)
    result = run_scenario(scenario)
    assert result.passed, result.report()
    bare = "\n".join(line.split(", sdk: ")[0] + "}" for line in expect.splitlines())
    unfiltered = run_scenario(parse_scenario(release_expectations(bare), "x.yaml").on_release(name))
    assert not unfiltered.passed
    assert "no such table" in unfiltered.report()


def test_an_unknown_release_on_an_expectation_is_refused_at_its_line() -> None:
    text = release_expectations('  - {event: rpc, sdk: "0.99.0"}')
    with pytest.raises(InvalidScenario) as refused:
        parse_scenario(text, "x.yaml")
    message = str(refused.value)
    assert "x.yaml:9" in message and "0.99.0" in message
    assert all(release in message for release in RELEASES)
