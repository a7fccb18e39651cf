"""Inputs that used to hang a run or change what it checks: a zero keepAlive interval, a
backtracking `match`, an expectation query that writes or attaches a file. Each now ends at once
with a located error, or runs as written without changing the agent's storage."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agents_core.options import resolve_options
from scenarios import InvalidScenario, parse_scenario
from scenarios.cli import command as cli
from scenarios.cli.inputs import write_whole
from scenarios.language import loader, yaml_lines
from scenarios.language.loader import load_scenario
from scenarios.run.runner import run_scenario
from scenarios.workloads import Counter
from sim import Simulation
from sim.sqlite import ReadOnlyViolation, StorageFault, compile_match
from tests.scenarios.helpers import BASE, DATA, library_files, without_release_notes
from tests.scenarios.test_cli import run_cli

FIBERS = """\
name: hostile
description: A fiber worker with a heartbeat.
seed: 1
agents:
  worker:
    workload: fibers
    keep_alive_interval: 2s
    fibers: [{name: ingest, steps: 2, step: 30s}]
steps:
  - call: {agent: worker, method: status}
"""


# -- ranges -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("interval", "shown"), [("0", "0"), ("0ms", "'0ms'"), ("0s", "'0s'")])
def test_a_zero_keep_alive_interval_is_refused_at_its_line(interval: str, shown: str) -> None:
    text = FIBERS.replace("keep_alive_interval: 2s", f"keep_alive_interval: {interval}")
    with pytest.raises(InvalidScenario) as caught:
        parse_scenario(text, "h.yaml")
    assert str(caught.value).startswith(
        f"h.yaml:7: agents.worker: keep_alive_interval: {shown}; expected a positive "
        "duration (1ms to 366d)"
    )


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("keep_alive_interval_ms", 0),
        ("keep_alive_interval_ms", -1),
        ("hung_schedule_timeout_seconds", 0),
        ("max_alarm_memory_limit_strikes", 0),
        ("hung_schedule_timeout_seconds", -1),
        ("keep_alive_interval_ms", 400 * 86_400_000),
    ],
)
def test_an_option_out_of_range_is_refused_at_the_options_line(option: str, value: int) -> None:
    text = BASE.replace(
        '  counter: {class: "scenarios.workloads:Counter"}\n',
        f'  counter:\n    class: "scenarios.workloads:Counter"\n    options:\n'
        f"      {option}: {value}\n",
    )
    with pytest.raises(InvalidScenario) as caught:
        parse_scenario(text, "h.yaml")
    message = str(caught.value)
    assert message.startswith(f"h.yaml:9: agents.counter: options.{option}: {value}; {option} ")
    assert "must be a whole number from" in message


@pytest.mark.parametrize("value", ["-5", "400d", "soon"])
def test_a_class_attribute_in_ms_is_a_duration_of_at_most_366_days(value: str) -> None:
    text = BASE.replace(
        '  a: {class: "scenarios.workloads:Counter"}',
        f'  a: {{class: "scenarios.workloads:Counter", options: {{step_ms: {value}}}}}',
    )
    with pytest.raises(InvalidScenario, match=r"^x\.yaml:7: agents\.a: options\.step_ms: "):
        parse_scenario(text, "x.yaml")


def test_the_runtime_refuses_a_zero_interval_from_python_code() -> None:
    """An agent class written in Python gets the same check when it is first used: a clear
    error naming the class and the option, not an alarm re-armed at `now` for ever."""

    class Spinning(Counter):
        options = {"keep_alive_interval_ms": 0}

    with Simulation() as sim:
        ref = sim.agent(Spinning, "s")
        with pytest.raises(ValueError, match=r"Spinning\.options: keep_alive_interval_ms must"):
            sim.call(ref, "increment")
    with pytest.raises(ValueError, match="retry.max_attempts"):
        resolve_options({"retry": {"max_attempts": 0}})


# -- matching -----------------------------------------------------------------------------------
def test_a_backtracking_pattern_matches_in_linear_time() -> None:
    """`^(\\w+\\s?)*$` against a long statement that almost matches takes Python's `re` for
    ever; RE2 answers at once."""
    fault = StorageFault(kind="error", match=r"^(\w+\s?)*$")
    statement = "INSERT " + "a " * 5_000 + "!"
    assert not fault.matches(statement)
    assert fault.matches("INSERT INTO counts")


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(?=INSERT)", "invalid perl operator"),
        (r"(a)\1", "invalid escape sequence"),
        ("((a{100}){100}){100}", "repetition"),
        ("a" * 1001, "at most 1000"),
    ],
)
def test_a_pattern_re2_cannot_run_is_refused_by_validate(pattern: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        compile_match(pattern)
    text = BASE.replace(
        "  - run_for: 3m\n",
        f"  - arm_storage_fault: {{agent: a, kind: crash, match: '{pattern}'}}\n",
    )
    with pytest.raises(InvalidScenario, match=r"^x\.yaml:10: step 2 \(arm_storage_fault\): match"):
        parse_scenario(text, "x.yaml")


# -- read-only expectations ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM counts",
        "ATTACH DATABASE 'x.db' AS x",
        "WITH a AS (SELECT 1) DELETE FROM counts",
        "PRAGMA query_only = 0",
        "CREATE TABLE t (a)",
    ],
)
def test_validate_refuses_an_expectation_query_that_writes(sql: str) -> None:
    text = BASE + f'  - query: {{agent: counter, sql: "{sql}", rows: []}}\n'
    with pytest.raises(InvalidScenario, match=r"^x\.yaml:17: expect 3 \(query\): sql: "):
        parse_scenario(text, "x.yaml")


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        ("SELEC 1", 'near "SELEC": syntax error'),
        ("SELECT 1; SELECT 2", "one statement at a time"),
        ("SELECT ?", "Incorrect number of bindings"),
    ],
)
def test_validate_refuses_an_expectation_query_that_does_not_parse(sql: str, problem: str) -> None:
    text = BASE + f'  - query: {{agent: counter, sql: "{sql}", rows: []}}\n'
    with pytest.raises(InvalidScenario, match=problem):
        parse_scenario(text, "x.yaml")


def test_a_query_of_a_table_made_at_run_time_validates() -> None:
    text = BASE + "  - query: {agent: counter, sql: 'SELECT id FROM counts', rows: [{id: 1}]}\n"
    assert parse_scenario(text, "x.yaml").expect[-1].sql == "SELECT id FROM counts"


def test_reads_from_outside_cannot_write_or_attach(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Simulation.read` (what expectations read with) refuses writes and ATTACH before they
    run: the rows stay, and no file appears."""
    monkeypatch.chdir(tmp_path)
    with Simulation() as sim:
        ref = sim.agent(Counter, "c")
        sim.call(ref, "increment")
        for statement in (
            "DELETE FROM counts",
            "ATTACH DATABASE 'x.db' AS x",
            "WITH a AS (SELECT 1) DELETE FROM counts",
            "PRAGMA query_only = OFF",
        ):
            with pytest.raises(ReadOnlyViolation, match="only reads are allowed"):
                sim.read(ref, statement)
        assert sim.read(ref, "SELECT COUNT(*) AS n FROM counts") == [{"n": 1}]
        assert sim.read(ref, "SELECT value FROM json_each('[1]')") == [{"value": 1}]
        sim.call(ref, "increment")  # the agent itself still writes
        assert sim.read(ref, "SELECT COUNT(*) AS n FROM counts") == [{"n": 2}]
    assert list(tmp_path.iterdir()) == []


