"""The built-in workloads described in YAML: one end-to-end scenario per kind through the runner,
then what each workload does with each of its settings, read from the trace and the storage."""

from __future__ import annotations

from pathlib import Path

import pytest

from scenarios import load_scenario, parse_scenario, run_scenario
from scenarios.run.runner import ScenarioResult
from scenarios.workloads import (
    DetachedPlan,
    FiberPlan,
    FiberWorkload,
    RunPlan,
    ScriptedToolChild,
    ToolsWorkload,
    fiber_workload,
    tools_workload,
)
from sim import Simulation
from tests.scenarios.helpers import WORKLOAD_FIXTURES, workload_scenario


def run(text: str, seed: int | None = None) -> ScenarioResult:
    return run_scenario(parse_scenario(text, "w.yaml"), seed)


def events(result: ScenarioResult, name: str) -> list[dict]:
    return [dict(record.fields) for record in result.trace.records if record.event == name]


# -- one scenario per kind, end to end ----------------------------------------------------------
@pytest.mark.parametrize("path", WORKLOAD_FIXTURES, ids=lambda p: p.stem)
def test_each_workload_scenario_passes_with_its_own_seed(path: Path) -> None:
    """The fibers, tools and chat stories pass as written (through `scenarios.run.runner`)."""
    result = run_scenario(load_scenario(path))
    assert result.passed, result.report()


@pytest.mark.parametrize("seed", [101, 102])
@pytest.mark.parametrize("path", WORKLOAD_FIXTURES, ids=lambda p: p.stem)
def test_each_workload_scenario_passes_with_other_seeds(path: Path, seed: int) -> None:
    """They check what must hold, not what one seed's timings happened to give."""
    result = run_scenario(load_scenario(path), seed)
    assert result.passed, result.report()


@pytest.mark.parametrize("path", WORKLOAD_FIXTURES, ids=lambda p: p.stem)
def test_each_workload_scenario_is_a_function_of_its_seed(path: Path) -> None:
    """Two runs give the same trace digest: workloads draw nothing outside the seed."""
    scenario = load_scenario(path)
    assert run_scenario(scenario).digest == run_scenario(scenario).digest


@pytest.mark.parametrize(
    ("path", "old", "new", "sentence"),
    [
        (
            WORKLOAD_FIXTURES[0],
            "{fiber: ingest, n: 5, distinct_steps: 5}",
            "{fiber: ingest, n: 6, distinct_steps: 5}",
            "expect 6 (query): the query",
        ),
        (
            WORKLOAD_FIXTURES[1],
            "    run: import\n    exactly: 1",
            "    run: import\n    exactly: 2",
            "expect 2 (hook): expected exactly 2 workload_on_finish calls for run import of "
            "parent (ToolsWorkload/parent) (workload:on_finish records); found 1: "
            "workload:on_finish ToolsWorkload/parent#2 at 00:16:50.000",
        ),
        (
            WORKLOAD_FIXTURES[2],
            'model: {reply: "on it"',
            'model: {reply: "on it!"',
            "expect 5 (event): expected exactly 1 'workload:answered' record of helper",
        ),
    ],
    ids=["fibers", "tools", "chat"],
)
def test_a_wrong_expectation_about_a_workload_fails(
    path: Path, old: str, new: str, sentence: str
) -> None:
    """The same stories with one claim changed fail, naming the expectation."""
    text = path.read_text()
    assert old in text
    result = run(text.replace(old, new, 1))
    assert not result.passed
    assert any(sentence in failure for failure in result.failures), result.report()


# -- fibers -------------------------------------------------------------------------------------
FIBER_AGENT = """\
  worker:
    workload: fibers
    keep_alive_interval: 2s
{settings}    fibers:
      - {{name: f, steps: 3, step: 10s{fiber}}}
"""


def fibers(settings: str = "", fiber: str = "") -> str:
    return FIBER_AGENT.format(settings=settings, fiber=fiber)


