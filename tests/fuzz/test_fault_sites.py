"""Faults aimed where bugs live: storage faults are drawn over the statements the base run
executed, each reached exactly (a step before the base step it ran in, a skip count), so a
bug behind one user UPDATE is found; each example draws which fault kinds it may use."""

from __future__ import annotations

from pathlib import Path

import pytest

from scenarios import parse_scenario, run_scenario
from scenarios.hunt.fault_sites import site_groups, statement_sites, target_of
from scenarios.hunt.fuzz import fuzz_scenario
from scenarios.hunt.statement_shapes import fault_group

TALLY = """\
name: tally
description: A background tally of three one-second counts under a keepAlive lease.
seed: 4
faults: none
agents:
  t: {class: "tests.fuzz.agents:Tally"}
steps:
  - call: {agent: t, method: tally, args: [3]}
  - run_for: 10s
"""


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_sites_name_each_statement_by_agent_shape_step_and_skip() -> None:
    """Every statement of the base run becomes a site; the user's table is its own group."""
    scenario = parse_scenario(TALLY, "tally.yaml")
    result = run_scenario(scenario, record_statements=True)
    sites = statement_sites(scenario, result.statements)
    updates = [site for site in sites if site.table == "tally" and site.kind == "UPDATE"]
    assert [(s.target, s.pattern, s.step, s.skip) for s in updates] == [
        ("t", r"^UPDATE tally\b", 0, 0),
        ("t", r"^UPDATE tally\b", 1, 0),
        ("t", r"^UPDATE tally\b", 1, 1),
    ]
    groups = site_groups(sites)
    assert ("t", "UPDATE", "tally") in [(g[0].target, g[0].kind, g[0].table) for g in groups]
    assert all(
        len({(s.target, fault_group(s.statement), s.site) for s in group}) == 1
        for group in groups
        if fault_group(group[0].statement) != ("schema", "")
    )
    # Every schema statement of an agent is one group, whatever table it creates.
    schema = [g for g in groups if fault_group(g[0].statement) == ("schema", "")]
    assert len(schema) == 1 and len({s.table for s in schema[0]}) > 1
    # A shape issued from two places in the code is two groups, each with its code site.
    assert all(s.site for s in updates)
    shapes = [(g[0].target, g[0].kind, g[0].table) for g in groups if g[0].kind != "CREATE TABLE"]
    assert len(shapes) > len(set(shapes))


@pytest.mark.parametrize("occurrence", [0, 1, 2])
def test_a_site_is_reached_exactly_by_a_step_before_its_base_step(occurrence: int) -> None:
    """Arming the site's match and skip just before its step fails that very statement, at the
    time it ran in the base run."""
    scenario = parse_scenario(TALLY, "tally.yaml")
    base = run_scenario(scenario, record_statements=True)
    sites = statement_sites(scenario, base.statements)
    updates = [s for s in sites if s.kind == "UPDATE" and s.table == "tally"]
    site = updates[occurrence]
    fault = f"{{agent: t, kind: error, match: '{site.pattern}', skip: {site.skip}}}"
    step = f"  - arm_storage_fault: {fault}\n"
    lines = TALLY.splitlines(keepends=True)
    at = lines.index("steps:\n") + 1 + site.step
    text = "".join(lines[:at] + [step] + lines[at:])
    result = run_scenario(parse_scenario(text, "tally.yaml"))
    (fault,) = result.trace.select("fault:storage_error")
    assert fault.get("statement").startswith("UPDATE tally")
    assert fault.t_ms == site.t_ms


def test_target_of_writes_sub_agents_as_a_step_names_them() -> None:
    scenario = parse_scenario(TALLY, "tally.yaml")
    assert target_of(scenario, "Tally/t") == "t"
    assert target_of(scenario, "Tally/t/Child/r1/Grand/g2") == "t/r1/g2"
    assert target_of(scenario, "Other/x") is None


def test_a_leak_behind_one_user_update_is_found_with_a_plain_reproducer(tmp_path: Path) -> None:
    """The bug shows only when a statement inside the leased section fails; the aimed fuzzer
    finds it in few examples and the reproducer names the statement shape it hit. On 0.21.0:
    0.32.0 runs many more statements of its own (its job queue and Tasks), among which 30
    examples do not reach the leased section's."""
    path = tmp_path / "tally.yaml"
    path.write_text(TALLY.replace("seed: 4\n", 'seed: 4\nsdk: "0.21.0"\n'))
    outcome = fuzz_scenario(path, examples=30, invariants_only=True)
    assert outcome.found, outcome.report()
    text = Path(outcome.path).read_text()
    assert "# inserted by agentsim fuzz" in text
    assert "  - arm_storage_fault: {agent: t, kind: " in text
    assert "liveness: the run did not settle" in outcome.report()
    assert outcome.report().splitlines()[-1] == f"  run it: agentsim run {outcome.path}"


def test_the_report_says_which_probes_the_runs_reached_and_which_never(tmp_path: Path) -> None:
    path = tmp_path / "tally.yaml"
    path.write_text(TALLY.replace("tally(n)", "tally(n)"))
    outcome = fuzz_scenario(path, examples=10, kinds=("evict", "deploy"), invariants_only=True)
    coverage = outcome.coverage()
    assert coverage.startswith("  probes: ")
    assert "never reached: " in coverage and "platform.alarm_given_up" in coverage


SESSION = """\
name: session
description: A client opens a one-minute session on an agent.
seed: 2
faults: none
agents:
  s: {class: "tests.fuzz.agents:Session"}
steps:
  - call: {agent: s, method: open}
  - run_for: 2m
"""


def test_a_repeated_call_finds_what_one_call_never_shows(tmp_path: Path) -> None:
    """`repeat` sends one of the scenario's own calls again at a drawn time: a second `open`
    overwrites the first lease, and the heartbeat never stops."""
    path = tmp_path / "session.yaml"
    path.write_text(SESSION)
    calm = fuzz_scenario(path, examples=20, kinds=("deploy",), invariants_only=True)
    assert not calm.found, calm.report()
    outcome = fuzz_scenario(path, examples=20, kinds=("repeat",), invariants_only=True)
    assert outcome.found, outcome.report()
    text = Path(outcome.path).read_text()
    assert "call: {agent: s, method: open, wait: false}" in text
    assert "liveness: the run did not settle" in outcome.report()


def test_always_expectations_are_kept_by_invariants_only_and_count_as_findings(
    tmp_path: Path,
) -> None:
    """`always: true` marks an expectation that holds under any fault: `--invariants-only`
    keeps it (and drops the story's others), and its failure is a finding."""
    from scenarios.hunt.emit import keep_always

    text = TALLY + (
        "expect:\n"
        "  - event: incarnation:end\n"
        "    count: {never: true}\n"
        "  # three counts (a repeated call makes six: the finding below)\n"
        "  - query: {agent: t, sql: 'SELECT n FROM tally', rows: [{n: 3}]}\n"
        "    always: true\n"
    )
    kept = keep_always(text, parse_scenario(text, "t.yaml"), "left out")
    assert "incarnation:end" not in kept and "always: true" in kept
    assert "# three counts" in kept
    assert [e.kind for e in parse_scenario(kept, "t.yaml").expect] == ["query"]
    path = tmp_path / "tally-always.yaml"
    path.write_text(text)
    outcome = fuzz_scenario(path, examples=20, kinds=("repeat",), invariants_only=True)
    assert outcome.found, outcome.report()
    assert any("expect 1 (query)" in f for f in outcome.finding.failures), outcome.report()
