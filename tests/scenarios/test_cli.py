"""`agentsim`: exit codes 0 / 1 / 2, one line per scenario and a summary, one-line errors for
bad input (never a traceback), seeds, failure files and their replay, determinism checks, JUnit
and HTML, traces and their reports, the schema, progress on a terminal and none elsewhere."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scenarios import load_scenario, run_scenario
from scenarios.cli import main
from sim import Trace
from tests.scenarios.helpers import (
    BASE,
    LEAKY,
    LIBRARY,
    ROOT,
    edit,
    library_files,
    without_release_notes,
)

HEADLINE = re.compile(
    r"^(PASS|FAIL) [\w.-]+ seed=\d+ events=\d+ digest=[0-9a-f]{8}( \(checked [^)]*\))?$"
)
COMMANDS = [
    "run",
    "validate",
    "replay",
    "report",
    "library",
    "schema",
    "fuzz",
    "explore",
    "golden",
    "generate",
    "diff",
]
FORGETFUL = """\
name: forgetful
description: A background fiber killed by a deploy after its first stash; recovery forgets it.
seed: 1
agents:
  w: {class: "tests.fuzz.agents:Forgetful"}
steps:
  - call: {agent: w, method: work, args: [4]}
  - at: 15s
    deploy: {}
  - run_for: 1m
"""


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Failure files go to ./agentsim-failures: keep them out of the checkout."""
    monkeypatch.chdir(tmp_path)


