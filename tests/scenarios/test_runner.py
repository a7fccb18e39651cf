"""The runner: library scenarios pass, wrong expectations and unexpected errors fail with
sentences and the replay command, named invariants are checked on request, a run is a function
of the scenario and the seed, and a determinism check names the first divergent record."""

from __future__ import annotations

from pathlib import Path

import pytest

from scenarios import load_scenario, parse_scenario, run_scenario
from scenarios.run.determinism import (
    NondeterminismDetected,
    check_determinism,
    first_divergence,
    run_checked,
)
from scenarios.run.runner import invariant_names
from sim import TraceRecord
from sim.checkers import CHECKERS
from tests.scenarios.helpers import BASE, EVERY_STEP, LEAKY, LIBRARY, edit, library_files

IDLE = LIBRARY / "idle-eviction.yaml"


@pytest.mark.parametrize("path", library_files(), ids=lambda p: p.name)
def test_library_scenario_passes_with_its_own_seed(path: Path) -> None:
    """`agentsim run scenarios/library` is the README's main job: every file passes."""
    result = run_scenario(load_scenario(path))
    assert result.passed, result.report()
    assert result.failures == () and result.report() == result.headline


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("path", library_files(), ids=lambda p: p.name)
def test_library_scenario_passes_with_other_seeds(path: Path, seed: int) -> None:
    """The stories hold whatever the seeded timings: they check bounds, not lucky instants."""
    result = run_scenario(load_scenario(path), seed=100 + seed)
    assert result.passed, result.report()


def test_every_step_kind_runs() -> None:
    """The fixture that uses each step kind passes, so each kind does what its name says."""
    result = run_scenario(load_scenario(EVERY_STEP))
    assert result.passed, result.report()


def test_a_wrong_expectation_fails_with_a_sentence_and_the_replay_command() -> None:
    """The failure names file, line and expectation, says what was found, and the report ends
    with the command that replays the run."""
    text = IDLE.read_text().replace("equals: {count: 2}", "equals: {count: 3}")
    result = run_scenario(parse_scenario(text, "scenarios/library/idle-eviction.yaml"))
    assert not result.passed
    (failure,) = result.failures
    assert failure.startswith("scenarios/library/idle-eviction.yaml:")
    assert "expect 4 (state): the state of counter is {'count': 2}, expected {'count': 3}" in (
        failure
    )
    assert result.replay == "agentsim run scenarios/library/idle-eviction.yaml --seed 7"
    report = result.report().splitlines()
    assert report[0].startswith("FAIL idle-eviction seed=7 events=")
    assert report[-1] == f"  replay: {result.replay}"


def test_a_count_mismatch_shows_the_records_that_nearly_matched() -> None:
    """When nothing matched, the sentence lists the records with that name, times included."""
    text = edit("count: {at_least: 1}", "fields: {reason: deploy}\n    count: {at_least: 1}")
    (failure,) = run_scenario(parse_scenario(text, "x.yaml")).failures
    assert failure.startswith(
        "x.yaml:13: expect 1 (event): expected at least 1 'incarnation:end' record of counter "
        "(Counter/counter) with reason='deploy'; found 0; records with that name: "
        "incarnation:end Counter/counter#1 at 00:01:52.937 (reason='idle')"
    )


def test_an_unexpected_call_error_is_a_failure_not_a_crash() -> None:
    """Agent code that raises is reported as the step's failure; the run goes on."""
    text = edit("method: increment}", "method: fail, args: [boom]}")
    result = run_scenario(parse_scenario(text, "x.yaml"))
    assert result.failures[0] == (
        "x.yaml:9: step 1 (call): counter.fail('boom') failed with RuntimeError: boom"
    )
    assert any("expect 2 (state)" in failure for failure in result.failures)


