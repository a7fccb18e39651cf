"""The loader: valid files become dataclasses; each invalid one gets one line naming the file,
the line, the part of the scenario, the field, the bad value and what is allowed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scenarios import InvalidScenario, load_scenario, parse_scenario
from scenarios.language.schema import (
    ACTIONS,
    CallStep,
    Count,
    EventExpectation,
    EvictStep,
    RunForStep,
    StateExpectation,
)
from scenarios.workloads import Counter
from tests.scenarios.helpers import BASE, DATA, EVERY_STEP, edit, library_files


def invalid(text: str, path: str = "lib/x.yaml") -> InvalidScenario:
    with pytest.raises(InvalidScenario) as caught:
        parse_scenario(text, path)
    return caught.value


# -- what a valid file becomes ------------------------------------------------------------------
def test_a_valid_file_becomes_frozen_dataclasses() -> None:
    """Steps, expectations, agents and timing come out typed, with their source lines."""
    scenario = parse_scenario(BASE, "lib/base.yaml")
    assert (scenario.name, scenario.seed, scenario.faults.name) == ("base", 7, "none")
    assert [spec.path for spec in scenario.agents] == ["Counter/counter", "Counter/a"]
    call, run_for, evict = scenario.steps
    assert call == CallStep(index=1, line=9, agent="counter", method="increment")
    assert run_for == RunForStep(index=2, line=10, duration_ms=180_000)
    assert evict == EvictStep(index=3, line=11, agent="counter", reason="idle")
    event, state = scenario.expect
    assert event == EventExpectation(
        index=1, line=13, event="incarnation:end", agent="counter", count=Count(1, None)
    )
    assert state == StateExpectation(index=2, line=16, agent="counter", equals={"count": 1})
    with pytest.raises(AttributeError):
        scenario.seed = 8  # type: ignore[misc]


def test_timing_is_read_beside_the_action() -> None:
    """`at:` is absolute and `after:` relative, both in ms, both optional."""
    text = edit(
        "  - run_for: 3m\n", "  - at: 14m59s\n    run_for: 3m\n  - after: 90s\n    deploy:\n"
    )
    steps = parse_scenario(text).steps
    assert (steps[1].at_ms, steps[1].after_ms) == (899_000, None)
    assert (steps[2].kind, steps[2].at_ms, steps[2].after_ms) == ("deploy", None, 90_000)


def test_options_make_a_subclass_of_the_same_name() -> None:
    """Class attributes are replaced, runtime options merged; the trace path keeps the name."""
    text = edit(
        '{class: "scenarios.workloads:Counter"}',
        '{class: "scenarios.workloads:Counter", options: {step_ms: 20s, '
        "keep_alive_interval_ms: 5000}}",
    )
    spec = parse_scenario(text).agent("counter")
    assert spec.cls is not Counter and issubclass(spec.cls, Counter)
    assert spec.cls.__name__ == "Counter" and spec.path == "Counter/counter"
    assert spec.cls.step_ms == 20_000
    assert dict(spec.cls.options) == {"keep_alive_interval_ms": 5000}
    assert Counter.step_ms == 1_000 and dict(Counter.options) == {}


@pytest.mark.parametrize(
    "path", [*library_files(), *sorted(DATA.glob("*.yaml"))], ids=lambda p: p.name
)
def test_bundled_scenarios_are_valid(path: Path) -> None:
    """Every library file (and every fixture) loads, with a description and a check."""
    scenario = load_scenario(path)
    assert scenario.path == str(path)
    assert scenario.description.strip() and scenario.expect


def test_the_every_step_fixture_uses_every_step_kind() -> None:
    """So that the runner test over it covers each kind."""
    kinds = {step.kind for step in load_scenario(EVERY_STEP).steps}
    assert kinds == set(ACTIONS)


# -- errors, one per kind of mistake ------------------------------------------------------------
CASES = [
    (
        "unknown-agent",
        ("  - run_for: 3m\n", "  - run_for: 3m\n  - evict: {agent: b}\n"),
        "lib/x.yaml:11: step 3 (evict): unknown agent 'b'; known agents: ['a', 'counter']",
    ),
    (
        "eviction-reason",
        ("reason: idle", "reason: sleepy"),
        "lib/x.yaml:11: step 3 (evict): reason: 'sleepy'; "
        "allowed: ['idle', 'deploy', 'alarm-limit', 'explicit']",
    ),
    (
        "bad-duration",
        ("run_for: 3m", "run_for: 3 minutes"),
        "lib/x.yaml:10: step 2 (run_for): run_for: '3 minutes'; expected a duration: whole "
        "numbers with units d, h, m, s, ms, largest first",
    ),
    (
        "units-out-of-order",
        ("run_for: 3m", "run_for: 30s1m"),
        "lib/x.yaml:10: step 2 (run_for): run_for: '30s1m'; expected a duration",
    ),
    (
        "unknown-top-level-key",
        ("seed: 7\n", "seed: 7\nsteeps: []\n"),
        "lib/x.yaml:4: unknown key 'steeps'; did you mean 'steps'? allowed keys: ['agents', "
        "'clients', 'description', 'expect', 'faults', 'interleave', 'limits', 'liveness', "
        "'model', 'name', 'python_path', 'sdk', 'seed', 'steps']",
    ),
    (
        "missing-seed",
        ("seed: 7\n", ""),
        "lib/x.yaml:1: missing key 'seed'; required keys: ['name', 'description', 'seed', "
        "'agents', 'steps']",
    ),
    (
        "seed-type",
        ("seed: 7", "seed: seven"),
        "lib/x.yaml:3: seed: 'seven'; expected a whole number from 0 to 9223372036854775807",
    ),
    (
        "bad-indentation",
        ("  - run_for: 3m", "    - run_for: 3m"),
        "lib/x.yaml:10: not valid YAML: while parsing a block mapping expected <block end>, "
        "but found '-'; check the indentation",
    ),
    (
        "duplicate-key",
        ("seed: 7\n", "seed: 7\nseed: 8\n"),
        "lib/x.yaml:4: not valid YAML: duplicate key 'seed'; each key may appear once",
    ),
    (
        "impossible-date",
        ("seed: 7", "seed: 2024-02-30"),
        "lib/x.yaml:3: not valid YAML: '2024-02-30': day is out of range for month",
    ),
    (
        "class-missing",
        ('workloads:Counter"}\n  a', 'workloads:Countr"}\n  a'),
        "lib/x.yaml:6: agents.counter: class: scenarios.workloads has no 'Countr'; "
        "Agent classes there: ['AiChatToolsWorkload', 'AiChatWorkload', 'ChatToolChild', "
        "'Counter', 'FiberWorkload',",
    ),
    (
        "class-not-a-path",
        ('"scenarios.workloads:Counter"}\n  a', '"Counter"}\n  a'),
        "lib/x.yaml:6: agents.counter: class: 'Counter' is not an import path; write "
        "'package.module:Class'",
    ),
    (
        "class-module-missing",
        ('"scenarios.workloads:Counter"}\n  a', '"nosuch.mod:Counter"}\n  a'),
        "lib/x.yaml:6: agents.counter: class: cannot import module 'nosuch.mod' "
        "(ModuleNotFoundError: No module named 'nosuch')",
    ),
    (
        "class-not-an-agent",
        ('"scenarios.workloads:Counter"}\n  a', '"sim.faults:FaultProfile"}\n  a'),
        "lib/x.yaml:6: agents.counter: class: 'sim.faults:FaultProfile' is not a subclass of "
        "agents_core.Agent",
    ),
    (
        "unknown-option",
        ('Counter"}\n  a', 'Counter", options: {stepms: 3}}\n  a'),
        "lib/x.yaml:6: agents.counter: options: unknown option 'stepms' for Counter; known "
        "options: ['agent_tool_reattach_max_window_ms',",
    ),
    (
        "option-duration",
        ('Counter"}\n  a', 'Counter", options: {keep_alive_interval_ms: soon}}\n  a'),
        "lib/x.yaml:6: agents.counter: options.keep_alive_interval_ms: 'soon'; option "
        "keep_alive_interval_ms: not a duration: 'soon'",
    ),
    (
        "unknown-method",
        ("method: increment", "method: incremnt"),
        "lib/x.yaml:9: step 1 (call): method: 'incremnt' is not a public method of Counter; "
        "did you mean 'increment'? methods: ['arm', 'fail', 'increment', 'work']",
    ),
    (
        "private-method",
        ("method: increment", "method: _count"),
        "lib/x.yaml:9: step 1 (call): method: '_count' is not a public method of Counter",
    ),
    (
        "wrong-arguments",
        ("method: increment}", "method: work, args: [1, 2]}"),
        "lib/x.yaml:9: step 1 (call): args: [1, 2]; too many positional arguments; "
        "work takes (steps=5)",
    ),
    (
        "wrong-keyword",
        ("method: increment}", "method: work, kwargs: {step: 2}}"),
        "lib/x.yaml:9: step 1 (call): kwargs: {'step': 2}; got an unexpected keyword argument "
        "'step'; work takes (steps=5)",
    ),
    (
        "expect-error-value",
        ("method: increment}", "method: increment, expect_error: 3}"),
        "lib/x.yaml:9: step 1 (call): expect_error: 3; expected true, false, or an exception "
        "class name",
    ),
    (
        "back-in-time",
        ("  - run_for: 3m\n", "  - run_until: 3m\n  - at: 1m\n    deploy: {}\n"),
        "lib/x.yaml:11: step 3 (deploy): at: '1m' is before step 2 (run_until)'s run_until: "
        "'3m'; steps run in order, so absolute times must not decrease",
    ),
    (
        "at-inside-the-action",
        ("method: increment}", "method: increment, at: 5s}"),
        "lib/x.yaml:9: step 1 (call): unknown key 'at' (at: and after: go beside the action, "
        "not inside it); allowed keys: ['agent', 'args', 'expect_error', 'kwargs', "
        "'may_fail_with', 'method', 'returns', 'wait']",
    ),
    (
        "at-and-after",
        ("  - run_for: 3m\n", "  - at: 1m\n    after: 1m\n    run_for: 3m\n"),
        "lib/x.yaml:11: step 2 (run_for): both at: and after:; give one of them",
    ),
    (
        "two-actions",
        ("  - run_for: 3m\n", "  - run_for: 3m\n    deploy: {}\n"),
        "lib/x.yaml:11: step 2: two actions 'run_for' and 'deploy'; a step has exactly one "
        "action; write two steps",
    ),
    (
        "no-action",
        ("  - run_for: 3m\n", "  - at: 3m\n"),
        "lib/x.yaml:10: step 2: no action; each step has exactly one action of "
        "['advance_to_next_alarm', 'arm_storage_fault', 'call',",
    ),
    (
        "unknown-action",
        ("  - run_for: 3m\n", "  - sleep: 3m\n"),
        "lib/x.yaml:10: step 2: unknown action 'sleep'; each step has exactly one action of",
    ),
    (
        "action-not-a-mapping",
        ("  - run_for: 3m\n", "  - evict: counter\n"),
        "lib/x.yaml:10: step 2 (evict): evict: 'counter'; expected a mapping with keys "
        "['agent', 'reason', 'run_id', 'child', 'if_present']",
    ),
    (
        "step-not-a-mapping",
        ("  - run_for: 3m\n", "  - deploy\n"),
        "lib/x.yaml:10: step 2: 'deploy' is not a mapping; each step has exactly one action of",
    ),
    (
        "missing-field",
        ("{agent: counter, method: increment}", "{agent: counter}"),
        "lib/x.yaml:9: step 1 (call): missing key 'method'; required keys: ['agent', 'method']",
    ),
    (
        "unknown-client",
        ("  - run_for: 3m\n", "  - send: {client: alice, message: hi}\n"),
        "lib/x.yaml:10: step 2 (send): unknown client 'alice'; known so far: []; declare it "
        "under clients: or connect it in an earlier step",
    ),
    (
        "bad-regex",
        ("  - run_for: 3m\n", "  - arm_storage_fault: {agent: a, kind: crash, match: '(('}\n"),
        "lib/x.yaml:10: step 2 (arm_storage_fault): match: '(('; not a usable pattern: missing"
        " ): (( (match patterns are RE2: no backreferences, no lookaround)",
    ),
    (
        "fault-kind",
        ("  - run_for: 3m\n", "  - arm_storage_fault: {agent: a, kind: boom}\n"),
        "lib/x.yaml:10: step 2 (arm_storage_fault): kind: 'boom'; allowed: ['error', 'crash', "
        "'crash-after-commit']",
    ),
    (
        "fault-count",
        ("  - run_for: 3m\n", "  - arm_storage_fault: {agent: a, kind: error, count: 0}\n"),
        "lib/x.yaml:10: step 2 (arm_storage_fault): count: 0; expected a whole number from 1",
    ),
    (
        "unknown-profile",
        ("faults: none", "faults: chaos"),
        "lib/x.yaml:4: faults: 'chaos'; known profiles: ['flaky-storage', 'hostile', 'none', "
        "'platform'], or a mapping of settings",
    ),
    (
        "profile-rate",
        ("faults: none", "faults: {crash_rate: 2}"),
        "lib/x.yaml:4: faults: crash_rate must be a probability in [0, 1], got 2",
    ),
    (
        "profile-key",
        ("faults: none", "faults: {crash_rat: 0.1}"),
        "lib/x.yaml:4: faults: unknown key 'crash_rat'; did you mean 'crash_rate'? allowed keys: "
        "['crash_rate', 'deploys_per_day', 'idle_eviction', 'storage_error_rate']",
    ),
    (
        "count-shape",
        ("count: {at_least: 1}", "count: {exactly: 1, never: true}"),
        "lib/x.yaml:15: expect 1 (event): count: {'exactly': 1, 'never': True}; give "
        "{exactly: N}, {never: true}, or at_least: and/or at_most:",
    ),
    (
        "count-not-a-mapping",
        ("count: {at_least: 1}", "count: 1"),
        "lib/x.yaml:15: expect 1 (event): count: 1; give {exactly: N}",
    ),
    (
        "reserved-field",
        ("    agent: counter\n", "    fields: {agent: counter}\n"),
        "lib/x.yaml:14: expect 1 (event): fields: 'agent' is not a field of the record; use "
        "agent: and incarnation: to match where a record is from",
    ),
    (
        "between-reversed",
        ("    agent: counter\n", "    between: [2m, 1m]\n"),
        "lib/x.yaml:14: expect 1 (event): between: ['2m', '1m']; expected from <= to",
    ),
    (
        "unknown-expectation",
        ("  - state: {agent", "  - stat: {agent"),
        "lib/x.yaml:16: expect 2: keys ['stat']; each expectation is a trace matcher",
    ),
    (
        "duplicate-key-in-flow-mapping",
        ("equals: {count: 1}", "equals: {count: 1}, agent: b"),
        "lib/x.yaml:16: not valid YAML: duplicate key 'agent'",
    ),
    (
        "expectation-agent",
        ("state: {agent: counter", "state: {agent: b"),
        "lib/x.yaml:16: expect 2 (state): unknown agent 'b'; known agents: ['a', 'counter']",
    ),
    (
        "scenario-name",
        ("name: base", "name: my scenario"),
        "lib/x.yaml:1: name: 'my scenario'; expected a name of letters (any script), digits",
    ),
    (
        "empty-steps",
        (
            "  - call: {agent: counter, method: increment}\n  - run_for: 3m\n  - evict: {agent: "
            "counter, reason: idle}\n",
            "",
        ),
        "lib/x.yaml:8: steps: None; expected a list",
    ),
    (
        "no-steps",
        (
            "steps:\n  - call: {agent: counter, method: increment}\n  - run_for: 3m\n"
            "  - evict: {agent: counter, reason: idle}\n",
            "steps: []\n",
        ),
        "lib/x.yaml:8: steps: []; expected a list of at least one step",
    ),
]


@pytest.mark.parametrize(("change", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_error_names_file_line_part_value_and_what_is_allowed(
    change: tuple[str, str], message: str
) -> None:
    """The message starts exactly as pinned (file:line: part: field: value; allowed)."""
    with pytest.raises(InvalidScenario, match="^" + re.escape(message)) as caught:
        parse_scenario(edit(*change), "lib/x.yaml")
    assert "\n" not in str(caught.value)


def test_the_error_carries_its_parts() -> None:
    """Tools need not parse the text: path, line, part, problem and fix are attributes."""
    error = invalid(edit("  - run_for: 3m\n", "  - run_for: 3m\n  - evict: {agent: b}\n"))
    assert isinstance(error, ValueError)
    assert (error.path, error.line, error.where) == ("lib/x.yaml", 11, "step 3 (evict)")
    assert (error.problem, error.allowed) == ("unknown agent 'b'", "known agents: ['a', 'counter']")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "lib/x.yaml:1: the document is empty; a scenario is a mapping with keys"),
        ("- a\n- b\n", "lib/x.yaml:1: ['a', 'b'] is not a mapping; expected a mapping with keys"),
        ("{{{{ ::: ]]", "lib/x.yaml:1: not valid YAML: while parsing a flow node"),
        ("a: &x [*x]\n", "lib/x.yaml:1: not valid YAML: found unconstructable recursive node"),
        ("? [a]\n: 1\n", "lib/x.yaml:1: not valid YAML: a mapping key cannot be a list"),
        ("a: !!python/object:os.system x\n", "lib/x.yaml:1: not valid YAML: could not determine"),
    ],
    ids=["empty", "list", "garbage", "recursive", "list-key", "python-tag"],
)
def test_documents_that_are_not_scenarios(text: str, message: str) -> None:
    """Empty, non-mapping, unparsable and unsafe documents are each one located error."""
    with pytest.raises(InvalidScenario, match="^" + re.escape(message)):
        parse_scenario(text, "lib/x.yaml")


def test_a_missing_file_is_an_invalid_scenario(tmp_path: Path) -> None:
    """Not an OSError with a traceback: the same one-line error as any other bad input."""
    with pytest.raises(InvalidScenario, match=r"nope\.yaml: cannot read the file: No such file"):
        load_scenario(tmp_path / "nope.yaml")


def test_a_file_that_is_not_utf8_is_an_invalid_scenario(tmp_path: Path) -> None:
    """Binary garbage is named as such, with the offset of the first bad byte."""
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"name: x\n\xff\xfe")
    with pytest.raises(InvalidScenario, match=re.escape("bin.yaml: not UTF-8 text (byte 8)")):
        load_scenario(path)


def test_the_line_is_that_of_the_offending_key_in_a_block_mapping() -> None:
    """A field written on its own line is reported at that line, not at its step's."""
    text = edit(
        "  - evict: {agent: counter, reason: idle}\n",
        "  - evict:\n      agent: counter\n      reason: sleepy\n",
    )
    with pytest.raises(
        InvalidScenario, match=r"^lib/x\.yaml:13: step 3 \(evict\): reason: 'sleepy'"
    ):
        parse_scenario(text, "lib/x.yaml")
