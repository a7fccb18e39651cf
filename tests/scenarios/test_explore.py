"""`agentsim explore`: crash points land where they say, strata spread the budget, planted bugs
are found and written as reproducers that fail the same way, exit codes 0 / 1 / 2."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scenarios.cli import main
from scenarios.hunt.crash_points import CRASH_EVENTS, all_points, choose, landed, spread, strata
from scenarios.hunt.emit import add_expectation, insert_steps
from scenarios.hunt.explore import Exploration
from scenarios.hunt.explore_outcome import breaks
from scenarios.hunt.interleavings import Planner
from scenarios.hunt.statement_shapes import fault_group
from scenarios.language.loader import load_scenario, parse_scenario
from scenarios.run.failure import (
    EXPECTATION,
    INVARIANT,
    LIVENESS,
    NO_CONNECTION,
    STEP,
    STEP_ERROR,
    Failure,
    RaisedError,
)
from scenarios.run.runner import ExecutedStatement, run_scenario
from sim.sqlite import is_write
from tests.scenarios.helpers import LIBRARY, ROOT

SUMMARY = re.compile(r"^\d+ crash points, \d+ interleavings, \d+ failures$")
COUNTER = """\
name: two-counts
description: A counter counts at the start and again a minute later.
seed: 3
agents:
  counter: {class: "scenarios.workloads:Counter"}
steps:
  - call: {agent: counter, method: increment}
  - at: 1m
    call: {agent: counter, method: increment}
"""
SPLIT = """\
name: split-progress
description: A three-step fiber whose place is also kept in a row written one turn late.
seed: 1
agents:
  worker: {class: "tests.scenarios.explore_agents:SplitProgress"}
steps:
  - call: {agent: worker, method: work, args: [3]}
  - run_for: 2m
"""
HANDOFF = """\
name: handoff
description: A worker takes a keepAlive lease and a closer gives it back, a second later both.
seed: 1
agents:
  box: {class: "tests.scenarios.explore_agents:Handoff"}
steps:
  - call: {agent: box, method: start}
  - run_for: 1m
"""

NEST = """\
name: nest
description: A parent asks a sub-agent whose name has a space to write a row.
seed: 1
agents:
  nest: {class: "tests.scenarios.explore_agents:Nest"}
steps:
  - call: {agent: nest, method: grow}
"""


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reproducers and failure files go below the current directory: keep them out of the
    checkout."""
    monkeypatch.chdir(tmp_path)