WAKE = "  - call: {agent: worker, method: status}\n"


def test_a_fiber_stashes_after_every_step_and_finishes() -> None:
    """Each step sleeps, is recorded, stashes {step} and emits workload:stashed; then done."""
    result = run(workload_scenario(fibers(), WAKE))
    assert [e["step"] for e in events(result, "workload:stashed")] == [1, 2, 3]
    assert events(result, "workload:fiber_done") == [{"name": "f"}]
    stashes = [r.t_ms for r in result.trace.records if r.event == "workload:stashed"]
    assert stashes == [10_000, 20_000, 30_000]


def test_fail_at_makes_that_step_raise() -> None:
    """The step fails instead of completing: no stash for it, the fiber ends failed."""
    text = workload_scenario(
        fibers(fiber=", fail_at: 2"),
        WAKE,
        "  - query: {agent: worker, sql: 'SELECT status FROM workload_fibers', "
        "rows: [{status: failed}]}\n",
    )
    result = run(text)
    assert result.passed, result.report()
    assert [e["step"] for e in events(result, "workload:stashed")] == [1]
    assert events(result, "workload:fiber_failed") == [{"name": "f", "step": 2}]
    assert len(events(result, "fiber:run:failed")) == 1 and not events(result, "task:error")


def test_start_call_runs_nothing_until_start_is_called() -> None:
    """`start: call` waits for the call; a second start starts nothing."""
    steps = WAKE + (
        "  - at: 1m\n    call: {agent: worker, method: start}\n"
        "  - call: {agent: worker, method: start, args: [f]}\n"
    )
    result = run(workload_scenario(fibers("    start: call\n"), steps))
    started = [r.t_ms for r in result.trace.records if r.event == "fiber:run:started"]
    assert started == [60_000]
    starts = [r for r in result.trace.records if r.event == "rpc" and r.get("method") == "start"]
    assert len(starts) == 2


DEPLOY = WAKE + "  - at: 15s\n    deploy_all: {}\n"


def test_recovery_resume_continues_from_the_stash() -> None:
    """The hook emits workload:resumed with the stashed step and a new fiber does the rest."""
    result = run(workload_scenario(fibers(), DEPLOY, "  - invariants: [no_lost_stash]\n"))
    assert result.passed, result.report()
    (resumed,) = events(result, "workload:resumed")
    assert resumed["step"] == 1
    stashed = events(result, "workload:stashed")
    assert [e["step"] for e in stashed] == [1, 2, 3]
    assert stashed[0]["fiberId"] == resumed["fiberId"] != stashed[1]["fiberId"]


def test_without_stash_a_resumed_fiber_starts_over() -> None:
    """No snapshot: the hook resumes from None and step 1 runs twice."""
    text = workload_scenario(
        fibers(fiber=", stash: false"),
        DEPLOY,
        "  - query: {agent: worker, sql: 'SELECT step FROM workload_steps ORDER BY at_ms', "
        "rows: [{step: 1}, {step: 1}, {step: 2}, {step: 3}]}\n",
    )
    result = run(text)
    assert result.passed, result.report()
    assert events(result, "workload:stashed") == []
    assert [e["step"] for e in events(result, "workload:resumed")] == [None]


def test_recovery_drop_lets_the_interrupted_fiber_go() -> None:
    """`drop`: workload:dropped, status dropped, no continuation, nothing left to recover."""
    text = workload_scenario(
        fibers("    recovery: drop\n"),
        DEPLOY,
        "  - query: {agent: worker, sql: 'SELECT status FROM workload_fibers', "
        "rows: [{status: dropped}]}\n  - invariants: [fibers_settled]\n",
    )
    result = run(text)
    assert result.passed, result.report()
    assert [e["step"] for e in events(result, "workload:dropped")] == [1]
    assert events(result, "workload:fiber_done") == []