def write(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(text)
    return str(path)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def failing(tmp_path: Path) -> str:
    return write(
        tmp_path,
        "bad.yaml",
        edit("name: base", "name: bad").replace("equals: {count: 1}", "equals: {count: 5}"),
    )


# -- run --------------------------------------------------------------------------------------
def test_running_the_library_passes_with_one_line_each_and_a_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Exit 0; a PASS line per file in name order; the summary alone on the last line; on
    stderr, only the one note that a release the upgrade stories reach is modelled in part."""
    code, out, err = run_cli(capsys, "run", str(LIBRARY))
    lines = out.splitlines()
    names = [load_scenario(p).name for p in library_files()]
    notes = err.splitlines()
    assert code == 0 and len(notes) <= 1, err
    assert all(note.startswith("agentsim run: note: SDK release ") for note in notes)
    assert [line.split()[1] for line in lines[:-1]] == names
    assert all(HEADLINE.match(line) and line.startswith("PASS") for line in lines[:-1])
    assert lines[-1] == f"{len(names)} passed, 0 failed"


def test_a_failing_scenario_exits_1_prints_its_failures_and_writes_a_failure_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The FAIL line, each failure indented, the failure file, the replay command last, then
    the summary; the failure file holds path, seed, failures, digest and version."""
    good = write(tmp_path, "a-good.yaml", BASE)
    bad = failing(tmp_path)
    code, out, err = run_cli(capsys, "run", good, bad)
    lines = out.splitlines()
    expected = run_scenario(load_scenario(bad))
    assert code == 1 and without_release_notes(err) == ""
    assert lines[0].startswith("PASS base seed=7 ")
    assert HEADLINE.match(lines[1]) and lines[1].startswith("FAIL bad seed=7 ")
    assert lines[2] == (
        f"  - {bad}:16: expect 2 (state): the state of counter is {{'count': 1}}, "
        f"expected {{'count': 5}}"
    )
    assert lines[3] == (
        "  failure file: agentsim-failures/bad-7.json "
        "(re-run it: agentsim replay agentsim-failures/bad-7.json)"
    )
    assert lines[4] == f"  replay: agentsim run {bad} --seed 7"
    assert lines[5:] == ["1 passed, 1 failed"]
    record = json.loads((tmp_path / "agentsim-failures" / "bad-7.json").read_text())
    assert record["format"] == "agentsim-run/1"
    assert (record["scenario"], record["path"], record["seed"]) == ("bad", bad, 7)
    assert record["failures"] == list(expected.failures)
    assert record["digest"] == expected.digest and record["events"] == expected.events
    assert record["agentsim_version"] == "0.1.0"
    assert record["replay"] == f"agentsim run {bad} --seed 7"
    assert not (tmp_path / "agentsim-failures" / "base-7.json").exists()


def test_seed_overrides_the_file_and_matches_the_library_api(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--seed 3` runs with seed 3: same digest as `run_scenario(..., seed=3)`."""
    path = LIBRARY / "idle-eviction.yaml"
    code, out, _ = run_cli(capsys, "run", str(path), "--seed", "3")
    expected = run_scenario(load_scenario(path), seed=3)
    assert code == 0
    assert out.splitlines()[0].startswith(f"{expected.headline} (checked 5 expectations, ")
    assert "seed=3 " in expected.headline


def test_seeds_run_each_seed_print_failures_and_a_summary_then_the_count_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--seeds 4..6` runs seeds 4, 5 and 6 of each file; passes are counted, not printed."""
    good, bad = write(tmp_path, "a-good.yaml", BASE), failing(tmp_path)
    code, out, _ = run_cli(capsys, "run", good, bad, "--seeds", "4..6")
    lines = out.splitlines()
    assert code == 1
    fails = [line for line in lines if HEADLINE.match(line)]
    assert [line.split()[:3] for line in fails] == [
        ["FAIL", "bad", f"seed={seed}"] for seed in (4, 5, 6)
    ]
    assert f"  replay: agentsim run {bad} --seed 5" in lines
    assert sorted(os.listdir(tmp_path / "agentsim-failures")) == [
        "bad-4.json",
        "bad-5.json",
        "bad-6.json",
    ]
    assert any(re.match(r"^bad\s+3\s+0\s+3\s+4, 5, 6$", line) for line in lines)
    assert "base: each run checked 2 expectations, no invariants, determinism not checked" in lines
    assert lines[-3] == "total: 6 runs, 3 passed, 3 failed"
    assert (
        lines[-2].startswith("probes: 0 of ") and " reached in 6 runs; never reached: " in lines[-2]
    )
    assert lines[-1] == "3 passed, 3 failed"


def test_seeds_report_how_many_runs_reached_each_probe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sweep says which rare paths its runs reached, and how many runs reached each."""
    crashing = edit(
        "  - run_for: 3m\n",
        "  - arm_storage_fault: {agent: counter, kind: crash-after-commit, match: INSERT}\n"
        "  - call: {agent: counter, method: increment, expect_error: AgentEvicted}\n"
        "  - run_for: 3m\n",
    ).replace("{count: 1}", "{count: 2}")
    path = write(tmp_path, "crashing.yaml", crashing)
    code, out, _ = run_cli(capsys, "run", path, "--seeds", "1..2")
    coverage = out.splitlines()[-2]
    assert coverage.startswith("probes: 1 of ")
    assert " reached in 2 runs (platform.crash_after_commit x2); never reached: " in coverage
    assert "platform.alarm_given_up" in coverage


def test_junit_has_a_case_per_scenario_and_seed_and_html_a_page_per_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--junit FILE --html DIR`: failures carry the replay command; pages are NAME-SEED.html."""
    good, bad = write(tmp_path, "a-good.yaml", BASE), failing(tmp_path)
    code, _, _ = run_cli(
        capsys, "run", good, bad, "--seeds", "1..2", "--junit", "out/j.xml", "--html", "pages"
    )
    junit = (tmp_path / "out" / "j.xml").read_text()
    cases = re.findall(r'<testcase name="([^"]+)"', junit)
    assert code == 1
    assert cases == ["base [seed 1]", "base [seed 2]", "bad [seed 1]", "bad [seed 2]"]
    assert 'tests="4" failures="2"' in junit
    assert f"replay: agentsim run {bad} --seed 2" in junit
    events = run_scenario(load_scenario(bad), seed=2).events
    assert f"events: {events}\n" in junit and "<property" not in junit
    pages = sorted(p.name for p in (tmp_path / "pages").iterdir())
    assert pages == ["bad-1.html", "bad-2.html", "base-1.html", "base-2.html"]
    page = (tmp_path / "pages" / "bad-2.html").read_text()
    assert 'data-verdict="fail"' in page and "--seed 2" in page


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


def test_report_html_takes_the_verdict_from_the_run_record_beside_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run --trace` writes NAME-SEED.run.json; `report --html` shows its verdict and failures,
    and says the verdict is unknown when there is no run record."""
    bad = failing(tmp_path)
    run_cli(capsys, "run", bad, "--trace", "traces")
    record = json.loads((tmp_path / "traces" / "bad-7.run.json").read_text())
    assert record["passed"] is False and record["kind"] == "failed"
    code, out, _ = run_cli(capsys, "report", "traces/bad-7.jsonl", "--html", "bad.html")
    page = (tmp_path / "bad.html").read_text()
    assert code == 0 and out == "wrote bad.html\n"
    assert 'data-verdict="fail"' in page and "expected {&#x27;count&#x27;: 5}" in page
    assert '<p class="description" id="description">A small valid scenario' in page
    (tmp_path / "traces" / "bad-7.run.json").unlink()
    run_cli(capsys, "report", "traces/bad-7.jsonl", "--html", "bare.html")
    bare = (tmp_path / "bare.html").read_text()
    assert "verdict unknown: no run record beside the trace" in bare
    assert "<title>VERDICT UNKNOWN bad-7 [seed 7]" in bare and "FAILED" not in bare


def test_invariants_named_on_the_command_line_are_checked_and_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--invariants no_lost_stash` fails a run whose recovery loses a stash; the replay
    command and the failure file carry the flag, and the replay reproduces."""
    path = write(tmp_path, "w.yaml", FORGETFUL)
    assert run_cli(capsys, "run", path)[0] == 0
    code, out, _ = run_cli(capsys, "run", path, "--invariants", "no_lost_stash")
    assert code == 1
    assert f"  - {path}: invariant no_lost_stash: fiber " in out
    assert f"  replay: agentsim run {path} --seed 1 --invariants no_lost_stash\n" in out
    record = json.loads((tmp_path / "agentsim-failures" / "forgetful-1.json").read_text())
    assert record["invariants"] == ["no_lost_stash"]
    code, out, _ = run_cli(capsys, "replay", "agentsim-failures/forgetful-1.json")
    assert code == 1 and "REPRODUCED forgetful seed=1" in out


# -- replay -------------------------------------------------------------------------------------
def test_replaying_a_failure_file_that_reproduces_says_so_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Same failures, same digest: REPRODUCED, and the failure is still a failure (exit 1)."""
    bad = failing(tmp_path)
    run_cli(capsys, "run", bad)
    code, out, err = run_cli(capsys, "replay", "agentsim-failures/bad-7.json")
    lines = out.splitlines()
    assert code == 1 and without_release_notes(err) == ""
    assert lines[0].startswith("FAIL bad seed=7 ")
    assert lines[-1].startswith("REPRODUCED bad seed=7: the same 1 failure(s) and the same trace")


def test_a_replay_that_does_not_reproduce_is_loud_and_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The scenario passes now: DID NOT REPRODUCE, the changed file noted, exit 1 (as Flaky)."""
    bad = failing(tmp_path)
    run_cli(capsys, "run", bad)
    Path(bad).write_text(Path(bad).read_text().replace("count: 5}", "count: 1}"))
    code, out, _ = run_cli(capsys, "replay", "agentsim-failures/bad-7.json")
    assert code == 1
    assert out.splitlines()[0] == f"note: {bad} changed since the failure was recorded"
    assert "DID NOT REPRODUCE bad seed=7: the run passed now" in out
    assert "This is not a pass" in out


def test_a_replay_with_another_trace_does_not_reproduce_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Same failures but another digest is named too: the run was not a function of its
    inputs, or they changed."""
    bad = failing(tmp_path)
    run_cli(capsys, "run", bad)
    path = tmp_path / "agentsim-failures" / "bad-7.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "digest": "0" * 64}))
    code, out, _ = run_cli(capsys, "replay", str(path))
    assert code == 1
    assert "DID NOT REPRODUCE bad seed=7 exactly: the same failures, but another trace" in out


def test_replaying_a_scenario_file_runs_it_with_its_seed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`agentsim replay FILE.yaml` is a run of that file with its own seed."""
    path = LIBRARY / "idle-eviction.yaml"
    code, out, _ = run_cli(capsys, "replay", str(path))
    assert code == 0
    headline = run_scenario(load_scenario(path)).headline
    assert out.splitlines()[0].startswith(f"{headline} (checked ")
    assert out.splitlines()[1:] == ["1 passed, 0 failed"]


# -- determinism --------------------------------------------------------------------------------
def test_check_determinism_passes_the_library(capsys: pytest.CaptureFixture[str]) -> None:
    """Every library scenario gives the same trace twice."""
    code, out, _ = run_cli(capsys, "run", str(LIBRARY), "--check-determinism")
    assert code == 0, out
    assert out.splitlines()[-1] == f"{len(library_files())} passed, 0 failed"


def test_check_determinism_names_the_first_divergent_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose trace depends on state outside the scenario is a failure naming the record
    (seq and both versions), with the replay command of the check and a failure file that
    replays as a reproduced nondeterminism."""
    path = write(tmp_path, "leaky.yaml", LEAKY)
    code, out, _ = run_cli(capsys, "run", path, "--check-determinism")
    lines = out.splitlines()
    assert code == 1
    (finding,) = [line for line in lines if "NondeterminismDetected" in line]
    assert re.search(
        r"NondeterminismDetected: two runs of 'leaky' with seed 2 diverged at trace record "
        r"#(\d+) \(the second in a fresh Simulation\); first run: #\1 .* user:ping  n=(\d+); "
        r"second run: #\1 .* user:ping  n=(\d+)",
        finding,
    ), finding
    assert lines[-2] == f"  replay: agentsim run {path} --seed 2 --check-determinism"
    record = json.loads((tmp_path / "agentsim-failures" / "leaky-2.json").read_text())
    assert record["kind"] == "nondeterministic" and record["check_determinism"] is True
    code, out, _ = run_cli(capsys, "replay", "agentsim-failures/leaky-2.json")
    assert code == 1 and "NondeterminismDetected" in out


def test_check_determinism_in_a_subprocess_catches_hash_seed_orders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An order decided by iterating a set of strings is the same twice in one process and
    differs in a child under another PYTHONHASHSEED."""
    text = LEAKY.replace("Leaky", "HashOrdered").replace("name: leaky", "name: hashy")
    path = write(tmp_path, "hashy.yaml", text)
    assert run_cli(capsys, "run", path, "--check-determinism")[0] == 0
    code, out, _ = run_cli(capsys, "run", path, "--check-determinism-subprocess")
    assert code == 1
    assert "the second in a child process with PYTHONHASHSEED=" in out
    assert "user:order" in out
    assert f"  replay: agentsim run {path} --seed 2 --check-determinism-subprocess\n" in out
    record = json.loads((tmp_path / "agentsim-failures" / "hashy-2.json").read_text())
    assert record["kind"] == "nondeterministic" and record["determinism_in_subprocess"] is True
    code, out, _ = run_cli(capsys, "replay", "agentsim-failures/hashy-2.json")
    assert code == 1 and "REPRODUCED hashy seed=2: the runs diverge again: " in out
    library = str(LIBRARY / "idle-eviction.yaml")
    assert run_cli(capsys, "run", library, "--check-determinism-subprocess")[0] == 0


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
        (["run"], "agentsim run: error: no scenario given; name files or directories, or give "),
        (["run", "x.yaml", "--seed", "-3"], "agentsim run: error: argument --seed: expected a "),
        (["run", "x.yaml", "--seeds", "5..2"], "agentsim run: error: argument --seeds: expected A"),
        (["run", "x.yaml", "--seeds", "1..2", "--seed", "3"], "agentsim run: error: argument"),
        (["run", "x.yaml", "--invariants", "nope"], "agentsim run: error: argument --invariants:"),
        (["run", "nope.yaml"], "agentsim run: error: 'nope.yaml': no such file or directory"),
        (["validate", "nope.yaml"], "agentsim validate: error: 'nope.yaml': no such file or"),
        (["report", "nope.jsonl"], "agentsim report: error: 'nope.jsonl': no such file or"),
        (["replay", "nope.json"], "agentsim replay: error: 'nope.json': no such file or"),
        (["fuzz", "nope.yaml"], "agentsim fuzz: error: 'nope.yaml': no such file or directory"),
        (["fuzz", "x.yaml", "--examples", "0"], "agentsim fuzz: error: argument --examples:"),
        (["fuzz", "x.yaml", "--faults", "meteor"], "agentsim fuzz: error: argument --faults:"),
        (["golden", "nope.yaml"], "agentsim golden: error: 'nope.yaml': no such file or"),
        (["schema", "extra"], "agentsim: error: unrecognized arguments: extra"),
    ],
    ids=[
        "command",
        "flag",
        "top-flag",
        "nothing",
        "no-path",
        "seed",
        "seeds",
        "seed-and-seeds",
        "invariants",
        "missing",
        "validate",
        "report",
        "replay",
        "fuzz",
        "examples",
        "faults",
        "golden",
        "schema",
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


def test_a_file_that_is_not_a_failure_file_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """JSON of another shape is named with the keys a failure file has."""
    path = write(tmp_path, "x.json", '{"hello": 1}')
    code, out, err = run_cli(capsys, "replay", path)
    assert code == 2 and out == ""
    assert err.startswith(f"agentsim replay: error: {path}: not a failure file: no ['format'")
    assert len(err.splitlines()) == 1


def test_an_empty_directory_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Running nothing is not a pass."""
    code, _, err = run_cli(capsys, "run", str(tmp_path))
    assert code == 2
    assert err == (
        f"agentsim run: error: no *.yaml or *.yml scenario files in directory "
        f"{str(tmp_path)!r} (searched with its subdirectories)\n"
    )


def test_two_scenarios_with_one_name_are_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Names identify runs and their trace files, so they must be unique in one run."""
    first, second = write(tmp_path, "a.yaml", BASE), write(tmp_path, "b.yaml", BASE)
    code, out, err = run_cli(capsys, "run", first, second)
    assert code == 2 and out == ""
    assert without_release_notes(err).startswith(
        "agentsim run: error: two scenarios are named 'base'"
    )


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


# -- validate, schema ---------------------------------------------------------------------------
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


def test_schema_prints_the_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """`agentsim schema` prints `scenarios.language.json_schema.scenario_json_schema()` as JSON."""
    from scenarios.language.json_schema import scenario_json_schema

    code, out, err = run_cli(capsys, "schema")
    assert code == 0 and err == ""
    assert json.loads(out) == json.loads(json.dumps(scenario_json_schema()))


# -- progress -----------------------------------------------------------------------------------
class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def screen(raw: str) -> list[str]:
    """What a terminal shows after `raw`: handles \\r, \\n, erase-line and cursor-up."""
    rows, row, col = [""], 0, 0
    for token in re.split(r"(\x1b\[[0-9;?]*[A-Za-z]|\r|\n)", raw):
        if token == "\n":
            row, col = row + 1, 0
            rows += [""] * (row + 1 - len(rows))
        elif token == "\r":
            col = 0
        elif token == "\x1b[2K":
            rows[row] = ""
        elif token.startswith("\x1b[") and token.endswith("A"):
            row -= int(token[2:-1] or 1)
        elif token and not token.startswith("\x1b["):
            rows[row] = rows[row][:col] + token + rows[row][col + len(token) :]
            col += len(token)
    while rows and not rows[-1]:
        rows.pop()
    return rows


def test_a_terminal_gets_a_progress_bar_that_leaves_the_count_alone_on_the_last_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a (fake) terminal a bar counts the runs while they go; when they are over it is gone
    and the screen ends with the summary and the count on its own line."""
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    good, bad = write(tmp_path, "a-good.yaml", BASE), failing(tmp_path)
    code = main(["run", good, bad, "--seeds", "1..3"])
    raw = terminal.getvalue()
    shown = screen(raw)
    assert code == 1
    assert "━" in raw and "6/6" in raw and "3/6" in raw
    assert not any("━" in line for line in shown)
    assert shown[-3] == "total: 6 runs, 3 passed, 3 failed"
    assert shown[-2].startswith("probes: 0 of ") and shown[-1] == "3 passed, 3 failed"
    assert [line.split()[:3] for line in shown if line.startswith("FAIL")] == [
        ["FAIL", "bad", f"seed={seed}"] for seed in (1, 2, 3)
    ]


def test_not_a_terminal_gets_no_bar_and_no_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In a pipe or CI the output is lines only, the same as without seeds to count."""
    code, out, _ = run_cli(capsys, "run", write(tmp_path, "a.yaml", BASE), "--seeds", "1..3")
    assert code == 0
    assert "\x1b" not in out and "━" not in out and "\r" not in out
    assert out.splitlines()[-1] == "3 passed, 0 failed"


# -- the front door ---------------------------------------------------------------------------
def test_help_lists_exactly_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """`agentsim --help` exits 0 and lists the commands that exist, nothing else."""
    code, out, _ = run_cli(capsys, "--help")
    section = out.split("commands:", 1)[1]
    listed = re.findall(r"^ {4}(\w+)\s", section, flags=re.MULTILINE)
    assert code == 0
    assert listed == COMMANDS


def test_the_console_script_in_a_real_process_prints_no_traceback(tmp_path: Path) -> None:
    """As installed: an unknown flag and a broken file are one line each on stderr, exit 2."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    broken = write(tmp_path, "broken.yaml", "name: x\n  bad: [")
    for argv, code in (
        (["--frobnicate"], 2),
        (["validate", broken], 2),
        (["run", broken], 2),
        (["fuzz", broken], 2),
        (["golden", broken], 2),
    ):
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