# -- files and the command line -----------------------------------------------------------------
def test_a_nul_byte_is_named_with_its_line_and_column() -> None:
    text = BASE.replace("seed: 7", "seed: 7\x00")
    with pytest.raises(InvalidScenario) as caught:
        parse_scenario(text, "x.yaml")
    assert str(caught.value).startswith(
        "x.yaml:3: character U+0000 (NUL) at column 8 is not allowed in YAML; remove it"
    )


def test_a_file_over_the_size_limit_is_refused_before_it_is_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loader, "MAX_FILE_BYTES", 1000)
    path = tmp_path / "big.yaml"
    path.write_text(BASE + "# padding\n" * 200, encoding="utf-8")
    with pytest.raises(InvalidScenario, match=r"big\.yaml: the file is larger than"):
        load_scenario(path)
    path.write_text(BASE, encoding="utf-8")
    assert load_scenario(path).name == "base"


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda p: os.mkfifo(p), "not a regular file: it is a FIFO (named pipe)"),
        (lambda p: os.symlink(p, p), "a symbolic link loop"),
        (lambda p: os.symlink(str(p) + ".gone", p), "a broken symbolic link"),
        (lambda p: None, "no such file or directory"),
    ],
    ids=["fifo", "symlink-loop", "broken-link", "missing"],
)
@pytest.mark.parametrize("command", ["validate", "run", "fuzz", "explore", "replay", "report"])
def test_what_is_not_a_file_is_named_for_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any, problem: str, command: str
) -> None:
    path = tmp_path / "x.yaml"
    make(path)
    code, out, err = run_cli(capsys, command, str(path))
    assert (code, out) == (2, "")
    assert err == f"agentsim {command}: error: {str(path)!r}: {problem}" + err.split(problem)[1]
    assert len(err.splitlines()) == 1


