"""A reproducer fails for its finding's reason alone: every call the inserted fault can refuse
says so (`expect_error`, or `may_fail_with` where the call checks what it returns or was not
refused this time), and a reproducer is compared with its finding on what it breaks."""

from __future__ import annotations

from pathlib import Path

import pytest

import scenarios.cli  # noqa: F401  (before scenarios.hunt: an import circle of main's)
from scenarios.hunt.explore import Exploration
from scenarios.hunt.fuzz import fuzz_scenario
from scenarios.hunt.reproducers import (
    FlakyFinding,
    failure_kinds,
    refusable_calls,
    write_reproducer,
)
from scenarios.language.loader import parse_scenario
from scenarios.run.failure import EXPECTATION, INVARIANT, LIVENESS, STEP, Failure
from scenarios.run.runner import run_scenario
from tests.scenarios.test_accepted_calls import SHOP

DOUBLE = SHOP.replace(":Shop", ":DoubleShop").replace("args: [a]}", "args: [a], returns: a}")
"""The shop whose recovery charges twice, its first call checking what it returns: the step a
crash right after that call's commit refuses, which `expect_error` cannot mark."""


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _on_the_clean_shop(reproducer: str, path: str) -> list[str]:
    """The reproducer's failures when its agent is the shop without the bug."""
    clean = reproducer.replace(":DoubleShop", ":Shop")
    return list(run_scenario(parse_scenario(clean, path)).failures)


def test_an_explore_reproducer_passes_on_the_fixed_code_and_fails_only_with_its_finding(
    tmp_path: Path,
) -> None:
    """The refused call that checks its return gets `may_fail_with`, the later calls on the
    crashed agent too; the file fails only with the count, and passes once the bug is gone."""
    base = tmp_path / "double.yaml"
    base.write_text(DOUBLE)
    outcome = Exploration(base, crash_points=30, interleavings=0, out_dir=tmp_path / "x").run()
    finding = outcome.findings[0]
    written = Path(finding.path).read_text()
    assert "args: [a], returns: a, may_fail_with: AgentEvicted}" in written
    assert "args: [d], may_fail_with: AgentEvicted}" in written
    failures = run_scenario(parse_scenario(written, finding.path)).failures
    assert failure_kinds(failures) == {"expect 1 (event)"}
    assert _on_the_clean_shop(written, finding.path) == []


def test_a_fuzz_reproducer_passes_on_the_fixed_code_and_fails_only_with_its_finding(
    tmp_path: Path,
) -> None:
    base = tmp_path / "double.yaml"
    base.write_text(DOUBLE)
    outcome = fuzz_scenario(
        base, examples=150, seed=0, kinds=("storage",), invariants_only=True, out_dir=tmp_path
    )
    assert outcome.finding is not None
    assert failure_kinds(outcome.finding.failures) == {"expect 1 (event)"}
    assert "may_fail_with: AgentEvicted" in outcome.reproducer
    assert _on_the_clean_shop(outcome.reproducer, outcome.path) == []


TWO_AGENTS = """\
name: two
description: Calls on two counters, some not waited for, around inserted faults.
seed: 1
agents:
  a: {class: "scenarios.workloads:Counter"}
  b: {class: "scenarios.workloads:Counter"}
steps:
  - call: {agent: a, method: work, args: [3], wait: false}
  - call: {agent: b, method: work, args: [3], wait: false}
  - call: {agent: a, method: increment}
  - evict: {agent: a}
  - arm_storage_fault: {agent: b, kind: error, match: "INSERT INTO counts"}
  - call: {agent: a, method: increment}
  - call: {agent: b, method: increment}
  - request: {agent: b, method: GET}
  - deploy: {}
"""


def test_the_calls_a_fault_can_refuse_are_the_ones_in_flight_or_after_a_storage_fault() -> None:
    """An eviction refuses its agent's calls still running (not those it waited for, nor later
    ones); a storage fault any later call or request on its agent too (with its class); a
    deploy every agent's calls still running."""
    scenario = parse_scenario(TWO_AGENTS, "two.yaml")
    line = {step.index: step.line for step in scenario.steps}
    assert refusable_calls(scenario, [4]) == {line[1]: "AgentEvicted"}
    assert refusable_calls(scenario, [5]) == {
        line[2]: "StorageError",
        line[7]: "StorageError",
        line[8]: "StorageError",
    }
    assert refusable_calls(scenario, [9]) == {line[1]: "AgentEvicted", line[2]: "AgentEvicted"}
    assert refusable_calls(scenario, [3]) == {}  # a call is no fault


def test_what_a_failure_is_about_leaves_its_line_out() -> None:
    """An invariant checked by the run or by an expectation is one kind; labels stay labels."""
    path = "r.yaml"
    failures = [
        Failure(INVARIANT, path, "no_lost_stash: step 2 lost", invariant="no_lost_stash"),
        Failure(
            EXPECTATION,
            path,
            "no_lost_stash: step 2 lost",
            30,
            "expect 3 (invariants)",
            3,
            invariant="no_lost_stash",
        ),
        Failure(STEP, path, "w.work() failed with ValueError: no", 12, "step 4 (call)", 4),
        Failure(LIVENESS, path, "liveness: the run did not settle"),
    ]
    assert [str(f) for f in failures] == [
        "r.yaml: invariant no_lost_stash: step 2 lost",
        "r.yaml:30: expect 3 (invariants): no_lost_stash: step 2 lost",
        "r.yaml:12: step 4 (call): w.work() failed with ValueError: no",
        "r.yaml: liveness: the run did not settle",
    ]
    assert failure_kinds(failures) == {"invariant no_lost_stash", "step 4 (call)", "liveness"}


def test_a_reproducer_failing_for_another_reason_than_its_finding_is_not_written(
    tmp_path: Path,
) -> None:
    """Compared on the same failure: the same digest is not enough."""
    text = SHOP.replace("count: {per_accepted_call", "count: {at_most: 0, per_accepted_call")
    path = str(tmp_path / "out" / "r.yaml")
    result = run_scenario(parse_scenario(text, path))
    assert failure_kinds(result.failures) == {"expect 1 (event)"}
    with pytest.raises(FlakyFinding, match=r"fails for another reason than its finding"):
        write_reproducer(
            text,
            path,
            lambda first, run: ["a header"],
            lambda run: list(run.failures),
            result.digest,
            found=[
                Failure(
                    INVARIANT, path, "no_lost_stash: a stash was lost", invariant="no_lost_stash"
                )
            ],
        )
    assert not Path(path).exists()


def test_may_fail_with_excuses_that_class_only_and_still_checks_a_return() -> None:
    crash = "  - arm_storage_fault: {agent: shop, kind: crash, match: '^INSERT INTO charges'}\n"
    text = SHOP.replace("steps:\n", "steps:\n" + crash, 1)
    excused = text.replace("args: [a]}", "args: [a], may_fail_with: AgentEvicted}")
    assert run_scenario(parse_scenario(excused, "s.yaml")).passed
    other = text.replace("args: [a]}", "args: [a], may_fail_with: StorageError}")
    failures = run_scenario(parse_scenario(other, "s.yaml")).failures
    assert [f for f in failures if "step 2 (call)" in f and "failed with AgentEvicted" in f]
    wrong = SHOP.replace("args: [b]}", "args: [b], returns: x, may_fail_with: AgentEvicted}")
    failures = run_scenario(parse_scenario(wrong, "s.yaml")).failures
    assert [f for f in failures if "returned 'b', expected 'x'" in f]
