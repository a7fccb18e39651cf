"""`agentsim generate --sdk` and `--upgrade`: the drawn scenarios name the release they start
on when it is not the default, a newer release is also reached by scenarios that start on an
older one and upgrade mid-run (its migration sometimes cut by an aimed storage fault), and other
upgrade deploys are drawn only when asked for."""

from __future__ import annotations

import re
from pathlib import Path

from agents_core.releases.registry import DEFAULT_RELEASE, RELEASES
from scenarios.generate.faults import MIGRATION_STATEMENTS
from scenarios.generate.hunt import write_generated
from scenarios.language.loader import load_scenario
from scenarios.language.schema import ArmStorageFaultStep, DeployStep
from scenarios.run.runner import run_scenario

OTHER = next(name for name in RELEASES if name != DEFAULT_RELEASE)
OLDEST, NEWEST = list(RELEASES)[0], list(RELEASES)[-1]


def _texts(paths: list[Path]) -> list[str]:
    return [path.read_text(encoding="utf-8") for path in paths]


def _upgrades(paths: list[Path]) -> list[str]:
    return [
        step.sdk
        for path in paths
        for step in load_scenario(path).steps
        if isinstance(step, DeployStep) and step.sdk is not None
    ]


def test_the_release_is_written_when_it_is_not_the_default(tmp_path: Path) -> None:
    plain = write_generated(examples=4, seed=5, out_dir=tmp_path / "a")
    on_default = write_generated(examples=4, seed=5, out_dir=tmp_path / "b", sdk=DEFAULT_RELEASE)
    other = write_generated(examples=4, seed=5, out_dir=tmp_path / "c", sdk=OTHER)
    assert _texts(plain) == _texts(on_default)
    # A scenario on the default release names none; one that starts older (and is upgraded to
    # the default by a drawn deploy) names the release it starts on.
    for path, text in zip(plain, _texts(plain), strict=True):
        start = load_scenario(path).sdk
        assert ("\nsdk:" in text) == (start is not None and start != DEFAULT_RELEASE), text
    assert all(f'sdk: "{load_scenario(path).sdk}"\n' in path.read_text() for path in other)
    # The first example is the simplest, the plain start: the same scenario, on the release.
    first = [text.replace(f'sdk: "{OTHER}"\n', "") for text in _texts(other)[:1]]
    assert first == _texts(plain)[:1]


def test_a_newer_release_is_reached_by_an_upgrade_too(tmp_path: Path) -> None:
    """Asked for the newest release, some scenarios start on an older one and a drawn deploy
    (a fault step) brings the newest mid-run, once; the others start on the newest and never
    deploy another release. On the oldest, none starts elsewhere."""
    files = write_generated(examples=30, seed=3, out_dir=tmp_path / "a", sdk=NEWEST)
    older = [path for path in files if load_scenario(path).sdk != NEWEST]
    on_newest = [path for path in files if load_scenario(path).sdk == NEWEST]
    assert older and on_newest
    assert {load_scenario(path).sdk for path in older} <= set(list(RELEASES)[:-1])
    for path in older:
        assert _upgrades([path]) == [NEWEST]
        line = next(text for text in path.read_text().splitlines() if "deploy: {sdk:" in text)
        assert "# a platform fault drawn beside the workload" in path.read_text()
        assert NEWEST in line
    assert _upgrades(on_newest) == []
    oldest = write_generated(examples=30, seed=3, out_dir=tmp_path / "b", sdk=OLDEST)
    assert {load_scenario(path).sdk for path in oldest} == {OLDEST}


def test_upgrades_are_drawn_only_when_asked_for(tmp_path: Path) -> None:
    upgrades = _upgrades
    plain = write_generated(examples=30, seed=3, out_dir=tmp_path / "a", sdk=OLDEST)
    assert upgrades(plain) == []
    # An upgrade is one fault kind among several, drawn or not per example by swarm testing:
    # over three seeds' examples some are drawn, each to a newer release.
    asked = [
        path
        for seed in (3, 4, 5)
        for path in write_generated(
            examples=30, seed=seed, out_dir=tmp_path / f"b{seed}", sdk=OLDEST, upgrade=True
        )
    ]
    assert upgrades(asked) and set(upgrades(asked)) <= set(list(RELEASES)[1:])
    newest = write_generated(examples=10, seed=3, out_dir=tmp_path / "c", sdk=NEWEST, upgrade=True)
    on_newest = [path for path in newest if load_scenario(path).sdk == NEWEST]
    assert on_newest and upgrades(on_newest) == []  # nothing newer to bring


def test_a_surface_that_plays_one_release_draws_no_older_start() -> None:
    """A narrowed surface leaves older starts closed unless it opens them (the real side plays
    one release per scenario); the full surface opens them."""
    from dataclasses import replace

    from scenarios.generate import FULL
    from scenarios.generate.hunt import drawn

    assert FULL.older_starts
    one = replace(FULL, older_starts=False)
    found = drawn(examples=30, seed=3, sdk=NEWEST, surface=one)
    assert {generated.sdk for generated in found} <= {None, NEWEST}  # None: the default
    assert not [s for g in found for s in g.steps if s.action == "deploy" and s.args.get("sdk")]


def test_an_upgrade_may_bring_a_fault_aimed_at_its_migration(tmp_path: Path) -> None:
    """A scenario that upgrades mid-run may arm, at the upgrade's instant, a storage fault aimed
    at a statement only the newer release's migration runs; run, it fires there, on the newer
    release's first startup of that agent."""
    files = write_generated(
        examples=60, seed=3, out_dir=tmp_path / "a", sdk=NEWEST, areas=("schedules",)
    )
    aimed = []
    for path in files:
        scenario = load_scenario(path)
        deploys = [s for s in scenario.steps if isinstance(s, DeployStep) and s.sdk is not None]
        arms = [
            s
            for s in scenario.steps
            if isinstance(s, ArmStorageFaultStep) and s.match in MIGRATION_STATEMENTS
        ]
        # (A fault aimed at random may name the jobs table too, at any time.)
        if deploys and any(a.at_ms == deploys[0].at_ms for a in arms):
            aimed.append(path)
    assert aimed, "no upgrade drew a fault at its migration"
    fired = []
    for path in aimed:
        result = run_scenario(load_scenario(path))
        fired += [
            r
            for r in result.trace
            if r.event.startswith("fault:")
            and "statement" in r.fields
            and any(re.search(p, r.fields["statement"]) for p in MIGRATION_STATEMENTS)
        ]
    assert fired, "no aimed fault cut a migration"
