"""The checker API: the registry, `check`, the context a simulation gives, and the
`InvariantViolation` a failed `assert_invariants` raises."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from sim import Simulation
from sim.checkers import (
    CHECKERS,
    CheckContext,
    InvariantViolation,
    Violation,
    assert_invariants,
    check,
    context_from,
    register,
    render_record,
)
from tests.checkers.agents import Forgetful, ToolParent, Worker, record

INVARIANTS = [
    "exactly_once_finish",
    "budget_interrupts",
    "reattach_terminal",
    "no_lost_stash",
    "no_leaked_keep_alive",
    "schedules_fire",
    "fibers_settled",
    "fiber_leases_released",
    "eviction_final",
    "startup_once",
    "startup_gates_deliveries",
    "turns_atomic",
    "alarms_never_overlap",
    "alarm_retries",
    "alarm_limit",
    "alarm_fires_on_time",
    "recovery_once",
    "recovery_error_kept",
    "schedules_fire_once",
    "one_shot_completes",
    "client_timeline_exact",
    "milestones_once",
    "child_reset_retryable",
    "give_up_not_early",
    "deaths_are_whole",
    "fiber_runs_once",
    "keep_alive_heartbeat",
    "schedules_armed",
    "delivered_marks_earned",
    "claims_wait_for_lease",
    "managed_status_final",
    "startup_triggered",
    "recovery_max_age",
    "recovery_backoff",
    "interval_runs_on_time",
    "facet_interval_redispatched",
    "facet_runs_watched",
    "due_jobs_in_time_order",
    "deferred_job_kept",
    "startup_fallback_armed",
    "deadman_before_drive",
    "legacy_schedules_moved",
    "one_shot_retried_when_cut",
    "failed_finish_redelivered",
    "chat_turns_serial",
    "progress_done_sent",
    "milestones_stored",
    "chat_recovery_attempts_count",
    "chunk_numbers_stable",
    "fiber_keys_unique",
    "interrupted_reason_kept",
    "agent_tools_under_cap",
    "cron_next_occurrence",
    "schedule_attempts_bounded",
    "listings_match",
    "schedules_owned_by_caller",
    "retryable_only_interrupted",
    "silent_runs_given_up",
    "finish_notified_once",
    "child_turn_once",
    "clear_cancels_child_first",
    "drill_in_gated",
    "agent_tools_under_instance_cap",
    "recovered_child_turn_rebound",
    "memory_limit_breaker",
    "stash_replaces_whole",
    "cancel_aborts_signal",
    "recovery_scan_deadline",
    "schedule_dedupe_keys",
    "client_runs_grouped",
    "client_run_terminals",
    "progress_flushed",
    "milestones_before_finish",
    "waited_status_settled",
    "mcp_servers_durable",
    "input_preview_derived",
    "cancel_settles_fiber",
    "alarm_covers_schedules",
    "sub_agents_registered",
]


def lossy_run(seed: int = 3) -> Simulation:
    """A Forgetful worker killed after stashing step 2, then recovered from step 0."""
    sim = Simulation(seed)
    ref = sim.agent(Forgetful, "w")
    sim.call(ref, "work", 4)
    sim.run_for(25_000)
    sim.evict(ref, "deploy")
    sim.quiesce(3_600_000)
    return sim


def test_the_registry_names_every_invariant_of_the_scenario_language() -> None:
    """CHECKERS holds the named invariants, each a documented function whose docstring opens
    with the promise it backs, then an em dash."""
    assert sorted(CHECKERS) == sorted(INVARIANTS)
    for name, checker in CHECKERS.items():
        assert checker.__doc__ and "—" in checker.__doc__, name


def test_check_refuses_an_unknown_name_and_lists_the_known_ones() -> None:
    """A misspelt invariant is a ValueError naming it and every known invariant."""
    context = CheckContext(records=())
    with pytest.raises(ValueError, match=r"unknown invariant\(s\) \['exactly_once'\]; known "):
        check(context, ["exactly_once"])
    assert check(context) == []


def test_a_registered_checker_runs_and_a_name_is_taken_once() -> None:
    """register() adds a checker that check() runs; a second checker under the same name is
    refused."""

    def every_record_has_an_agent(context: CheckContext) -> list[Violation]:
        return [
            Violation("agents_named", "", str(r.seq), f"record #{r.seq} has no agent", (r.seq,))
            for r in context.records
            if not r.agent and r.event != "simulation:start"
        ]

    register("agents_named", every_record_has_an_agent)
    try:
        context = CheckContext(records=(record(0, 0, "", 0, "quiesce:begin"),))
        (found,) = check(context, ["agents_named"])
        assert str(found) == "agents_named: record #0 has no agent [records #0]"
        with pytest.raises(ValueError, match="'agents_named' is already registered by"):
            register("agents_named", lambda c: [])
        with pytest.raises(ValueError, match="snake_case identifier, got 'no good'"):
            register("no good", every_record_has_an_agent)
    finally:
        CHECKERS.pop("agents_named", None)


def test_context_from_reads_trace_storage_alarms_options_and_the_liveness_phase() -> None:
    """The context of a simulation holds its seed, end time, every agent's storage (sub-agents
    too), top-level alarms only, each class's options, and `quiet` once a quiesce ended."""
    with Simulation(11) as sim:
        parent = sim.agent(ToolParent, "p")
        sim.call(parent, "dispatch", "d1", [["sleep", 1_000], ["finish", "completed", "ok"]])
        worker = sim.agent(Worker, "w")
        before = context_from(sim, scenario="demo")
        assert (before.seed, before.scenario, before.end_ms) == (11, "demo", sim.now_ms)
        assert before.quiet is None and not before.liveness_ran
        assert "ToolParent/p/ResumingChild/d1" in before.storage
        assert set(before.alarms) == {"ToolParent/p", "Worker/w"}
        assert before.alarms["ToolParent/p"] == sim.alarm_of(parent)
        assert before.option(worker.path, "keep_alive_interval_ms") == 2_000
        assert before.option("Nobody/x", "keep_alive_interval_ms") == 30_000
        assert sim.quiesce(3_600_000) is True
        after = context_from(sim)
        assert after.quiet is True and after.records[-1].event == "quiesce:end"
        assert after.table(parent.path, "cf_agent_tool_runs")[0]["status"] == "completed"


