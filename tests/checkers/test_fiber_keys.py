"""`fiber_keys_unique`: a managed fiber's idempotency key names one fiber of its agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.checkers import CheckContext, check
from sim.checkers.storage import inserted_rows
from tests.checkers.agents import fails_with_a_blind_checker, scenario_context

ROOT = Path(__file__).resolve().parents[2]
INSERT = (
    "INSERT INTO cf_agents_fibers (fiber_id, idempotency_key, name, status, created_at) "
    "VALUES (?, ?, ?, ?, ?)"
)
DELETE = "DELETE FROM cf_agents_fibers WHERE fiber_id = ?"
CREATE = (
    "CREATE TABLE cf_agents_fibers (fiber_id TEXT PRIMARY KEY, idempotency_key TEXT, "
    "name TEXT NOT NULL, status TEXT NOT NULL, created_at INTEGER NOT NULL)"
)
"""The ledger without its UNIQUE key: a port that lost it is what the checker is for."""
P = "Webhooks/hooks"


def messages(context: CheckContext) -> list[str]:
    return [v.message for v in check(context, ["fiber_keys_unique"])]


def ledger(*turns: tuple[str, tuple]) -> CheckContext:
    return CheckContext(records=[], journals={P: [[(CREATE, ())], *([turn] for turn in turns)]})


@pytest.fixture(scope="module")
def webhook() -> CheckContext:
    story = ROOT / "scenarios/library/webhook-accepted-once-across-deploy.yaml"
    return scenario_context(story.read_text(encoding="utf-8"))


def test_a_duplicate_webhook_keeps_one_fiber(webhook: CheckContext) -> None:
    """The story's webhook arrives twice with one key: one keyed row, and the checker agrees."""
    keys = [r["idempotency_key"] for r in inserted_rows(webhook.journals[P], "cf_agents_fibers")]
    assert keys == ["webhook:w-77"]
    assert messages(webhook) == []


def test_a_second_fiber_under_a_live_key_is_caught() -> None:
    context = ledger(
        (INSERT, ("f1", "webhook:w-77", "reply", "pending", 0)),
        (INSERT, ("f2", "webhook:w-77", "reply", "pending", 5)),
    )
    assert messages(context) == [
        f"managed fiber f2 of {P} was written with idempotency key 'webhook:w-77', which fiber "
        "f1 of the same agent still held (committed turn 3): a duplicate start became a second "
        "fiber"
    ]


def test_a_deleted_fiber_frees_its_key_and_null_keys_never_clash() -> None:
    context = ledger(
        (INSERT, ("f1", "k", "reply", "completed", 0)),
        (DELETE, ("f1",)),
        (INSERT, ("f2", "k", "reply", "pending", 5)),
        (INSERT, ("f3", None, "reply", "pending", 6)),
        (INSERT, ("f4", None, "reply", "pending", 7)),
    )
    assert messages(context) == []


def test_the_catching_test_fails_with_a_blind_checker(monkeypatch: pytest.MonkeyPatch) -> None:
    fails_with_a_blind_checker(
        monkeypatch,
        "fiber_keys_unique",
        lambda context: test_a_second_fiber_under_a_live_key_is_caught(),
        CheckContext(records=[]),
    )
