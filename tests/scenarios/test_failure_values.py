"""A failure is a value: each kind carries its file, line, label, number, invariant and error as
fields, reads as the sentence it always did, and one rule says which failures the hunts count."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path

import pytest

import scenarios.cli  # noqa: F401  (before scenarios.hunt: an import circle of main's)
from scenarios import parse_scenario, run_scenario
from scenarios.hunt.explore import Exploration
from scenarios.hunt.findings import findings, is_finding
from scenarios.hunt.fuzz import fuzz_scenario
from scenarios.run.determinism import run_checked
from scenarios.run.failure import (
    BUDGET,
    EXPECTATION,
    FAILURE_KINDS,
    INVARIANT,
    LATE_STEP,
    LIVENESS,
    NO_CONNECTION,
    NONDETERMINISM,
    STEP,
    STEP_ERROR,
    Failure,
    RaisedError,
)
from tests.scenarios.helpers import LEAKY, edit
from tests.scenarios.test_budgets import RUNAWAY
from tests.scenarios.test_construction_errors import SCENARIO as BROKEN
from tests.scenarios.test_runner import WORKER


def _only(text: str, path: str = "x.yaml", **kwargs: object) -> Failure:
    (failure,) = run_scenario(parse_scenario(text, path), **kwargs).failures  # type: ignore[arg-type]
    return failure


def test_a_call_that_failed_carries_its_step_and_the_error() -> None:
    failure = run_scenario(
        parse_scenario(edit("method: increment}", "method: fail, args: [boom]}"), "x.yaml")
    ).failures[0]
    assert (failure.kind, failure.path, failure.line, failure.label, failure.number) == (
        STEP,
        "x.yaml",
        9,
        "step 1 (call)",
        1,
    )
    assert failure.error == RaisedError("RuntimeError", "boom") and not failure.expected_error
    assert failure == "x.yaml:9: step 1 (call): counter.fail('boom') failed with RuntimeError: boom"
    assert failure.subject == "step 1 (call)"


def test_a_call_that_failed_with_another_class_names_the_one_expected() -> None:
    failure = run_scenario(
        parse_scenario(
            edit("method: increment}", "method: fail, expect_error: AgentEvicted}"), "x.yaml"
        )
    ).failures[0]
    assert failure.kind == STEP and failure.expected_error == "AgentEvicted"
    assert failure.error == RaisedError("RuntimeError", "asked to fail")
    assert failure.text == (
        "x.yaml:9: step 1 (call): counter.fail() failed with RuntimeError: asked to fail, but "
        "was expected to fail with AgentEvicted"
    )


def test_a_constructor_that_raised_is_a_step_error() -> None:
    failure = _only(BROKEN, "broken.yaml")
    assert (failure.kind, failure.line, failure.number) == (STEP_ERROR, 8, 1)
    assert failure.error == RaisedError("RuntimeError", "missing setting: API_URL")
    assert failure.startswith(
        "broken.yaml:8: step 1 (call): a.ping() failed: constructing agent 'a' "
        "(tests.scenarios.user_agents.BrokenConstructor) raised RuntimeError: "
    )


def test_a_step_whose_time_had_passed_is_a_late_step() -> None:
    text = edit("  - run_for: 3m\n", "  - run_for: 3m\n  - at: 2m\n    deploy: {}\n").replace(
        "  - call: {agent: counter, method: increment}\n", "  - run_until: 1m\n"
    )
    failure = run_scenario(parse_scenario(text, "x.yaml")).failures[0]
    assert (failure.kind, failure.line, failure.label, failure.error) == (
        LATE_STEP,
        11,
        "step 3 (deploy)",
        None,
    )
    assert failure == (
        "x.yaml:11: step 3 (deploy): at: 00:02:00.000 had already passed; an earlier step ran "
        "until 00:04:00.000, so this step ran then"
    )


def test_a_send_to_a_client_no_longer_connected_is_no_connection() -> None:
    text = edit(
        "  - run_for: 3m\n",
        "  - connect: {client: alice, agent: counter}\n  - disconnect: {client: alice}\n"
        "  - after: 1s\n    send: {client: alice, message: increment}\n",
    )
    failure = run_scenario(parse_scenario(text, "x.yaml")).failures[0]
    assert (failure.kind, failure.number) == (NO_CONNECTION, 4)
    assert failure == (
        "x.yaml:12: step 4 (send): client 'alice' is not connected; the message 'increment' was "
        "not sent"
    )


def test_an_expectation_carries_its_number_and_an_invariants_one_its_invariant() -> None:
    state = _only(edit("equals: {count: 1}}", "equals: {count: 2}}"))
    assert (state.kind, state.line, state.label, state.number, state.invariant) == (
        EXPECTATION,
        16,
        "expect 2 (state)",
        2,
        "",
    )
    assert state == (
        "x.yaml:16: expect 2 (state): the state of counter is {'count': 1}, expected {'count': 2}"
    )
    expected = _only(WORKER + "expect:\n  - invariants: [no_lost_stash]\n", "w.yaml")
    assert (expected.kind, expected.invariant, expected.number) == (EXPECTATION, "no_lost_stash", 1)
    assert expected.startswith("w.yaml:12: expect 1 (invariants): no_lost_stash: fiber ")
    assert expected.subject == "invariant no_lost_stash"


def test_a_run_level_invariant_and_the_liveness_rule_have_no_line() -> None:
    invariant = _only(WORKER, "w.yaml", invariants=["no_lost_stash"])
    assert (invariant.kind, invariant.line, invariant.label, invariant.invariant) == (
        INVARIANT,
        None,
        "",
        "no_lost_stash",
    )
    assert invariant.startswith("w.yaml: invariant no_lost_stash: fiber ")
    assert invariant.subject == "invariant no_lost_stash"
    text = """\