def test_recovery_throw_leaves_a_poison_row_until_it_ages_out() -> None:
    """`throw`: each recovery attempt fails; past max age the row is skipped for good."""
    settings = "    recovery: throw\n    options: {fiber_recovery_max_age_ms: 10m}\n"
    text = workload_scenario(fibers(settings), DEPLOY, "  - invariants: [fibers_settled]\n")
    result = run(text)
    assert result.passed, result.report()
    failed = events(result, "fiber:recovery:failed")
    assert len(failed) >= 2
    assert "the workload's recovery is throw" in failed[0]["error"]
    skipped = events(result, "fiber:recovery:skipped")
    assert [e["reason"] for e in skipped] == ["max_age_exceeded"]


def test_a_managed_fiber_resumes_in_a_continuation_without_its_key() -> None:
    """The ledger row under the key stays interrupted; the continuation completes keyless."""
    text = workload_scenario(
        fibers(fiber=", managed: true, idempotency_key: k1"),
        DEPLOY,
        "  - query: {agent: worker, sql: 'SELECT idempotency_key AS k, status FROM "
        "cf_agents_fibers ORDER BY created_at', rows: [{k: k1, status: interrupted}, "
        "{k: null, status: completed}]}\n",
    )
    result = run(text)
    assert result.passed, result.report()


CRASH_RATE = {"0.21.0": "0.05", "0.32.0": "0.005"}
"""Per statement, the crash rate that lands crashes inside the fiber on each release. 0.21.0: a
heartbeat runs no statement once its incarnation knows its own state
(agents_core/durable_memo.py), so crashes drawn per statement need a higher rate to land inside
the fiber. 0.32.0: a heartbeat runs 19 statements (its job queue), so that rate would kill
every incarnation before its first stash."""


@pytest.mark.parametrize("sdk", list(CRASH_RATE))
@pytest.mark.parametrize("seed", range(4))
def test_no_stash_is_lost_under_hostile_faults(seed: int, sdk: str) -> None:
    """Deploys, storage errors and crashes at random: the workload never resumes behind a
    stash that returned (the invariant it exists to exercise). Requests wake it (a startup
    trigger, so on_start starts the fiber); one a crash kills is no finding here."""
    wake = "  - after: 10m\n    request: {agent: worker}\n"
    faults = f"faults: {{crash_rate: {CRASH_RATE[sdk]}, deploys_per_day: [40, 60]}}"
    text = workload_scenario(
        fibers(fiber=", steps: 40").replace("steps: 3, ", ""),
        wake * 6,
        "  - invariants: [no_lost_stash, fibers_settled]\n",
    ).replace("seed: 1\n", f'seed: 1\nsdk: "{sdk}"\n{faults}\n')
    result = run(text, seed)
    assert [f for f in result.failures if "(invariants)" in f] == [], result.report()
    assert events(result, "workload:stashed") and events(result, "workload:resumed")


HOLD = """
name: hold
description: keepAlive by hand, nested, failing, disposers twice
seed: 1
agents:
  worker:
    workload: fibers
    keep_alive_interval: 2s
    fibers: [{name: f1, steps: 1, step: 1s}]
steps:
  - call: {agent: worker, method: status}
  - call: {agent: worker, method: hold, args: [5000, 3, true, true], wait: false}
  - at: 1s
    call: {agent: worker, method: hold, args: [4000], wait: false}
  - run_for: 20s
expect:
  - invariants: all
"""


