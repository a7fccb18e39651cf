"""The workload features the hunting scenarios (`scenarios/library/hunt-*.yaml`) are built from:
the `schedules` workload, cancellable managed fibers with deadlines and per-fiber recovery, read
from the trace and the storage of small scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents_core.releases.registry import RELEASES
from scenarios import load_scenario, parse_scenario, run_scenario
from scenarios.language.errors import InvalidScenario
from scenarios.run.runner import ScenarioResult
from scenarios.workloads import SchedulePlan, ScheduleWorkload, schedule_workload
from tests.scenarios.helpers import workload_scenario


def run(text: str, seed: int | None = None) -> ScenarioResult:
    return run_scenario(parse_scenario(text, "w.yaml"), seed)


def on_release(text: str, sdk: str) -> str:
    """The scenario text with its `sdk:` key naming `sdk`."""
    return text.replace("seed: 1\n", f'seed: 1\nsdk: "{sdk}"\n', 1)


def events(result: ScenarioResult, event: str, **fields: object) -> list[dict]:
    return [
        dict(record.fields)
        for record in result.trace.records
        if record.event == event and all(record.get(k) == v for k, v in fields.items())
    ]


def times(result: ScenarioResult, event: str, **fields: object) -> list[int]:
    return [
        record.t_ms
        for record in result.trace.records
        if record.event == event and all(record.get(k) == v for k, v in fields.items())
    ]


# -- schedules ----------------------------------------------------------------------------------
def scheduler(*entries: str, settings: str = "") -> str:
    body = "".join(f"      - {entry}\n" for entry in entries)
    return f"  s:\n    workload: schedules\n{settings}    schedules:\n{body}"


WAKE = "  - call: {agent: s, method: status}\n  - run_until: 10m\n"
ALL = "  - invariants: all\n"


def test_an_interval_runs_one_interval_after_each_completion_and_stops_after_its_runs() -> None:
    """every: 10s with work: 2s runs at 10 s, 22 s, 34 s; runs: 3 cancels it after the third."""
    result = run(
        workload_scenario(scheduler("{name: p, every: 10s, runs: 3, work: 2s}"), WAKE, ALL)
    )
    assert result.passed, result.report()
    assert times(result, "workload:schedule_run") == [10_000, 22_000, 34_000]
    assert times(result, "workload:schedule_done") == [12_000, 24_000, 36_000]
    assert events(result, "workload:schedule_cancelled") == [
        {"name": "p", "by": "runs", "found": True}
    ]
    assert len(events(result, "schedule:cancel")) == 1


def test_failing_attempts_are_retried_and_the_run_still_completes() -> None:
    """fail: 2 fails the first two attempts; the runtime's retries make the third."""
    result = run(workload_scenario(scheduler("{name: r, after: 30s, fail: 2}"), WAKE, ALL))
    assert result.passed, result.report()
    assert [e["attempt"] for e in events(result, "workload:schedule_failed")] == [1, 2]
    assert [e["attempt"] for e in events(result, "workload:schedule_done")] == [3]
    assert [e["attempt"] for e in events(result, "schedule:retry")] == [2, 3]


def test_attempts_one_makes_a_failure_final_for_that_run() -> None:
    """attempts: 1: the failed run is reported (schedule:error) and the interval goes on."""
    entry = "{name: p, every: 10s, runs: 2, fail: 1, attempts: 1}"
    result = run(workload_scenario(scheduler(entry), WAKE, ALL))
    assert result.passed, result.report()
    assert len(events(result, "schedule:error")) == 1 and not events(result, "schedule:retry")
    assert [e["attempt"] for e in events(result, "workload:schedule_done")] == [2, 3]


def test_keep_alive_holds_a_lease_around_every_attempt_even_a_failing_one() -> None:
    """Each attempt acquires a keep_alive lease and gives it back, also when it raises."""
    entry = "{name: r, after: 30s, work: 5s, fail: 1, keep_alive: true}"
    result = run(workload_scenario(scheduler(entry), WAKE, ALL))
    assert result.passed, result.report()
    acquired = times(result, "keep_alive:acquire", holder="keep_alive")
    released = times(result, "keep_alive:release", holder="keep_alive")
    assert len(acquired) == len(released) == 2
    assert released[0] == acquired[0] + 5_000