def test_an_expected_error_that_does_not_happen_is_a_failure() -> None:
    """`expect_error` is a claim too: a call that returns instead is reported."""
    text = edit("method: increment}", "method: increment, expect_error: AgentEvicted}")
    result = run_scenario(parse_scenario(text, "x.yaml"))
    assert result.failures == (
        "x.yaml:9: step 1 (call): counter.increment() returned 1, but was expected to fail "
        "with AgentEvicted",
    )


def test_an_error_of_the_wrong_class_is_a_failure() -> None:
    """A named `expect_error` only accepts that class (or a subclass)."""
    text = edit("method: increment}", "method: fail, expect_error: AgentEvicted}")
    result = run_scenario(parse_scenario(text, "x.yaml"))
    assert result.failures[0] == (
        "x.yaml:9: step 1 (call): counter.fail() failed with RuntimeError: asked to fail, but "
        "was expected to fail with AgentEvicted"
    )


def test_a_started_call_that_never_finishes_is_reported_after_the_liveness_phase() -> None:
    """`wait: false` moves on at once; a call still running at the end is a failure."""
    text = """\
name: never-finishes
description: A long piece of work outlives a short liveness phase.
seed: 1
liveness: {limit: 5m}
agents:
  counter: {class: "scenarios.workloads:Counter", options: {step_ms: 1m}}
steps:
  - call: {agent: counter, method: work, args: [100], wait: false}
"""
    result = run_scenario(parse_scenario(text, "x.yaml"))
    assert result.failures[0] == (
        "x.yaml:8: step 1 (call): counter.work(100) never finished (still running at "
        "00:05:00.000, after the liveness phase)"
    )
    assert result.failures[1].startswith(
        "x.yaml: liveness: the run did not settle within its limit (5m after 00:00:00.000): "
        "the liveness phase (00:00:00.000 to 00:05:00.000) did not go quiet (the next event was "
        "due at 00:06:00.000); what kept it busy: Counter/counter (5 records): its records: "
    )
    assert len(result.failures) == 2


def test_a_run_that_never_settles_fails_naming_what_kept_it_busy() -> None:
    """A job that needs 20 minutes inside an alarm handler is killed at 15 and retried; the
    liveness phase cannot go quiet, and the failure says which alarm kept it busy and how."""
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
    result = run_scenario(parse_scenario(text, "x.yaml"))
    (failure,) = result.failures
    assert failure.startswith("x.yaml: liveness: the run did not settle within its limit (1h ")
    assert "(every 15m4s on average; interrupted 3 times, killed by the 15-minute limit" in failure
    assert "Counter/counter (" in failure
    assert "its alarm fired 4 times" in failure
    assert "killed by the 15-minute limit" in failure
    assert failure.endswith("say so with `liveness: {settles: false}`")


def test_settles_false_accepts_a_busy_end() -> None:
    """`liveness: {settles: false}`: the same run passes; the result still says it was busy."""
    text = """\
name: busy-on-purpose
description: A heartbeat that never stops, on purpose.
seed: 1
liveness: {limit: 1h, settles: false}
agents:
  counter: {class: "scenarios.workloads:Counter", options: {alarm_work_ms: 20m}}
steps:
  - call: {agent: counter, method: arm, args: [1000]}
"""
    result = run_scenario(parse_scenario(text, "x.yaml"))
    assert result.passed and not result.quiet


def test_an_at_that_has_already_passed_is_reported_and_the_step_runs_then() -> None:
    """A blocking step can overrun a later `at:`; the timing depends on the seed, so say so."""
    text = edit(
        "  - run_for: 3m\n",
        "  - run_for: 3m\n  - at: 2m\n    deploy: {}\n",
    ).replace("  - call: {agent: counter, method: increment}\n", "  - run_until: 1m\n")
    result = run_scenario(parse_scenario(text, "x.yaml"))
    assert result.failures[0] == (
        "x.yaml:11: step 3 (deploy): at: 00:02:00.000 had already passed; an earlier step ran "
        "until 00:04:00.000, so this step ran then"
    )
    deploys = [r.t_ms for r in result.trace.select("platform:deploy")]
    assert deploys == [240_000]


