"""JUnit XML: a case per scenario and seed, failures with every sentence and the replay command."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reports import RunReport, render_junit
from reports.junit import TAIL_LINES, classname
from tests.reports.helpers import library_run, rec, report_of, story
from tests.reports.junit_schema import violations

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
    out = cases[1].find("system-out")
    assert out is not None and out.text is not None
    head = dict(line.split(": ", 1) for line in out.text.split("\n\n", 1)[0].split("\n"))
    assert head["seed"] == "7" and head["sim_elapsed_ms"] == "1500000"
    assert head["replay"].endswith("--seed 7") and head["scenario"].endswith("story.yaml")


def test_system_out_is_the_runs_identity_then_the_short_log_tail() -> None:
    """`key: value` lines naming the run, a blank line, then the last TAIL_LINES lines of the
    short log, ending with the run's last record."""
    records = [rec(i, i * 1000, "A/a", 1, "rpc", method=f"m{i}") for i in range(100)]
    root = ET.fromstring(render_junit([report_of(records)]))
    out = root.find("testsuite/testcase/system-out")
    assert out is not None and out.text is not None
    head, log = out.text.split("\n\n", 1)
    assert [line.split(": ")[0] for line in head.split("\n")] == [
        "seed",
        "scenario",
        "digest",
        "sim_elapsed_ms",
        "events",
        "replay",
    ]
    lines = log.split("\n")
    assert len(lines) == TAIL_LINES
    assert lines[-1].endswith("method=m99") and lines[0].endswith(f"method=m{100 - TAIL_LINES}")


def test_time_is_the_wall_clock_seconds_of_each_run_and_their_sum() -> None:
    """A case's `time` is its run's seconds with three decimals; the suites' is the sum."""
    fast = report_of(story(), wall_s=0.25)
    slow = report_of(story(), seed=7, wall_s=1.5)
    root = ET.fromstring(render_junit([fast, slow]))
    assert [case.get("time") for case in root.iter("testcase")] == ["0.250", "1.500"]
    suite = root.find("testsuite")
    assert suite is not None
    assert root.get("time") == suite.get("time") == "1.750"


def test_the_document_validates_against_the_strict_junit_schema() -> None:
    """Passing, failing and real runs give a document junit-10.xsd accepts: no properties in a
    case, no skipped on testsuites, SUREFIRE_TIME times."""
    document = render_junit([*runs(), report_of(story(), seed=9, wall_s=12.3456)])
    assert violations(document) == []


def test_the_schema_check_rejects_what_the_strict_schema_rejects() -> None:
    """The checker is not a rubber stamp: properties in a case, skipped on testsuites, a time
    that is no number, a case without a name and a suite without counts are each caught."""
    document = (
        '<testsuites skipped="0" time="soon"><testsuite name="s">'
        '<testcase time="0"><properties><property name="seed" value="7"/></properties>'
        "</testcase></testsuite></testsuites>"
    )
    found = violations(document)
    assert found == [
        "/testsuites: the attribute 'skipped' is not declared for <testsuites>",
        "/testsuites: time='soon' is not a SUREFIRE_TIME",
        "/testsuites/testsuite[1]: the required attribute 'errors' is missing",
        "/testsuites/testsuite[1]: the required attribute 'failures' is missing",
        "/testsuites/testsuite[1]: the required attribute 'tests' is missing",
        "/testsuites/testsuite[1]/testcase[1]: the required attribute 'name' is missing",
        "/testsuites/testsuite[1]/testcase[1]/properties[1]: <properties> is not allowed in "
        "<testcase>",
    ]


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
