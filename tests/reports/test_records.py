"""Reading traces into plain records, and the run report made from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reports import RunReport, TraceFormatError, parse_trace_lines, read_trace, trace_digest
from scenarios.language.loader import load_scenario
from scenarios.run.runner import run_scenario
from tests.reports.helpers import LIBRARY, library_run, rec, story


def test_a_trace_written_by_the_simulator_reads_back_as_the_same_records(tmp_path: Path) -> None:
    """The JSONL `run --trace` writes reads back record for record, with the run's digest."""
    result = run_scenario(load_scenario(str(LIBRARY / "deploy-mid-work.yaml")))
    path = result.trace.write_jsonl(tmp_path / "deploy.jsonl")
    records = read_trace(path)
    assert records == [record.to_dict() for record in result.trace]
    assert trace_digest(records) == result.digest
    assert records[0] == {
        "seq": 0,
        "t": 0,
        "agent": "",
        "inc": 0,
        "event": "simulation:start",
        "seed": result.seed,
    }


def test_run_report_computes_digest_and_elapsed_sim_time() -> None:
    """`from_records` fills the digest and the elapsed sim time from the records."""
    records = story()
    run = RunReport.from_records(
        name="s",
        path="s.yaml",
        seed=1,
        passed=False,
        failures=("one", "two"),
        replay_command="agentsim run s.yaml --seed 1",
        records=records,
    )
    assert run.elapsed_sim_ms == 1_500_000
    assert run.digest == trace_digest(records) and len(run.digest) == 64
    assert run.failures == ["one", "two"]
    assert run.records == records and run.records[0] is not records[0]


def test_a_real_run_report_keeps_the_runner_digest() -> None:
    """The digest the reports compute is the one the runner printed."""
    run = library_run("idle-eviction")
    assert run.digest == trace_digest(run.records)
    assert run.passed and run.failures == []
    assert run.replay_command.endswith("--seed 7")


def test_blank_lines_are_skipped() -> None:
    """Blank lines between records are not records."""
    lines = ["", json.dumps(rec(0, 0, "", 0, "simulation:start")), "   "]
    assert parse_trace_lines(lines) == [rec(0, 0, "", 0, "simulation:start")]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"t\.jsonl:2: not a trace record: not JSON \(Expecting"),
        ("[1, 2]", r"t\.jsonl:2: not a trace record: a JSON list, not an object"),
        ('{"seq": 1, "t": 0, "agent": "", "inc": 0}', r"t\.jsonl:2: .*no 'event' key"),
        (
            '{"seq": 1, "t": "5s", "agent": "", "inc": 0, "event": "x"}',
            r"t\.jsonl:2: .*'t' must be int, got '5s'",
        ),
        (
            '{"seq": true, "t": 0, "agent": "", "inc": 0, "event": "x"}',
            r"t\.jsonl:2: .*'seq' must be int, got True",
        ),
    ],
)
def test_a_bad_line_is_named_by_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    """A line that is not a trace record fails with one line naming the file, line and fault."""
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(rec(0, 0, "", 0, "simulation:start")) + "\n" + line + "\n")
    with pytest.raises(TraceFormatError, match=message) as caught:
        read_trace(path)
    assert "\n" not in str(caught.value)
    assert "each line is a JSON object with seq, t, agent, inc and event" in str(caught.value)


def test_a_file_that_is_not_utf8_is_refused_by_name(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 give a format error naming the file and the byte."""
    path = tmp_path / "bin.jsonl"
    path.write_bytes(b'{"seq":0}\n\xff\xfe')
    with pytest.raises(TraceFormatError, match=r"bin\.jsonl: not UTF-8 text \(byte 10\)"):
        read_trace(path)


def test_a_long_bad_line_is_shown_cut_short(tmp_path: Path) -> None:
    """The bad line is quoted, but never more than 80 characters of it."""
    path = tmp_path / "long.jsonl"
    path.write_text('"' + "x" * 500 + '"\n')
    with pytest.raises(TraceFormatError, match=r"long\.jsonl:1: .*\.\.\.'$") as caught:
        read_trace(path)
    quoted = str(caught.value).split("the line: ", 1)[1]
    assert len(quoted) == 82  # 77 characters, "...", and the quotes