def test_fiber_runs_each_attempt_as_a_new_fiber_of_the_schedules_name() -> None:
    """fiber: every run (and retry) is one run_fiber of that name, each with its own id."""
    entry = "{name: d, cron: '* * * * *', runs: 2, work: 1s, fiber: true}"
    result = run(workload_scenario(scheduler(entry), WAKE, ALL))
    assert result.passed, result.report()
    started = events(result, "fiber:run:started", fiberName="d")
    assert len(started) == 2 and started[0]["fiberId"] != started[1]["fiberId"]
    assert times(result, "workload:schedule_run") == [60_000, 120_000]


def test_one_shots_run_once_and_a_restart_sets_nothing_up_again() -> None:
    """after: and at: make delayed and scheduled rows; a deploy after they ran runs on_start
    again, which finds them set up already and adds no row."""
    entries = ("{name: a, after: 20s}", "{name: b, at: 1m}")
    steps = "  - call: {agent: s, method: status}\n  - at: 2m\n    deploy_all: {}\n" + (
        "  - at: 3m\n    request: {agent: s}\n  - run_until: 10m\n"
    )
    result = run(workload_scenario(scheduler(*entries), steps, ALL))
    assert result.passed, result.report()
    assert [e["kind"] for e in events(result, "workload:scheduled")] == ["delayed", "scheduled"]
    assert len(events(result, "schedule:create")) == 2
    assert times(result, "workload:schedule_done") == [20_000, 60_000]


@pytest.mark.parametrize("sdk", list(RELEASES))
def test_warmup_holds_the_input_gate_while_startup_awaits(sdk: str) -> None:
    """A plain RPC sent during the warmup is delivered only after startup:done: on 0.21.0 it
    waits at the input gate, on 0.32.0 its `async` method joins the startup under way
    (sdk-0.32 §1.3, J-08)."""
    steps = (
        "  - call: {agent: s, method: status, wait: false}\n"
        "  - at: 1s\n    call: {agent: s, method: status, wait: false}\n  - run_until: 1m\n"
    )
    text = workload_scenario(scheduler("{name: a, after: 10s}", settings="    warmup: 3s\n"), steps)
    result = run(on_release(text, sdk))
    assert result.passed, result.report()
    assert times(result, "startup:done") == [3_000]
    assert times(result, "delivery:begin", trigger="rpc") == [3_000, 3_000]
    waited = result.probes.get("platform.delivery_waited_at_gate")
    assert waited if sdk == "0.21.0" else waited is None


def test_setup_call_and_cancel() -> None:
    """setup: call creates nothing until `setup`; `cancel` removes a schedule before it runs."""
    entries = ("{name: a, after: 1m}", "{name: b, every: 30s, runs: 2}")
    steps = (
        "  - call: {agent: s, method: status}\n  - at: 10s\n    call: {agent: s, method: setup}\n"
        "  - at: 20s\n    call: {agent: s, method: cancel, args: [a]}\n  - run_until: 5m\n"
    )
    result = run(workload_scenario(scheduler(*entries, settings="    setup: call\n"), steps, ALL))
    assert result.passed, result.report()
    assert times(result, "schedule:create") == [10_000, 10_000]
    assert events(result, "workload:schedule_cancelled", name="a") == [
        {"name": "a", "by": "call", "found": True}
    ]
    assert {e["name"] for e in events(result, "workload:schedule_run")} == {"b"}


@pytest.mark.parametrize("sdk", list(RELEASES))
def test_a_cancel_that_fails_is_tried_again_and_the_schedule_stops(sdk: str) -> None:
    """runs: 2 cancels the interval after its second run, and that cancel fails on a storage
    error: the schedule is not taken for cancelled, so the retried run cancels it and it
    stops (marked first, it would have run on for good)."""
    table = "cf_agents_schedules" if sdk == "0.21.0" else "cf_agents_jobs"
    fault = f"  - arm_storage_fault: {{agent: s, kind: error, match: '^DELETE FROM {table}'}}\n"
    plan = scheduler("{name: p, every: 10s, runs: 2, work: 1s}")
    result = run(on_release(workload_scenario(plan, fault + WAKE, ALL), sdk))
    assert result.passed, result.report()
    # The failed cancel fails the second run's callback; its in-process retry runs it again.
    first, second, retried = times(result, "workload:schedule_run")
    assert (first, second) == (10_000, 21_000) and 22_000 <= retried < 25_000
    assert events(result, "workload:schedule_cancelled") == [
        {"name": "p", "by": "runs", "found": True}
    ]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{name: a, after: 10s, every: 5s}", "every and after for schedule 'a'; give exactly one"),
        ("{name: a}", "no timing for schedule 'a'; give exactly one of every"),
        ("{name: a, after: 10s, runs: 2}", "only a recurring schedule (every or cron) stops"),
        ("{name: a, every: 1500ms}", "expected whole seconds (schedules are kept in seconds)"),
        ("{name: a, cron: 'every minute'}", "agents.s.schedules[1]: cron: 'every minute'"),
        ("{name: a, every: 0s}", "from 1s to 30d"),
    ],
)
def test_a_wrong_schedule_is_refused_at_its_line(entry: str, message: str) -> None:
    with pytest.raises(InvalidScenario, match=r"w\.yaml:\d+") as raised:
        parse_scenario(workload_scenario(scheduler(entry), WAKE), "w.yaml")
    assert message in str(raised.value)