def test_sending_to_a_client_that_is_not_connected_is_a_failure() -> None:
    """The agent never saw the message, and the scenario says so instead of crashing."""
    text = edit(
        "  - run_for: 3m\n",
        "  - connect: {client: alice, agent: counter}\n  - disconnect: {client: alice}\n"
        "  - after: 1s\n    send: {client: alice, message: increment}\n",
    )
    result = run_scenario(parse_scenario(text, "x.yaml"))
    assert result.failures[0] == (
        "x.yaml:12: step 4 (send): client 'alice' is not connected; the message 'increment' was "
        "not sent"
    )


def test_the_same_seed_gives_the_same_run_and_another_seed_another() -> None:
    """Digest, event count and verdict are a function of scenario and seed."""
    scenario = load_scenario(IDLE)
    first, second = run_scenario(scenario, seed=42), run_scenario(scenario, seed=42)
    assert (first.digest, first.events, first.failures) == (
        second.digest,
        second.events,
        second.failures,
    )
    assert run_scenario(scenario, seed=43).digest != first.digest


def test_a_seed_override_is_what_the_replay_command_names() -> None:
    """Replaying a run with another seed must name that seed, not the file's."""
    result = run_scenario(load_scenario(IDLE), seed=99)
    assert result.seed == 99 and result.replay.endswith("--seed 99")
    assert result.trace.records[0].fields == {"seed": 99}


def test_the_state_of_an_agent_that_never_ran_is_its_initial_state() -> None:
    """Reading state needs no live instance, not even a table: the class's initial state."""
    text = edit("equals: {count: 1}}", "equals: {count: 0}}").replace(
        "state: {agent: counter", "state: {agent: a"
    )
    result = run_scenario(parse_scenario(text, "x.yaml"))
    assert result.passed, result.report()


def test_a_query_that_fails_is_a_failure_sentence() -> None:
    """A query on a table the agent never made (a typo `validate` cannot see: the tables are
    known only when the run ends) does not stop the other checks."""
    text = BASE + "  - query: {agent: counter, sql: 'SELECT * FROM cuonts', rows: []}\n"
    result = run_scenario(parse_scenario(text, "x.yaml"))
    assert result.failures == (
        "x.yaml:17: expect 3 (query): the query 'SELECT * FROM cuonts' on counter failed: no "
        "such table: cuonts (statement: SELECT * FROM cuonts)",
    )


# -- named invariants ---------------------------------------------------------------------------
WORKER = """\
name: worker
description: A background fiber of four steps, killed by a deploy after its first stash.
seed: 1
agents:
  w: {class: "tests.fuzz.agents:Forgetful"}
steps:
  - call: {agent: w, method: work, args: [4]}
  - at: 15s
    deploy: {}
  - run_for: 1m
"""


def test_named_invariants_are_checked_after_the_expectations_and_named_in_the_replay() -> None:
    """A recovery that loses its stash passes a scenario without expectations, and fails once
    `no_lost_stash` is asked for, with a sentence and a replay command that asks for it too."""
    scenario = parse_scenario(WORKER, "w.yaml")
    assert run_scenario(scenario).passed
    result = run_scenario(scenario, invariants=["no_lost_stash"])
    (failure,) = result.failures
    assert failure.startswith("w.yaml: invariant no_lost_stash: fiber ")
    assert "stashed step 1 at 00:00:10.000" in failure and "the stash was lost" in failure
    assert result.replay == "agentsim run w.yaml --seed 1 --invariants no_lost_stash"
    every = run_scenario(scenario, invariants=["all"])
    assert every.replay.endswith("--invariants all") and every.invariants == tuple(CHECKERS)


