"""`agentsim generate --sdk` and `--upgrade`: the drawn scenarios name the release they start
on when it is not the default, and upgrade deploys are drawn only when asked for (without it a
seed draws the very files it drew before)."""

from __future__ import annotations

from pathlib import Path

from agents_core.releases.registry import DEFAULT_RELEASE, RELEASES
from scenarios.generate.hunt import write_generated
from scenarios.language.loader import load_scenario
from scenarios.language.schema import DeployStep

OTHER = next(name for name in RELEASES if name != DEFAULT_RELEASE)
OLDEST, NEWEST = list(RELEASES)[0], list(RELEASES)[-1]


def _texts(paths: list[Path]) -> list[str]:
    return [path.read_text(encoding="utf-8") for path in paths]


def test_the_release_is_written_when_it_is_not_the_default(tmp_path: Path) -> None:
    plain = write_generated(examples=4, seed=5, out_dir=tmp_path / "a")
    on_default = write_generated(examples=4, seed=5, out_dir=tmp_path / "b", sdk=DEFAULT_RELEASE)
    other = write_generated(examples=4, seed=5, out_dir=tmp_path / "c", sdk=OTHER)
    assert _texts(plain) == _texts(on_default)
    assert all("\nsdk:" not in text for text in _texts(plain))
    assert [load_scenario(path).sdk for path in other] == [OTHER] * len(other)
    stripped = [text.replace(f'sdk: "{OTHER}"\n', "") for text in _texts(other)]
    assert stripped == _texts(plain)  # the same draws, on another release


def test_upgrades_are_drawn_only_when_asked_for(tmp_path: Path) -> None:
    def upgrades(paths: list[Path]) -> list[str]:
        return [
            step.sdk
            for path in paths
            for step in load_scenario(path).steps
            if isinstance(step, DeployStep) and step.sdk is not None
        ]

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
    assert upgrades(newest) == []  # nothing newer to bring
