"""Tuned options: the fuzzer's draws of agents' options, written into the scenario's text."""

from __future__ import annotations

from pathlib import Path

import pytest

from scenarios.cli import main
from scenarios.hunt.fault_draws import FAULT_KINDS
from scenarios.hunt.fuzz import FUZZ_KINDS, fuzz_scenario
from scenarios.hunt.tunings import TUNE_NOTE, TUNINGS, tunable, tune_text
from scenarios.language.loader import parse_scenario
from tests.fuzz.test_fuzz import STEADY, scenario

BLOCK = """\
name: tuned
description: Agents whose options the fuzzer tunes.
seed: 1
faults: none
agents:
  # the worker
  w:
    class: "tests.fuzz.agents:Steady"
    options:
      keep_alive_interval_ms: 20s
  jobs:
    workload: fibers
    keep_alive_interval: 10s
    options: {fiber_recovery_max_age_ms: 4m}  # a day is too long here
    fibers:
      - {name: ingest, steps: 2, step: 5s}
  bare:
    class: "tests.fuzz.agents:Steady"
steps:
  - run_for: 1m
"""


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reproducers and failure files go under the working directory: keep them in tmp."""
    monkeypatch.chdir(tmp_path)


def read(text: str) -> dict[str, dict[str, object]]:
    return {spec.alias: spec.options for spec in parse_scenario(text, "t.yaml").agents}


def test_tunings_are_merged_into_block_flow_and_missing_options_and_read_back() -> None:
    base = parse_scenario(BLOCK, "t.yaml")
    text = tune_text(
        BLOCK,
        base,
        {
            "w": {"fiber_recovery_hook_timeout_ms": 50, "keep_alive_interval_ms": 5_000},
            "jobs": {"max_alarm_memory_limit_strikes": 1},
            "bare": {"send_identity_on_connect": False},
        },
    )
    options = read(text)
    assert options["w"] == {
        "keep_alive_interval_ms": "5s",
        "fiber_recovery_hook_timeout_ms": "50ms",
    }
    assert options["jobs"] == {
        "fiber_recovery_max_age_ms": "4m",
        "max_alarm_memory_limit_strikes": 1,
        "keep_alive_interval_ms": 10_000,
    }
    assert options["bare"] == {"send_identity_on_connect": False}
    assert text.count(TUNE_NOTE) == 4  # two keys of w's block, jobs' line, bare's new line
    assert "  # the worker\n  w:\n" in text  # the file's own comments and layout stay
    assert text.splitlines()[-2:] == ["steps:", "  - run_for: 1m"]


def test_an_agent_written_on_one_line_is_tuned_on_that_line() -> None:
    text = tune_text(
        STEADY, parse_scenario(STEADY, "s.yaml"), {"w": {"max_concurrent_agent_tools": 0}}
    )
    line = next(line for line in text.splitlines() if line.startswith("  w: "))
    assert line == (
        '  w: {class: "tests.fuzz.agents:Steady", options: {max_concurrent_agent_tools: 0}}'
        f"  # {TUNE_NOTE}"
    )
    assert read(text)["w"] == {"max_concurrent_agent_tools": 0}


def test_an_unknown_agent_or_a_file_not_in_block_style_is_refused() -> None:
    base = parse_scenario(BLOCK, "t.yaml")
    with pytest.raises(ValueError, match="no agent nobody to tune"):
        tune_text(BLOCK, base, {"nobody": {"keep_alive_interval_ms": 1_000}})
    flow = BLOCK.replace('  bare:\n    class: "tests.fuzz.agents:Steady"\n', "")
    flow = flow.replace("agents:\n", 'agents: {bare: {class: "tests.fuzz.agents:Steady"}}\nx:\n')
    with pytest.raises(ValueError, match="not written as a block mapping"):
        tune_text(flow, parse_scenario(BLOCK, "t.yaml"), {"bare": {"keep_alive_interval_ms": 1}})


def test_what_an_agent_may_be_tuned_on_leaves_out_what_its_file_sets() -> None:
    specs = {spec.alias: spec for spec in parse_scenario(BLOCK, "t.yaml").agents}
    names = {alias: {name for name, _ in tunable(spec)} for alias, spec in specs.items()}
    assert "keep_alive_interval_ms" not in names["w"]  # set in the file
    assert "keep_alive_interval_ms" not in names["jobs"]  # set as keep_alive_interval:
    assert "fiber_recovery_max_age_ms" not in names["jobs"]
    assert "max_concurrent_agent_tools" not in names["jobs"]  # a fibers workload runs no tools
    assert "max_concurrent_agent_tools" in names["bare"]  # a class of the user's may
    assert "max_chat_recovery_attempts" not in names["bare"]  # not a chat host's class
    assert names["bare"] <= set(TUNINGS)


def test_tune_is_a_fuzz_kind_not_a_platform_fault() -> None:
    assert "tune" in FUZZ_KINDS and "tune" not in FAULT_KINDS


def test_a_bug_only_a_short_hook_timeout_shows_is_found_with_that_tuning(tmp_path: Path) -> None:
    """`Hurried` loses its stash only when its recovery hook is given under 5 s: the fuzzer
    draws the tuning and a death, shrinks to them, and the reproducer sets the option."""
    text = STEADY.replace("steady-worker", "hurried-worker").replace("Steady", "Hurried")
    path = scenario(tmp_path, text, "hurried.yaml")
    without = fuzz_scenario(path, examples=25, kinds=("evict", "deploy"))
    assert not without.found, without.report()
    outcome = fuzz_scenario(path, examples=200, kinds=("evict", "deploy", "tune"))
    assert outcome.found and outcome.finding is not None, outcome.report()
    assert [line.split(":")[0] for line in outcome.drawn].count("tune w") == 1
    tuned = next(line for line in outcome.drawn if line.startswith("tune w"))
    assert "fiber_recovery_hook_timeout_ms" in tuned
    assert len(outcome.steps) == 1 and outcome.steps[0].action in {"evict", "deploy"}
    written = Path(outcome.path).read_text()
    assert f"# {TUNE_NOTE}" in written and "option(s) marked" in written
    value = read(written)["w"]["fiber_recovery_hook_timeout_ms"]
    assert value in {"50ms", "1s"}
    assert "no_lost_stash" in " ".join(outcome.finding.failures)


def test_the_reproducer_header_gives_the_fuzz_command_with_its_fault_kinds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = STEADY.replace("steady-worker", "hurried-worker").replace("Steady", "Hurried")
    path = scenario(tmp_path, text, "hurried.yaml")
    out = tmp_path / "found"
    argv = ["fuzz", path, "--examples", "200", "--faults", "evict,deploy,tune", "--out", str(out)]
    assert main(argv) == 1
    assert "+ tune w: {'fiber_recovery_hook_timeout_ms': " in capsys.readouterr().out
    (written,) = out.glob("*.yaml")
    header = written.read_text().splitlines()[0]
    assert header == (
        f"# Found by `agentsim fuzz {path} --seed 0 --examples 200 --faults evict,deploy,tune`:"
    )


def test_tuning_alone_runs_examples_that_each_set_an_option(tmp_path: Path) -> None:
    """`--faults tune`: every example sets one or two options and inserts no step; the healthy
    worker keeps its promises under all of them."""
    outcome = fuzz_scenario(scenario(tmp_path, STEADY, "steady.yaml"), examples=15, kinds=("tune",))
    assert not outcome.found, outcome.report()
    assert outcome.runs >= 10 and outcome.rejected == 0


def test_a_file_whose_agents_cannot_be_tuned_is_refused_before_any_run(tmp_path: Path) -> None:
    """Agents written as one flow mapping cannot take an `options:` edit: asked to tune, the
    fuzzer says so at once, naming the file, instead of failing mid-search."""
    text = STEADY.replace(
        'agents:\n  w: {class: "tests.fuzz.agents:Steady"}\n',
        'agents: {w: {class: "tests.fuzz.agents:Steady"}}\n',
    )
    path = scenario(tmp_path, text, "flow.yaml")
    with pytest.raises(
        ValueError, match=r"flow\.yaml: line \d+: agent w is not written as a block"
    ):
        fuzz_scenario(path, examples=5, kinds=("evict", "tune"))
    assert not fuzz_scenario(path, examples=5, kinds=("evict",)).found
