"""The bundled library: enough stories, each readable, each passing under several seeds, and
each one's expectations strong enough to catch the regression its story is about (the runtime
is broken on purpose, and the scenario must fail naming what went wrong)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agents_core.agent_tools.backbone import DetachedBackbone
from agents_core.agent_tools.notify import MILESTONE_DEDUPE_PREFIX, MilestoneNotifier
from agents_core.fiber_ledger import FiberLedger
from agents_core.fibers import FiberRunner
from agents_core.keep_alive import KeepAlive
from agents_core.recovery import Recovery
from agents_core.releases.registry import RELEASES
from agents_core.releases.v0_32.host_jobs import HOST_JOB_KEEP_ALIVE_ID, HostJobs
from scenarios import load_scenario, run_scenario
from tests.scenarios.helpers import LIBRARY, library_files

KEBAB = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


def run(name: str, seed: int | None = None, sdk: str | None = None) -> Any:
    return run_scenario(load_scenario(LIBRARY / f"{name}.yaml").on_release(sdk), seed=seed)


def test_the_library_tells_at_least_twenty_stories() -> None:
    """Issue 5 asks for at least 20 library scenarios."""
    assert len(library_files()) >= 20


@pytest.mark.parametrize("path", library_files(), ids=lambda p: p.name)
def test_each_story_is_named_for_its_file_and_described_for_people(path: Path) -> None:
    """File names are kebab-case and equal the scenario's name; the description is a paragraph
    of several sentences, not a label."""
    scenario = load_scenario(path)
    assert KEBAB.fullmatch(path.stem), path.name
    assert scenario.name == path.stem
    assert len(scenario.description) >= 200, scenario.description
    assert scenario.description.count(". ") >= 1, scenario.description
    assert scenario.expect, "a story without expectations proves nothing"


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
@pytest.mark.parametrize("seed", range(1, 6))
@pytest.mark.parametrize("path", library_files(), ids=lambda p: p.name)
def test_each_story_passes_with_seeds_one_to_five(path: Path, seed: int, sdk: str) -> None:
    """The stories check bounds that hold whatever the seeded timings and ids, on both
    releases (an expectation of one release alone says `sdk:`)."""
    result = run_scenario(load_scenario(path).on_release(sdk), seed=seed)
    assert result.passed, result.report()


# -- each story catches its regression -------------------------------------------------------
def _stash_is_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FiberRunner, "_write_stash", lambda self, fiber_id, data, managed: None)


def _no_heartbeat(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0.21.0: a held lease asks the alarm for no heartbeat.
    monkeypatch.setattr(KeepAlive, "alarm_candidates", lambda self, now: [])
    # 0.32.0: the heartbeat is the host job cf:keep-alive; every sync of the host jobs drops it.
    sync = HostJobs.sync

    async def sync_without_heartbeat(self: HostJobs) -> None:
        await sync(self)
        jobs = self._lifecycle.jobs
        if jobs.get(HOST_JOB_KEEP_ALIVE_ID) is not None:
            await jobs.cancel(HOST_JOB_KEEP_ALIVE_ID)

    monkeypatch.setattr(HostJobs, "sync", sync_without_heartbeat)


def _recovery_without_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    def candidates(self: Any, now: int) -> list[int]:
        pending = self._has_pending_fiber_recovery()
        return [now + self._options.keep_alive_interval_ms] if pending else []

    monkeypatch.setattr(Recovery, "_recovery_alarm_candidates", candidates)


def _idempotency_key_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FiberLedger, "row_by_key", lambda self, key: None)


def _own_teardown_delivered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(DetachedBackbone, "_aborted_by_own_teardown", lambda self, r, c: False)


def _milestones_not_deduped(monkeypatch: pytest.MonkeyPatch) -> None:
    original = MilestoneNotifier.notify

    def forgetful(self: Any, row: Any, milestone: Any) -> None:
        self._ctx.host.kv.delete(f"{MILESTONE_DEDUPE_PREFIX}{row['run_id']}:{milestone['name']}")
        original(self, row, milestone)

    monkeypatch.setattr(MilestoneNotifier, "notify", forgetful)


Breakage = Callable[[pytest.MonkeyPatch], None]

REGRESSIONS: list[tuple[str, Breakage, str]] = [
    ("deploy-mid-fiber-resumes-from-stash", _stash_is_lost, "'story:recovered'"),
    ("idle-eviction-mid-fiber", _stash_is_lost, "'story:recovered' records"),
    ("keep-alive-holds-long-fiber", _no_heartbeat, "'incarnation:end'"),
    ("poison-fiber-backs-off-then-ages-out", _recovery_without_backoff, "backoff='flat'"),
    ("webhook-accepted-once-across-deploy", _idempotency_key_ignored, "status='running'"),
    ("detached-budget-exceeded-gives-up-once", _own_teardown_delivered, "status='aborted'"),
    ("milestones-narrated-and-reacted", _milestones_not_deduped, "'story:milestone-message'"),
]


@pytest.mark.parametrize("sdk", list(RELEASES))
@pytest.mark.parametrize(
    ("name", "breakage", "named"), REGRESSIONS, ids=[r[0] for r in REGRESSIONS]
)
def test_a_story_fails_when_the_promise_it_tells_is_broken(
    monkeypatch: pytest.MonkeyPatch, name: str, breakage: Breakage, named: str, sdk: str
) -> None:
    """With the runtime broken where the story's promise lives, the scenario fails on each
    release, and one of its failure sentences names the expectation that caught it."""
    assert run(name, sdk=sdk).passed
    breakage(monkeypatch)
    result = run(name, sdk=sdk)
    assert not result.passed
    assert any(named in failure for failure in result.failures), result.report()
