"""agentsim generate: drawn scenarios load and run, the same seed draws the same files, a planted
failure is found and shrunk to a file that fails alone, and the coverage report names what no
run reached."""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenarios.cli.command import main
from scenarios.generate import hunt as hunt_module
from scenarios.generate.coverage import CATALOGUE, Coverage
from scenarios.generate.cron import crons, due_within, forms_of
from scenarios.generate.faults import FAULT_NOTE
from scenarios.generate.hunt import generate, write_generated
from scenarios.generate.parts import TimedStep
from scenarios.generate.schedules import _cron_gap, _done_by
from scenarios.generate.strategy import AREAS, scenarios
from scenarios.language.loader import load_scenario, parse_scenario
from scenarios.run.runner import run_scenario
from sim.checkers import CHECKERS, CheckContext, Violation, register
from sim.checkers.models import next_cron_due_ms
from sim.units import parse_duration_ms

ROOT = Path(__file__).resolve().parents[2]
DRAWS = settings(
    max_examples=25,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


@given(generated=scenarios(st, tuple(AREAS)))
@DRAWS
def test_every_drawn_scenario_loads_and_its_pairs_are_in_the_catalogue(generated) -> None:
    """The drawn text is a scenario the loader accepts, with the drawn agents, every fault step
    where its number says, and each pair it uses one the coverage catalogue lists."""
    scenario = parse_scenario(generated.text(), "generated.yaml")
    assert [spec.alias for spec in scenario.agents] == list(generated.agents)
    for number in generated.fault_numbers:
        kinds = ("evict", "deploy", "reconnect", "call", "arm_storage_fault")
        assert scenario.steps[number - 1].kind in kinds
    listed = {pair for pairs in CATALOGUE.values() for pair in pairs}
    assert {use.pair for use in generated.uses} <= listed


def _counted_afresh(generated) -> Iterator[tuple[TimedStep, dict]]:
    """Each call after which a schedule counts its runs from the call, with that schedule: a
    re-created one, every schedule of a sub-agent an `open` opens (from its opening), and every
    schedule an agent sets up at startup from a request (a startup trigger: the startup that
    sets them up when a fault cut the first one short)."""
    for step in generated.steps:
        if step.action == "request" and step.note != FAULT_NOTE:
            agent = generated.agents.get(step.args.get("agent"), {})
            if agent.get("workload") == "schedules" and agent.get("setup") != "call":
                yield from ((step, entry) for entry in agent.get("schedules", []))
            continue
        method = step.args.get("method") if step.action == "call" else None
        schedules = generated.agents.get(step.args.get("agent"), {}).get("schedules", [])
        if method == "recreate":
            (name,) = step.args["args"]
            yield step, next(e for e in schedules if e["name"] == name)
        elif method == "open":
            yield from ((step, entry) for entry in schedules)


@given(generated=scenarios(st, ("schedules",)))
@settings(DRAWS, max_examples=60)
def test_a_recurring_schedule_s_work_leaves_room_for_its_sub_agents_copies(generated) -> None:
    """One alarm runs the root's and every sub-agent's copy of a schedule one after another: the
    work of a cron or interval is kept under half its period shared by all of them, so the last
    copy completes before the next occurrence (generate --seed 11 once drew a cron two seconds
    apart whose root and sub-agent worked 500 ms each: the sub-agent's next run came a day
    later)."""
    for agent in generated.agents.values():
        load = 1 + len(agent.get("sub_agents", ()))
        for entry in agent.get("schedules", ()):
            if "work" not in entry or not ("cron" in entry or "every" in entry):
                continue
            period = (
                parse_duration_ms(entry["every"])
                if "every" in entry
                else _cron_gap(entry["cron"], entry.get("runs", 1))
            )
            assert parse_duration_ms(entry["work"]) * 2 * load <= period, (entry, load)


@given(generated=scenarios(st, ("schedules",)))
@settings(DRAWS, max_examples=60)
def test_a_warmup_leaves_a_cron_its_occurrences(generated) -> None:
    """An alarm that wakes the agent runs its startup, warmup included, before the due rows: a
    cron's occurrences are kept further apart than twice the warmup and the work, or the ones
    due during it would collapse into one (generate --seed 5 once drew a four-second warmup
    before a cron due on three consecutive seconds, whose second run came a week later)."""
    for agent in generated.agents.values():
        warmup = parse_duration_ms(agent.get("warmup", "0s"))
        for entry in agent.get("schedules", ()):
            if not warmup or "cron" not in entry:
                continue
            tries = entry.get("runs", 1) + entry.get("fail", 0)
            work = parse_duration_ms(entry.get("work", "0s"))
            assert warmup + work <= _cron_gap(entry["cron"], tries) // 2, (entry, warmup)


@given(generated=scenarios(st, ("schedules",)))
@settings(DRAWS, max_examples=60)
def test_a_re_created_schedule_is_given_the_time_to_run_its_course(generated) -> None:
    """A schedule created again by a call, or by a sub-agent opened by a call, counts its runs
    afresh from that call (a sub-agent's cron opened a second after its root's may be due only
    the next day, as generate --seed 11 drew once): the liveness
    phase after the last step reaches past its last run (a cron's occurrences computed by the
    checkers' own model), so a drawn scenario is not busy at its end only because it ran out
    of time."""
    end = max(step.at_ms for step in generated.steps) + generated.liveness_ms
    for step, entry in _counted_afresh(generated):
        tries = entry.get("runs", 1) + entry.get("fail", 0)
        if "cron" in entry:
            due = step.at_ms
            for _ in range(tries):
                due = next_cron_due_ms(entry["cron"], due)
        elif "every" in entry:
            due = step.at_ms + parse_duration_ms(entry["every"]) * tries
        else:
            due = step.at_ms + parse_duration_ms(entry.get("after", "0s"))
        assert due <= end, (entry, step.at_ms, generated.liveness_ms)


@given(generated=scenarios(st, ("schedules",)))
@settings(DRAWS, max_examples=60)
def test_a_callback_s_work_leaves_room_for_the_startup_of_an_alarm_that_wakes_the_agent(
    generated,
) -> None:
    """An alarm that wakes an agent runs its startup (the drawn warmup) inside the handler's
    15 minutes, so no drawn callback works so long that warmup and work pass the limit (such a
    schedule is killed at every retry and its agent never settles)."""
    for agent in generated.agents.values():
        warmup = parse_duration_ms(agent.get("warmup", "0s"))
        for entry in agent.get("schedules", ()):
            work = parse_duration_ms(entry.get("work", "0s"))
            assert warmup + work < 15 * 60_000, (warmup, entry)


def test_a_cron_created_again_late_counts_its_occurrences_from_the_call() -> None:
    """A cron cancelled and created again at 1h16m, to run once after two failing attempts,
    is done only at its third occurrence after the call (1:34, 10:15, 10:34 of the day), so
    the drawn scenario's horizon reaches past it (a generated scenario once stopped its
    liveness phase at 4h48m with the cron still due at 10:15)."""
    entry = {"name": "s2", "cron": "15,34 0,1,10,16 * * *", "runs": 1, "fail": 2}
    at = 76 * 60_000
    third = at
    for _ in range(3):
        third = next_cron_due_ms(entry["cron"], third)
    assert third == 10 * 3_600_000 + 34 * 60_000
    done = _done_by(entry, at)
    assert done is not None and done >= third


def test_a_sub_agent_opened_late_is_given_two_occurrences_more_than_its_cron_needs() -> None:
    """A cron on the first of the month every three hours, opened at 10h39m to run three
    times after one failing attempt, has exactly four occurrences left that day: a drawn fault
    costing one of them would leave its last run a month away, past any run's limit (a
    generated scenario on 0.32.0 once failed liveness so). Two occurrences more must fit, and
    here they do not, so the sub-agent is not opened there (None)."""
    entry = {"name": "s2", "cron": "42-51/12 */3 1 1-11 *", "runs": 3, "fail": 1}
    assert _done_by(entry, 38_347_000) is None
    assert _done_by(entry, 0) is not None  # from midnight, eight occurrences fit that day


@given(expression=crons(st), runs=st.integers(1, 3))
@DRAWS
def test_drawn_crons_use_the_field_forms_they_are_named_by(expression: str, runs: int) -> None:
    """Each drawn cron names at least one form, and the six-field form says 'seconds'."""
    forms = forms_of(expression)
    assert forms
    assert ("seconds" in forms) == (len(expression.split()) == 6)
    assert due_within(expression, runs, 10**13) is not None


def test_what_is_drawn_does_not_depend_on_the_runtime_s_cron(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drawing asks the checkers' cron model, never the code under test: with the runtime's
    parser broken (as a planted slip in it could break it), the same seed draws the same files.
    A generator that asked the runtime crashed while drawing, and found nothing."""
    import agents_core.cron

    first = write_generated(examples=12, seed=3, out_dir=tmp_path / "a", areas=("schedules",))

    def broken(expression: str, after_ms: int) -> int:
        raise IndexError("tuple index out of range")

    monkeypatch.setattr(agents_core.cron, "next_cron_time_ms", broken)
    monkeypatch.setattr(agents_core.cron.CronExpression, "next_after_ms", broken)
    second = write_generated(examples=12, seed=3, out_dir=tmp_path / "b", areas=("schedules",))
    assert any("cron:" in path.read_text(encoding="utf-8") for path in first)
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]


def test_the_same_seed_writes_the_same_files_under_any_hash_seed(tmp_path: Path) -> None:
    """--write twice with one seed, the second in a child process with another PYTHONHASHSEED:
    byte-for-byte the same files; another seed draws others."""
    first = write_generated(examples=6, seed=5, out_dir=tmp_path / "a")
    script = (
        "from scenarios.generate.hunt import write_generated; "
        f"write_generated(examples=6, seed=5, out_dir={str(tmp_path / 'b')!r})"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT, env=env)
    second = sorted((tmp_path / "b").iterdir())
    assert [p.name for p in first] == [p.name for p in second]
    assert len(first) == 6
    for mine, theirs in zip(first, second, strict=True):
        a, b = mine.read_text(encoding="utf-8"), theirs.read_text(encoding="utf-8")
        assert a == b, "\n".join(difflib.unified_diff(a.split("\n"), b.split("\n"), lineterm=""))
    other = write_generated(examples=6, seed=6, out_dir=tmp_path / "c")
    assert [p.read_bytes() for p in other] != [p.read_bytes() for p in first]


def test_write_runs_nothing_and_every_written_file_validates(tmp_path: Path, capsys) -> None:
    """`agentsim generate --write DIR` writes N files that load, says so, and exits 0."""
    code = main(["generate", "--write", str(tmp_path), "--examples", "4", "--seed", "2"])
    out = capsys.readouterr().out
    assert code == 0
    files = sorted(tmp_path.glob("*.yaml"))
    assert len(files) == 4
    assert "4 scenarios written to" in out
    for path in files:
        scenario = load_scenario(path)
        assert scenario.name == path.stem


def test_the_areas_filter_keeps_other_areas_out(tmp_path: Path) -> None:
    """--areas fibers draws fibers workloads only; an unknown area is bad input."""
    for path in write_generated(examples=8, seed=1, out_dir=tmp_path, areas=("fibers",)):
        scenario = load_scenario(path)
        assert {spec.workload for spec in scenario.agents} == {"fibers"}
    assert main(["generate", "--areas", "fibres", "--write", str(tmp_path)]) == 2


def _no_failed_step(context: CheckContext) -> list[Violation]:
    return [
        Violation(
            "no_failed_fiber_step",
            r.agent,
            str(r.seq),
            f"fiber {r.fields['name']} failed",
            (r.seq,),
        )
        for r in context.records
        if r.event == "workload:fiber_failed"
    ]


@pytest.fixture
def planted() -> Iterator[str]:
    register("no_failed_fiber_step", _no_failed_step)
    try:
        yield "no_failed_fiber_step"
    finally:
        CHECKERS.pop("no_failed_fiber_step", None)


def test_a_planted_failure_is_found_and_shrunk_to_a_file_that_fails_alone(
    tmp_path: Path, planted: str
) -> None:
    """An invariant that breaks whenever a fiber step fails: the hunt finds it, shrinks it to one
    agent with one fiber that fails, no fault and the plain options, and the file it writes fails
    with that invariant when run by itself."""
    outcome = generate(
        examples=30, seed=3, areas=("fibers",), invariants=(planted,), out_dir=tmp_path
    )
    assert [finding.subject for finding in outcome.findings] == [f"invariant {planted}"]
    finding = outcome.findings[0]
    scenario = load_scenario(finding.path)
    assert len(scenario.agents) == 1
    (plan,) = scenario.agents[0].cls.fibers
    assert plan.fail_at == 1 and not plan.managed
    assert all(step.kind == "call" for step in scenario.steps)
    result = run_scenario(scenario)
    assert {failure.subject for failure in result.failures} == {f"invariant {planted}"}
    assert finding.command == f"agentsim run {finding.path}"
    assert "Found by `agentsim generate" in Path(finding.path).read_text(encoding="utf-8")


def test_a_shrink_stops_when_its_runs_are_spent_and_writes_its_best_so_far(
    tmp_path: Path, planted: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With two shrinking runs allowed, the round ends at the third (no candidate drawn after it
    is run or waited for) and the last failing example is written, a file that fails alone."""
    monkeypatch.setattr(hunt_module, "MAX_SHRINK_RUNS", 2)
    asked = []
    fails = hunt_module._Hunt.fails

    def counted(self, generated):
        asked.append(self.target is not None)
        return fails(self, generated)

    monkeypatch.setattr(hunt_module._Hunt, "fails", counted)
    outcome = generate(
        examples=30, seed=3, areas=("fibers",), invariants=(planted,), out_dir=tmp_path
    )
    assert [finding.subject for finding in outcome.findings] == [f"invariant {planted}"]
    assert outcome.runs - outcome.drawn == 2
    assert asked.count(True) == 3  # two shrinking runs, and the candidate that ended the round
    result = run_scenario(load_scenario(outcome.findings[0].path))
    assert {failure.subject for failure in result.failures} == {f"invariant {planted}"}


def test_the_report_lists_what_no_run_reached(tmp_path: Path, capsys) -> None:
    """A small run prints the coverage: probes and API/option pairs reached, and those never
    reached by name; nothing found exits 0."""
    code = main(
        ["generate", "--examples", "3", "--seed", "4", "--areas", "chat", "--out", str(tmp_path)]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "probes never reached (" in out and "fiber.cleanup_delete_failed" in out
    assert "API/option pairs: " in out and " of 9 reached in 3 runs" in out
    assert "3 scenarios drawn over chat (seed 4)" in out


def test_coverage_names_unreached_pairs_and_counts_draws() -> None:
    """A pair drawn and never reached is named with its draws; one reached is not named."""
    from scenarios.generate.parts import Use

    coverage = Coverage(("chat",))
    uses = [Use("client", "connect", "a", "connection:open"), Use("chat host", "think", "a", "x")]
    coverage.add({}, uses, {"client connect"})
    never = coverage.report()[-1]
    assert "chat host think (drawn 1x)" in never
    assert "client connect" not in never
    assert "client reconnect" in never


@given(generated=scenarios(st, ("fibers",)))
@settings(DRAWS, max_examples=80)
def test_a_forget_call_carries_every_bound_it_was_drawn_with(generated) -> None:
    """A drawn `forget` gives its arguments as far as the last one set, a `settled_before` of 0
    included (left out, it would delete every terminal row instead of none)."""
    for step in generated.steps:
        if step.action == "call" and step.args.get("method") == "forget":
            args = step.args.get("args", [])
            assert not args or args[-1] is not None, step.args
    drawn_bounds = {use.option for use in generated.uses if use.api == "delete_fibers"}
    forgets = [s for s in generated.steps if s.args.get("method") == "forget"]
    if "settled_before" in drawn_bounds:
        assert any(len(s.args.get("args", [])) >= 2 for s in forgets)