def test_hold_takes_nested_leases_by_hand_and_gives_each_back_once() -> None:
    """Three nested leases and the work's own, given back at 5 s although the work raised and
    each disposer was called twice; a second hold's two leases from 1 s to 5 s. The heartbeat
    fires every 2 s while any is held, and not after."""
    result = run(HOLD)
    held = [(r.t_ms, dict(r.fields)) for r in result.trace.records if r.event == "workload:held"]
    assert held == [
        (5_000, {"depth": 3, "ms": 5000, "failed": True}),
        (5_000, {"depth": 1, "ms": 4000, "failed": False}),
    ]
    leases = [r for r in result.trace.records if r.event.startswith("keep_alive:")]
    by_hand = [r for r in leases if r.fields.get("holder") == "keep_alive"]
    assert [r.event for r in by_hand].count("keep_alive:acquire") == 6
    released = [r.fields["lease"] for r in by_hand if r.event == "keep_alive:release"]
    assert sorted(released) == sorted(set(released)) and len(released) == 6
    fires = [r.t_ms for r in result.trace.records if r.event == "alarm:fired"]
    assert fires[:2] == [2_000, 4_000] and all(t <= 6_000 for t in fires)
    assert result.passed


FIBER_SUBS = """
name: fiber-subs
description: sub-agents running fibers, the root evicted mid-way, one closed after
seed: 1
agents:
  worker:
    workload: fibers
    start: call
    keep_alive_interval: 5s
    fibers: [{name: f1, steps: 3, step: 10s}, {name: f2, steps: 2, step: 7s, managed: true}]
    sub_agents: [w1, w10, twin:w1, w1/x]
steps:
  - call: {agent: worker, method: status}
  - call: {agent: worker, method: open, args: [w1]}
  - call: {agent: worker, method: open, args: [w10]}
  - call: {agent: worker, method: open, args: [twin:w1]}
  - call: {agent: worker, method: open, args: [w1/x]}
  - at: 12s
    evict: {agent: worker}
  - at: 15s
    call: {agent: worker, method: close, args: [w1]}
  - run_for: 2m
expect:
  - invariants: all
"""


def test_a_fibers_workload_s_sub_agents_run_its_fibers_and_are_recovered_through_its_alarm() -> (
    None
):
    """Each opened sub-agent (two of one class whose names share a prefix, a twin of another
    class, one a level down) starts the workload's fibers; the root's eviction takes them all,
    and the root's alarm recovers each one's fibers; closing `w1` deletes it with `w1/x`, whose
    fibers never finish, while `w10` and the twin finish theirs."""
    result = run(FIBER_SUBS)
    root = "FiberWorkload/worker"
    subs = {
        "w1": f"{root}/FiberWorkload/w1",
        "w10": f"{root}/FiberWorkload/w10",
        "twin": f"{root}/FiberTwin/w1",
        "x": f"{root}/FiberWorkload/w1/FiberWorkload/x",
    }
    records = result.trace.records
    opened = [r.fields["name"] for r in records if r.event == "workload:sub_agent_opened"]
    assert opened == ["w1", "w10", "twin:w1", "x"]
    for path in subs.values():
        resumed = [r for r in records if r.agent == path and r.event == "workload:resumed"]
        assert [r.t_ms for r in resumed] == [15_000, 15_000], path
    done = {(r.agent, r.fields["name"]) for r in records if r.event == "workload:fiber_done"}
    assert done == {(subs[s], f) for s in ("w10", "twin") for f in ("f1", "f2")}
    deleted = {
        r.agent
        for r in records
        if r.event == "incarnation:end" and r.fields.get("reason") == "deleted"
    }
    assert deleted == {subs["w1"], subs["x"]}
    assert result.passed


def test_fiber_workload_is_a_subclass_with_the_plan_as_class_attributes() -> None:
    """Tests can build the class directly; the trace path keeps the base's name."""
    cls = fiber_workload([FiberPlan("a", 2, 1_000)], start="call", recovery="drop")
    assert issubclass(cls, FiberWorkload) and cls.__name__ == "FiberWorkload"
    assert (cls.fibers, cls.start_on, cls.recovery) == ((FiberPlan("a", 2, 1_000),), "call", "drop")
    assert FiberWorkload.fibers == ()
    with pytest.raises(ValueError, match=r"fiber names must be unique, got \['a', 'a'\]"):
        fiber_workload([FiberPlan("a", 1), FiberPlan("a", 2)])
    with pytest.raises(ValueError, match=r"recovery must be one of \['resume', 'drop', 'throw'\]"):
        fiber_workload([FiberPlan("a", 1)], recovery="retry")


