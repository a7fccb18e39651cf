"""`agentsim`: exit codes 0 / 1 / 2, one line per scenario and a summary, one-line errors for
bad input (never a traceback), traces written and rendered."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scenarios import load_scenario, run_scenario
from scenarios.cli import main
from sim import Trace
from tests.scenarios.helpers import BASE, LIBRARY, ROOT, edit, library_files

HEADLINE = re.compile(r"^(PASS|FAIL) [\w.-]+ seed=\d+ events=\d+ digest=[0-9a-f]{8}$")


def write(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(text)
    return str(path)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- run --------------------------------------------------------------------------------------
def test_running_the_library_passes_with_one_line_each_and_a_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Exit 0; a PASS line per file in name order; the summary alone on the last line."""
    code, out, err = run_cli(capsys, "run", str(LIBRARY))
    lines = out.splitlines()
    names = [load_scenario(p).name for p in library_files()]
    assert code == 0 and err == ""
    assert [line.split()[1] for line in lines[:-1]] == names
    assert all(HEADLINE.match(line) and line.startswith("PASS") for line in lines[:-1])
    assert lines[-1] == f"{len(names)} passed, 0 failed"


def test_a_failing_scenario_exits_1_and_prints_its_failures_and_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The FAIL line, each failure indented, the replay command, then the summary."""
    good = write(tmp_path, "a-good.yaml", BASE)
    bad = write(
        tmp_path,
        "b-bad.yaml",
        edit("name: base", "name: bad").replace("equals: {count: 1}", "equals: {count: 5}"),
    )
    code, out, err = run_cli(capsys, "run", good, bad)
    lines = out.splitlines()
    assert code == 1 and err == ""
    assert lines[0].startswith("PASS base seed=7 ")
    assert HEADLINE.match(lines[1]) and lines[1].startswith("FAIL bad seed=7 ")
    assert lines[2] == (
        f"  - {bad}:16: expect 2 (state): the state of counter is {{'count': 1}}, "
        f"expected {{'count': 5}}"
    )
    assert lines[3] == f"  replay: agentsim run {bad} --seed 7"
    assert lines[4:] == ["1 passed, 1 failed"]


def test_seed_overrides_the_file_and_matches_the_library_api(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--seed 3` runs with seed 3: same digest as `run_scenario(..., seed=3)`."""
    path = LIBRARY / "idle-eviction.yaml"
    code, out, _ = run_cli(capsys, "run", str(path), "--seed", "3")
    expected = run_scenario(load_scenario(path), seed=3)
    assert code == 0
    assert out.splitlines()[0] == expected.headline
    assert "seed=3 " in expected.headline