name: never-settles
description: An alarm handler that needs 20 minutes is killed at 15 and retried.
seed: 1
liveness: {limit: 1h}
agents:
  counter: {class: "scenarios.workloads:Counter", options: {alarm_work_ms: 20m}}
steps:
  - call: {agent: counter, method: arm, args: [1000]}
"""
    liveness = _only(text)
    assert (liveness.kind, liveness.line, liveness.subject) == (LIVENESS, None, "liveness")
    assert liveness.startswith("x.yaml: liveness: the run did not settle within its limit (1h ")


def test_a_budget_reads_as_the_liveness_rule_and_is_about_liveness() -> None:
    failure = _only(RUNAWAY + "limits: {events: 3000}\n", "runaway.yaml")
    assert (failure.kind, failure.line, failure.subject) == (BUDGET, None, "liveness")
    assert failure.startswith(
        "runaway.yaml: liveness: the run did not settle during its steps (before any liveness "
        "phase): it used up its budget of 3,000 simulated events"
    )


def test_a_nondeterminism_is_the_checks_own_sentence() -> None:
    result = run_checked(parse_scenario(LEAKY, "leaky.yaml"))
    failure = result.failures[-1]
    assert (failure.kind, failure.path, failure.subject) == (
        NONDETERMINISM,
        "leaky.yaml",
        "nondeterminism",
    )
    assert failure.startswith("NondeterminismDetected: two runs of 'leaky' with seed ")


def test_a_failure_is_its_sentence_wherever_it_goes() -> None:
    """Compared, hashed, joined, written as JSON, pickled (worker processes) and copied."""
    failure = Failure(
        STEP,
        "a.yaml",
        "a.go() failed with AgentEvicted: gone\x07",
        3,
        "step 2 (call)",
        2,
        error=RaisedError("AgentEvicted", "gone\x07"),
    )
    sentence = "a.yaml:3: step 2 (call): a.go() failed with AgentEvicted: gone\\x07"
    assert failure == sentence and hash(failure) == hash(sentence) and f"{failure}" == sentence
    assert json.loads(json.dumps([failure])) == [sentence] and " ".join([failure]) == sentence
    for again in (pickle.loads(pickle.dumps(failure)), copy.deepcopy(failure)):
        assert isinstance(again, Failure) and again == failure and again.error == failure.error
    assert type(failure.text) is str and failure.error.message == "gone\x07"  # raw, as raised
    long = Failure(STEP, "a.yaml", "x" * 5000, 3, "step 2 (call)", 2)
    assert long.endswith("... (1,025 more characters)") and len(long.detail) == 5000
    with pytest.raises(ValueError, match=r"unknown failure kind 'oops'; known: \['expectation'"):
        Failure("oops", "a.yaml", "x")


# -- what counts as a finding ---------------------------------------------------------------
def _step(kind: str, error: str = "", number: int = 2, expected: str = "") -> Failure:
    raised = RaisedError(error, "m") if error else None
    label = f"step {number} (call)"
    return Failure(kind, "p.yaml", "d", 9, label, number, error=raised, expected_error=expected)


@pytest.mark.parametrize(
    ("failure", "in_story", "in_invariants"),
    [
        (Failure(INVARIANT, "p.yaml", "x: y", invariant="x"), True, True),
        (Failure(EXPECTATION, "p.yaml", "d", 3, "expect 1 (state)", 1), True, True),
        (Failure(LIVENESS, "p.yaml", "liveness: d"), True, True),
        (Failure(BUDGET, "p.yaml", "liveness: d"), True, True),
        (Failure(NONDETERMINISM, "p.yaml", "NondeterminismDetected: d"), True, True),
        (_step(STEP), True, False),
        (_step(STEP, "RuntimeError"), True, False),
        (_step(STEP, "AgentEvicted"), False, False),
        (_step(STEP, "StorageError", expected="ValueError"), False, False),
        (_step(STEP_ERROR, "TypeError"), True, True),
        (_step(STEP_ERROR, "StorageError"), False, False),
        (_step(STEP_ERROR, "IncarnationKilled"), False, False),
        (_step(LATE_STEP), False, False),
        (_step(NO_CONNECTION), False, False),
    ],
    ids=lambda value: value.kind if isinstance(value, Failure) else str(value),
)
def test_which_failures_are_findings(failure: Failure, in_story: bool, in_invariants: bool) -> None:
    """Invariants, liveness and expectations always; a step's own check only when the story is
    judged; the platform's truth and what the hunt inserted never."""
    assert is_finding(failure, story=True) is in_story
    assert is_finding(failure, story=False) is in_invariants
    of_a_step = failure.kind in (STEP, STEP_ERROR, LATE_STEP, NO_CONNECTION)
    inserted = {failure.number or 0}
    assert is_finding(failure, story=True, inserted=inserted) is (in_story and not of_a_step)