def test_invariant_names_take_all_none_or_known_names_only() -> None:
    """`all`, `none`, a comma list; an unknown name lists the known ones."""
    assert invariant_names("all") == tuple(CHECKERS)
    assert invariant_names("none") == () == invariant_names("")
    assert invariant_names("no_lost_stash, exactly_once_finish") == (
        "no_lost_stash",
        "exactly_once_finish",
    )
    with pytest.raises(ValueError, match=r"unknown invariant\(s\) \['nope'\]; known invariants: "):
        invariant_names("no_lost_stash,nope")


def test_each_step_has_its_timing_in_the_result() -> None:
    """One (begin, end) per step, in order: the fuzzer places drawn steps by them."""
    result = run_scenario(load_scenario(IDLE))
    assert [(t.begin_ms, t.end_ms) for t in result.timings] == [
        (0, 0),
        (0, 180_000),
        (180_000, 300_000),
    ]


# -- determinism --------------------------------------------------------------------------------


def test_a_deterministic_scenario_passes_the_check_and_returns_its_result() -> None:
    """Two runs, one trace: the first run's result comes back."""
    scenario = load_scenario(IDLE)
    assert check_determinism(scenario, 9).digest == run_scenario(scenario, 9).digest


def test_nondeterminism_is_raised_naming_the_first_divergent_record() -> None:
    """The exception carries seq and both versions; its text ends with the replay command."""
    with pytest.raises(NondeterminismDetected) as caught:
        check_determinism(parse_scenario(LEAKY, "leaky.yaml"))
    error = caught.value
    assert error.first is not None and error.second is not None
    assert error.first.event == error.second.event == "user:ping"
    assert error.first.seq == error.second.seq == error.seq
    assert error.second.fields["n"] == error.first.fields["n"] + 1
    assert error.first_digest != error.second_digest
    assert str(error).endswith("\nreplay: agentsim run leaky.yaml --seed 2 --check-determinism")
    result = run_checked(parse_scenario(LEAKY, "leaky.yaml"))
    assert not result.passed and result.failures[-1].startswith("NondeterminismDetected: ")


def test_first_divergence_finds_a_changed_record_or_a_missing_tail() -> None:
    """Equal traces: None; a differing record: its index; one trace a prefix: the shorter's
    length."""
    a = [TraceRecord(i, 0, "", 0, "e", {"v": i}) for i in range(3)]
    b = [*a[:2], TraceRecord(2, 0, "", 0, "e", {"v": 9})]
    assert first_divergence(a, list(a)) is None
    assert first_divergence(a, b) == 2
    assert first_divergence(a, a[:1]) == 1


def test_a_probes_expectation_fails_when_the_rare_path_was_not_taken() -> None:
    """`probes: [...]`: a story that stops reaching its rare path fails instead of passing."""
    reached = edit(
        "  - run_for: 3m\n",
        "  - arm_storage_fault: {agent: counter, kind: crash-after-commit, match: INSERT}\n"
        "  - call: {agent: counter, method: increment, expect_error: AgentEvicted}\n"
        "  - run_for: 3m\n",
    )
    probes = "  - probes: [platform.crash_after_commit]\n"
    result = run_scenario(
        parse_scenario(reached.replace("  - state:", probes + "  - state:"), "x.yaml")
    )
    assert result.probes.get("platform.crash_after_commit") == 1
    assert not any("probe" in failure for failure in result.failures), result.failures
    missed = run_scenario(
        parse_scenario(BASE.replace("  - state:", probes + "  - state:"), "x.yaml")
    )
    (failure,) = [f for f in missed.failures if "probe" in f]
    assert failure.startswith(
        "x.yaml:16: expect 2 (probes): probe 'platform.crash_after_commit' was never reached: "
        "the run did not take the rare path it marks (the process died at the instant after a "
        "turn committed)"
    )