def test_trace_dir_gets_one_jsonl_per_run_and_report_renders_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--trace DIR` writes NAME-SEED.jsonl with the run's digest; `report` prints each record."""
    path = LIBRARY / "deploy-mid-work.yaml"
    code, _, _ = run_cli(capsys, "run", str(path), "--trace", str(tmp_path / "traces"))
    trace_file = tmp_path / "traces" / "deploy-mid-work-11.jsonl"
    records = Trace.read_jsonl(trace_file)
    expected = run_scenario(load_scenario(path))
    assert code == 0
    assert [r.to_json() for r in records] == [r.to_json() for r in expected.trace]
    code, out, err = run_cli(capsys, "report", str(trace_file))
    assert code == 0 and err == ""
    assert len(out.splitlines()) == len(records)
    assert "platform:deploy" in out and "00:01:10.000" in out


# -- bad input: exit 2, one line --------------------------------------------------------------
def test_an_invalid_scenario_is_exit_2_with_its_error_and_nothing_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No scenario runs when one of them is invalid; the error is one located line."""
    good = write(tmp_path, "good.yaml", BASE)
    bad = write(tmp_path, "bad.yaml", edit("reason: idle", "reason: sleepy"))
    code, out, err = run_cli(capsys, "run", good, bad)
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"{bad}:11: step 3 (evict): reason: 'sleepy'; "
        "allowed: ['idle', 'deploy', 'alarm-limit', 'explicit']"
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bogus"], "agentsim: error: argument COMMAND: invalid choice: 'bogus'"),
        (["run", "--bogus", "x.yaml"], "agentsim: error: unrecognized arguments: --bogus"),
        (["--verbose"], "agentsim: error: "),
        ([], "agentsim: error: the following arguments are required: COMMAND"),
        (["run"], "agentsim run: error: the following arguments are required: PATH"),
        (["run", "x.yaml", "--seed", "-3"], "agentsim run: error: argument --seed: expected a "),
        (["run", "nope.yaml"], "agentsim run: error: no such file or directory: 'nope.yaml'"),
        (["validate", "nope.yaml"], "agentsim validate: error: no such file or directory"),
        (["report", "nope.jsonl"], "agentsim report: error: cannot read 'nope.jsonl': No such"),
    ],
    ids=[
        "command",
        "flag",
        "top-flag",
        "nothing",
        "no-path",
        "seed",
        "missing",
        "validate",
        "report",
    ],
)
def test_bad_command_lines_get_one_line_on_stderr_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse's usage block is not printed: exactly one line, starting with the message."""
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith(message), err


def test_an_empty_directory_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Running nothing is not a pass."""
    code, _, err = run_cli(capsys, "run", str(tmp_path))
    assert code == 2
    assert err == f"agentsim run: error: no *.yaml scenario files in directory {str(tmp_path)!r}\n"


def test_two_scenarios_with_one_name_are_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Names identify runs and their trace files, so they must be unique in one run."""
    first, second = write(tmp_path, "a.yaml", BASE), write(tmp_path, "b.yaml", BASE)
    code, out, err = run_cli(capsys, "run", first, second)
    assert code == 2 and out == ""
    assert err.startswith("agentsim run: error: two scenarios are named 'base'")


def test_report_of_a_file_that_is_not_a_trace_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed trace names the file and line."""
    path = write(
        tmp_path, "t.jsonl", '{"seq": 0, "t": 0, "agent": "", "inc": 0, "event": "a"}\n[]\n'
    )
    code, out, err = run_cli(capsys, "report", path)
    assert code == 2 and out == ""
    assert err.startswith(
        f"agentsim report: error: {path}:2: not a trace record (TypeError: a JSON list, not an "
        "object); each line is a JSON object with seq, t, agent, inc and event"
    )
    assert len(err.splitlines()) == 1


# -- validate ---------------------------------------------------------------------------------
def test_validate_says_ok_for_valid_files_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    """One `ok` line per file, nothing on stderr."""
    code, out, err = run_cli(capsys, "validate", str(LIBRARY))
    assert code == 0 and err == ""
    assert len(out.splitlines()) == len(library_files())
    assert all(line.startswith("ok ") for line in out.splitlines())


def test_validate_prints_each_error_on_one_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every file is checked, each invalid one gives one line; valid ones still say ok."""
    a = write(tmp_path, "a.yaml", edit("run_for: 3m", "run_for: soon"))
    b = write(tmp_path, "b.yaml", BASE)
    c = write(tmp_path, "c.yaml", "name: [")
    code, out, err = run_cli(capsys, "validate", a, b, c)
    assert code == 2
    assert out.splitlines() == [f"ok {b}: base (3 steps, 2 expectations)"]
    errors = err.splitlines()
    assert len(errors) == 2
    assert errors[0].startswith(f"{a}:10: step 2 (run_for): run_for: 'soon'; expected a duration")
    assert errors[1].startswith(f"{c}:1: not valid YAML: ")


# -- the front door ---------------------------------------------------------------------------
def test_help_lists_exactly_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """`agentsim --help` exits 0 and lists run, validate and report, nothing else."""
    code, out, _ = run_cli(capsys, "--help")
    section = out.split("commands:", 1)[1]
    listed = re.findall(r"^ {4}(\w+)\s", section, flags=re.MULTILINE)
    assert code == 0
    assert listed == ["run", "validate", "report"]


def test_the_console_script_in_a_real_process_prints_no_traceback(tmp_path: Path) -> None:
    """As installed: an unknown flag and a broken file are one line each on stderr, exit 2."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    broken = write(tmp_path, "broken.yaml", "name: x\n  bad: [")
    for argv, code in ((["--frobnicate"], 2), (["validate", broken], 2), (["run", broken], 2)):
        done = subprocess.run(
            [sys.executable, "-m", "scenarios.cli", *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        assert done.returncode == code, done.stderr
        assert "Traceback" not in done.stderr
        assert len(done.stderr.splitlines()) == 1, done.stderr
