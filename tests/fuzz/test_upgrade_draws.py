"""The upgrade as a drawn fault, and the hunts on another release than the file's.

`upgrade` is a fault kind drawn only when asked for (`--faults ...,upgrade`): a deploy that
brings a newer SDK release than the run's. Left out of the default kinds, it leaves every seed's
draws as they were. A hunt run with `--sdk` writes reproducers that name the release, so that
they replay on it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agents_core.releases.registry import DEFAULT_RELEASE, RELEASES
from scenarios.hunt.emit import with_sdk
from scenarios.hunt.fault_draws import FAULT_KINDS, UPGRADE
from scenarios.hunt.fuzz import FUZZ_KINDS, fuzz_scenario
from scenarios.language.loader import load_scenario, parse_scenario
from scenarios.run.runner import run_scenario
from tests.fuzz.test_fault_sites import SESSION
from tests.scenarios.test_explore import SPLIT, run_cli

OLD, NEW = list(RELEASES)[0], list(RELEASES)[-1]

SAYS = f"""\
name: says
description: The agent says its release twice, a minute apart; an upgrade between changes it.
seed: 2
sdk: "{OLD}"
agents:
  a: {{class: "tests.unit.release_agents:ReleaseReporter"}}
steps:
  - call: {{agent: a, method: release, returns: "{OLD}"}}
  - run_for: 1m
  - call: {{agent: a, method: release, returns: "{OLD}"}}
"""


def test_upgrade_is_asked_for_not_drawn_by_default() -> None:
    assert UPGRADE in FUZZ_KINDS and UPGRADE not in FAULT_KINDS


def test_a_drawn_upgrade_is_a_deploy_bringing_the_newer_release(tmp_path: Path) -> None:
    path = tmp_path / "says.yaml"
    path.write_text(SAYS)
    calm = fuzz_scenario(path, examples=20, kinds=("deploy",), out_dir=tmp_path / "calm")
    assert not calm.found, calm.report()
    outcome = fuzz_scenario(path, examples=20, kinds=(UPGRADE,), out_dir=tmp_path / "up")
    assert outcome.found, outcome.report()
    text = Path(outcome.path).read_text()
    assert f'deploy: {{sdk: "{NEW}"}}' in text
    assert not run_scenario(load_scenario(outcome.path)).passed


def test_fuzz_on_another_release_writes_it_into_the_reproducer(tmp_path: Path) -> None:
    """A release other than the file's own (the default: SESSION names none) is written into
    the reproducer as its `sdk:` key."""
    other = next(name for name in RELEASES if name != DEFAULT_RELEASE)
    path = tmp_path / "session.yaml"
    path.write_text(SESSION)
    outcome = fuzz_scenario(
        path, examples=20, kinds=("repeat",), invariants_only=True, sdk=other, out_dir=tmp_path
    )
    assert outcome.found, outcome.report()
    text = Path(outcome.path).read_text()
    assert f'\nsdk: "{other}"\n' in text
    assert load_scenario(outcome.path).sdk == other


def test_explore_on_another_release_writes_it_into_the_reproducer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    other = next(name for name in RELEASES if name != DEFAULT_RELEASE)
    monkeypatch.chdir(tmp_path)
    base = tmp_path / "split.yaml"
    base.write_text(SPLIT)
    code, out, _ = run_cli(
        capsys,
        "explore",
        str(base),
        "--crash-points",
        "60",
        "--interleavings",
        "0",
        "--out",
        "found",
        "--sdk",
        other,
    )
    assert code == 1
    runs = [line for line in out.splitlines() if line.startswith("  run it: agentsim run ")]
    reproducer = runs[0].removeprefix("  run it: agentsim run ")
    text = Path(reproducer).read_text()
    assert text.startswith(f"# Found by `agentsim explore {base} --crash-points 60")
    assert f"--sdk {other}`" in text.splitlines()[0]
    assert load_scenario(reproducer).sdk == other


def test_with_sdk_replaces_the_key_or_puts_it_after_the_seed() -> None:
    put = with_sdk(SESSION, NEW)
    assert f'seed: 2\nsdk: "{NEW}"\n' in put
    assert parse_scenario(put, "x.yaml").sdk == NEW
    again = with_sdk(put, OLD)
    assert again.count("sdk:") == 1 and parse_scenario(again, "x.yaml").sdk == OLD
