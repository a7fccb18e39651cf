"""JUnit XML: a case per scenario and seed, failures with every sentence and the replay command."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reports import RunReport, render_junit
from reports.junit import TAIL_LINES, classname
from tests.reports.helpers import library_run, rec, report_of, story

FAILURES = ["exactly_once_finish: run r1 was delivered twice", "no_lost_stash: stash 3 is gone"]


def runs() -> list[RunReport]:
    return [
        report_of(story()),
        report_of(
            story(),
            passed=False,
            seed=7,
            failures=FAILURES,
            replay_command="agentsim run scenarios/library/story.yaml --seed 7",
        ),
        library_run("idle-eviction"),
    ]


def test_the_xml_parses_and_counts_tests_and_failures() -> None:
    """Both the suites element and the suite carry the counts; a case per run, in order."""
    root = ET.fromstring(render_junit(runs()))
    suite = root.find("testsuite")
    assert root.tag == "testsuites" and suite is not None
    for element in (root, suite):
        assert (element.get("tests"), element.get("failures"), element.get("errors")) == (
            "3",
            "1",
            "0",
        )
        assert element.get("name") == "agentsim"
    names = [case.get("name") for case in suite.iter("testcase")]
    assert names == ["story [seed 42]", "story [seed 7]", "idle-eviction [seed 7]"]
    classes = [case.get("classname") for case in suite.iter("testcase")]
    assert classes[:2] == ["scenarios.library.story", "scenarios.library.story"]
    assert classes[2] is not None and classes[2].endswith("scenarios.library.idle-eviction")


def test_a_failure_carries_its_first_sentence_every_sentence_and_the_replay_command() -> None:
    """message = the first sentence; text = all sentences, then `replay: <command>`."""
    root = ET.fromstring(render_junit(runs(), suite_name="nightly"))
    cases = list(root.iter("testcase"))
    assert cases[0].find("failure") is None and cases[2].find("failure") is None
    failure = cases[1].find("failure")
    assert failure is not None
    assert failure.get("message") == FAILURES[0]
    assert failure.text == (
        f"- {FAILURES[0]}\n- {FAILURES[1]}\n"
        "replay: agentsim run scenarios/library/story.yaml --seed 7"
    )
    assert root.get("name") == "nightly"
    props = {p.get("name"): p.get("value") for p in cases[1].iter("property")}
    assert props["seed"] == "7" and props["sim_elapsed_ms"] == "1500000"
    assert props["replay"].endswith("--seed 7")


def test_system_out_is_the_short_log_tail() -> None:
    """The last TAIL_LINES lines of the short log, ending with the run's last record."""
    records = [rec(i, i * 1000, "A/a", 1, "rpc", method=f"m{i}") for i in range(100)]
    root = ET.fromstring(render_junit([report_of(records)]))
    out = root.find("testsuite/testcase/system-out")
    assert out is not None and out.text is not None
    lines = out.text.split("\n")
    assert len(lines) == TAIL_LINES
    assert lines[-1].endswith("method=m99") and lines[0].endswith(f"method=m{100 - TAIL_LINES}")


def test_markup_and_control_characters_in_failures_stay_valid_xml() -> None:
    """`<&>"` round-trips; a control character XML cannot hold is written as an escape."""
    bad = 'expected <count> & "quotes" \x01 here'
    run = report_of(
        [rec(0, 0, "A/<a>", 1, "user:\x07", note="]]>")], passed=False, name="x&y", failures=[bad]
    )
    root = ET.fromstring(render_junit([run]))
    case = root.find("testsuite/testcase")
    assert case is not None and case.get("name") == "x&y [seed 42]"
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("message") == 'expected <count> & "quotes" \\x01 here'
    out = case.find("system-out")
    assert out is not None and out.text is not None
    assert "A/<a>" in out.text and "user:\\u0007" in out.text and "]]>" in out.text


def test_classname_comes_from_the_scenario_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Directories become dots; the extension, a leading ./ or / and the working directory go."""
    assert classname("scenarios/library/idle-eviction.yaml") == "scenarios.library.idle-eviction"
    assert classname("./x/y.yml") == "x.y"
    monkeypatch.chdir(tmp_path)
    assert classname(str(tmp_path / "lib" / "a.yaml")) == "lib.a"
    outside = tmp_path.parent / "elsewhere" / "z.yaml"
    assert classname(str(outside)) == str(outside)[1:-5].replace("/", ".")


def test_same_runs_same_bytes() -> None:
    """Rendering is deterministic."""
    assert render_junit(runs()) == render_junit(runs())