# -- tools --------------------------------------------------------------------------------------
def tools(runs: str, settings: str = "") -> str:
    return f"  parent:\n    workload: tools\n{settings}    runs:\n{runs}"


DISPATCH = "  - call: {agent: parent, method: dispatch}\n"


def test_an_awaited_run_returns_its_result_from_dispatch() -> None:
    """dispatch waits for an awaited run; the global hook runs once, no per-run callback."""
    runs = "      - {run_id: a, steps: [{sleep: 5s}, {finish: {summary: ok}}]}\n"
    result = run(workload_scenario(tools(runs), DISPATCH))
    (rpc_end,) = [r.t_ms for r in result.trace.records if r.event == "hook:on_agent_tool_finish"]
    assert rpc_end == 5_000
    assert events(result, "hook:on_finish") == [] and events(result, "workload:on_finish") == []


def test_start_on_start_dispatches_every_run_once_across_restarts() -> None:
    """on_start dispatches what was never dispatched; the next incarnation does not again."""
    runs = "      - {run_id: a, detached: true, steps: [{sleep: 10m}, {finish: completed}]}\n"
    steps = "  - request: {agent: parent}\n  - at: 1m\n    deploy_all: {}\n"
    expect = (
        "  - query: {agent: parent, sql: 'SELECT run_id FROM cf_agent_tool_runs', "
        "rows: [{run_id: a}]}\n  - invariants: all\n"
        "  - hook: workload_on_finish\n    run: a\n    status: completed\n    exactly: 1\n"
    )
    result = run(workload_scenario(tools(runs, "    start: on_start\n"), steps, expect))
    assert result.passed, result.report()


def test_cancel_delivers_aborted_to_the_built_in_on_finish() -> None:
    """A hanging detached run cancelled by a call finishes `aborted`, delivered once."""
    runs = "      - {run_id: a, detached: {on_finish: true}, steps: [{hang: true}]}\n"
    steps = DISPATCH + "  - after: 1m\n    call: {agent: parent, method: cancel, args: [a]}\n"
    expect = "  - hook: workload_on_finish\n    run: a\n    status: aborted\n    exactly: 1\n"
    result = run(workload_scenario(tools(runs), steps, expect))
    assert result.passed, result.report()


CANCEL_SEAL_FAILS = (
    "  - arm_storage_fault: {agent: parent/a, kind: error, match: '^UPDATE child_runs\\b'}\n"
)


@pytest.mark.parametrize("child", ["ScriptedToolChild", "StoryChild"])
def test_a_cancel_whose_seal_fails_still_stops_the_script(child: str) -> None:
    """As the SDK's chat hosts abort the run before sealing its row: a cancel whose `aborted`
    write fails still stops the hanging script, which then settles the run `aborted` itself
    and gives its keepAlive lease back (the run settles; no restart resumes it)."""
    if child == "StoryChild":
        agents = '  parent: {class: "scenarios.library_agents:StoryParent"}\n'
        steps = "  - call: {agent: parent, method: dispatch, args: [a, [[hang]]]}\n"
    else:
        agents = tools("      - {run_id: a, detached: {on_finish: true}, steps: [{hang: true}]}\n")
        steps = DISPATCH
    steps += CANCEL_SEAL_FAILS
    steps += "  - after: 1m\n    call: {agent: parent, method: cancel, args: [a]}\n"
    steps += "  - at: 2m\n    deploy_all: {}\n  - at: 3m\n    request: {agent: parent}\n"
    expect = (
        "  - query:\n      agent: parent/a\n"
        "      sql: SELECT status, completed_at FROM child_runs\n"
        "      rows: [{status: aborted, completed_at: 60000}]\n"
    )
    result = run(workload_scenario(agents, steps, expect))
    assert result.passed, result.report()
    (cancel_failed,) = [e for e in events(result, "rpc:error") if "child_runs" in e["error"]]
    assert cancel_failed["method"] == "cancel_agent_tool_run"


