"""Every constant, option default and key shape the checkers restate from the spec
(`sim.checkers.models.spec_constants`) equals the runtime's (and the simulated platform's) own
value. The checkers never import those values; this test does, so a disagreement between the
spec as the checkers read it and the code is a failure here, not a value both sides share."""

from __future__ import annotations

import dataclasses

import pytest

from agents_core import schedule_dispatch, stored_names
from agents_core.agent_tools import backbone, ledger, notify
from agents_core.alarm import FIBER_RECOVERY_BACKOFF_MAX_EXP, FIBER_RECOVERY_MAX_BACKOFF_MS
from agents_core.chat.progress import AGENT_TOOL_PROGRESS_COALESCE_MS
from agents_core.chat.turns import CHAT_TURN_FIBER_PREFIX
from agents_core.options import AgentOptions, RetryOptions, resolve_options
from agents_core.releases.v0_32 import job_driver
from sim import alarms
from sim.checkers.models import spec_constants as spec

RUNTIME = {
    "FIBER_RECOVERY_MAX_BACKOFF_MS": FIBER_RECOVERY_MAX_BACKOFF_MS,
    "FIBER_RECOVERY_BACKOFF_MAX_EXP": FIBER_RECOVERY_BACKOFF_MAX_EXP,
    "DETACHED_DELIVERY_LEASE_MS": ledger.DETACHED_DELIVERY_LEASE_MS,
    "FINISH_SLOTS": ledger.SLOTS,
    "MILESTONE_CLAIM_LEASE_MS": notify.MILESTONE_CLAIM_LEASE_MS,
    "MILESTONE_DEDUPE_PREFIX": notify.MILESTONE_DEDUPE_PREFIX,
    "CHAT_TURN_FIBER_PREFIX": CHAT_TURN_FIBER_PREFIX,
    "PROGRESS_COALESCE_MS": AGENT_TOOL_PROGRESS_COALESCE_MS,
    "DETACHED_BACKBONE_CADENCE_S": backbone.DETACHED_BACKBONE_CADENCE_S,
    "DETACHED_RECONCILE_CALLBACK": stored_names.DETACHED_RECONCILE_CALLBACK,
    "DETACHED_NOTIFY_CALLBACK": stored_names.DETACHED_NOTIFY_CALLBACK,
    "ALARM_HANDLER_LIMIT_MS": alarms.ALARM_HANDLER_LIMIT_MS,
    "ALARM_RETRY_BASE_MS": alarms.ALARM_RETRY_BASE_MS,
    "ALARM_RETRY_LIMIT": alarms.ALARM_RETRY_LIMIT,
    "DEADMAN_ALARM_DELAY_MS": job_driver.DEADMAN_ALARM_DELAY_MS,
    "OOM_ALARM_STRIKES_KEY": schedule_dispatch.OOM_ALARM_STRIKES_KEY,
    "MEMORY_LIMIT_BACKOFF_STEP_S": schedule_dispatch.MEMORY_LIMIT_BACKOFF_STEP_S,
    "MEMORY_LIMIT_BACKOFF_MAX_S": schedule_dispatch.MEMORY_LIMIT_BACKOFF_MAX_S,
}
"""Each restated constant's name -> the runtime's (or the platform's) value."""


def test_every_restated_constant_is_compared() -> None:
    restated = {name for name in spec.__all__ if name.isupper()} - {
        "OPTION_DEFAULTS",
        "RETRY_DEFAULTS",
    }
    assert restated == set(RUNTIME)


@pytest.mark.parametrize("name", sorted(RUNTIME))
def test_a_restated_constant_equals_the_runtimes(name: str) -> None:
    restated, runtime = getattr(spec, name), RUNTIME[name]
    assert restated == runtime, (
        f"{name}: the spec (as restated) says {restated!r}, the code {runtime!r}"
    )


@pytest.mark.parametrize("name", sorted(spec.OPTION_DEFAULTS))
def test_an_option_default_equals_the_runtimes(name: str) -> None:
    runtime = getattr(AgentOptions(), name)
    assert spec.option_value({}, name) == runtime
    assert spec.option_value(None, name) == runtime


def test_every_option_a_checker_may_ask_for_is_restated() -> None:
    """Every option of the runtime but `retry` (its own table) and the connection's identity
    frame (no checker reads it) has a restated default."""
    runtime = {f.name for f in dataclasses.fields(AgentOptions)} - {
        "retry",
        "send_identity_on_connect",
    }
    assert set(spec.OPTION_DEFAULTS) == runtime


def test_retry_defaults_equal_the_runtimes() -> None:
    assert dict(spec.RETRY_DEFAULTS) == dataclasses.asdict(RetryOptions())


@pytest.mark.parametrize(
    "given",
    [
        {"keep_alive_interval_ms": 2_000},
        {"fiber_recovery_max_age_ms": 0},
        {"hung_schedule_timeout_seconds": 5},
    ],
)
def test_an_option_set_falls_back_field_by_field_as_the_runtime_does(given: dict) -> None:
    """`??`: an explicit 0 is kept, every other field takes its default (fibers §8)."""
    resolved = resolve_options(given)
    for name in spec.OPTION_DEFAULTS:
        assert spec.option_value(given, name) == getattr(resolved, name), name


@pytest.mark.parametrize(
    ("interval", "scans"), [(2_000, 0), (2_000, 3), (2_000, 9), (30_000, 25), (1, 40)]
)
def test_the_recovery_backoff_matches_the_spec_formula(interval: int, scans: int) -> None:
    """fibers §3.3 step 4, computed by hand here: min(300 s, interval x 2^min(k, 20))."""
    assert spec.recovery_backoff_ms(interval, scans) == min(300_000, interval * 2 ** min(scans, 20))


def test_keys_are_scoped_as_the_spec_says() -> None:
    """Milestone claims per (runId, name); schedule dedupe ignores time and delay but not the
    owner key, the cron expression or the interval (fibers §4.1, §4.2, §4.7)."""
    assert spec.milestone_dedupe_key("r1", "draft") == "cf_agents:agent_tool_milestone:r1:draft"
    assert spec.milestone_dedupe_key("r1", "draft") != spec.milestone_dedupe_key("r2", "draft")
    row = {
        "type": "delayed",
        "callback": "tick",
        "payload": "{}",
        "owner_path_key": None,
        "time": 5,
    }
    assert spec.schedule_dedupe_key(row) == spec.schedule_dedupe_key({**row, "time": 99})
    assert spec.schedule_dedupe_key(row) != spec.schedule_dedupe_key({**row, "owner_path_key": "a"})
    cron = {**row, "type": "cron", "cron": "* * * * *"}
    assert spec.schedule_dedupe_key(cron) != spec.schedule_dedupe_key({**cron, "cron": "0 * * * *"})
    every = {**row, "type": "interval", "intervalSeconds": 10}
    assert spec.schedule_dedupe_key(every) != spec.schedule_dedupe_key(
        {**every, "intervalSeconds": 20}
    )
    assert spec.schedule_dedupe_key({**row, "type": "other"}) is None
