"""Ctrl-C on a sweep: the JUnit file and the summary of the runs that finished are written, the
rest are marked as not run, and the command exits 130 (pending work cancelled, workers
stopped)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from scenarios.cli.interrupted import NOT_RUN, with_not_run

SLOW_FAIL = """\
name: slow-fail
description: A counter that works long and is expected to count wrong, so every run fails.
seed: 1
agents:
  counter: {class: "scenarios.workloads:Counter"}
steps:
  - call: {agent: counter, method: work, args: [300]}
expect:
  - state: {agent: counter, equals: {count: -1}}
"""
RUNS = 1000
HANG_GUARD_S = 300
"""Only a guard against a sweep that never stops: nothing here measures time."""


def _own_lines(err: str) -> list[str]:
    """stderr without the lines Python's multiprocessing resource tracker may add at exit (a
    worker interrupted mid-run can leave its semaphores to the tracker, which warns about them
    from its own process, after agentsim's last line, as the machine's timing falls)."""
    return [
        line
        for line in err.rstrip().splitlines()
        if "multiprocessing/resource_tracker.py" not in line
        and not line.lstrip().startswith("warnings.warn('resource_tracker:")
    ]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_writes_the_finished_runs_and_marks_the_rest_not_run(
    tmp_path: Path, workers: str
) -> None:
    """SIGINT after the first result line: exit 130, and a JUnit file whose cases are the
    finished runs (the one printed among them) and a skipped case for each run not made."""
    scenario = tmp_path / "slow.yaml"
    scenario.write_text(SLOW_FAIL)
    junit = tmp_path / "out" / "junit.xml"
    command = [sys.executable, "-m", "scenarios.cli", "run", str(scenario)]
    command += ["--seeds", f"0..{RUNS - 1}", "--junit", str(junit), "--workers", workers]
    process = subprocess.Popen(
        command,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = ""
    for line in process.stdout:
        if line.startswith("FAIL slow-fail "):
            first = line
            break
    assert first, process.communicate(timeout=HANG_GUARD_S)
    process.send_signal(signal.SIGINT)
    rest, err = process.communicate(timeout=HANG_GUARD_S)
    assert process.returncode == 130, (rest, err)
    assert _own_lines(err)[-1] == "agentsim run: interrupted", err
    seed = re.search(r"seed=(\d+)", first)
    assert seed is not None
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == RUNS and suite.get("tests") == str(RUNS)
    finished = [case for case in cases if case.find("skipped") is None]
    not_run = [case for case in cases if case.find("skipped") is not None]
    assert f"slow-fail [seed {seed.group(1)}]" in [case.get("name") for case in finished]
    assert all(case.find("failure") is not None for case in finished)
    assert suite.get("skipped") == str(len(not_run))
    assert all(case.find("skipped").get("message") == NOT_RUN for case in not_run)  # type: ignore[union-attr]
    totals = f"0 passed, {len(finished)} failed, {len(not_run)} not run"
    assert totals in rest.splitlines()
    assert f"interrupted: {len(finished)} of {RUNS} runs finished" in rest
    assert "total: " in rest  # the summary of what finished


def test_the_not_run_cases_follow_the_finished_ones_and_count() -> None:
    """The cases added keep the document a JUnit one: counts updated, order kept."""
    from reports import RunReport, render_junit

    done = RunReport.from_records(
        name="a", path="a.yaml", seed=1, passed=True, failures=(), replay_command="r", records=[]
    )
    root = ET.fromstring(with_not_run(render_junit([done]), [("a", "a.yaml", 2)]))
    suite = root.find("testsuite")
    assert suite is not None
    assert [c.get("name") for c in suite] == ["a [seed 1]", "a [seed 2]"]
    assert (root.get("tests"), suite.get("tests"), suite.get("skipped")) == ("2", "2", "1")


LEFT_WAITING = """\
import threading
import scenarios.cli.command as command

def interrupted_main():
    # a thread left waiting for ever, as the pool's manager thread can be after its workers
    # were stopped mid-send; the interpreter's exit would join it
    threading.Thread(target=threading.Event().wait).start()
    print("written", flush=True)
    return command.EXIT_INTERRUPTED

command.main = interrupted_main
command.console()
"""


def test_an_interrupted_command_leaves_even_with_a_thread_left_waiting() -> None:
    """The console script does not wait for threads at exit once the command was interrupted:
    what it owed is written, and it leaves with 130."""
    done = subprocess.run(
        [sys.executable, "-c", LEFT_WAITING],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert (done.returncode, done.stdout) == (130, "written\n"), done.stderr