def test_a_run_past_its_budget_is_given_up_as_interrupted() -> None:
    """max_budget: the give-up is delivered `interrupted`, and budget_interrupts holds."""
    runs = "      - {run_id: a, detached: {max_budget: 10m}, steps: [{hang: true}]}\n"
    expect = (
        "  - hook: workload_on_finish\n    run: a\n    status: interrupted\n    exactly: 1\n"
        "  - invariants: [budget_interrupts, exactly_once_finish]\n"
    )
    result = run(workload_scenario(tools(runs), DISPATCH, expect))
    assert result.passed, result.report()


def test_a_child_that_does_not_resume_goes_silent_after_a_restart() -> None:
    """resume: false: the script stops with the isolate, and no-progress (counted from the
    last progress it reported) gives the run up."""
    runs = (
        "      - run_id: a\n        resume: false\n"
        "        detached: {no_progress_budget: 5m}\n"
        "        steps: [{progress: {fraction: 0.1}}, {sleep: 1m}, {finish: completed}]\n"
    )
    steps = DISPATCH + "  - at: 30s\n    deploy_all: {}\n"
    expect = (
        "  - hook: workload_on_finish\n    run: a\n    status: interrupted\n    exactly: 1\n"
        "  - hook: workload_on_finish\n    run: a\n    status: completed\n    never: true\n"
    )
    result = run(workload_scenario(tools(runs), steps, expect))
    assert result.passed, result.report()
    resumed = workload_scenario(tools(runs.replace("resume: false", "resume: true")), steps, expect)
    assert "expect 1 (hook)" in run(resumed).failures[0]


def test_a_think_child_answers_its_input_from_the_scenario_model() -> None:
    """child: think takes `input` as its user message; the summary is the model's answer."""
    runs = "      - {run_id: a, child: think, input: research x, detached: true}\n"
    model = "model:\n  rules:\n    - {asked: research, reply: {text: Found three papers.}}\n"
    expect = "  - hook: on_finish\n    run: a\n    status: completed\n    exactly: 1\n"
    result = run(workload_scenario(tools(runs), DISPATCH, expect, extra=model))
    assert result.passed, result.report()
    rows = [r for r in result.trace.records if r.event == "rpc" and r.agent.endswith("/a")]
    assert rows and rows[0].agent == "ToolsWorkload/parent/ThinkToolChild/a"


def test_notify_on_a_chat_host_parent_makes_the_chat_hook_the_callback() -> None:
    """host: think with notify: the stored on_finish is the chat host's notify hook."""
    runs = "      - {run_id: a, detached: {notify: true}, steps: [{finish: completed}]}\n"
    result = run(workload_scenario(tools(runs, "    host: think\n"), DISPATCH))
    (call,) = events(result, "hook:on_finish")
    assert call["callback"] == "_cfDetachedNotifyFinish"
    assert events(result, "workload:on_finish") == []


def test_evicting_a_child_by_run_id_kills_only_the_child() -> None:
    """`evict: {agent: parent, run_id: a}` ends the child's incarnation; the parent lives on
    and the child resumes its script when the parent reaches it again."""
    runs = "      - {run_id: a, detached: true, steps: [{sleep: 1m}, {finish: completed}]}\n"
    steps = DISPATCH + "  - after: 10s\n    evict: {agent: parent, run_id: a}\n"
    expect = (
        "  - event: incarnation:end\n    agent: parent\n    count: {never: true}\n"
        "  - hook: workload_on_finish\n    run: a\n    status: completed\n    exactly: 1\n"
    )
    result = run(workload_scenario(tools(runs), steps, expect), 1)
    assert result.passed, result.report()
    ends = [
        (r.agent, r.t_ms, r.get("reason"))
        for r in result.trace.records
        if r.event == "incarnation:end" and r.agent.endswith("/a")
    ]
    assert ends[0] == ("ToolsWorkload/parent/ScriptedToolChild/a", 10_000, "explicit")