def test_a_storage_fault_on_a_sub_agent_is_armed_when_it_is_created() -> None:
    """`arm_storage_fault: {agent: parent/a}` before the child exists waits for its creation,
    and then fails the child's own statement."""
    from tests.scenarios.helpers import workload_scenario

    runs = "      - {run_id: a, detached: true, steps: [{sleep: 1m}, {finish: completed}]}\n"
    agents = f"  parent:\n    workload: tools\n    runs:\n{runs}"
    steps = (
        "  - arm_storage_fault: {agent: parent/a, kind: crash, match: '^UPDATE child_scripts'}\n"
        "  - call: {agent: parent, method: dispatch}\n"
    )
    result = run_scenario(parse_scenario(workload_scenario(agents, steps), "w.yaml"))
    faults = [r for r in result.trace.records if r.event.startswith("fault:")]
    assert [r.event for r in faults] == ["fault:armed", "fault:crash"]
    assert faults[0].get("when_created") == "ToolsWorkload/parent/a"
    assert faults[1].agent == "ToolsWorkload/parent/ScriptedToolChild/a"
    assert faults[1].get("statement").startswith("UPDATE child_scripts")


def test_a_busy_liveness_phase_is_extended_to_a_durable_deadline() -> None:
    """A detached run whose child died at its creation is watched until its budget (the seed's
    promise), past the 1 h limit: the phase runs on to that deadline, sees the give-up, and
    goes quiet, instead of failing at 1 h for a busy backbone."""
    from tests.scenarios.helpers import workload_scenario

    runs = (
        "      - {run_id: a, detached: {max_budget: 3h}, "
        "steps: [{sleep: 1m}, {finish: completed}]}\n"
    )
    agents = f"  parent:\n    workload: tools\n    runs:\n{runs}"
    steps = (
        "  - arm_storage_fault: {agent: parent/a, kind: crash, match: '^CREATE TABLE'}\n"
        "  - call: {agent: parent, method: dispatch, expect_error: AgentEvicted}\n"
    )
    expect = "  - hook: workload_on_finish\n    run: a\n    status: interrupted\n    exactly: 1\n"
    result = run_scenario(
        parse_scenario(workload_scenario(agents, steps, expect), "w.yaml"), invariants=("all",)
    )
    assert result.passed, result.report()
    assert result.quiet
    ends = [r for r in result.trace.records if r.event == "quiesce:begin"]
    assert [r.get("limit_ms") for r in ends][0] == 3_600_000 and len(ends) == 2


def test_a_deadline_kept_just_before_the_end_of_the_liveness_phase_gets_its_grace() -> None:
    """A budget that falls due inside the phase is acted on by the next backbone tick (up to
    120 s later), and the incarnations then wind down: when that lands at the end of the 1 h
    phase, the phase runs on through the deadline's grace instead of failing for the wind-down
    of a promise the runtime has just kept (found by fuzzing a crash after the child's first
    commit: give-up at 01:00:50, quiet at 01:02:41, phase over at 01:01:00)."""
    from tests.scenarios.helpers import workload_scenario

    runs = (
        "      - {run_id: a, detached: {max_budget: 1h}, "
        "steps: [{sleep: 1m}, {finish: completed}]}\n"
    )
    agents = f"  parent:\n    workload: tools\n    runs:\n{runs}"
    steps = (
        "  - arm_storage_fault: {agent: parent/a, kind: crash, match: '^CREATE TABLE'}\n"
        "  - call: {agent: parent, method: dispatch, expect_error: AgentEvicted}\n"
        "  - run_for: 1m\n"
    )
    expect = "  - hook: workload_on_finish\n    run: a\n    status: interrupted\n    exactly: 1\n"
    result = run_scenario(
        parse_scenario(workload_scenario(agents, steps, expect), "w.yaml"), invariants=("all",)
    )
    assert result.passed, result.report()
    assert result.quiet
    begins = [r for r in result.trace.records if r.event == "quiesce:begin"]
    assert len(begins) == 2
    give_up = next(r for r in result.trace.records if r.event == "hook:on_finish")
    assert 3_600_000 <= give_up.t_ms <= 60_000 + 3_600_000
