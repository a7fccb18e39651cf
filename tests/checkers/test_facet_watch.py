"""`facet_runs_watched` (fibers §6.9, F-123): a root that indexes a sub-agent's fiber run wakes
every keepAlive interval even while its own recovery backs off; a root whose alarm followed its
backoff instead is caught."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from sim.checkers import CheckContext
from tests.checkers.agents import fails_with_a_blind_checker, messages_of, scenario_context, without

ROOT = "FiberWorkload/hub"
BESIDE_BACKOFF = """
    name: facet-lease-beside-backoff
    description: a root backs off on its own poison fiber while a sub-agent's fiber is cut
    seed: 1
    agents:
      hub:
        workload: fibers
        start: call
        recovery: throw
        fibers: [{name: f1, steps: 3, step: 1m}]
        sub_agents: [w1]
    liveness: {limit: 1h}
    steps:
      - call: {agent: hub, method: start}
      - run_for: 30s
      - evict: {agent: hub, reason: deploy}
      - run_for: 3m
      - call: {agent: hub, method: open, args: [w1]}
      - run_for: 10s
      - evict: {agent: hub/w1, reason: deploy}
      - run_for: 20m
"""


@pytest.fixture(scope="module", params=["0.21.0", "0.32.0"])
def beside_backoff(request: pytest.FixtureRequest) -> CheckContext:
    return scenario_context(BESIDE_BACKOFF, sdk=request.param)


def messages(context: CheckContext) -> list[str]:
    return messages_of(context, "facet_runs_watched")


def test_a_root_wakes_every_interval_while_it_indexes_a_sub_agent_run(beside_backoff) -> None:
    """Both the root's own row and the sub-agent's keep failing their recovery: the root backs
    off (its follow-up alarm doubles), yet fires every 30 s while the lease is indexed."""
    assert beside_backoff.events("fiber:recovery:backoff", ROOT) != []
    assert beside_backoff.table(ROOT, "cf_agents_facet_runs") != []
    assert messages(beside_backoff) == []


def test_an_alarm_that_followed_the_backoff_is_caught(beside_backoff) -> None:
    """Without the alarm runs between 5 and 6 minutes (what a root armed at its backoff's
    moment does), the run end whose next fire came late is named."""
    dropped = without(
        beside_backoff,
        lambda r: r.agent == ROOT and r.event.startswith("alarm:") and 300_000 < r.t_ms < 360_000,
    )
    found = messages(dropped)
    assert len(found) == 1
    assert "but its alarm did not fire by 00:05:30.000 (every 30000 ms" in found[0]


def test_a_root_that_indexes_nothing_owes_no_wake(beside_backoff) -> None:
    """With no sub-agent run indexed (the journal's inserts of the table gone), late fires are
    the backoff's business, not this checker's."""
    dropped = without(
        beside_backoff,
        lambda r: r.agent == ROOT and r.event.startswith("alarm:") and 300_000 < r.t_ms < 360_000,
    )
    journal = tuple(
        tuple((sql, params) for sql, params in turn if "cf_agents_facet_runs" not in sql)
        for turn in dropped.journals[ROOT]
    )
    unindexed = dataclasses.replace(dropped, journals={**dropped.journals, ROOT: journal})
    assert messages(unindexed) == []


@pytest.mark.parametrize("test", [test_an_alarm_that_followed_the_backoff_is_caught])
def test_the_catching_test_fails_with_a_blind_checker(
    test: Callable[[CheckContext], None],
    beside_backoff: CheckContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The catching test goes red when the checker is replaced by one that finds nothing."""
    fails_with_a_blind_checker(monkeypatch, "facet_runs_watched", test, beside_backoff)
