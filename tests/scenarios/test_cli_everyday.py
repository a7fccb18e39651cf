"""Everyday use of `agentsim`: its version, the bundled library, agents beside the scenario
file, directories searched at any depth, what a PASS checked, and golden files of failing
runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scenarios import load_scenario
from scenarios.cli import main
from scenarios.cli.inputs import library_dir, scenario_files_in
from scenarios.hunt.reproducers import with_python_path
from scenarios.run.failures import agentsim_version
from tests.scenarios.helpers import BASE, LIBRARY, ROOT, edit, without_release_notes

AGENTSIM = Path(sys.executable).with_name("agentsim")

MY_AGENTS = """\
from agents_core import Agent


class Greeter(Agent):
    initial_state = {"greeted": 0}

    async def greet(self, name):
        self.set_state({"greeted": self.state["greeted"] + 1})
        return f"hello {name}"
"""


def greeter_scenario(module: str, greeted: int = 1) -> str:
    return f"""\
name: greeter-{module}
description: An agent class that lives beside this file, not in an installed package.
seed: 3
agents:
  g: {{class: "{module}:Greeter"}}
steps:
  - call: {{agent: g, method: greet, args: [ada]}}
expect:
  - state: {{agent: g, equals: {{greeted: {greeted}}}}}
"""


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def command(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The installed `agentsim` script, with no PYTHONPATH: as a user runs it."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        [str(AGENTSIM), *argv], cwd=cwd, capture_output=True, text=True, env=env, timeout=120
    )


# -- version, library ---------------------------------------------------------------------------
def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    """`agentsim --version` prints `agentsim X.Y.Z` and exits 0."""
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out == f"agentsim {agentsim_version()}\n"
    assert agentsim_version() != "unknown"


def test_library_lists_every_bundled_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    """One line per scenario of the package's library, name first, then how to run them."""
    code, out, err = run_cli(capsys, "library")
    lines = out.splitlines()
    names = [load_scenario(path).name for path in scenario_files_in(LIBRARY)]
    assert code == 0 and err == ""
    assert library_dir() == LIBRARY.resolve()
    assert [line.split()[0] for line in lines[:-1]] == names
    assert lines[-1] == (
        f"{len(names)} scenarios in {LIBRARY.resolve()}; run them with: agentsim run --library"
    )


