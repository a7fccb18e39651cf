"""The comparison reports first differences with both sides' records, and forgives only what an
allow-list entry names, each entry naming a row of docs/divergences.md."""

from __future__ import annotations

import re
from pathlib import Path

from scenarios.diff.compare import ALLOWED, Allowed, compare
from scenarios.diff.normalise import normalise

DIVERGENCES = Path(__file__).resolve().parents[2] / "docs" / "divergences.md"


def _tables(created_at: int) -> dict:
    return {
        "a": {"cf_agents_schedules": [{"id": "s1", "callback": "tick", "created_at": created_at}]}
    }


def test_every_allowed_difference_names_a_divergence_row() -> None:
    """Each allow-list entry's row id is a row of docs/divergences.md."""
    rows = set(re.findall(r"^\| ([A-Z]\d+) \|", DIVERGENCES.read_text(), flags=re.MULTILINE))
    assert ALLOWED
    assert [rule.row for rule in ALLOWED if rule.row not in rows] == []


def test_a_forgiven_column_agrees_and_names_its_row() -> None:
    """K3: the schedule row's created_at differs (real clock) and is forgiven by name."""
    ours = normalise([], _tables(5), real=False)
    theirs = normalise([], _tables(1_790_000_000), real=True)
    outcome = compare(ours, theirs, "s")
    assert outcome.agree
    assert outcome.allowed == ["K3"]


def test_without_the_allow_list_the_same_tables_differ() -> None:
    """The same tables with no allow-list differ, naming the table and both rows."""
    ours = normalise([], _tables(5), real=False)
    theirs = normalise([], _tables(1_790_000_000), real=True)
    outcome = compare(ours, theirs, "s", allowed=())
    assert not outcome.agree
    assert outcome.differences[0].startswith("table a.cf_agents_schedules:")
    assert '"created_at":5' in outcome.differences[0]


def test_a_scenario_scoped_rule_forgives_only_its_scenario() -> None:
    """A rule for one scenario does not forgive the same difference in another."""
    rule = Allowed(
        row="S1", why="test", event="fiber:recovery:failed", payload_field="status", scenario="one"
    )
    ours = normalise(
        [
            {
                "t": 0,
                "agent": "a",
                "type": "fiber:recovery:failed",
                "payload": {"status": "interrupted"},
            }
        ],
        {},
        real=False,
    )
    theirs = normalise(
        [{"t": 0, "agent": "a", "type": "fiber:recovery:failed", "payload": {"status": "error"}}],
        {},
        real=True,
    )
    assert compare(ours, theirs, "one", allowed=(rule,)).agree
    other = compare(ours, theirs, "two", allowed=(rule,))
    assert not other.agree
    assert "workerd only: a fiber:recovery:failed" in other.differences[0]


def test_connect_events_and_the_state_rows_are_compared_with_no_allowance() -> None:
    """The port emits `connect` / `disconnect` and stores the state row alone, as SDK 0.21.0
    does (no allow-list entry forgives them): a `disconnect` missing on one side, or the legacy
    `cf_state_was_changed` row left on one side, is a difference."""
    closed = {"t": 5, "agent": "a", "type": "disconnect", "payload": {"code": 1000}}
    opened = {"t": 0, "agent": "a", "type": "connect", "payload": {"connectionId": "c" * 21}}
    state = [{"id": "cf_state_row_id", "state": '{"n": 1}'}]
    legacy = [*state, {"id": "cf_state_was_changed", "state": "true"}]
    ours = normalise([opened], {"a": {"cf_agents_state": state}}, real=False)
    same = normalise([opened], {"a": {"cf_agents_state": state}}, real=True)
    assert compare(ours, same, "s").agree
    both = normalise([opened, closed], {"a": {"cf_agents_state": state}}, real=True)
    outcome = compare(ours, both, "s")
    assert not outcome.agree and outcome.allowed == []
    assert "disconnect" in outcome.differences[0]
    flagged = normalise([opened], {"a": {"cf_agents_state": legacy}}, real=True)
    outcome = compare(ours, flagged, "s")
    assert not outcome.agree and outcome.allowed == []
    assert "cf_state_was_changed" in outcome.differences[0]