def test_schedule_workload_is_a_subclass_with_the_plans_as_class_attributes() -> None:
    cls = schedule_workload([SchedulePlan("a", every_s=5, runs=2)], setup="call", warmup_ms=10)
    assert issubclass(cls, ScheduleWorkload) and cls.__name__ == "ScheduleWorkload"
    assert (cls.setup_on, cls.warmup_ms, cls.schedules[0].kind) == ("call", 10, "interval")
    with pytest.raises(ValueError, match="give exactly one of every, cron, after, at"):
        schedule_workload([SchedulePlan("a", every_s=5, after_s=3)])
    with pytest.raises(ValueError, match="runs is for every or cron schedules"):
        schedule_workload([SchedulePlan("a", after_s=3, runs=1)])
    with pytest.raises(ValueError, match=r"schedule names must be unique"):
        schedule_workload([SchedulePlan("a", after_s=3), SchedulePlan("a", after_s=4)])


def test_sub_agent_names_are_distinct_and_open_names_one_of_them() -> None:
    """A repeated sub-agent name is refused at its line; opening a name the workload does not
    list fails that call with the names it has."""
    repeated = scheduler("{name: a, after: 10s}").replace(
        "    workload: schedules\n", "    workload: schedules\n    sub_agents: [w1, w1]\n"
    )
    with pytest.raises(InvalidScenario, match=r"w\.yaml:\d+") as raised:
        parse_scenario(workload_scenario(repeated, WAKE), "w.yaml")
    assert "sub_agents" in str(raised.value) and "distinct" in str(raised.value)
    with pytest.raises(ValueError, match="sub-agent names must be distinct"):
        schedule_workload([SchedulePlan("a", after_s=3)], sub_agents=("w1", "w1"))
    cls = schedule_workload([SchedulePlan("a", after_s=3)], sub_agents=("w1",))
    with pytest.raises(ValueError, match=r"no sub-agent named 'w2'; this workload's: \['w1'\]"):
        cls._sub_class("w2")
    sub = cls._sub_class("w1")
    assert sub is cls._sub_class("w1") and sub.sub_agents == () and sub.setup_on == "call"


# -- fibers: cancels, deadlines, per-fiber recovery ---------------------------------------------
def worker(*fibers: str, settings: str = "    keep_alive_interval: 2s\n") -> str:
    body = "".join(f"      - {fiber}\n" for fiber in fibers)
    return f"  w:\n    workload: fibers\n{settings}    fibers:\n{body}"


START = "  - call: {agent: w, method: status}\n"


def test_cancel_stops_a_managed_fiber_at_once_and_the_ledger_keeps_it_aborted() -> None:
    """The step's sleep is raced against the abort signal: the fiber returns at the cancel."""
    steps = START + "  - at: 25s\n    call: {agent: w, method: cancel, args: [m]}\n"
    expect = (
        "  - query: {agent: w, sql: 'SELECT status FROM cf_agents_fibers', "
        "rows: [{status: aborted}]}\n"
        "  - query: {agent: w, sql: 'SELECT status FROM workload_fibers', "
        "rows: [{status: cancelled}]}\n" + ALL
    )
    text = workload_scenario(worker("{name: m, steps: 5, step: 10s, managed: true}"), steps, expect)
    result = run(text)
    assert result.passed, result.report()
    assert events(result, "workload:fiber_cancelled") == [{"name": "m", "step": 3}]
    assert times(result, "fiber:run:completed") == [25_000]
    assert [e["step"] for e in events(result, "workload:stashed")] == [1, 2]
    assert events(result, "workload:cancel")[0]["cancelled"] is True


