"""The scenario key `interleave:`: read, checked, resolved to points, run, and deterministic."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scenarios.language.errors import InvalidScenario
from scenarios.language.loader import load_scenario, parse_scenario
from scenarios.run.runner import run_scenario
from sim.interleave import Interleave, draw_points
from tests.scenarios.helpers import DATA

ROOT = Path(__file__).resolve().parents[2]
POINTS = DATA / "interleave-points.yaml"
DEPTH = DATA / "interleave-depth.yaml"


def _with(value: str) -> str:
    text = POINTS.read_text(encoding="utf-8")
    return text.replace("interleave: {seed: 5, points: [1, 3]}", f"interleave: {value}")


def test_points_run_out_of_fifo_order_at_the_groups_named() -> None:
    """`points` name the groups reordered; the result says which ran how."""
    scenario = load_scenario(POINTS)
    assert scenario.interleave is not None and scenario.interleave.points == (1, 3)
    result = run_scenario(scenario)
    assert result.passed, result.failures
    assert result.interleave == Interleave(5, (1, 3))
    assert result.group_sizes == (2, 2, 2, 2)
    assert [(r.t_ms, r.group) for r in result.reorderings] == [(1_000, 1), (3_000, 3)]
    first = result.reorderings[0]
    assert first.after == tuple(reversed(first.before))
    assert "Counter/a#1" in first.before[0] and "Counter/b#1" in first.before[1]


def test_depth_draws_its_points_among_the_groups_of_the_fifo_run() -> None:
    """`depth` is resolved, by the seed, to points among the groups the FIFO run has."""
    result = run_scenario(load_scenario(DEPTH))
    assert result.passed, result.failures
    assert result.interleave == Interleave(8, draw_points(8, 2, 4))
    assert len(result.reorderings) == 2


def test_an_override_wins_and_no_setting_means_fifo() -> None:
    """`run_scenario(interleave=...)` replaces the file's setting; no points changes nothing."""
    scenario = load_scenario(POINTS)
    counted = run_scenario(scenario, interleave=Interleave(5, ()))
    plain = parse_scenario(_with("{seed: 5, points: []}"), "plain.yaml")
    assert counted.reorderings == () and counted.group_sizes == (2, 2, 2, 2)
    assert run_scenario(plain).digest == counted.digest


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{seed: 5}", r"interleave: neither points: nor depth:; points: \[3, 11\]"),
        ("{seed: 5, points: [1], depth: 2}", "both points: and depth:; give one of them"),
        ("{seed: 5, points: [0]}", "item 1 is not a whole number from 1 to"),
        ("{seed: 5, depth: 0}", "depth: 0; expected a whole number from 1 to 1000"),
        ("{points: [1]}", r"missing key 'seed'; required keys: \['seed'\]"),
        ("{seed: 5, points: [1], order: fifo}", "unknown key 'order'"),
        ("7", "interleave: 7; expected a mapping"),
    ],
)
def test_a_bad_setting_is_one_located_sentence(value: str, message: str) -> None:
    with pytest.raises(InvalidScenario, match=message) as caught:
        parse_scenario(_with(value), "lib/x.yaml")
    assert str(caught.value).startswith("lib/x.yaml:8: interleave: ")


def test_same_file_same_digest_under_another_hash_seed() -> None:
    """An interleaved run is a function of the file: the same digest in two processes with
    different PYTHONHASHSEED."""
    program = (
        "import sys; from scenarios.language.loader import load_scenario; "
        "from scenarios.run.runner import run_scenario; "
        "print(run_scenario(load_scenario(sys.argv[1])).digest)"
    )
    digests = []
    for hash_seed in ("1", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=str(ROOT))
        done = subprocess.run(
            [sys.executable, "-c", program, str(DEPTH)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        digests.append(done.stdout.strip())
    assert len(digests[0]) == 64 and digests[0] == digests[1]
    assert digests[0] == run_scenario(load_scenario(DEPTH)).digest