def test_a_character_device_is_refused_without_reading_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run_cli(capsys, "validate", "/dev/zero")
    assert code == 2
    assert "not a regular file: it is a character device" in err
    with pytest.raises(InvalidScenario, match="not a regular file"):
        load_scenario("/dev/zero")


def test_report_of_an_empty_trace_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "t.jsonl"
    empty.write_text("", encoding="utf-8")
    code, out, err = run_cli(capsys, "report", str(empty))
    assert (code, out) == (2, "")
    assert "holds no trace record" in err


def test_a_junit_directory_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(BASE, encoding="utf-8")
    code, out, err = run_cli(capsys, "run", str(scenario), "--junit", str(tmp_path))
    assert (code, out) == (2, "")
    assert "is a directory; the JUnit report is one file" in err


@pytest.mark.parametrize(("flag", "value"), [("--examples", "-5"), ("--examples", "0")])
def test_every_too_small_count_names_the_same_minimum(
    capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    code, _, err = run_cli(capsys, "fuzz", "x.yaml", flag, value)
    assert code == 2
    assert (
        err
        == f"agentsim fuzz: error: argument {flag}: expected a whole number >= 1, got {value!r}\n"
    )


def test_control_characters_of_an_agent_reach_the_terminal_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        BASE.replace(
            "  - run_for: 3m\n",
            '  - call: {agent: counter, method: fail, args: ["\\a\\e[31mred\\u202e"]}\n',
        ),
        encoding="utf-8",
    )
    code, out, _ = run_cli(capsys, "run", str(scenario), "--failures", str(tmp_path / "f"))
    assert code == 1
    assert "\x07" not in out and "\x1b" not in out and "\u202e" not in out
    assert "\\x07\\x1b[31mred\\u202e" in out


def test_ctrl_c_stops_with_one_line_and_exit_130_keeping_finished_failure_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = tmp_path / "a.yaml"
    first.write_text(BASE.replace("name: base", "name: a").replace("count: 1}", "count: 9}"))
    second = tmp_path / "b.yaml"
    second.write_text(BASE.replace("name: base", "name: b"))
    real = cli.run_scenario
    calls = []

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(cli, "run_scenario", interrupted)
    failures = tmp_path / "failures"
    code, out, err = run_cli(capsys, "run", str(first), str(second), "--failures", str(failures))
    assert code == 130
    assert without_release_notes(err) == "agentsim run: interrupted\n"
    assert out.startswith("FAIL a seed=7")
    assert (failures / "a-7.json").is_file()