def test_a_deadline_cancels_a_long_watch_through_a_one_shot_schedule() -> None:
    """deadline: 150s: a 600-step watch is cancelled by its own one-shot mid-step 3."""
    fiber = "{name: watch, steps: 600, step: 1m, managed: true, deadline: 150s}"
    result = run(workload_scenario(worker(fiber), START, ALL))
    assert result.passed, result.report()
    assert times(result, "workload:cancel", reason="deadline") == [150_000]
    assert events(result, "workload:fiber_cancelled") == [{"name": "watch", "step": 3}]
    assert events(result, "schedule:execute")[0]["callback"] == "workload_fiber_deadline"


def test_a_deadline_reaches_the_continuation_recovery_started() -> None:
    """A deploy kills the watch; its deadline's alarm restarts the agent, whose recovery resumes
    the watch in a continuation (a new execution), and the deadline then cancels that one."""
    fiber = "{name: m, steps: 20, step: 1m, managed: true, deadline: 150s}"
    steps = START + "  - at: 140s\n    deploy_all: {}\n"
    result = run(workload_scenario(worker(fiber, settings=""), steps, ALL))
    assert result.passed, result.report()
    (resumed,) = events(result, "workload:resumed")
    (cancel,) = events(result, "workload:cancel")
    assert cancel["cancelled"] is True and cancel["fiberId"] != resumed["fiberId"]
    assert times(result, "workload:fiber_cancelled") == [150_000]


def test_a_fibers_own_recovery_overrides_the_workloads() -> None:
    """One poison fiber (recovery: throw) and one resumed fiber in the same agent."""
    fibers = (
        "{name: ok, steps: 3, step: 10s}",
        "{name: poison, steps: 3, step: 10s, recovery: throw}",
    )
    settings = "    keep_alive_interval: 2s\n    options: {fiber_recovery_max_age_ms: 5m}\n"
    steps = START + "  - at: 15s\n    deploy_all: {}\n"
    result = run(workload_scenario(worker(*fibers, settings=settings), steps, ALL))
    assert result.passed, result.report()
    assert len(events(result, "workload:resumed")) == 1
    assert events(result, "fiber:recovery:failed", fiberName="poison")
    assert [e["reason"] for e in events(result, "fiber:recovery:skipped")] == ["max_age_exceeded"]


def test_cancel_and_deadline_are_for_managed_fibers_only() -> None:
    with pytest.raises(InvalidScenario, match="only a managed fiber can be cancelled"):
        parse_scenario(workload_scenario(worker("{name: a, steps: 1, deadline: 1m}"), START))
    steps = START + "  - call: {agent: w, method: cancel, args: [a]}\n"
    result = run(workload_scenario(worker("{name: a, steps: 1}"), steps))
    assert "no managed fiber named 'a'" in result.failures[0]


# -- tools: a flaky or slow built-in on_finish --------------------------------------------------
def parent(runs: str, settings: str = "") -> str:
    return f"  parent:\n    workload: tools\n{settings}    runs:\n{runs}"


DISPATCH = "  - call: {agent: parent, method: dispatch}\n  - run_until: 30m\n"


def test_a_failing_on_finish_is_delivered_again_after_its_claims_lease() -> None:
    """on_finish_fails: 2: the first two calls raise (workload:on_finish_failed) and the ledger
    delivers the finish again after each claim's 60 s lease; the third call records it."""
    runs = (
        "      - run_id: a\n        detached: {on_finish_fails: 2}\n"
        "        steps: [{sleep: 10s}, {finish: completed}]\n"
    )
    expect = (
        "  - hook: workload_on_finish\n    run: a\n    status: completed\n    exactly: 1\n" + ALL
    )
    result = run(workload_scenario(parent(runs), DISPATCH, expect))
    assert result.passed, result.report()
    assert [e["call"] for e in events(result, "workload:on_finish_failed")] == [1, 2]
    failed, done = times(result, "workload:on_finish_failed"), times(result, "workload:on_finish")
    assert failed[1] - failed[0] >= 60_000 and done[0] - failed[1] >= 60_000
    # Re-claimed after the lease: by this incarnation, or by a later one after an idle eviction.
    reclaimed = ("ledger.failed_handler_reclaimed", "ledger.dead_claim_reclaimed")
    assert any(result.probes.get(name) for name in reclaimed), result.probes