def test_evicting_a_child_that_does_not_exist_yet_is_a_failure_sentence() -> None:
    """The child is looked up when the step runs; before dispatch there is none."""
    runs = "      - {run_id: a, detached: true, steps: [{finish: completed}]}\n"
    steps = "  - evict: {agent: parent/a}\n" + DISPATCH
    result = run(workload_scenario(tools(runs), steps))
    assert result.failures[0] == (
        "w.yaml:10: step 1 (evict): cannot evict parent/a: ToolsWorkload/parent has no "
        "sub-agent named 'a' at 00:00:00.000 (its sub-agents: [])"
    )


def test_evicting_a_child_that_does_not_exist_with_if_present_does_nothing() -> None:
    """`if_present: true` (what a hunt writes for a drawn eviction) leaves a missing sub-agent
    alone; the same step evicts the child once it exists."""
    runs = "      - {run_id: a, detached: true, steps: [{sleep: 1m}, {finish: completed}]}\n"
    evict = "evict: {agent: parent/a, if_present: true}\n"
    steps = f"  - {evict}{DISPATCH}  - after: 10s\n    {evict}"
    result = run(workload_scenario(tools(runs), steps))
    assert result.failures == ()
    ends = [
        (r.agent, r.t_ms)
        for r in result.trace.records
        if r.event == "incarnation:end" and r.get("reason") == "explicit"
    ]
    assert ends == [("ToolsWorkload/parent/ScriptedToolChild/a", 10_000)]


def test_a_run_without_steps_completes_at_once() -> None:
    """A scripted child with no script finishes `completed` with the summary 'done'."""
    runs = "      - {run_id: a, detached: true}\n"
    expect = "  - hook: workload_on_finish\n    run: a\n    status: completed\n    exactly: 1\n"
    assert run(workload_scenario(tools(runs), DISPATCH, expect)).passed


def test_a_sub_agent_of_a_class_agent_is_evicted_by_path() -> None:
    """`agent: parent/d1` works for any parent: the child is found by name when the step runs."""
    agents = '  parent: {class: "tests.checkers.agents:ToolParent"}\n'
    steps = (
        "  - call: {agent: parent, method: dispatch, "
        "args: [d1, [[sleep, 60000], [finish, completed, ok]]]}\n"
        "  - after: 10s\n    evict: {agent: parent/d1, reason: explicit}\n"
    )
    result = run(workload_scenario(agents, steps))
    ends = [
        (r.agent, r.t_ms)
        for r in result.trace.records
        if r.event == "incarnation:end" and r.get("reason") == "explicit"
    ]
    assert ends == [("ToolParent/parent/ResumingChild/d1", 10_000)]


def test_a_sub_agent_of_another_class_is_not_evicted() -> None:
    """`child:` names the class the sub-agent must have; a mismatch is a failure sentence."""
    agents = '  parent: {class: "tests.checkers.agents:ToolParent"}\n'
    steps = (
        "  - call: {agent: parent, method: dispatch, args: [d1, [[finish, completed, ok]]]}\n"
        "  - evict: {agent: parent, child: ScriptedToolChild, run_id: d1}\n"
        "  - evict: {agent: parent, child: ResumingChild, run_id: d1}\n"
    )
    result = run(workload_scenario(agents, steps))
    assert result.failures == (
        "w.yaml:8: step 2 (evict): cannot evict parent/d1: ToolParent/parent has no sub-agent "
        "ScriptedToolChild 'd1' at 00:00:00.000 (its sub-agents: ['ResumingChild/d1'])",
    )


