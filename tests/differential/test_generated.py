"""`agentsim diff --generate` without workerd: what it draws is what the real side plays, the
shrink reduces a drawn scenario and stops at its bound of real-side runs, and a finding is
written with its header and replay command (a stand-in plays the real side)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from agents_core.releases.registry import DEFAULT_RELEASE, RELEASES
from scenarios.cli import main
from scenarios.diff import generated as diff_generated_module
from scenarios.diff.generated import diff_generated
from scenarios.diff.plan import PLAYED_CHILDREN, PLAYED_HOSTS, compile_plan, static_skip
from scenarios.diff.playable import REAL_SIDE
from scenarios.diff.shrink import reductions, signature
from scenarios.diff.workerd import Play, RealSideUnavailable
from scenarios.generate import drawn
from scenarios.generate.document import Generated
from scenarios.generate.parts import TimedStep
from scenarios.language.loader import parse_scenario


def test_the_real_side_surface_is_read_from_the_plan_compiler() -> None:
    """Hosts and children without a player, storage-fault profiles and the seeded-latency model
    are closed; what the plan compiler plays is open."""
    assert set(REAL_SIDE.tool_hosts) == set(PLAYED_HOSTS["tools"])
    assert set(REAL_SIDE.chat_hosts) == set(PLAYED_HOSTS["chat"])
    assert set(REAL_SIDE.tool_children) <= set(PLAYED_CHILDREN)
    assert REAL_SIDE.profiles == ("platform",)
    assert not REAL_SIDE.storage_rates
    assert not REAL_SIDE.aimed_storage
    assert REAL_SIDE.timed_models


def test_scenarios_drawn_from_the_real_side_surface_pass_the_static_refusal() -> None:
    """Forty draws over every area: the plan compiler's refusal before any run lets each
    through (no Think host, no storage faults, no model at the seeded latency)."""
    found = drawn(examples=40, seed=3, surface=REAL_SIDE)
    assert len(found) == 40
    for number, generated in enumerate(found, start=1):
        scenario = parse_scenario(generated.text(), f"<{number}>")
        assert static_skip(scenario) is None, generated.text()
    assert any("model:" in g.text() for g in found)


def _small() -> Generated:
    agents = {
        "parent": {
            "workload": "tools",
            "runs": [{"run_id": "r1", "detached": {"max_budget": "1m"}}, {"run_id": "r2"}],
        },
        "sched": {"workload": "schedules", "schedules": [{"name": "s1", "after": "5s"}]},
    }
    steps = (
        TimedStep(0, "call", {"agent": "parent", "method": "dispatch", "wait": False}),
        TimedStep(0, "call", {"agent": "sched", "method": "status", "wait": False}),
        TimedStep(1000, "call", {"agent": "parent", "method": "cancel", "args": ["r2"]}),
        TimedStep(2000, "evict", {"agent": "parent/r2"}, "a platform fault"),
        TimedStep(3000, "deploy", {}, "a platform fault"),
    )
    return Generated(
        name="small",
        seed=1,
        faults="platform",
        agents=agents,
        steps=steps,
        fault_numbers=frozenset({4, 5}),
        areas=("schedules", "tools"),
    )


def test_reductions_drop_an_agent_a_run_and_a_fault_with_what_names_them() -> None:
    small = _small()
    by_label = {r.label: r for r in reductions(small)}
    without_sched = by_label["drop agent sched"].apply(small)
    assert without_sched is not None and list(without_sched.agents) == ["parent"]
    assert len(without_sched.steps) == 4 and without_sched.areas == ("tools",)
    assert without_sched.fault_numbers == frozenset({3, 4})
    without_r2 = by_label["drop parent runs r2"].apply(small)
    assert without_r2 is not None
    assert [r["run_id"] for r in without_r2.agents["parent"]["runs"]] == ["r1"]
    assert [s.action for s in without_r2.steps] == ["call", "call", "deploy"]
    assert without_r2.fault_numbers == frozenset({3})
    assert by_label["faults: none"].apply(small).faults == "none"  # type: ignore[union-attr]
    budget = by_label["parent: drop runs/0/detached/max_budget"].apply(small)
    assert budget is not None and budget.agents["parent"]["runs"][0]["detached"] == {}
    assert small.agents["parent"]["runs"][0]["detached"] == {"max_budget": "1m"}  # a copy
    assert "drop agent parent" in by_label and "drop parent runs r1" in by_label


def test_a_signature_names_the_record_types_or_the_table_first_differing() -> None:
    records = (
        "at 00:00:01.000:\n      agentsim only: sched schedule:execute {}\n"
        "      workerd only: sched schedule:retry {}",
        "table sched.cf_agents_schedules:",
    )
    assert signature(records) == {
        "agentsim only: schedule:execute",
        "workerd only: schedule:retry",
    }
    assert signature(("table a.cf_agents_fibers:\n      agentsim only: {}",)) == {
        "cf_agents_fibers"
    }


class _Silent:
    """A real side that plays every plan and records nothing: everything agentsim recorded
    differs. It counts its vitest runs and the plans of each."""

    def __init__(self) -> None:
        self.runs: list[int] = []

    def __call__(self, plans: list[dict]) -> dict[str, Play]:
        self.runs.append(len(plans))
        empty = {"records": [], "tables": {}, "errors": []}
        return {plan["name"]: Play([empty] * plan["repeat"], None) for plan in plans} | {}


def test_a_disagreement_is_shrunk_within_its_bound_and_written_with_its_replay(
    tmp_path: Path,
) -> None:
    """One drawn example that differs: one run plays the draw, the shrink takes at most its
    two rounds (each at most CANDIDATES_PER_ROUND plans, PLANS_PER_RUN to a vitest run), one
    more run checks the shrunk scenario, which is written with what differed and `agentsim diff
    FILE`."""
    silent = _Silent()
    outcome = diff_generated(
        examples=1, seed=5, areas=("schedules",), out_dir=tmp_path, shrink_rounds=2, play=silent
    )
    assert outcome.drawn == 1 and outcome.played == 1 and len(outcome.findings) == 1
    finding = outcome.findings[0]
    assert finding.shrink_rounds <= 2
    per_round = -(
        -diff_generated_module.CANDIDATES_PER_ROUND // diff_generated_module.PLANS_PER_RUN
    )
    assert len(silent.runs) == outcome.workerd_runs <= 1 + 2 * per_round + 1
    assert silent.runs[0] == 1 and silent.runs[-1] == 1
    assert all(n <= diff_generated_module.PLANS_PER_RUN for n in silent.runs)
    assert finding.steps[1] <= finding.steps[0]
    assert finding.path == str(tmp_path / "diff-generate-5-1.yaml")
    text = Path(finding.path).read_text()
    assert text.startswith("# Found by `agentsim diff --generate 1 --seed 5`:")
    assert "no row of docs/divergences.md" in text
    assert f"# Replay it: agentsim diff {finding.path}" in text
    assert "agentsim only:" in text
    scenario = parse_scenario(text, finding.path)
    assert scenario.name == "diff-generate-5-1" and static_skip(scenario) is None
    report = outcome.report()
    assert "DIFFER 1: example 1" in report and f"replay it: agentsim diff {finding.path}" in report
    assert report.endswith(f"{outcome.workerd_runs} workerd run(s)")


def test_with_no_shrink_rounds_the_drawn_example_is_written_as_drawn(tmp_path: Path) -> None:
    silent = _Silent()
    outcome = diff_generated(
        examples=1, seed=5, areas=("schedules",), out_dir=tmp_path, shrink_rounds=0, play=silent
    )
    assert silent.runs == [1, 1]
    finding = outcome.findings[0]
    assert finding.shrink_rounds == 0 and finding.steps[0] == finding.steps[1]
    original = drawn(examples=1, seed=5, areas=("schedules",), surface=REAL_SIDE)[0]
    body = Path(str(finding.path)).read_text().split("\nname: ", 1)[1]
    assert body == replace(original, name="diff-generate-5-1").text().split("name: ", 1)[1]


def test_on_a_release_the_drawn_scenarios_run_and_are_written_on_it(tmp_path: Path) -> None:
    """`sdk` (a release other than the default): the drawn scenarios carry that release's `sdk:`
    key, so the agentsim side runs the release the real side plays, and the written finding
    replays on it; without `sdk` they carry none and run the default."""
    other = next(name for name in RELEASES if name != DEFAULT_RELEASE)
    outcome = diff_generated(
        examples=1,
        seed=5,
        areas=("schedules",),
        out_dir=tmp_path,
        shrink_rounds=0,
        play=_Silent(),
        sdk=other,
    )
    (finding,) = outcome.findings
    scenario = parse_scenario(Path(str(finding.path)).read_text(), str(finding.path))
    assert scenario.sdk == other and scenario.sdk_in_file == other
    unset = diff_generated(
        examples=1,
        seed=5,
        areas=("schedules",),
        out_dir=tmp_path / "d",
        shrink_rounds=0,
        play=_Silent(),
    )
    text = Path(str(unset.findings[0].path)).read_text()
    assert parse_scenario(text, "x.yaml").sdk_in_file is None


def test_refusals_are_counted_by_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A drawn scenario the plan compiler refuses is not played: the report counts it under
    the compiler's reason."""
    monkeypatch.setattr(diff_generated_module, "_compiled", lambda *_a: "a reason of its own")
    outcome = diff_generated(examples=3, seed=1, out_dir=tmp_path, play=_Silent())
    refused = 3 - outcome.repeats
    assert outcome.played == 0 and outcome.refused == {"a reason of its own": refused}
    assert f"refused {refused}: a reason of its own" in outcome.report()
    assert not outcome.found