def test_validate_lists_every_error_with_the_nearest_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        BASE.replace("  - call: {agent: counter", "  - cal: {agent: counter")
        .replace("  - run_for: 3m", "  - run_for: soon")
        .replace("agent: counter, reason: idle", "agent: countr, reason: idle"),
        encoding="utf-8",
    )
    code, out, err = run_cli(capsys, "validate", str(path))
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert [line.split(";")[0] for line in lines] == [
        f"{path}:9: step 1: unknown action 'cal'",
        f"{path}:10: step 2 (run_for): run_for: 'soon'",
        f"{path}:11: step 3 (evict): unknown agent 'countr'",
    ]
    assert "did you mean 'call'?" in lines[0]
    assert "did you mean 'counter'?" in lines[2]


def test_a_step_naming_a_broken_agent_is_not_reported_again() -> None:
    text = BASE.replace(
        '  a: {class: "scenarios.workloads:Counter"}',
        '  a: {class: "scenarios.workloads:Counter", options: {step_ms: soon}}',
    ).replace("  - run_for: 3m", "  - call: {agent: a, method: increment}")
    with pytest.raises(InvalidScenario) as caught:
        parse_scenario(text, "x.yaml")
    assert [error.where for error in caught.value.errors] == ["agents.a"]


@pytest.mark.parametrize("path", [*library_files(), *sorted(DATA.glob("*.yaml"))], ids=str)
def test_both_yaml_readers_give_the_same_data_and_lines(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    fast, slow = yaml_lines._read_fast(text), yaml_lines._read_slow(text)
    assert fast == slow
    assert lines_of(fast) == lines_of(slow)


def lines_of(value: Any) -> Any:
    if isinstance(value, dict):
        return (value.line, dict(value.lines), {k: lines_of(v) for k, v in value.items()})
    if isinstance(value, list):
        return (value.line, list(value.lines), [lines_of(v) for v in value])
    return None


def test_the_fast_reader_refuses_what_the_slow_one_refuses() -> None:
    for text, problem in [
        ("a: 1\na: 2\n", "duplicate key 'a'"),
        ("a: &x [*x]\n", "found unconstructable recursive node"),
        ("? [a]\n: 1\n", "a mapping key cannot be a list"),
        ("a: *nope\n", "found undefined alias"),
        ("a: 1\n---\nb: 2\n", "expected a single document"),
        ("a: " + "[" * 70 + "]" * 70 + "\n", "nested deeper than 64 levels"),
    ]:
        with pytest.raises(InvalidScenario, match=problem):
            yaml_lines.read_document(text, "x.yaml")
    merged = yaml_lines.read_document("b: &b {x: 1}\nc: {<<: *b, y: 2}\n", "x.yaml")
    assert merged == {"b": {"x": 1}, "c": {"x": 1, "y": 2}}  # merge keys: the slow reader


def test_aliases_that_expand_to_billions_of_values_are_refused() -> None:
    """Nine aliases of nine aliases of ... : a few lines standing for 9**11 values, which any
    printing of them would never finish."""
    anchors = "".join(
        f"  a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 9) + "]\n"
        for level in range(1, 12)
    )
    text = BASE + "x:\n  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + anchors
    with pytest.raises(InvalidScenario, match="its aliases expand to more than 5,000,000"):
        yaml_lines.read_document(text, "x.yaml")


def test_a_failure_sentence_quoting_a_huge_value_is_cut() -> None:
    text = BASE.replace(
        "  - run_for: 3m\n",
        "  - call: {agent: counter, method: fail, args: [" + "x" * 9000 + "]}\n",
    )
    result = run_scenario(parse_scenario(text, "x.yaml"))
    sentence = next(f for f in result.failures if "counter.fail" in f)
    assert len(sentence) < 4_100 and sentence.endswith("more characters)")


def test_a_failure_file_is_never_left_half_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f" / "a-7.json"
    write_whole(target, '{"old": true}')

    def interrupted(self: Path, text: str, encoding: str = "utf-8") -> int:
        Path.open(self, "w").write(text[:3])
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_whole(target, '{"new": true}')
    monkeypatch.undo()
    assert target.read_text() == '{"old": true}'
    assert [p.name for p in target.parent.iterdir()] == ["a-7.json"]
