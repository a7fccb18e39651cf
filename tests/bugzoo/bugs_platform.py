"""Zoo bugs in the simulated platform (`sim`): the alarm slot, idle eviction, the input gate and
turn-atomic storage. A platform bug can show in any story, so each is hunted over all of them.
"""

# ruff: noqa: E501 - find texts are verbatim lines of the tree, indentation included

from __future__ import annotations

from tests.bugzoo.model import Bug, fix

__all__ = ["PLATFORM_BUGS"]

ALL = ("all",)

PLATFORM_BUGS = (
    Bug(
        "alarm-retry-linear",
        "sim/alarms.py",
        (
            fix(
                "at_ms = platform.kernel.now_ms + ALARM_RETRY_BASE_MS * 2**attempt",
                "at_ms = platform.kernel.now_ms + ALARM_RETRY_BASE_MS * attempt",
            ),
        ),
        "wrote the retry delay as base x attempt, so the first retry fires at once and the "
        "delay grows linearly",
        "a throwing alarm handler is retried 2 s later, then with a doubling delay",
        ALL,
    ),
    Bug(
        "alarm-retry-limit-off-by-one",
        "sim/alarms.py",
        (
            fix(
                "if attempt >= ALARM_RETRY_LIMIT:",
                "if attempt > ALARM_RETRY_LIMIT:",
            ),
        ),
        "compared the attempt with the retry limit using > instead of >=",
        "the platform gives an alarm up after 6 retries",
        ALL,
    ),
    Bug(
        "alarm-limit-first-attempt-only",
        "sim/alarms.py",
        (
            fix(
                "            on_suspend=lambda: self._arm_limit(record, run, slot),\n",
                "            # a retry only finishes what the first run began\n"
                "            on_suspend=(lambda: self._arm_limit(record, run, slot)) if attempt == 0 else None,\n",
            ),
        ),
        "armed the 15-minute handler limit for the first attempt only, assuming retries are short",
        "any alarm handler still running 15 minutes after it started is killed with its "
        "incarnation",
        ALL,
    ),
    Bug(
        "alarm-set-keeps-old-timer",
        "sim/alarms.py",
        (
            fix(
                "        record.alarm_at_ms = at_ms\n"
                "        record.alarm_generation += 1\n"
                "        generation = record.alarm_generation\n",
                "        record.alarm_at_ms = at_ms\n"
                "        generation = record.alarm_generation\n",
            ),
        ),
        "dropped the generation bump from set(), so the timer of a replaced time still fires",
        "one alarm slot, replace-on-set: only the last time set fires",
        ALL,
    ),
    Bug(
        "idle-timer-not-invalidated",
        "sim/lifecycle.py",
        (
            fix(
                "        if deadline > self._platform.kernel.now_ms:\n"
                "            self._arm_idle(incarnation, deadline)\n"
                "            return\n",
                "",
            ),
        ),
        "the idle timer no longer checks that its deadline still stands, so activity does not "
        "push back an eviction an earlier wait had armed",
        "an incarnation is evicted for idleness only after 70-140 s without activity",
        ALL,
    ),
    Bug(
        "gate-skipped-by-non-startup-event",
        "sim/platform.py",
        (
            fix(
                "                if incarnation.gate is not None:\n"
                '                    self.probes.hit("platform.delivery_waited_at_gate")\n'
                "                while incarnation.gate is not None:\n"
                "                    await incarnation.gate\n",
                "                if incarnation.gate is not None:\n"
                '                    self.probes.hit("platform.delivery_waited_at_gate")\n',
            ),
        ),
        "a refactor kept the probe of the input gate but lost the wait behind it",
        "startup runs under an input gate: no other event is delivered while it runs",
        ALL,
    ),
    Bug(
        "startup-on-plain-rpc",
        "sim/platform.py",
        (
            fix(
                'STARTUP_TRIGGERS = frozenset({"get", "request", "connect", "message", "close", '
                '"alarm", "facet"})',
                'STARTUP_TRIGGERS = frozenset(\n    {"get", "request", "rpc", "connect", "message", '
                '"close", "alarm", "facet"}\n)',
            ),
        ),
        "added rpc to the startup triggers so that every entry point starts the agent",
        "startup is triggered by a request, a connection, an alarm, get-by-name or a sub-agent "
        "resolution, never by a plain RPC",
        ALL,
    ),
    Bug(
        "rollback-keeps-pending-writes",
        "sim/sqlite.py",
        (
            fix(
                '            self._db.execute("ROLLBACK")\n            self._pending = []\n',
                '            self._db.execute("ROLLBACK")\n',
            ),
        ),
        "the rollback forgets to clear the turn's pending writes, so the next commit journals "
        "writes that were rolled back",
        "turn-atomic storage: a crash rolls its whole turn back and nothing of it is committed",
        ALL,
    ),
    Bug(
        "deploy-kill-not-retried",
        "sim/alarms.py",
        (
            fix(
                'if reason == "destroyed":',
                'if reason in ("destroyed", "deploy"):  # new code starts clean',
            ),
        ),
        "treated a deploy like a self-destruct and dropped the retry of the alarm it killed",
        "an alarm handler whose incarnation dies under it is retried (2 s, doubling)",
        ALL,
    ),
)
