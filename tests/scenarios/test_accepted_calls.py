"""`count: {per_accepted_call: ...}`: a promise counted per call that returned, so a call the
inserted fault itself refused excuses what it did not do (explore and fuzz report no failure),
while a real bug under the same fault still fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import scenarios.cli  # noqa: F401  (before scenarios.hunt: an import circle of main's)
from scenarios.hunt.explore import Exploration
from scenarios.hunt.fuzz import fuzz_scenario
from scenarios.language.errors import InvalidScenario
from scenarios.language.loader import parse_scenario
from scenarios.language.schema import CallSelector, Count
from scenarios.run.runner import run_scenario
from tests.scenarios.helpers import ROOT

DOCS = ROOT / "docs" / "scenario-language.md"


def _docs_example() -> str:
    blocks = re.findall(r"```yaml\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    found = [block for block in blocks if "per_accepted_call" in block and "name:" in block]
    assert len(found) == 1, "the docs' per_accepted_call example is gone"
    return found[0]


SHOP = _docs_example()
CRASH_D = (
    "  - arm_storage_fault: {agent: shop, kind: crash, match: '^INSERT INTO charges', skip: 3}\n"
)
"""Kills the process just before order d's charge: the last call is refused, and no later
call settles it, so d is never charged."""


def _with_first_step(text: str, step: str) -> str:
    return text.replace("steps:\n", "steps:\n" + step, 1)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_the_count_is_parsed_with_its_calls() -> None:
    """Alone it means exactly one per accepted call; beside a bound, that bound per call."""
    scenario = parse_scenario(SHOP, "shop.yaml")
    assert scenario.expect[0].count == Count(1, 1, CallSelector("charge", "shop"))
    at_most = SHOP.replace("{per_accepted_call:", "{at_most: 2, per_accepted_call:")
    assert parse_scenario(at_most, "shop.yaml").expect[0].count == Count(
        0, 2, CallSelector("charge", "shop")
    )


def test_a_refused_call_may_count_once_or_not_at_all() -> None:
    """3 returned and 1 refused allow 3 to 4 (a refused call may have committed its effect)."""
    count = Count(1, 1, CallSelector("charge"))
    assert count.for_calls(3, 1) == Count(3, 4)
    assert Count(2, None, CallSelector("charge")).for_calls(3, 1) == Count(6, None)


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("method: charge}}", "method: chrage}}", r"'chrage' is not a public method.*'charge'"),
        (
            "call: {agent: shop, method: charge}}",
            "call: {agent: nobody, method: charge}}",
            "unknown",
        ),
        ("{per_accepted_call:", "{never: true, per_accepted_call:", r"never"),
        ("{agent: shop, method: charge}", "{agent: shop}", r"method"),
    ],
)
def test_a_bad_selector_is_refused_with_its_line(old: str, new: str, problem: str) -> None:
    with pytest.raises(InvalidScenario, match=problem) as caught:
        parse_scenario(SHOP.replace(old, new), "shop.yaml")
    assert caught.value.line == 14  # the count's line


def test_a_run_whose_fault_refuses_a_call_passes_and_an_absolute_count_fails() -> None:
    """With the charge of order d crashed, `exactly: 4` fails; per accepted call it holds."""
    crashed = _with_first_step(SHOP, CRASH_D).replace(
        "args: [d]}", "args: [d], expect_error: AgentEvicted}"
    )
    assert run_scenario(parse_scenario(crashed, "shop.yaml")).passed
    absolute = crashed.replace(
        "count: {per_accepted_call: {agent: shop, method: charge}}", "count: {exactly: 4}"
    )
    failures = run_scenario(parse_scenario(absolute, "shop.yaml")).failures
    assert [f for f in failures if "expected exactly 4 'shop:charged' records; found 3" in f]


def test_a_double_charge_fails_and_says_how_the_count_was_made() -> None:
    """A shop that charges a refused order again gives more records than calls were made: a
    failure that names the calls it was counted by."""
    crash = CRASH_D.replace("kind: crash,", "kind: crash-after-commit,").replace(
        "skip: 3", "skip: 0"
    )
    text = _with_first_step(SHOP.replace(":Shop", ":DoubleShop"), crash).replace(
        "args: [a]}", "args: [a], expect_error: AgentEvicted}"
    )
    failures = run_scenario(parse_scenario(text, "shop.yaml")).failures
    assert len(failures) == 1
    assert "expected between 3 and 4 'shop:charged' records; found 5" in failures[0]
    assert failures[0].endswith("(1 per accepted call of shop.charge: 3 returned, 1 refused)")


def test_explore_reports_no_failure_the_crash_excused_but_finds_a_double_charge(
    tmp_path: Path,
) -> None:
    """Every crash point of the docs' example is excused by the new count; the same story on a
    shop whose recovery charges a pending order again is a finding that names the count."""
    good = tmp_path / "shop.yaml"
    good.write_text(SHOP)
    outcome = Exploration(good, crash_points=120, interleavings=0, out_dir=tmp_path / "x").run()
    assert outcome.points_run > 100 and outcome.failures == 0, outcome.report()
    absolute = tmp_path / "absolute.yaml"
    absolute.write_text(
        SHOP.replace(
            "count: {per_accepted_call: {agent: shop, method: charge}}", "count: {exactly: 4}"
        )
    )
    before = Exploration(absolute, crash_points=120, interleavings=0, out_dir=tmp_path / "y")
    assert before.run().failures > 0  # what the count per accepted call is for
    bad = tmp_path / "double.yaml"
    bad.write_text(SHOP.replace(":Shop", ":DoubleShop"))
    found = Exploration(bad, crash_points=120, interleavings=0, out_dir=tmp_path / "z").run()
    assert found.findings and found.findings[0].breaks == ("expect 1 (event)",)
    assert "1 per accepted call of shop.charge: 3 returned, 1 refused" in "\n".join(
        found.findings[0].result.failures
    )


def test_fuzz_reports_no_failure_the_crash_excused_but_finds_a_double_charge(
    tmp_path: Path,
) -> None:
    """Fuzz with storage faults: nothing on the good shop, the double charge on the bad one."""
    good = tmp_path / "shop.yaml"
    good.write_text(SHOP)
    kwargs = {"examples": 150, "seed": 0, "kinds": ("storage",), "invariants_only": True}
    clean = fuzz_scenario(good, out_dir=tmp_path / "f", **kwargs)  # type: ignore[arg-type]
    assert clean.runs > 100 and not clean.found, clean.report()
    bad = tmp_path / "double.yaml"
    bad.write_text(SHOP.replace(":Shop", ":DoubleShop"))
    found = fuzz_scenario(bad, out_dir=tmp_path / "g", **kwargs)  # type: ignore[arg-type]
    assert found.finding is not None
    assert any("per accepted call of shop.charge" in f for f in found.finding.failures)
    assert run_scenario(parse_scenario(found.reproducer, found.path)).failures
