"""Inputs that used to hang a run or change what it checks: a zero keepAlive interval, a
backtracking `match`, an expectation query that writes or attaches a file. Each now ends at once
with a located error, or runs as written without changing the agent's storage."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents_core.options import resolve_options
from scenarios import InvalidScenario, parse_scenario
from scenarios.workloads import Counter
from sim import Simulation
from sim.sqlite import ReadOnlyViolation, StorageFault, compile_match
from tests.scenarios.helpers import BASE

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
