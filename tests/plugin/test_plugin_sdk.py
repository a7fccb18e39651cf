"""`--agentsim-sdk VERSION`: the `sim` fixture and every scenario file run on that release, the
replay line names it, an unknown release is a usage error, and a release modelled in part gets
its note once."""

from __future__ import annotations

from pathlib import Path

from agents_core.releases.registry import DEFAULT_RELEASE, RELEASES, release_named
from tests.plugin.test_plugin import _project, _pytest

OTHER = next(name for name in RELEASES if name != DEFAULT_RELEASE)

RELEASE_TESTS = """\
def test_release(sim):
    print(f"RELEASE={sim.release}")


def test_fails(sim):
    assert False
"""

SCENARIO = f"""\
name: says
description: The agent says its release.
seed: 1
agents:
  a: {{class: "release_agent:Says"}}
steps:
  - call: {{agent: a, method: release, returns: "{OTHER}"}}
"""

AGENT = """\
from agents_core import Agent


class Says(Agent):
    async def release(self) -> str:
        return self.host.release
"""


def test_the_fixture_and_scenario_files_run_on_the_release_asked(tmp_path: Path) -> None:
    where = _project(tmp_path)
    (where / "test_release.py").write_text(RELEASE_TESTS)
    (where / "release_agent.py").write_text(AGENT)
    (where / "says.yaml").write_text(SCENARIO)
    plain = _pytest(where, "-s", "test_release.py::test_release")
    asked = _pytest(where, "-s", "test_release.py::test_release", "--agentsim-sdk", OTHER)
    assert f"RELEASE={DEFAULT_RELEASE}" in plain.stdout, plain.stdout
    assert f"RELEASE={OTHER}" in asked.stdout, asked.stdout
    assert _pytest(where, "says.yaml").returncode == 1
    on_other = _pytest(where, "says.yaml", "--agentsim-sdk", OTHER)
    assert on_other.returncode == 0, on_other.stdout
    failing = _pytest(where, "test_release.py::test_fails", "--agentsim-sdk", OTHER)
    assert f"--agentsim-sdk {OTHER}" in failing.stdout
    notes = [line for line in asked.stdout.splitlines() if "modelled in part" in line]
    assert len(notes) == (1 if release_named(OTHER).preview else 0), asked.stdout


def test_an_unknown_release_is_a_usage_error(tmp_path: Path) -> None:
    where = _project(tmp_path)
    done = _pytest(where, "--agentsim-sdk", "0.99.0")
    assert done.returncode == 4
    assert f"supported releases: {', '.join(RELEASES)}" in done.stderr
