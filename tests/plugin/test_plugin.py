"""The pytest plugin: the `sim` fixture, failure reports, invariants, scenario files as tests.

Each test writes a small project into a temporary directory and runs pytest on it in a child
process, as a user would: the plugin is found through its `pytest11` entry point.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

from scenarios.cli import main
from tests.scenarios.helpers import SOME_SEEDS_FAIL

ROOT = Path(__file__).resolve().parents[2]

AGENT = """\
from agents_core import Agent


class Bad(Agent):
    async def poke(self) -> None:
        self.host.trace.emit("user:bad", why="poked")
"""

CONFTEST = """\
from sim.checkers import Violation, register


def _no_bad(context):
    return [
        Violation("no_bad_records", r.agent, "", "a user:bad record", (r.seq,))
        for r in context.events("user:bad")
    ]


register("no_bad_records", _no_bad)
"""

TESTS = """\
from agents import Bad


def test_seed(sim):
    print(f"SEED={sim.seed}")


def test_fails(sim):
    ref = sim.agent(Bad, "b")
    sim.run_for(5_000)
    assert sim.now_ms == 0, "time moved"


def test_pokes(sim):
    sim.call(sim.agent(Bad, "b"), "poke")
"""

SCENARIO = SOME_SEEDS_FAIL


def _project(tmp_path: Path, ini: str = "") -> Path:
    (tmp_path / "agents.py").write_text(AGENT)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_user.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n" + ini)
    return tmp_path


def _pytest(
    where: Path, *args: str, env: dict[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """pytest in `where`, as a user runs it; `env` sets (or, with None, unsets) variables."""
    base = {**os.environ, "PYTHONPATH": str(where), "PYTHONDONTWRITEBYTECODE": "1"}
    base.pop("PYTEST_ADDOPTS", None)
    for name, value in (env or {}).items():
        if value is None:
            base.pop(name, None)
        else:
            base[name] = value
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=where,
        capture_output=True,
        text=True,
        env=base,
        timeout=300,
    )


def test_the_fixture_seeds_from_the_node_id_or_the_option(tmp_path: Path) -> None:
    """Without an option the seed is crc32 of the node id; --agentsim-seed N sets it."""
    where = _project(tmp_path)
    own = _pytest(where, "-s", "test_user.py::test_seed")
    given = _pytest(where, "-s", "test_user.py::test_seed", "--agentsim-seed", "41")
    assert f"SEED={zlib.crc32(b'test_user.py::test_seed')}" in own.stdout, own.stdout
    assert "SEED=41" in given.stdout, given.stdout


def test_a_failing_test_reports_seed_short_log_trace_and_replay(tmp_path: Path) -> None:
    """The failure shows the seed, the short log's tail, the trace file and the replay line,
    and the replay line fails the same way with the same trace."""
    where = _project(tmp_path)
    first = _pytest(where, "test_user.py::test_fails")
    assert first.returncode == 1
    seed = zlib.crc32(b"test_user.py::test_fails")
    out = first.stdout
    assert "agentsim" in out and f"seed: {seed} (from the test's node id)" in out, out
    assert "short log, last" in out and "incarnation:start" in out
    replay = re.search(r"replay: (pytest .*)$", out, re.M)
    assert replay and replay.group(1) == f"pytest test_user.py::test_fails --agentsim-seed {seed}"
    trace = re.search(r"full trace: (\S+\.jsonl)", out)
    assert trace and (where / trace.group(1)).is_file()
    first_trace = (where / trace.group(1)).read_text()
    again = _pytest(where, *replay.group(1).split()[1:])
    assert again.returncode == 1
    assert f"seed: {seed} (from --agentsim-seed)" in again.stdout
    assert (where / trace.group(1)).read_text() == first_trace


def test_named_invariants_fail_a_test_that_broke_them(tmp_path: Path) -> None:
    """--agentsim-invariants checks after each test that used the fixture, and says which."""
    where = _project(tmp_path)
    plain = _pytest(where, "test_user.py::test_pokes")
    checked = _pytest(where, "test_user.py::test_pokes", "--agentsim-invariants", "no_bad_records")
    assert plain.returncode == 0, plain.stdout
    assert checked.returncode == 1
    assert "invariant no_bad_records" in checked.stdout or "no_bad_records" in checked.stdout
    assert "a user:bad record" in checked.stdout
    assert "--agentsim-invariants no_bad_records" in checked.stdout


def test_bad_options_are_usage_errors(tmp_path: Path) -> None:
    """An unknown invariant or a bad seed range stops pytest with what would be valid."""
    where = _project(tmp_path)
    unknown = _pytest(where, "--agentsim-invariants", "no_such_thing")
    backwards = _pytest(where, "--agentsim-seeds", "9..1")
    assert unknown.returncode == 4 and "no_such_thing" in unknown.stderr
    assert "known invariants" in unknown.stderr
    assert backwards.returncode == 4 and "A..B" in backwards.stderr


def test_scenario_files_are_tests_one_per_seed(tmp_path: Path) -> None:
    """A scenario-shaped YAML file gives a test per seed; other YAML is left alone."""
    where = _project(tmp_path)
    (where / "idle.yaml").write_text(SCENARIO)
    (where / "settings.yaml").write_text("agents_count: 3\nsteps_per_day: 2\n")
    listed = _pytest(where, "--collect-only", ".")
    assert "idle.yaml::seed=0" in listed.stdout
    assert "settings.yaml" not in listed.stdout
    many = _pytest(where, "--collect-only", "idle.yaml", "--agentsim-seeds", "3..5")
    items = [line for line in many.stdout.splitlines() if line.startswith("idle.yaml::")]
    assert items == ["idle.yaml::seed=3", "idle.yaml::seed=4", "idle.yaml::seed=5"]
    one = _pytest(where, "--collect-only", "idle.yaml", "--agentsim-seed", "8")
    assert [line for line in one.stdout.splitlines() if line.startswith("idle.yaml::")] == [
        "idle.yaml::seed=8"
    ]


def test_a_failing_scenario_shows_what_agentsim_run_shows(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """The failure text, the failure file and the replay command are those of agentsim run."""
    where = _project(tmp_path)
    (where / "idle.yaml").write_text(SCENARIO)
    monkeypatch.chdir(where)
    assert main(["run", "idle.yaml", "--seeds", "0..11", "--failures", "cli"]) == 1
    cli_out = capsys.readouterr().out
    failing = sorted(int(s) for s in re.findall(r"^FAIL idle seed=(\d+)", cli_out, re.M))
    assert failing
    seed = failing[0]
    block = re.search(rf"^FAIL idle seed={seed} .*?^  replay: .*?$", cli_out, re.M | re.S)
    assert block
    ran = _pytest(where, f"idle.yaml::seed={seed}", "--agentsim-seeds", f"{seed}..{seed}")
    assert ran.returncode == 1
    assert block.group(0).replace("cli/", "agentsim-failures/") in ran.stdout
    record = json.loads((where / "agentsim-failures" / f"idle-{seed}.json").read_text())
    assert record["replay"] == f"agentsim run idle.yaml --seed {seed}"


def test_globs_choose_files_when_sniffing_is_off(tmp_path: Path) -> None:
    """With agentsim_sniff_yaml = false only files matching agentsim_scenarios are collected."""
    where = _project(tmp_path, "agentsim_sniff_yaml = false\nagentsim_scenarios = chosen/*.yaml\n")
    (where / "chosen").mkdir()
    (where / "data").mkdir()
    (where / "chosen" / "idle.yaml").write_text(SCENARIO)
    (where / "data" / "fixture.yaml").write_text(SCENARIO)
    listed = _pytest(where, "--collect-only", "chosen", "data")
    assert "chosen/idle.yaml::seed=0" in listed.stdout
    assert "data/fixture.yaml" not in listed.stdout


def test_this_project_collects_its_library_and_not_its_fixtures() -> None:
    """Here, `pytest scenarios/library` collects the library and the test data stays data."""
    library = _pytest(ROOT, "--collect-only", "scenarios/library")
    data = _pytest(ROOT, "--collect-only", "tests/scenarios/data")
    library_dir = ROOT / "scenarios" / "library"
    files = [*library_dir.rglob("*.yaml"), *library_dir.rglob("*.yml")]
    collected = [line for line in library.stdout.splitlines() if ".yaml::seed=" in line]
    assert len(collected) == len(files), library.stdout[-2000:]
    assert ".yaml::" not in data.stdout