def test_a_hand_built_context_takes_its_end_and_quiet_from_the_records() -> None:
    """Without end_ms the last record's time is the end; without quiet the last quiesce:end
    says it."""
    records = (
        record(0, 0, "", 0, "quiesce:begin", limit_ms=10),
        record(1, 7_000, "", 0, "quiesce:end", quiet=False),
    )
    context = CheckContext(records=records)
    assert (context.end_ms, context.quiet, context.liveness_ran) == (7_000, False, True)
    assert context.end_words() == "the end (00:00:07.000, not quiet)"


def test_a_record_renders_on_one_line_with_seq_time_agent_and_fields() -> None:
    """`#seq time agent#inc event key=value`, strings bare unless they hold spaces."""
    line = render_record(
        record(31, 65_000, "Parent/p", 2, "hook:delivered", runId="r1", slot="finish", why="a b")
    )
    assert line == (
        '#31    00:01:05.000  Parent/p#2  hook:delivered  runId=r1 slot=finish why="a b"'
    )


def test_assert_invariants_returns_the_context_of_a_healthy_run() -> None:
    """A run that keeps every promise passes all invariants."""
    with Simulation(3) as sim:
        ref = sim.agent(Worker, "w")
        sim.call(ref, "work", 4)
        sim.run_for(25_000)
        sim.evict(ref, "deploy")
        sim.quiesce(3_600_000)
        context = assert_invariants(sim)
        assert context.quiet is True


