"""The multi-seed summary: a row per scenario, the failing seeds, a replay line per failure."""

from __future__ import annotations

from reports import RunReport, render_summary
from reports.summary import MAX_SEEDS_LISTED
from tests.reports.helpers import report_of, story


def run(name: str, seed: int, passed: bool = True) -> RunReport:
    return report_of(
        story(),
        passed=passed,
        name=name,
        seed=seed,
        path=f"scenarios/library/{name}.yaml",
        failures=[] if passed else [f"{name} broke with seed {seed}"],
        replay_command=f"agentsim run scenarios/library/{name}.yaml --seed {seed}",
    )


def test_rows_per_scenario_with_failing_seeds_and_replay_lines() -> None:
    """Seeds run, passed, failed and the failing seeds per scenario; each failure replayable."""
    runs = [run("deploy-mid-work", s, passed=s not in (4, 2)) for s in (5, 4, 3, 2, 1)]
    runs += [run("idle-eviction", s) for s in (1, 2)]
    lines = render_summary(runs).split("\n")
    assert lines[0].split() == ["scenario", "seeds", "passed", "failed", "failing", "seeds"]
    assert lines[1].split() == ["deploy-mid-work", "5", "3", "2", "2,", "4"]
    assert lines[2].split() == ["idle-eviction", "2", "2", "0", "-"]
    assert lines[4] == "replay the 2 failures:"
    assert lines[5:9] == [
        "  deploy-mid-work [seed 2] (deploy-mid-work broke with seed 2)",
        "    agentsim run scenarios/library/deploy-mid-work.yaml --seed 2",
        "  deploy-mid-work [seed 4] (deploy-mid-work broke with seed 4)",
        "    agentsim run scenarios/library/deploy-mid-work.yaml --seed 4",
    ]
    assert lines[-1] == "total: 7 runs, 5 passed, 2 failed"


def test_columns_line_up() -> None:
    """Numbers are right-aligned under their headers whatever the name lengths."""
    lines = render_summary([run("a", 1), run("a-much-longer-name", 2, passed=False)]).split("\n")
    assert lines[1].index("1") == lines[2].index("1") == lines[0].index("seeds") + 4


def test_all_passing_has_no_replay_section() -> None:
    """Nothing to replay when every run passed."""
    text = render_summary([run("a", 1)])
    assert "replay" not in text and text.endswith("total: 1 run, 1 passed, 0 failed")


def test_many_failing_seeds_are_cut_in_the_table_but_each_keeps_its_replay_line() -> None:
    """The table lists the first seeds and how many more; every failure still has its command."""
    count = MAX_SEEDS_LISTED + 3
    text = render_summary([run("s", seed, passed=False) for seed in range(count)])
    assert "… (+3 more)" in text.split("\n")[1]
    assert text.count("agentsim run scenarios/library/s.yaml --seed") == count