def test_every_kind_is_decided() -> None:
    """No kind of failure falls through the rule unseen: each has a test row above."""
    assert set(FAILURE_KINDS) == {
        EXPECTATION,
        INVARIANT,
        LIVENESS,
        BUDGET,
        STEP,
        STEP_ERROR,
        LATE_STEP,
        NO_CONNECTION,
        NONDETERMINISM,
    }


CHATTY = """\
name: chatty
description: A client connects, then sends a message a minute later.
seed: 3
faults: none
agents:
  counter: {class: "scenarios.workloads:Counter"}
steps:
  - connect: {client: alice, agent: counter}
  - run_for: 1m
  - send: {client: alice, message: increment}
  - run_for: 1m
"""


def test_fuzz_and_explore_agree_that_a_send_the_fault_disconnected_is_no_finding(
    tmp_path: Path,
) -> None:
    """The case their two classifiers once split on: a story's `send` after a drawn eviction
    closed its client's connection. Explore never counted it; fuzz counted it as a finding of
    the story. It is the platform telling the truth, for both."""
    evicted = CHATTY.replace("  - send", "  - evict: {agent: counter}\n  - send", 1)
    (failure,) = run_scenario(parse_scenario(evicted, "c.yaml")).failures
    assert failure.kind == NO_CONNECTION
    assert findings([failure], story=True) == [] == findings([failure], story=False)
    base = tmp_path / "chatty.yaml"
    base.write_text(CHATTY)
    fuzzed = fuzz_scenario(base, examples=40, seed=1, kinds=("evict",), out_dir=tmp_path / "f")
    assert not fuzzed.found, fuzzed.report()
    explored = Exploration(base, crash_points=40, interleavings=0, out_dir=tmp_path / "x").run()
    assert explored.points_run > 0 and not explored.found, explored.report()


def test_a_failure_file_keeps_each_failure_as_its_fields(tmp_path: Path) -> None:
    """The record written for a failed run holds every failure's fields, read back as the same
    values (a tool that reads failure files decides findings by `is_finding`, never by text)."""
    from scenarios.run.failures import RunRecord, read_run_record

    result = run_scenario(parse_scenario(BROKEN, "broken.yaml"), invariants=("all",))
    assert not result.passed
    path = RunRecord.of(result).write(tmp_path / "leaky.json")
    back = read_run_record(path).failure_objects()
    assert back == result.failures
    assert [f.fields() for f in back] == [f.fields() for f in result.failures]
    assert findings(back, story=False) == findings(result.failures, story=False)


def test_a_failure_file_of_an_older_agentsim_reads_with_no_values(tmp_path: Path) -> None:
    from scenarios.run.failures import RunRecord, read_run_record

    result = run_scenario(parse_scenario(BROKEN, "broken.yaml"), invariants=("all",))
    data = json.loads(RunRecord.of(result).to_json())
    del data["failure_values"]
    (tmp_path / "old.json").write_text(json.dumps(data), encoding="utf-8")
    assert read_run_record(tmp_path / "old.json").failure_objects() == ()
