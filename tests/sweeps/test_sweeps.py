"""Sweeps: `agentsim run --seeds A..B --workers N` and `--dask` give what a serial run gives."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from scenarios.cli import main
from scenarios.cli.sweeps import ALLOWED_DEATHS, SweepSettings, sweep
from scenarios.language.loader import load_scenario
from scenarios.run.runner import run_scenario
from tests.scenarios.helpers import SOME_SEEDS_FAIL

SEEDS = "0..11"


DIES = """\
name: sweep-dies
description: The first run anywhere kills its process; every other run counts once.
seed: 0
agents:
  counter: {{class: "tests.sweeps.agents:DiesOnce"}}
steps:
  - call: {{agent: counter, method: die_once, args: ["{marker}"]}}
expect:
  - state: {{agent: counter, equals: {{count: 1}}}}
"""

KILLS = """\
name: sweep-kills
description: Every run kills the process that runs it.
seed: 0
agents:
  counter: {class: "tests.sweeps.agents:DiesOnce"}
steps:
  - call: {agent: counter, method: die_always}
expect:
  - state: {agent: counter, equals: {count: 1}}
"""


@pytest.fixture
def idle_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    Path("idle.yaml").write_text(SOME_SEEDS_FAIL, encoding="utf-8")
    return "idle.yaml"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _tally(out: str) -> tuple[int, int]:
    match = re.search(r"^(\d+) passed, (\d+) failed$", out, re.M)
    assert match, out
    return int(match.group(1)), int(match.group(2))


def _failure_files(directory: str) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(Path(directory).glob("*.json"))}


def test_two_workers_print_and_write_what_one_process_does(
    idle_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --workers 2 the output, the failure files and the exit code are a serial run's."""
    serial = _run(capsys, "run", idle_file, "--seeds", SEEDS, "--failures", "serial")
    pooled = _run(
        capsys, "run", idle_file, "--seeds", SEEDS, "--workers", "2", "--failures", "pooled"
    )
    passed, failed = _tally(serial[1])
    assert passed > 0 and failed > 0  # a mix of both, or the comparison shows little
    assert pooled[0] == serial[0] == 1
    assert pooled[1] == serial[1].replace("serial", "pooled")
    assert _failure_files("pooled") == {
        name: text.replace("serial", "pooled") for name, text in _failure_files("serial").items()
    }
    assert _failure_files("serial")


def test_pooled_traces_are_the_serial_traces(
    idle_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--trace with --workers 2 writes the same trace files, byte for byte."""
    _run(capsys, "run", idle_file, "--seeds", "0..3", "--trace", "one")
    _run(capsys, "run", idle_file, "--seeds", "0..3", "--trace", "two", "--workers", "2")
    one = {p.name: p.read_bytes() for p in Path("one").glob("*.jsonl")}
    two = {p.name: p.read_bytes() for p in Path("two").glob("*.jsonl")}
    assert len(one) == 4 and one == two


def test_sweep_hands_results_back_in_the_order_given(idle_file: str) -> None:
    """`sweep` gives each run's verdict and digest, in the order of the runs given."""
    scenario = load_scenario(idle_file)
    seeds = [5, 0, 3, 9, 1]
    runs = [(scenario, seed) for seed in seeds]
    results = list(sweep(runs, SweepSettings(), workers=2))
    expected = [run_scenario(scenario, seed) for seed in seeds]
    assert [r.seed for r in results] == seeds
    assert [(r.digest, r.passed, r.failures) for r in results] == [
        (r.digest, r.passed, r.failures) for r in expected
    ]
    assert all(len(r.trace) == 0 for r in results)  # records are shipped only when asked for


def _a_death_loses_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *backend: str,
) -> None:
    """Seeds 0..5 of a file whose first run anywhere kills its process: serially (the death
    already spent), then on `backend` (a worker dies), with the same output."""
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "marker"
    Path("dies.yaml").write_text(DIES.format(marker=marker), encoding="utf-8")
    marker.write_text("already died\n", encoding="utf-8")
    serial = _run(capsys, "run", "dies.yaml", "--seeds", "0..5")
    marker.unlink()
    spread = _run(capsys, "run", "dies.yaml", "--seeds", "0..5", *backend)
    assert marker.exists()  # a worker did die
    assert serial[0] == 0
    assert spread[0] == 0, spread[2]
    assert spread[1] == serial[1]


def test_a_pooled_worker_that_dies_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A local worker that dies mid-task breaks the pool; a fresh pool runs the seeds it took
    down, and the output is the serial run's."""
    _a_death_loses_nothing(tmp_path, monkeypatch, capsys, "--workers", "2")


def test_a_seed_that_kills_every_worker_ends_the_pooled_sweep_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run that kills each pool it is given stops the sweep after the allowed retries, with
    one line naming its seeds (never a traceback)."""
    monkeypatch.chdir(tmp_path)
    Path("kills.yaml").write_text(KILLS, encoding="utf-8")
    code, _, err = _run(capsys, "run", "kills.yaml", "--seeds", "0..3", "--workers", "2")
    assert code == 2
    assert f"a worker process died {ALLOWED_DEATHS + 1} times while running kills.yaml" in err
    assert "Traceback" not in err


def test_dask_without_distributed_says_how_to_install_it(
    idle_file: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--dask without the extra is bad input naming the extra."""
    monkeypatch.setitem(sys.modules, "distributed", None)
    code, _, err = _run(capsys, "run", idle_file, "--seeds", "0..1", "--dask", "local")
    assert code == 2
    assert "pip install 'agentsim[dask]'" in err


@pytest.fixture(scope="module")
def dask_available() -> None:
    pytest.importorskip("distributed")


def test_a_local_dask_cluster_prints_what_one_process_does(
    dask_available: None, idle_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--dask local with 2 workers gives the serial run's output and failure files."""
    serial = _run(capsys, "run", idle_file, "--seeds", SEEDS, "--failures", "serial")
    dask = _run(
        capsys,
        "run",
        idle_file,
        "--seeds",
        SEEDS,
        "--dask",
        "local",
        "--workers",
        "2",
        "--failures",
        "dask",
    )
    assert dask[0] == serial[0] == 1
    assert dask[1] == serial[1].replace("serial", "dask")
    assert _failure_files("dask") == {
        name: text.replace("serial", "dask") for name, text in _failure_files("serial").items()
    }


def test_a_lost_dask_worker_s_seeds_run_elsewhere(
    dask_available: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A worker that dies mid-task loses nothing: its seeds run again, the summary is whole."""
    _a_death_loses_nothing(tmp_path, monkeypatch, capsys, "--dask", "local", "--workers", "2")


def test_workers_keep_the_budgets_and_the_determinism_check(
    idle_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--max-events and --check-determinism reach every worker: the same verdicts, sentences
    and replay commands as a serial run."""
    flags = ["--seeds", "0..3", "--max-events", "30", "--check-determinism"]
    serial = _run(capsys, "run", idle_file, *flags, "--failures", "serial")
    pooled = _run(capsys, "run", idle_file, *flags, "--workers", "2", "--failures", "pooled")
    assert "--max-events 30" in serial[1]  # the budget cut the runs short, and replays keep it
    assert pooled[:2] == (serial[0], serial[1].replace("serial", "pooled"))
