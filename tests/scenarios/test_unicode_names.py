"""Names in any script: a Cyrillic scenario, agent and client run, trace, report, replay and
render end to end with a stable digest; only what cannot be a name or a path segment is
refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scenarios import parse_scenario, run_scenario
from scenarios.cli import main
from scenarios.language.errors import InvalidScenario
from tests.scenarios.helpers import ROOT

CYRILLIC = """\
name: счёт
description: Names in Cyrillic, end to end.
seed: 1
faults: none
agents:
  счётчик: {class: "tests.scenarios.user_agents:Tally"}
clients:
  клиент: {agent: счётчик}
steps:
  - call: {agent: счётчик, method: add, args: [2], returns: 2}
  - run_for: 3m
  - call: {agent: счётчик, method: add, returns: 3}
expect:
  - event: incarnation:end
    agent: счётчик
    count: {at_least: 1}
"""


@pytest.mark.parametrize("name", ["счётчик", "नमस्ते", "東京", "café-2", "Ω.1_x"])
def test_letters_digits_and_marks_of_any_script_are_names(name: str) -> None:
    """Cyrillic, Devanagari (with its combining marks), CJK, accented Latin, Greek."""
    text = CYRILLIC.replace("счётчик", name)
    assert run_scenario(parse_scenario(text, "u.yaml")).passed


@pytest.mark.parametrize(
    "name",
    ["a/b", ".", "..", ".hidden", "-x", "a b", "a\\tb", "a\\u200eb", "x" * 101, "a:b"],
)
def test_what_cannot_be_a_name_or_path_segment_is_refused(name: str) -> None:
    """A slash, '.' and '..', a leading '-', spaces, control and bidi characters, > 100."""
    text = CYRILLIC.replace("счётчик:", f'"{name}":', 1)
    with pytest.raises(InvalidScenario, match=r"agent name .*; expected a name of letters"):
        parse_scenario(text, "u.yaml")


def test_a_cyrillic_run_traces_reports_renders_and_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trace file, the report, the HTML page, JUnit and the failure file all carry the
    names as written (UTF-8, not escapes), and the failure file replays."""
    monkeypatch.chdir(tmp_path)
    Path("u.yaml").write_text(CYRILLIC, encoding="utf-8")
    argv = ["run", "u.yaml", "--trace", "tr", "--html", "html", "--junit", "j.xml"]
    assert main(argv) == 0
    trace = tmp_path / "tr" / "счёт-1.jsonl"
    paths = {json.loads(line).get("agent") for line in trace.read_text("utf-8").splitlines()}
    assert "Tally/счётчик" in paths
    capsys.readouterr()
    assert main(["report", str(trace)]) == 0
    assert "Tally/счётчик#1 incarnation:start" in capsys.readouterr().out
    assert "Tally/счётчик" in (tmp_path / "html" / "счёт-1.html").read_text("utf-8")
    assert 'name="счёт [seed 1]"' in (tmp_path / "j.xml").read_text("utf-8")
    Path("u.yaml").write_text(CYRILLIC.replace("returns: 3", "returns: 99"), encoding="utf-8")
    assert main(["run", "u.yaml"]) == 1
    assert "счётчик.add() returned 3, expected 99" in capsys.readouterr().out
    assert main(["replay", "agentsim-failures/счёт-1.json"]) == 1
    assert "счётчик.add() returned 3, expected 99" in capsys.readouterr().out


def test_the_digest_of_a_cyrillic_run_does_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    """Two processes with different PYTHONHASHSEED print the same digest."""
    (tmp_path / "u.yaml").write_text(CYRILLIC, encoding="utf-8")
    lines = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-m", "scenarios.cli", "run", "u.yaml"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            encoding="utf-8",
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        lines.append(done.stdout.splitlines()[0])
    assert lines[0] == lines[1] and "digest=" in lines[0]
