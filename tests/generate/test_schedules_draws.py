"""What the `schedules` area draws for 0.32.0's job layer: bursts of one callback past the
job driver's backlog warning, rows due together, `recovery_loop`, the agent's
`hung_schedule_timeout_seconds` around its work, and aimed faults on the workload's own record
of its setup (after which a second `schedule()` meets the row the first stored). Each is drawn
by a seeded search and run, and the run reaches the path it was drawn for."""

from __future__ import annotations

import random

import hypothesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenarios.generate.coverage import CATALOGUE
from scenarios.generate.faults import TABLES, statement_patterns
from scenarios.generate.schedules import BURST_MAX
from scenarios.generate.strategy import scenarios
from scenarios.hunt.findings import findings
from scenarios.language.loader import parse_scenario
from scenarios.run.runner import run_scenario
from sim.units import parse_duration_ms

DRAWS = settings(
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
SEARCH = settings(
    max_examples=3000,
    deadline=None,
    database=None,
    phases=(hypothesis.Phase.generate,),
    suppress_health_check=list(HealthCheck),
)


def _find(condition):
    """The first scenario of the schedules area (seeded) that meets `condition`."""
    return hypothesis.find(
        scenarios(st, ("schedules",), sdk="0.32.0"),
        condition,
        settings=SEARCH,
        random=random.Random(0),
    )


def _quiet(generated) -> bool:
    """No fault step and no storage-fault profile: the workload alone."""
    text = generated.text()
    return not generated.fault_numbers and "faults: none" in text and "destroy_agent" not in text


def _run(generated):
    """The run, and its findings as the hunt counts them."""
    result = run_scenario(parse_scenario(generated.text(), "generated.yaml"))
    return result, findings(result.failures, story=False, inserted=generated.fault_numbers)


@given(generated=scenarios(st, ("schedules",)))
@DRAWS
def test_a_burst_stays_under_its_bound_and_its_new_pairs_are_catalogued(generated) -> None:
    """No agent keeps more than `BURST_MAX` schedules; a burst keeps four or more; a hung
    timeout is whole seconds; `recovery_loop` is never on an interval; each pair is listed."""
    listed = set(CATALOGUE["schedules"])
    for use in generated.uses:
        if use.pair in {
            "schedule recovery_loop",
            "schedule a burst of one callback",
            "option hung_schedule_timeout_seconds",
            "job a dispatch past its hung timeout",
        }:
            assert use.pair in listed
    bursts = {u.alias for u in generated.uses if u.pair == "schedule a burst of one callback"}
    for alias, agent in generated.agents.items():
        if agent.get("workload") != "schedules":
            continue
        assert len(agent["schedules"]) <= BURST_MAX
        if alias in bursts:
            assert len(agent["schedules"]) >= 4
        hung = agent.get("options", {}).get("hung_schedule_timeout_seconds")
        assert hung is None or (isinstance(hung, int) and hung >= 1)
        if any(
            u.alias == alias and u.pair == "job a dispatch past its hung timeout"
            for u in generated.uses
        ):
            longest = max(parse_duration_ms(e.get("work", "0ms")) for e in agent["schedules"])
            assert hung is not None and hung * 1000 <= longest
        for entry in agent["schedules"]:
            assert not (entry.get("recovery_loop") and "every" in entry), entry


def test_a_burst_of_one_shots_due_together_passes_the_backlog_warning() -> None:
    """Ten or more one-shots of one agent with one due time, set up together: their rows come
    due at one wake, and 0.32.0's job driver warns of the backlog (`job:backlog_warning`)."""

    def burst(generated) -> bool:
        if not _quiet(generated):
            return False
        for agent in generated.agents.values():
            timings = [
                (key, entry[key])
                for entry in agent.get("schedules", ())
                for key in ("after", "at")
                if key in entry
            ]
            if len(timings) >= 10 and len(set(timings)) == 1:
                return True
        return False

    generated = _find(burst)
    result, found = _run(generated)
    assert not found, found
    warnings = [r for r in result.trace if r.event == "job:backlog_warning"]
    assert warnings and warnings[0].fields["count"] >= 10


def test_a_hung_timeout_under_the_work_is_warned_about() -> None:
    """What generate draws when the agent's `hung_schedule_timeout_seconds` is a second under
    its longest work: the interval's dispatch outlives it and 0.32.0's driver warns once
    (`job:slow_dispatch`) and lets it run on, and every invariant holds."""
    text = """
name: hung-timeout-under-the-work
description: an interval whose work outlives the agent's hung timeout
seed: 0
sdk: "0.32.0"
agents:
  sched:
    workload: schedules
    options: {hung_schedule_timeout_seconds: 2}
    schedules:
      - {name: s1, every: 10s, runs: 2, work: 3s}
steps:
  - at: 0s
    call: {agent: sched, method: status}
expect:
  - invariants: all
"""
    result = run_scenario(parse_scenario(text, "hung.yaml"))
    assert result.passed, result.failures
    warned = [r for r in result.trace if r.event == "job:slow_dispatch"]
    assert [r.fields["thresholdMs"] for r in warned] == [2000, 2000]
    done = [r for r in result.trace if r.event == "workload:schedule_done"]
    assert len(done) == 2


def test_a_setup_whose_record_failed_dedupes_its_second_schedule() -> None:
    """The pattern generate draws for the workload's INSERT into its own record, failing after
    `schedule()` stored the row: the setup call fails, a second setup does it again, and its
    `schedule()` of the same callback and payload returns the stored row (the idempotent
    dedupe) instead of storing a second one."""
    assert "workload_schedules" in TABLES["schedules"]
    patterns = dict(statement_patterns(("schedules",)))
    insert = r"^INSERT (OR [A-Z]+ )?INTO workload_schedules\b"
    assert patterns[insert] is True  # a write: every kind of fault may be drawn on it
    text = f"""
name: record-failed
description: the setup's record of its schedule fails once; the setup is called again
seed: 0
sdk: "0.32.0"
agents:
  sched:
    workload: schedules
    setup: call
    schedules:
      - {{name: s1, after: 1m}}
      - {{name: s2, cron: "*/5 * * * *", runs: 1}}
steps:
  - at: 0s
    arm_storage_fault: {{agent: sched, kind: error, match: '{insert}', skip: 1}}
  - at: 0s
    call: {{agent: sched, method: setup, expect_error: StorageError}}
  - at: 10s
    call: {{agent: sched, method: setup}}
expect:
  - invariants: all
"""
    result = run_scenario(parse_scenario(text, "record-failed.yaml"))
    assert result.passed, result.failures
    assert result.probes.get("schedule.idempotent_dedupe") == 1
    creates = [r for r in result.trace if r.event == "schedule:create"]
    assert len(creates) == 2  # s1 once, s2 once: the second setup stored no second row