def test_assert_invariants_raises_with_seed_sentence_trace_tail_and_replay() -> None:
    """A broken promise raises InvariantViolation (an AssertionError) carrying the seed, the
    violations, the last 20 records one per line, and the pytest command that replays it."""
    sim = lossy_run()
    with pytest.raises(InvariantViolation) as caught:
        assert_invariants(sim)
    error = caught.value
    assert isinstance(error, AssertionError)
    assert error.seed == 3 and error.scenario is None
    assert [v.invariant for v in error.violations] == ["no_lost_stash"]
    text = str(error)
    lines = text.splitlines()
    assert lines[0] == "1 invariant violation (no_lost_stash) in seed 3:"
    assert "stashed step 2 at 00:00:20.000" in lines[1] and "the stash was lost" in lines[1]
    tail_at = lines.index(f"trace tail (last 20 of {len(sim.trace)} records):")
    assert len(lines[tail_at + 1 : -1]) == 20
    assert lines[-2].lstrip().startswith(f"#{len(sim.trace) - 1} ")
    assert "quiesce:end" in lines[-2]
    assert lines[-1].startswith("replay: python -m pytest 'tests/checkers/test_core.py::")
    assert "records named above (not in the tail):" in text
    assert len(error.tail) == 20
    sim.close()


def test_a_scenario_failure_names_the_scenario_and_its_replay_command() -> None:
    """With a scenario, the headline names it and the replay is `agentsim run ... --seed`."""
    sim = lossy_run(seed=4)
    with pytest.raises(InvariantViolation, match=r"in scenario 'library/lossy.yaml', seed 4:"):
        assert_invariants(sim, ["no_lost_stash"], scenario="library/lossy.yaml")
    with pytest.raises(InvariantViolation) as caught:
        assert_invariants(sim, scenario="library/lossy.yaml")
    assert str(caught.value).endswith("replay: agentsim run library/lossy.yaml --seed 4")
    assert assert_invariants(sim, ["schedules_fire", "fibers_settled"]).seed == 4
    sim.close()


def test_from_context_keeps_the_violations_and_the_records_they_name() -> None:
    """An InvariantViolation built from a context shows each named record once."""
    records = tuple(record(n, n * 1_000, "A/a", 1, "tick") for n in range(30))
    context = CheckContext(records=records, seed=9)
    violation = Violation("demo", "A/a", "x", "something broke", (2, 29))
    error = InvariantViolation.from_context(context, [violation], replay="run it again")
    text = str(error)
    assert text.count("#2     00:00:02.000") == 1
    assert "demo: something broke [records #2, #29]" in text
    assert dataclasses.astuple(error.violations[0])[0] == "demo"
    assert text.endswith("replay: run it again")


def test_the_public_surface_of_sim_checkers_is_pinned() -> None:
    """`sim.checkers.__all__` is exactly this list, and every name in it exists."""
    import sim.checkers

    assert sorted(sim.checkers.__all__) == [
        "CHECKERS",
        "CheckContext",
        "Checker",
        "InvariantViolation",
        "LIVENESS_GRACE_MS",
        "Violation",
        "assert_invariants",
        "check",
        "context_from",
        "invariant",
        "register",
        "render_record",
    ]
    assert all(hasattr(sim.checkers, name) for name in sim.checkers.__all__)


@pytest.mark.parametrize(
    ("document", "heading"),
    [
        ("README.md", "**Invariants.**"),
        ("docs/checkers.md", "## The invariants"),
        ("docs/scenario-language.md", "### `invariants`"),
        ("sim/checkers/__init__.py", "| invariant | promise |"),
    ],
)
def test_the_docs_name_every_registered_invariant(document: str, heading: str) -> None:
    """The README's table, the checker guide's table, the scenario language's list and the
    package docstring's table name every invariant the registry holds."""
    text = (Path(__file__).resolve().parents[2] / document).read_text()
    section = text[text.index(heading) :]
    section = section[: section.find("\n#", len(heading))]
    named = set(re.findall(r"`([a-z_]+)`", section))
    assert sorted(set(CHECKERS) - named) == []
