"""Editing scenario text for the fuzzer: steps go in at their places with the base file's
comments kept where they belong, names, seeds and expectations are rewritten, drawn faults are
placed by the base run's timeline, and files the edits cannot handle are refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scenarios import parse_scenario, run_scenario
from scenarios.hunt.emit import (
    InsertedStep,
    add_expectation,
    expect_errors,
    format_duration,
    insert_steps,
    remove_top_level,
    retitle,
)
from scenarios.hunt.fuzz import Fault, place
from scenarios.hunt.reproducers import write_reproducer
from tests.scenarios.helpers import BASE

# BASE: step 1 call (line 9), step 2 run_for: 3m (line 10), step 3 evict (line 11).
BASE_SCENARIO = parse_scenario(BASE, "base.yaml")


def kinds(text: str) -> list[str]:
    return [step.kind for step in parse_scenario(text, "x.yaml").steps]


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0, "0s"), (1, "1ms"), (90_000, "1m30s"), (90_500, "1m30s500ms"), (86_400_000, "1d")],
)
def test_durations_are_written_the_way_scenarios_read_them(ms: int, text: str) -> None:
    """The loader reads back what `format_duration` writes."""
    assert format_duration(ms) == text


def test_steps_go_in_before_the_step_they_name_and_after_the_last() -> None:
    """Two drawn steps before step 2 (in time order) and one after the last; the result is a
    valid scenario with the base steps in their order."""
    steps = [
        InsertedStep(1, 60_000, "deploy", {}, "drawn"),
        InsertedStep(1, 90_000, "evict", {"agent": "counter", "reason": "idle"}),
        InsertedStep(3, 400_000, "arm_storage_fault", {"agent": "a", "kind": "crash", "skip": 2}),
    ]
    text = insert_steps(BASE, BASE_SCENARIO, steps)
    assert kinds(text) == [
        "call",
        "deploy",
        "evict",
        "run_for",
        "evict",
        "arm_storage_fault",
    ]
    assert "  # drawn\n  - at: 1m\n    deploy: {}\n  - at: 1m30s\n" in text
    assert "    evict: {agent: counter, reason: idle}\n  - run_for: 3m\n" in text
    assert (
        "  - evict: {agent: counter, reason: idle}\n  - at: 6m40s\n"
        "    arm_storage_fault: {agent: a, kind: crash, skip: 2}\nexpect:\n"
    ) in text


def test_a_comment_above_a_step_stays_with_it() -> None:
    """A step inserted before a commented step goes above the comment."""
    text = BASE.replace("  - run_for: 3m\n", "  # wait a while\n  - run_for: 3m\n")
    scenario = parse_scenario(text, "x.yaml")
    out = insert_steps(text, scenario, [InsertedStep(1, 1_000, "deploy")])
    assert "  - at: 1s\n    deploy: {}\n  # wait a while\n  - run_for: 3m\n" in out


def test_values_yaml_would_misread_are_quoted() -> None:
    """An alias such as `yes` or `1e3` is written as a quoted string."""
    step = InsertedStep(0, 0, "evict", {"agent": "yes", "reason": "1e3"})
    assert step.lines("  ")[-1] == '    evict: {agent: "yes", reason: "1e3"}'


def test_retitle_replaces_name_and_seed() -> None:
    """Top-level `name:` and `seed:` get the new values; the rest is untouched."""
    text = retitle(BASE, "base-fuzz-3", 99)
    scenario = parse_scenario(text, "x.yaml")
    assert (scenario.name, scenario.seed) == ("base-fuzz-3", 99)
    assert text.replace("base-fuzz-3", "base").replace("seed: 99", "seed: 7") == BASE


def test_flow_style_files_are_refused_by_name() -> None:
    """The edits are line based; a file they cannot handle is a ValueError saying why."""
    text = BASE.replace(
        "steps:\n  - call: {agent: counter, method: increment}\n  - run_for: 3m\n"
        "  - evict: {agent: counter, reason: idle}\n",
        "steps: [{call: {agent: counter, method: increment}}]\n",
    )
    scenario = parse_scenario(text, "x.yaml")
    with pytest.raises(ValueError, match=r"step 1 \(call\) is not a block list item"):
        insert_steps(text, scenario, [InsertedStep(0, 0, "deploy")])
    with pytest.raises(ValueError, match="no top-level 'seed:' line"):
        retitle(text.replace("seed: 7\n", ""), "x", 1)


def test_an_expectation_goes_after_the_last_or_into_a_new_list() -> None:
    """`add_expectation` appends to `expect`, or creates it."""
    item = "{state: {agent: a, equals: {count: 0}}}"
    text = add_expectation(BASE, BASE_SCENARIO, item)
    assert len(parse_scenario(text, "x.yaml").expect) == 3
    bare = remove_top_level(BASE, "expect", "no expectations")
    assert bare.endswith("# no expectations\n")
    assert parse_scenario(bare, "x.yaml").expect == ()
    again = add_expectation(bare, parse_scenario(bare, "x.yaml"), item)
    assert len(parse_scenario(again, "x.yaml").expect) == 1


def test_drawn_faults_are_placed_by_the_base_timeline() -> None:
    """Before a step whose wait it falls in, before a `run_for` it interrupts (at its own
    time), after a blocking step it falls inside (at that step's end), after the last step."""
    timeline = run_scenario(BASE_SCENARIO)
    at = [place(BASE_SCENARIO, timeline, Fault(t, "deploy")) for t in (0, 60_000, 180_000, 500_000)]
    assert [(s.before, s.at_ms) for s in at if s is not None] == [
        (0, 0),
        (1, 60_000),
        (2, 180_000),
        (3, 500_000),
    ]


CUT = """\
name: cut
description: A deploy cuts a long call.
seed: 3
agents:
  worker: {class: "scenarios.workloads:Counter", options: {step_ms: 20s}}
steps:
  - call: {agent: worker, method: work, args: [10], wait: false}  # cut by the deploy
  - at: 70s
    deploy: {}
  - after: 1s
    call:
      agent: worker
      method: increment
  - call: {agent: worker, method: increment, returns: 6}
expect:
  - state: {agent: worker, equals: {count: 99}}
"""


def test_expect_error_goes_into_flow_and_block_calls_and_not_where_one_is_told() -> None:
    """`expect_errors` adds the class before a flow value's closing brace (its comment kept
    after it), as a key line of a block mapping, and leaves a step with `returns` alone."""
    scenario = parse_scenario(CUT, "cut.yaml")
    lines = {step.line for step in scenario.steps if step.kind == "call"}
    assert lines == {7, 10, 14}
    text = expect_errors(CUT, scenario, {7: "AgentEvicted", 10: "StorageError", 14: "AgentEvicted"})
    assert (
        "  - call: {agent: worker, method: work, args: [10], wait: false, "
        "expect_error: AgentEvicted}  # cut by the deploy\n"
    ) in text
    assert "    call:\n      expect_error: StorageError\n      agent: worker\n" in text
    assert "  - call: {agent: worker, method: increment, returns: 6}\n" in text
    calls = [s for s in parse_scenario(text, "cut.yaml").steps if s.kind == "call"]
    assert [c.expect_error for c in calls] == ["AgentEvicted", "StorageError", False]


CONNECTED = """\
name: connected
description: A client connects to a chat agent, and again later.
seed: 3
agents:
  chat: {workload: chat}
steps:
  - connect: {client: browser, agent: chat}
  - at: 5s
    reconnect: {client: browser}
"""


def test_a_refused_connection_may_fail_with_its_class() -> None:
    """A connect or reconnect step a fault can refuse gets `may_fail_with` (a connection expects
    nothing else), and a connection refused with that class is not a failure of the run."""
    scenario = parse_scenario(CONNECTED, "connected.yaml")
    text = expect_errors(
        CONNECTED, scenario, {step.line: "AgentEvicted" for step in scenario.steps}
    )
    assert "  - connect: {client: browser, agent: chat, may_fail_with: AgentEvicted}\n" in text
    assert "    reconnect: {client: browser, may_fail_with: AgentEvicted}\n" in text
    steps = parse_scenario(text, "connected.yaml").steps
    assert [s.may_fail_with for s in steps] == ["AgentEvicted", "AgentEvicted"]
    refused = text.replace(
        "  - connect:", "  - arm_storage_fault: {agent: chat, kind: crash}\n  - connect:"
    )
    result = run_scenario(parse_scenario(refused, "connected.yaml"))
    assert result.failures == (), result.failures
    plain = run_scenario(
        parse_scenario(
            CONNECTED.replace(
                "  - connect:", "  - arm_storage_fault: {agent: chat, kind: crash}\n  - connect:"
            ),
            "connected.yaml",
        )
    )
    assert any("failed with AgentEvicted" in f for f in plain.failures), plain.failures


def test_a_reproducer_expects_the_error_its_fault_gives_a_call(
    tmp_path: Path,
) -> None:
    """The call the deploy cuts fails with AgentEvicted; the written reproducer says so, and
    running it shows its finding alone."""
    text = CUT.replace("  - call: {agent: worker, method: increment, returns: 6}\n", "")
    base = run_scenario(parse_scenario(text, "cut.yaml"))
    assert any("failed with AgentEvicted" in f for f in base.failures), base.failures
    out = str(tmp_path / "cut.yaml")

    def expectations(result: Any) -> list[str]:
        return [f for f in result.failures if ": expect 1 (" in f]

    written, check = write_reproducer(
        text, out, lambda first, run: ["found by a test", first], expectations, base.digest
    )
    assert "wait: false, expect_error: AgentEvicted}" in written
    rerun = run_scenario(parse_scenario(written, out))
    assert rerun.digest == base.digest
    assert list(rerun.failures) == expectations(rerun) != []