def test_diff_takes_paths_or_generate_not_both(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "x.yaml", "--generate", "2"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["diff"]) == 2


def test_diff_generate_without_node_says_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from scenarios.diff import workerd

    monkeypatch.setattr(workerd.shutil, "which", lambda name: None)
    assert main(["diff", "--generate", "2"]) == 2
    assert "node is not installed" in capsys.readouterr().err


def test_a_vitest_run_that_does_not_finish_leaves_its_plans_unplayed(tmp_path: Path) -> None:
    """A real side that times out: nothing is shrunk or written, the examples are reported
    UNPLAYED with the reason, and the run counts as a finding (exit 1)."""

    def stuck(plans: list[dict]) -> dict[str, Play]:
        raise RealSideUnavailable("vitest did not finish within 1800 s")

    outcome = diff_generated(examples=2, seed=5, areas=("schedules",), out_dir=tmp_path, play=stuck)
    assert not outcome.findings and outcome.found
    assert len(outcome.unplayed) == outcome.played >= 1
    assert "UNPLAYED: example 1: vitest did not finish within 1800 s" in outcome.report()
    assert not list(tmp_path.iterdir())


FIBERS = """
name: player-gap
description: a workload asks what the real side's player lacks
seed: 1
agents:
  worker:
    workload: fibers
    fibers:
      - {name: f1, steps: 1, step: 1s, managed: true%s}
steps:
  - call: {agent: worker, method: %s, wait: false}
"""