def test_run_library_runs_the_bundled_scenarios_from_any_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--library` adds the package's library to the paths given (here: one file of ours)."""
    ours = tmp_path / "ours.yaml"
    ours.write_text(edit("name: base", "name: ours"))
    code, out, _ = run_cli(capsys, "run", str(ours), "--library", "--seeds", "1..1")
    total = len(scenario_files_in(LIBRARY)) + 1
    assert out.splitlines()[-1] == f"{total} passed, 0 failed" and code == 0


def test_run_without_a_path_or_library_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "run")
    assert code == 2 and out == ""
    assert err == (
        "agentsim run: error: no scenario given; name files or directories, or give --library\n"
    )


def test_an_install_ships_the_library_and_lists_it_from_site_packages(tmp_path: Path) -> None:
    """Built as an install lays it out (setuptools' `build_py`, the step that fills a wheel
    from the package data of pyproject.toml), the tree holds every library scenario, its golden
    file and the schema; from there `agentsim library` lists them."""
    source = tmp_path / "src"
    for part in ("agents_core", "sim", "scenarios", "reports"):
        shutil.copytree(ROOT / part, source / part, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / part, source / part)
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_py"]
        + ["--build-lib", str(site)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    shipped_dir = site / "scenarios" / "library"
    shipped = {p.relative_to(shipped_dir) for p in shipped_dir.rglob("*") if p.is_file()}
    expected = {
        p.relative_to(LIBRARY)
        for p in LIBRARY.rglob("*")
        if p.suffix in (".yaml", ".yml", ".golden")
    }
    assert expected and expected <= shipped
    assert (site / "scenarios" / "scenario.schema.json").is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(site)}
    listed = subprocess.run(
        [sys.executable, "-m", "scenarios.cli", "library"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[-1] == (
        f"{len(list(LIBRARY.glob('*.yaml')))} scenarios in {shipped_dir}; run them with: "
        f"agentsim run --library"
    )


# -- agents beside the scenario -----------------------------------------------------------------
def test_a_class_module_beside_the_scenario_imports_without_pythonpath(tmp_path: Path) -> None:
    """`agentsim run dir/x.yaml` from elsewhere imports `dir/beside_agents.py`; the printed
    replay command of a failure, run as printed, works too."""
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "beside_agents.py").write_text(MY_AGENTS)
    (folder / "greet.yaml").write_text(greeter_scenario("beside_agents"))
    (folder / "wrong.yaml").write_text(greeter_scenario("beside_agents", greeted=5))
    done = command(tmp_path, "run", "suite/greet.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("PASS greeter-beside_agents seed=3 ")
    failed = command(tmp_path, "run", "suite/wrong.yaml")
    assert failed.returncode == 1
    replay = [line for line in failed.stdout.splitlines() if line.startswith("  replay: ")]
    assert replay == ["  replay: agentsim run suite/wrong.yaml --seed 3"]
    again = command(tmp_path, *replay[0].split()[2:])
    assert again.returncode == 1 and "FAIL greeter-beside_agents seed=3" in again.stdout
    replayed = command(tmp_path, "replay", "agentsim-failures/greeter-beside_agents-3.json")
    assert replayed.returncode == 1 and "REPRODUCED" in replayed.stdout, replayed.stdout


def test_a_reproducer_written_elsewhere_names_where_the_agents_are(tmp_path: Path) -> None:
    """A hunt's reproducer in another folder gets a `python_path:` back to the base scenario's
    folder, so that it validates and runs as printed; installed agents need none."""
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "hunted_agents.py").write_text(MY_AGENTS)
    base = folder / "greet.yaml"
    base.write_text(greeter_scenario("hunted_agents"))
    try:
        load_scenario(base)  # as fuzz and explore do, in this process
        out = tmp_path / "agentsim-fuzz" / "greet-fuzz-0.yaml"
        text = with_python_path(base.read_text(), str(out))
        assert 'python_path: ["../suite"]  # where the agents\' modules are\nagents:\n' in text
        out.parent.mkdir()
        out.write_text(text)
        checked = command(tmp_path / "agentsim-fuzz", "run", "greet-fuzz-0.yaml")
        assert checked.returncode == 0, checked.stdout + checked.stderr
        again = with_python_path(text, str(tmp_path / "elsewhere" / "deeper" / "x.yaml"))
        assert 'python_path: ["../../suite"]' in again and again.count("python_path: [") == 1
    finally:
        sys.modules.pop("hunted_agents", None)
    installed = edit("name: base", "name: installed")
    assert with_python_path(installed, str(tmp_path / "out" / "x.yaml")) == installed


def test_a_class_module_in_the_current_directory_imports_too(tmp_path: Path) -> None:
    """The module may sit in the directory the command runs from, the scenario elsewhere;
    `validate` imports it as `run` does."""
    (tmp_path / "here_agents.py").write_text(MY_AGENTS)
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "greet.yaml").write_text(greeter_scenario("here_agents"))
    assert command(tmp_path, "run", "scenarios/greet.yaml").returncode == 0
    checked = command(tmp_path, "validate", "scenarios/greet.yaml")
    assert checked.returncode == 0 and checked.stdout.startswith("ok scenarios/greet.yaml")
    (tmp_path / "here_agents.py").write_text(MY_AGENTS + "\nraise RuntimeError('side effect')\n")
    broken = command(tmp_path, "validate", "scenarios/greet.yaml")
    assert broken.returncode == 2
    assert "cannot import module 'here_agents' (RuntimeError: side effect)" in broken.stderr


def test_the_search_path_is_put_back_after_the_import(tmp_path: Path) -> None:
    """Loading a scenario leaves `sys.path` as it was (a scenario's folder never shadows what
    the process imports later)."""
    (tmp_path / "restore_agents.py").write_text(MY_AGENTS)
    path = tmp_path / "greet.yaml"
    path.write_text(greeter_scenario("restore_agents"))
    before = list(sys.path)
    try:
        assert load_scenario(path).agents[0].cls.__name__ == "Greeter"
        assert sys.path == before
    finally:
        sys.modules.pop("restore_agents", None)


# -- directories --------------------------------------------------------------------------------
def test_directories_are_searched_at_any_depth_and_yml_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`.yaml` and `.yml` files in the folder and its subfolders, by path; hidden folders and
    other files left out."""
    tree = tmp_path / "tree"
    for relative, name in (
        ("b.yaml", "b"),
        ("a.yml", "a"),
        ("sub/c.yaml", "c"),
        ("sub/deeper/d.yml", "d"),
        (".hidden/e.yaml", "e"),
    ):
        (tree / relative).parent.mkdir(parents=True, exist_ok=True)
        (tree / relative).write_text(edit("name: base", f"name: {name}"))
    (tree / "notes.txt").write_text("not a scenario")
    found = [p.relative_to(tree).as_posix() for p in scenario_files_in(tree)]
    assert found == ["a.yml", "b.yaml", "sub/c.yaml", "sub/deeper/d.yml"]
    code, out, _ = run_cli(capsys, "run", str(tree))
    assert code == 0
    assert [line.split()[1] for line in out.splitlines()[:-1]] == ["a", "b", "c", "d"]


# -- what a PASS checked ------------------------------------------------------------------------
def test_a_pass_says_what_it_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The number of expectations, the invariants (the file's and the command line's) and
    whether determinism was checked."""
    path = tmp_path / "base.yaml"
    path.write_text(BASE + "  - invariants: [eviction_final]\n")
    _, out, _ = run_cli(capsys, "run", str(path))
    assert out.splitlines()[0].endswith(
        "(checked 3 expectations, invariants: eviction_final, determinism not checked)"
    )
    _, out, _ = run_cli(
        capsys, "run", str(path), "--invariants", "startup_once", "--check-determinism"
    )
    assert out.splitlines()[0].endswith(
        "(checked 3 expectations, invariants: eviction_final, startup_once, determinism checked)"
    )
    _, out, _ = run_cli(capsys, "run", str(path), "--invariants", "all")
    assert " invariants: all " in out.splitlines()[0]


def test_a_scenario_that_checks_nothing_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No `expect:` and no `--invariants`: it passes, with a warning on stderr; invariants on
    the command line silence it."""
    path = tmp_path / "bare.yaml"
    path.write_text(BASE[: BASE.index("expect:")].replace("name: base", "name: bare"))
    code, out, err = run_cli(capsys, "run", str(path))
    assert code == 0 and "(checked 0 expectations, no invariants," in out
    assert without_release_notes(err) == (
        f"agentsim run: warning: {path}: scenario 'bare' has no expectation and no invariant, "
        f"so its PASS only says that its steps raised nothing and it settled; add expect: to "
        f"the file, or --invariants all\n"
    )
    assert without_release_notes(run_cli(capsys, "run", str(path), "--invariants", "all")[2]) == ""


# -- golden -------------------------------------------------------------------------------------
def test_golden_reports_a_run_that_fails_its_expectations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A matching golden file of a failing run is not "ok": exit 1, FAIL, each failure and the
    replay command; `--update` writes the file and still says the run fails."""
    path = tmp_path / "bad.yaml"
    path.write_text(edit("equals: {count: 1}", "equals: {count: 5}"))
    code, out, _ = run_cli(capsys, "golden", "--update", str(path))
    assert code == 1 and out.startswith(f"wrote {tmp_path / 'bad.golden'}\nFAIL the run of ")
    code, out, _ = run_cli(capsys, "golden", str(path))
    assert code == 1 and not out.startswith("ok")
    assert out == (
        f"FAIL the run of {path} fails its expectations, so its golden trace shows a story that "
        f"no longer holds:\n  - {path}:16: expect 2 (state): the state of counter is "
        f"{{'count': 1}}, expected {{'count': 5}}\n  replay: agentsim run {path} --seed 7\n"
    )
