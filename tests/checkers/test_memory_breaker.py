"""`memory_limit_breaker`: a one-shot whose callback keeps ending in a memory-limit reset is
backed off 30 s per strike and sealed at the budget; a count that skips, a count stored at the
budget and a back-off off the formula are each caught, whether written into the journal or
planted in the runtime."""

from __future__ import annotations

import pytest

from agents_core import schedule_dispatch
from sim.checkers import CheckContext, check
from sim.sqlite import Write
from tests.checkers.agents import fails_with_a_blind_checker, scenario_context, with_journal

W = "ScheduleWorkload/w"
KEY = "cf_agents:oom_alarm_strikes"
STORY = """
name: memory-breaker
description: two one-shots whose callbacks end in memory-limit resets
seed: 3
agents:
  w:
    workload: schedules
    options: {{max_alarm_memory_limit_strikes: {limit}, retry: {{max_attempts: 1}}}}
    schedules:
      - {{name: s1, after: 10s, fail: 3, fail_as: memory}}
      - {{name: s2, after: 20s, fail: 1, fail_as: memory}}
steps:
  - {{at: 0s, call: {{agent: w, method: status}}}}
"""


def breaker_run(limit: int = 3) -> CheckContext:
    return scenario_context(STORY.format(limit=limit), sdk="0.21.0")  # 0.21.0's breaker


def strikes(context: CheckContext) -> list[object]:
    return [record.get("strikes") for record in context.events("alarm:memory_limit_reset", W)]


def test_resets_back_off_and_seal_as_the_spec_says() -> None:
    context = breaker_run(limit=3)
    # s1 fails at 10 s (strike 1), s2 at 20 s (strike 2), s1 again at 40 s (strike 3: sealed).
    assert strikes(context) == [1, 2, 3]
    assert [r.get("sealed") for r in context.events("alarm:memory_limit_reset", W)] == [
        False,
        False,
        True,
    ]
    assert check(context, ["memory_limit_breaker"]) == []


def test_a_budget_of_one_seals_at_the_first_reset() -> None:
    context = breaker_run(limit=1)
    assert strikes(context)[0] == 1
    assert check(context, ["memory_limit_breaker"]) == []


def rewritten_count(context: CheckContext, old: int, new: int) -> CheckContext:
    def rewrite(write: Write) -> Write:
        statement, params = write
        if params and params[0] == KEY and len(params) > 1 and params[1] == str(old):
            return statement, (KEY, str(new), *params[2:])
        return write

    return with_journal(context, W, rewrite)


def test_a_count_that_skips_a_strike_is_caught() -> None:
    context = rewritten_count(breaker_run(limit=3), 2, 3)
    messages = [v.message for v in check(context, ["memory_limit_breaker"])]
    assert messages[0] == (
        f"agent {W} at 00:00:20.000 stored the memory-limit strike count 3 when the count "
        "committed before it was 1: each reset adds one"
    )


def test_a_seal_one_strike_late_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget compared with `>` instead of `>=`: the third strike backs off instead."""
    original = schedule_dispatch.ScheduleDispatch._handle_alarm_memory_limit

    async def late(self: schedule_dispatch.ScheduleDispatch, error: BaseException) -> bool:
        self._options = type(self._options)(
            **{**vars(self._options), "max_alarm_memory_limit_strikes": 4}
        )
        return await original(self, error)

    monkeypatch.setattr(schedule_dispatch.ScheduleDispatch, "_handle_alarm_memory_limit", late)
    context = breaker_run(limit=3)
    (violation,) = check(context, ["memory_limit_breaker"])
    assert violation.message == (
        f"agent {W} at 00:00:40.000 kept the memory-limit strike count 3 with a budget of 3 "
        "strikes: at the budget the breaker deletes the executing row and the count instead "
        "of backing off"
    )


def test_a_back_off_off_the_formula_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule_dispatch, "MEMORY_LIMIT_BACKOFF_STEP_S", 20)
    context = breaker_run(limit=3)
    found = check(context, ["memory_limit_breaker"])
    assert found, "a 20 s step must be caught"
    assert found[0].message.startswith(
        f"agent {W} at 00:00:10.000, strike 1 moved delayed schedule "
    )
    assert found[0].message.endswith("the breaker backs it off to second 40 (now + 30 s)")


def test_the_rules_are_this_checkers_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def caught(context: CheckContext) -> None:
        assert check(context, ["memory_limit_breaker"]), "nothing found"

    fails_with_a_blind_checker(
        monkeypatch, "memory_limit_breaker", caught, rewritten_count(breaker_run(), 2, 3)
    )


SEAL_FAILS = """
name: seal-fails
description: a one-shot's memory-limit reset at a budget of one, whose sealing DELETE fails
seed: 3
agents:
  w:
    workload: schedules
    options: {max_alarm_memory_limit_strikes: 1, retry: {max_attempts: 1}}
    schedules:
      - {name: s1, after: 10s, fail: 1, fail_as: memory}
steps:
  - {at: 0s, call: {agent: w, method: status}}
  - arm_storage_fault: {agent: w, kind: error, match: "^DELETE FROM cf_agents_schedules WHERE id"}
"""


def test_the_breakers_writes_are_best_effort() -> None:
    """fibers §4.6: each write of the breaker is tried on its own and a failure skipped, so a
    seal whose row DELETE fails still clears the count and swallows the reset (generate found
    the port re-raising the storage error: the alarm failed, the count stayed at the budget)."""
    context = scenario_context(SEAL_FAILS, sdk="0.21.0")
    assert [r.get("sealed") for r in context.events("alarm:memory_limit_reset", W)] == [True]
    assert context.events("fault:storage_error", W)
    assert not [
        r for r in context.events("alarm:failed", W) if "StorageError" in str(r.get("error"))
    ]
    kv = {row["key"] for row in context.storage[W].get("_cf_KV", [])}
    assert KEY not in kv
    assert check(context, ["memory_limit_breaker"]) == []