def test_a_slow_on_finish_works_before_it_records_and_a_deploy_cuts_it_short() -> None:
    """on_finish_work: 5s: the call records 5 s after it began; a deploy in between leaves the
    claim to a later incarnation, which delivers it again (at least once across a crash)."""
    runs = (
        "      - run_id: a\n        detached: {on_finish_work: 5s}\n"
        "        steps: [{sleep: 10s}, {finish: completed}]\n"
    )
    expect = (
        "  - hook: workload_on_finish\n    run: a\n    status: completed\n    exactly: 1\n" + ALL
    )
    calm = run(workload_scenario(parent(runs), DISPATCH, expect))
    assert calm.passed, calm.report()
    (called,) = times(calm, "hook:on_finish")
    assert times(calm, "workload:on_finish") == [called + 5_000]
    steps = DISPATCH.replace(
        "  - run_until", f"  - at: {called + 2_000}\n    deploy_all: {{}}\n  - run_until"
    )
    cut = run(workload_scenario(parent(runs), steps, expect))
    assert cut.passed, cut.report()
    assert len(times(cut, "hook:on_finish")) == 2 and len(times(cut, "workload:on_finish")) == 1
    assert cut.probes.get("ledger.dead_claim_reclaimed")


def test_a_scripted_on_finish_needs_the_built_in_callback() -> None:
    runs = "      - {run_id: a, detached: {notify: true, on_finish_fails: 1}}\n"
    with pytest.raises(InvalidScenario, match="it scripts the built-in on_finish"):
        parse_scenario(workload_scenario(parent(runs, "    host: think\n"), DISPATCH), "w.yaml")


# -- chat children: the work tool reports progress and milestones -------------------------------
WORK_MODEL = """\
model:
  rules:
    - {after_tool: work, reply: {text: done}}
    - offers: work
      reply:
        tool_calls:
          - name: work
            input:
              steps:
                - progress: {fraction: 0.5, message: half}
                - sleep: 10000
                - milestone: {name: halfway, data: {rows: 3}}
                - progress: {fraction: 0.9}
                - progress: {fraction: 1.0}
"""


@pytest.mark.parametrize("child", ["think", "chat"])
def test_a_chat_childs_work_tool_reports_progress_and_milestones(child: str) -> None:
    """The model calls `work`; each report goes through report_progress for the run the turn
    serves, and the milestone is stored in the child's stream (the client reduces it)."""
    runs = f"      - {{run_id: a, child: {child}, input: go, detached: true}}\n"
    steps = "  - connect: {client: browser}\n" + DISPATCH
    expect = (
        "  - client: browser\n    run: a\n    reduced: {status: completed, milestones: [halfway],"
        " progress: {fraction: 1.0}}\n" + ALL
    )
    extra = WORK_MODEL + "clients:\n  browser: {agent: parent}\n"
    result = run(workload_scenario(parent(runs), steps, expect, extra=extra))
    assert result.passed, result.report()
    reported = events(result, "workload:reported")
    assert [(e["kind"], e["outcome"]) for e in reported] == [
        ("progress", "emitted"),
        ("milestone", "emitted"),
        ("progress", "coalesced"),
        ("progress", "emitted"),
    ]
    assert {e["runId"] for e in reported} == {"a"}
    assert result.probes.get("chat.progress_trailing_flush") is None


def test_a_row_a_failed_re_create_left_unrecorded_still_stops_at_its_runs() -> None:
    """Found by `agentsim generate --seed 11`: two re-creates of one cron at once under hostile
    storage; one created its row, then failed before writing it down. Once the runs were done
    the workload cancelled only the row it had recorded, and the other ran every minute for
    good (liveness). The row whose callback runs is cancelled too."""
    path = Path(__file__).parent / "data" / "orphan-schedule-row-stops.yaml"
    result = run_scenario(load_scenario(path))
    assert result.passed, result.failures


def test_a_twin_is_a_sub_agent_of_the_same_name_and_another_class() -> None:
    cls = schedule_workload([SchedulePlan("a", after_s=3)], sub_agents=("w1", "twin:w1"))
    mine, twin = cls._sub_class("w1"), cls._sub_class("twin:w1")
    assert (mine.__name__, twin.__name__) == ("ScheduleWorkload", "ScheduleTwin")
    assert mine is not twin and issubclass(twin, ScheduleWorkload)
    with pytest.raises(ValueError, match="sub-agent names must be distinct and not empty"):
        schedule_workload([SchedulePlan("a", after_s=3)], sub_agents=("other:w1",))
    other = scheduler("{name: a, after: 10s}").replace(
        "    workload: schedules\n", '    workload: schedules\n    sub_agents: ["other:w1"]\n'
    )
    with pytest.raises(InvalidScenario, match=r"w\.yaml:\d+") as raised:  # not a traceback
        parse_scenario(workload_scenario(other, WAKE), "w.yaml")
    assert "sub_agents: ['other:w1']" in str(raised.value) and "twin:" in str(raised.value)