@pytest.mark.parametrize(
    ("extra", "method", "why"),
    [
        ("", "forget", "the fibers player on the real side has no `forget` yet"),
        ("", "listing", "the fibers player on the real side has no `listing` yet"),
        (", stash_bytes: 1000", "status", "the fibers player on the real side does not read"),
        ("", "status", None),
    ],
)
def test_what_a_real_side_player_lacks_is_refused_before_any_run(
    extra: str, method: str, why: str | None
) -> None:
    """A call of a workload method the real side's player has no counterpart for, or a plan
    field it does not read, is refused by the plan compiler (so diff --generate counts it)."""
    skip = static_skip(parse_scenario(FIBERS % (extra, method), "<gap>"))
    if why is None:
        assert skip is None
    else:
        assert skip is not None and why in skip.why


def test_a_shrink_plays_at_most_its_rounds_and_keeps_what_still_differs() -> None:
    """A drawn scenario of two agents and at least eight steps that differs whatever is left of
    it: two rounds, each at most CANDIDATES_PER_ROUND candidates in runs of PLANS_PER_RUN, make
    it smaller, and it still compiles for the real side."""
    from scenarios.diff.generated import GeneratedDiff, _Shrinker

    big = next(
        example
        for example in drawn(examples=20, seed=6, areas=("fibers",), surface=REAL_SIDE)
        if len(example.agents) == 2 and len(example.steps) >= 8
    )
    silent = _Silent()
    outcome = GeneratedDiff(1, 6, ("fibers",))
    shrinker = _Shrinker(silent, outcome, 2, "<shrink>", lambda _label: None)
    first = diff_generated_module._compiled(big, "<big>", 1)
    wanted = diff_generated_module._judge({big.name: first}, silent, outcome)[big.name]
    small, rounds = shrinker.shrink(big, signature(wanted.lines))
    assert rounds == 2
    per_round = -(
        -diff_generated_module.CANDIDATES_PER_ROUND // diff_generated_module.PLANS_PER_RUN
    )
    assert outcome.workerd_runs == len(silent.runs) <= 1 + 2 * per_round
    assert len(small.steps) + len(small.agents) < len(big.steps) + len(big.agents)
    assert static_skip(parse_scenario(small.text(), "<small>")) is None


WARMED = """
name: two-warmups
description: schedule agents whose startups wait on a warm-up
seed: 1
agents:
  a:
    workload: schedules
    warmup: 2s
    schedules:
      - {name: s1, after: 5s}
  b:
    workload: schedules
    warmup: %s
    schedules:
      - {name: s1, after: 5s}
steps:
  - call: {agent: a, method: status, wait: false}
  - call: {agent: b, method: status, wait: false}
"""


ALONE = WARMED.split("  b:\n")[0] + "steps:\n  - call: {agent: a, method: status, wait: false}\n"


@pytest.mark.parametrize(
    ("text", "refused"), [(WARMED % "2s", True), (WARMED % "0s", True), (ALONE, False)]
)
def test_a_plan_with_a_parked_startup_beside_other_agents_is_refused(
    text: str, refused: bool
) -> None:
    """A warm-up beside other agents is refused with the reason (the CI sample's example 4
    ended in workerd's blockConcurrencyWhile reset, with two warm-ups and with one); a warm-up
    alone is played."""
    compiled = compile_plan(parse_scenario(text, "<warm>"), repeat=1)
    if refused:
        assert compiled.plan is None and compiled.skip is not None
        assert compiled.skip.where.startswith("agent a (line ")
        assert "blockConcurrencyWhile" in compiled.skip.why
    else:
        assert compiled.skip is None and compiled.plan is not None