def test_tools_workload_classes_can_be_built_directly() -> None:
    """`tools_workload` gives a subclass of the host's parent class with the runs attached."""
    plan = RunPlan("r", detached=DetachedPlan(max_budget_ms=60_000), steps=(("hang",),))
    cls = tools_workload([plan], start="on_start")
    assert issubclass(cls, ToolsWorkload) and cls.runs == (plan,)
    assert plan.detached.option() == {"on_finish": "workload_on_finish", "max_budget_ms": 60_000}
    assert plan.child_input() == {"steps": [["hang"]], "resume": True}
    with Simulation(seed=1) as sim:
        ref = sim.agent(cls, "p")
        sim.run_for(1_000)
        child = sim.facet(ref, ScriptedToolChild, "r")
        assert sim.query(child, "SELECT status FROM child_runs") == [{"status": "running"}]


# -- chat ---------------------------------------------------------------------------------------
CHAT = "  c: {workload: chat, host: chat}\n"


def say(*texts: str) -> str:
    return "".join(f"  - call: {{agent: c, method: say, args: [{t!r}]}}\n" for t in texts)


def answers(result: ScenarioResult) -> list[tuple[str, str]]:
    return [(e["status"], e["text"]) for e in events(result, "workload:answered")]


def test_a_reply_list_answers_in_turn_and_then_repeats_the_last() -> None:
    """`reply: [a, b]`: the first match gets a, every later one b."""
    model = "model:\n  default: [{text: first}, {text: again}]\n"
    result = run(workload_scenario(CHAT, say("x", "y", "z"), extra=model))
    assert answers(result) == [
        ("completed", "first"),
        ("completed", "again"),
        ("completed", "again"),
    ]


def test_stall_model_without_times_stalls_every_later_call() -> None:
    """Re-scripted from now on: every later turn waits, then fails (no `then`)."""
    steps = say("a") + "  - stall_model: {for: 1m}\n" + say("b", "c")
    result = run(workload_scenario(CHAT, steps))
    assert answers(result) == [("completed", "ok"), ("error", ""), ("error", "")]
    ends = [r.t_ms for r in result.trace.records if r.event == "workload:answered"]
    assert ends[2] - ends[1] >= 60_000


def test_stall_model_can_target_an_agent_s_own_model() -> None:
    """agent: names a chat workload with a model of its own; the scenario's model is untouched."""
    agents = CHAT + "  d:\n    workload: chat\n    model: {reply: mine}\n"
    steps = (
        "  - fail_model: {agent: d, message: down, times: 1}\n"
        + say("a")
        + (
            "  - call: {agent: d, method: say, args: [b]}\n"
            "  - call: {agent: d, method: say, args: [c]}\n"
        )
    )
    result = run(workload_scenario(agents, steps))
    assert answers(result) == [("completed", "ok"), ("error", ""), ("completed", "mine")]


def test_model_replies_are_built_as_sim_model_replies() -> None:
    """Each reply kind becomes the `sim.model` reply of the same name, with its settings."""
    from sim.model import call, fail, stall, text, tool_calls

    model = (
        "model:\n  rules:\n"
        "    - {asked: a, reply: {text: hi, chunks: 3, delay: 50ms}}\n"
        "    - {offers: t, reply: {tool_calls: [{name: t, input: {q: 1}, id: c1}], text: go}}\n"
        "    - {after_tool: true, reply: {stall: 30s, then: {text: late}}}\n"
        "    - {continuing: true, reply: {fail: boom, after_chunks: 2, in_band: true}}\n"
        "  default: {text: ''}\n"
    )
    script = parse_scenario(workload_scenario(CHAT, say("x"), extra=model)).models["model"]
    assert [rule.replies for rule in script.rules] == [
        (text("hi", 3, delay_ms=50),),
        (tool_calls(call("t", {"q": 1}, id="c1"), text="go"),),
        (stall(30_000, text("late")),),
        (fail("boom", 2, in_band=True),),
    ]
    assert (script.rules[2].after_tool, script.rules[3].continuing) == (True, True)
    assert script.default == (text(""),)