def write(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(text)
    return str(path)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- crash points ---------------------------------------------------------------------------------
def _base(text: str) -> tuple[str, object, object]:
    scenario = parse_scenario(text, "base.yaml")
    return text, scenario, run_scenario(scenario, record_statements=True)


def test_a_crash_point_lands_on_the_statement_it_names() -> None:
    """Every point of a small run is one step whose fault fires on the intended statement, at
    its time, on its agent: the skip counts only what that agent runs from that step on."""
    text, scenario, base = _base(COUNTER)
    points = all_points(base.statements)
    assert {p.kind for p in points} == {"crash", "error", "crash-after-commit"}
    assert any(p.skip > 0 for p in points)
    for point in points:
        run = run_scenario(parse_scenario(insert_steps(text, scenario, [point.step()]), "x.yaml"))
        assert landed(point, base, run), point.describe()
        (record,) = [r for r in run.trace if r.event == CRASH_EVENTS[point.kind]]
        assert (record.t_ms, record.agent) == (point.statement.t_ms, point.statement.agent)


@pytest.mark.parametrize(("kind", "count"), [("crash", 1), ("crash-after-commit", 2)])
def test_crash_after_commit_keeps_the_turn_and_crash_rolls_it_back(kind: str, count: int) -> None:
    """A crash before the first count's insert loses that count; a crash right after its turn
    commits keeps it (the call still fails: the process died before it answered)."""
    text, scenario, base = _base(COUNTER)
    insert = next(s for s in base.statements if s.statement.startswith("INSERT INTO counts"))
    (point,) = [
        p
        for p in all_points(base.statements)
        if p.kind == kind
        and p.statement.turn == insert.turn
        and (kind == "crash-after-commit" or p.statement == insert)
    ]
    candidate = insert_steps(text, scenario, [point.step()])
    candidate = add_expectation(
        candidate,
        parse_scenario(candidate, "x.yaml"),
        f"state: {{agent: counter, equals: {{count: {count}}}}}",
    )
    run = run_scenario(parse_scenario(candidate, "x.yaml"))
    assert landed(point, base, run)
    assert not any("expect" in failure for failure in run.failures), run.failures
    assert any("failed with AgentEvicted" in failure for failure in run.failures)


def test_points_at_one_instant_that_die_the_same_way_are_one() -> None:
    """Two turns at the same instant running the same statement first are one point each kind."""
    statements = [
        ExecutedStatement(5, "Counter/c", "INSERT INTO counts (source) VALUES (?)", turn, 0)
        for turn in (1, 2)
    ]
    points = all_points(statements)
    assert [(p.kind, p.index) for p in points] == [
        ("crash", 0),
        ("error", 0),
        ("crash-after-commit", 0),
    ]
    assert points[0].match == r"^INSERT INTO counts\b" and points[0].skip == 0
    assert points[0].agent == "c"


def test_the_budget_is_spread_over_every_stratum_before_any_repeats() -> None:
    """Round-robin over (agent role, kind, fault group, code site): with as many points as
    strata, one each; within a stratum the first, the last, then the middle."""
    base = run_scenario(
        load_scenario(LIBRARY / "detached-import-across-two-deploys.yaml"), record_statements=True
    )
    points = all_points(base.statements)
    groups = strata(points)
    assert len(points) > 3 * len(groups)
    chosen = choose(points, len(groups))
    assert {
        (p.role, p.kind, fault_group(p.statement.statement), p.statement.site)
        for p in chosen
        if fault_group(p.statement.statement) != ("schema", "")
    } == {key for key in groups if key[2] != ("schema", "")}
    # The schema set-up of an incarnation is one stratum per kind, whatever table it creates.
    schema = [key for key in groups if key[2] == ("schema", "")]
    assert schema and len({p.shape for key in schema for p in groups[key]}) > len(schema)
    # A budget smaller than the strata goes to writes first, the rarest first (a statement
    # that ran once), then to reads.
    writes = [g for g in groups.values() if is_write(g[0].statement.statement)]
    few = choose(points, 5)
    key_of = {id(p): key for key, group in groups.items() for p in group}
    assert all(is_write(p.statement.statement) for p in few)
    sizes = sorted(len(group) for group in writes)
    assert sorted(len(groups[key_of[id(p)]]) for p in few) == sizes[:5]
    assert sum(not is_write(p.statement.statement) for p in choose(points, len(writes) + 1)) == 1
    # One shape issued by two places in the code is two strata.
    shapes = [(key[0], key[1], key[2]) for key in groups if key[2] != ("schema", "")]
    assert len(shapes) > len(set(shapes))
    assert [p.index for p in chosen] == sorted(p.index for p in chosen)
    assert spread(7) == [0, 6, 3, 1, 4, 2, 5]
    assert sorted(spread(20)) == list(range(20))


def test_a_sub_agent_is_named_the_way_a_step_names_it() -> None:
    """Points on an agent-tool child say `agent: parent/run`, and still land."""
    path = LIBRARY / "finish-redelivered-after-crash.yaml"
    text = path.read_text()
    scenario = parse_scenario(text, str(path))
    base = run_scenario(scenario, record_statements=True)
    child = [p for p in all_points(base.statements) if p.agent.count("/") == 1]
    assert child, "the story's child runs statements of its own"
    point = child[len(child) // 2]
    run = run_scenario(parse_scenario(insert_steps(text, scenario, [point.step()]), "x.yaml"))
    assert landed(point, base, run), point.describe()


def test_a_point_no_step_can_name_is_not_run_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sub-agent named `a leaf` cannot be written as `agent: nest/a leaf`: its points are
    counted as not run, and the rest are explored."""
    base = write(tmp_path, "nest.yaml", NEST)
    code, out, _ = run_cli(capsys, "explore", base, "--crash-points", "100")
    assert code == 0, out
    line = next(line for line in out.splitlines() if line.startswith("crash points: "))
    assert re.search(r"; [1-9]\d* not run \(no step can name their agent\)$", line)


# -- interleavings -------------------------------------------------------------------------------
def test_schedules_try_each_group_alone_then_draw_pairs_and_never_repeat() -> None:
    """Singles in spread order up to half the budget, then depth-2 draws among the groups
    given; no two schedules reorder the same groups the same way; few small groups run out."""
    planner = Planner([2, 3, 2, 2, 4], count=8, depth=2)
    singles = planner.singles()
    assert [s.points for s in singles] == [(1,), (5,), (3,), (2,)]
    drawn = planner.draws([2, 5], 4)
    assert drawn and all(d.points == (2, 5) for d in drawn)
    assert len({(d.seed, d.points) for d in [*singles, *drawn]}) == len(singles) + len(drawn)
    assert planner.most() == 8
    few = Planner([2], count=50, depth=2)
    assert [s.points for s in few.singles()] == [(1,)]
    assert few.draws([1], 49) == []  # a group of two has one other order, already tried
    assert Planner([], count=50, depth=2).most() == 0


# -- what counts ----------------------------------------------------------------------------------
def _step(number: int, kind: str, detail: str, error: tuple[str, str] | None = None) -> Failure:
    raised = None if error is None else RaisedError(*error)
    label = f"step {number} ({'request' if 'GET' in detail else 'call'})"
    return Failure(kind, "p.yaml", detail, 9, label, number, error=raised)


@pytest.mark.parametrize(
    ("failure", "with_expect", "counted"),
    [
        (
            Failure(INVARIANT, "p.yaml", "no_lost_stash: lost", invariant="no_lost_stash"),
            False,
            "invariant no_lost_stash",
        ),
        (Failure(LIVENESS, "p.yaml", "liveness: the run did not settle ..."), False, "liveness"),
        (
            _step(2, STEP, "w.go() failed with AgentEvicted: gone", ("AgentEvicted", "gone")),
            True,
            None,
        ),
        (_step(2, STEP_ERROR, "raised KeyError: 'x'", ("KeyError", "'x'")), False, "step 2 (call)"),
        (_step(2, STEP, "w.go() never finished (still running at ...)"), False, None),
        (_step(2, STEP, "w.go() never finished (still running at ...)"), True, "step 2 (call)"),
        (_step(4, STEP, "GET / answered 202 ..., expected status 200"), False, None),
        (_step(4, STEP, "GET / answered 202 ..., expected status 200"), True, "step 4 (request)"),
        (_step(5, NO_CONNECTION, "client 'c' is not connected; the message ..."), True, None),
        (
            Failure(EXPECTATION, "p.yaml", "state of w is ...", 12, "expect 1 (state)", 1),
            True,
            "expect 1 (state)",
        ),
    ],
)
def test_only_what_the_fault_does_not_explain_is_a_finding(
    failure: Failure, with_expect: bool, counted: str | None
) -> None:
    assert breaks([failure], with_expect) == (() if counted is None else (counted,))


# -- planted bugs, reproducers --------------------------------------------------------------------
def test_explore_finds_a_turn_split_across_an_await_and_writes_a_reproducer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The planted non-atomic update breaks `no_lost_stash` at some crash points (the stash lost)
    and `stash_replaces_whole` at others (the stash kept, the hook handed an older step): one
    reproducer for each, each one armed step naming its invariant, failing the same way under
    `agentsim run`."""
    base = write(tmp_path, "split.yaml", SPLIT)
    code, out, _ = run_cli(
        capsys, "explore", base, "--crash-points", "60", "--interleavings", "0", "--out", "found"
    )
    lines = out.splitlines()
    assert code == 1
    assert SUMMARY.match(lines[-1]) and lines[-1].startswith("60 crash points, 0 interleavings")
    assert not lines[-1].endswith(" 0 failures")
    runs = [line for line in lines if line.startswith("  run it: agentsim run ")]
    assert len(runs) == 2
    broken = {}
    for run in runs:
        reproducer = run.removeprefix("  run it: agentsim run ")
        assert re.fullmatch(r"found/split-progress-explore-crash-\d+\.yaml", reproducer)
        text = Path(reproducer).read_text()
        assert text.startswith(f"# Found by `agentsim explore {base} --crash-points 60")
        (name,) = re.findall(r"  - invariants: \[(\w+)\]", text)
        assert text.count("arm_storage_fault:") == 1 and "at:" not in text
        assert "# inserted by agentsim explore: crash point" in text
        code, out, _ = run_cli(capsys, "run", reproducer)
        assert code == 1
        broken[name] = out
    assert sorted(broken) == ["no_lost_stash", "stash_replaces_whole"]
    assert "expect 1 (invariants): no_lost_stash: fiber" in broken["no_lost_stash"]
    assert (
        "recovery did not hand the hook the last committed snapshot"
        in (broken["stash_replaces_whole"])
    )


def test_explore_finds_two_timers_racing_at_one_instant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The planted race only shows when the closer's timer runs before the worker's; the
    reproducer says so with one `interleave:` line and replays it."""
    base = write(tmp_path, "handoff.yaml", HANDOFF)
    code, out, _ = run_cli(
        capsys, "explore", base, "--crash-points", "0", "--interleavings", "5", "--out", "found"
    )
    assert code == 1
    assert out.splitlines()[-1] == "0 crash points, 1 interleavings, 1 failures"
    assert "(group 1) Handoff/box#1 _worker (explore_agents.py:" in out
    reproducer = "found/handoff-explore-interleave-1.yaml"
    text = Path(reproducer).read_text()
    assert "\ninterleave: {seed: 1, points: [1]}\n" in text
    assert "ran as Handoff/box#1 _closer" in text
    code, out, _ = run_cli(capsys, "run", reproducer)
    assert code == 1 and "liveness: the run did not settle" in out


def test_a_library_story_explores_clean_unless_its_story_is_kept(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Nothing found: exit 0, the coverage lines, the count alone on the last line. With
    `--with-expect` the story's exact counts are checked too, and a crash changes them."""
    path = str(LIBRARY / "idle-eviction.yaml")
    code, out, _ = run_cli(capsys, "explore", path, "--crash-points", "12")
    lines = out.splitlines()
    assert code == 0, out
    assert lines[0].startswith(f"explored {path}: base run passes (")
    assert lines[-1] == "12 crash points, 0 interleavings, 0 failures"
    assert any(line.startswith("probes: ") for line in lines)
    code, out, _ = run_cli(capsys, "explore", path, "--crash-points", "12", "--with-expect")
    assert code == 1
    assert re.search(r"^\d+ run\(s\) break expect \d+ \(", out, flags=re.MULTILINE)


def test_the_same_exploration_twice_is_the_same_in_any_process(tmp_path: Path) -> None:
    """No wall clock, no luck: two processes under other hash seeds print the same and write
    the same reproducer."""
    base = write(tmp_path, "handoff.yaml", HANDOFF)
    outputs = []
    for hash_seed in ("0", "977"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=str(ROOT))
        where = tmp_path / f"process-{hash_seed}"
        where.mkdir()
        argv = ["explore", base, "--crash-points", "8", "--interleavings", "3", "--out", "found"]
        done = subprocess.run(
            [sys.executable, "-m", "scenarios.cli", *argv],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            cwd=where,
        )
        assert done.returncode == 1, done.stderr
        written = sorted((where / "found").iterdir())
        outputs.append((done.stdout, [(p.name, p.read_text()) for p in written]))
    assert outputs[0] == outputs[1]
    assert outputs[0][1] and "FOUND (interleaving 1)" in outputs[0][0]


def test_a_terminal_gets_a_bar_and_a_pipe_gets_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class FakeTerminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    path = str(LIBRARY / "idle-eviction.yaml")
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["explore", path, "--crash-points", "6"]) == 0
    assert "━" in terminal.getvalue() and "6/6" in terminal.getvalue()
    monkeypatch.undo()
    code, out, _ = run_cli(capsys, "explore", path, "--crash-points", "6")
    assert code == 0 and "\x1b" not in out and "━" not in out


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "argv", "message"),
    [
        (None, [], "'missing.yaml': no such file or directory"),
        ("name: x\n  bad: [", [], "not valid YAML"),
        (COUNTER.replace("seed: 3", "seed: -3"), [], "seed: -3"),
        (
            "{name: flow, description: d, seed: 1, agents: {c: {class: "
            "'scenarios.workloads:Counter'}}, steps: [{call: {agent: c, method: increment}}]}",
            [],
            "block style",
        ),
        (COUNTER, ["--crash-points", "-1"], "expected a whole number >= 0"),
        (COUNTER, ["--depth", "0"], "expected a whole number >= 1"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str | None,
    argv: list[str],
    message: str,
) -> None:
    path = "missing.yaml" if text is None else write(tmp_path, "bad.yaml", text)
    code, out, err = run_cli(capsys, "explore", path, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err, err


def test_a_base_run_that_fails_is_reported_before_anything_is_explored(
    tmp_path: Path,
) -> None:
    """Exit 1 with the base run's failures: nothing is explored over a broken story."""
    broken = COUNTER + "expect:\n  - state: {agent: counter, equals: {count: 9}}\n"
    exploration = Exploration(write(tmp_path, "b.yaml", broken), with_expect=True)
    assert exploration.total == 0
    outcome = exploration.run()
    assert outcome.found
    assert outcome.report().splitlines()[-1] == "0 crash points, 0 interleavings, 1 failures"


def test_explore_keeps_always_expectations_and_reports_what_breaks_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An `always: true` expectation survives explore's dropping of the story's expectations:
    a crash that loses a count breaks "two counts" and is a finding; the other expectation (an
    exact time) is dropped."""
    text = COUNTER + (
        "expect:\n"
        "  - event: incarnation:start\n"
        "    count: {exactly: 1}\n"
        "  - state: {agent: counter, equals: {count: 2}}\n"
        "    always: true\n"
    )
    base = write(tmp_path, "counts.yaml", text)
    code, out, _ = run_cli(
        capsys, "explore", base, "--crash-points", "30", "--interleavings", "0", "--out", "f"
    )
    assert code == 1
    assert "expect 1 (state)" in out
    runs = [line for line in out.splitlines() if line.startswith("  run it: agentsim run ")]
    reproducer = Path(runs[0].removeprefix("  run it: agentsim run ")).read_text()
    assert "  - state: {agent: counter, equals: {count: 2}}\n    always: true" in reproducer
    assert "incarnation:start" not in reproducer
