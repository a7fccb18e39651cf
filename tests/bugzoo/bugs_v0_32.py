"""The zoo's SDK 0.32.0 set: slips in the components that model release 0.32.0
(`agents_core/releases/v0_32/`: the job queue and its driver, the deadman and the startup
fallback, the migrations, the Scheduler on jobs and the host jobs), written in the held-apart
style: from that code and the spec (`sdk-0.32.md`) alone, without reading any library or hunting
story, and without looking at what a hunter or a checker catches.

Each is a mistake a developer could make while writing that line (a bound swapped, a clause a
port from 0.21.0 left out, a marker not reset, a field a match or a migration forgets, a write
put before the work it records, a clock armed after the work it guards), never one shaped to be
found. `seen` says what
a user of the runtime would notice. The runner hunts this set on 0.32.0 and reports it apart
(`python tests/bugzoo/run.py --set v0_32`, which implies `--sdk 0.32.0`).
"""

# ruff: noqa: E501 - find texts are verbatim lines of the tree, indentation included

from __future__ import annotations

from tests.bugzoo.model import Bug, fix

__all__ = ["V0_32_BUGS", "V0_32_RELEASE"]

V0_32_RELEASE = "0.32.0"
"""The SDK release these components model, and the one the set is hunted on."""

_DIR = "agents_core/releases/v0_32"
ALARM = ("alarm", "schedules")
SCHEDULES = ("schedules",)


def on_0_32(
    id: str,
    file: str,
    hunks: tuple,
    story: str,
    promise: str,
    areas: tuple[str, ...],
    seen: str,
) -> Bug:
    return Bug(
        id,
        f"{_DIR}/{file}",
        hunks,
        story,
        promise,
        areas,
        held_apart=True,
        seen=seen,
        release=V0_32_RELEASE,
    )


DRIVER_BUGS = (
    on_0_32(
        "deadman-armed-after-the-drive",
        "job_driver.py",
        (
            fix(
                "        self._warn_backlog(due)\n"
                "        if not self._disabled():\n"
                "            host.alarm.set_alarm(now + DEADMAN_ALARM_DELAY_MS)\n"
                "        for stale in due:\n",
                "        self._warn_backlog(due)\n        for stale in due:\n",
            ),
            fix(
                '            self._queue.mark_running(row["id"], now)\n'
                "            await self._drive_job(row)\n",
                '            self._queue.mark_running(row["id"], now)\n'
                "            await self._drive_job(row)\n"
                "        if not self._disabled():\n"
                "            host.alarm.set_alarm(now + DEADMAN_ALARM_DELAY_MS)\n",
            ),
        ),
        "arms the deadman once the due jobs have been driven instead of before the first dispatch",
        "when at least one job is due, the alarm is set 30 s ahead before the first dispatch, so "
        "an isolate that dies mid-drive is woken again 30 s later",
        ALARM,
        "after a cold wake, the alarm left armed while the jobs run is startup's re-arm for the "
        "due job itself (1 ms ahead): a job whose callback kills its isolate (a crash, an "
        "eviction mid-callback) is retried at once, over and over, instead of every 30 s",
    ),
    on_0_32(
        "platform-failure-keeps-running-marker",
        "job_driver.py",
        (
            fix(
                "                with contextlib.suppress(Exception):  # best effort, as the SDK's\n"
                '                    queue.clear_running(row["id"])\n',
                "",
            ),
        ),
        "the platform-failure branch keeps the job but forgets to clear its dispatch marker",
        "a job whose dispatch ends in a platform failure is kept with its time unchanged and its "
        "dispatch marker cleared, and runs again on the alarm's retry",
        ALARM,
        "an interval schedule whose callback hits a platform failure (a lost network connection, "
        "a storage reset) is skipped as 'previous execution still running' on the platform's "
        "retry and only forced once its 30 s hung timeout has passed",
    ),
    on_0_32(
        "startup-fallback-min-not-max",
        "job_driver.py",
        (
            fix(
                "        host.alarm.set_alarm(max(nxt, now + DEADMAN_ALARM_DELAY_MS))\n",
                "        host.alarm.set_alarm(min(nxt, now + DEADMAN_ALARM_DELAY_MS))\n",
            ),
        ),
        "the startup fallback takes the earlier of the queue's next time and now + 30 s",
        "the startup fallback is armed at max(next job time, now + 30 s): a startup that keeps "
        "failing is retried about every 30 s, never in a tight loop on an overdue job",
        ALARM,
        "an agent with an overdue job whose startup throws (a failing on_start, a storage fault "
        "in a migration) wakes again 1 ms later, over and over, instead of once every 30 s",
    ),
)

QUEUE_BUGS = (
    on_0_32(
        "due-jobs-in-id-order",
        "job_queue.py",
        (
            fix(
                '"SELECT * FROM cf_agents_jobs WHERE time <= ? ORDER BY time ASC", math.floor(now_ms)',
                '"SELECT * FROM cf_agents_jobs WHERE time <= ?", math.floor(now_ms)',
            ),
        ),
        "the due-jobs query is 0.21.0's, without the ORDER BY time that 0.32.0 added",
        "the due jobs of one alarm are driven in due-time order, the earliest first",
        ALARM,
        "when one alarm finds several jobs due (after an eviction, a deploy or a failed alarm, "
        "or two schedules due in the same second), they run in the order of their ids, not their "
        "times: a schedule due at 10:00:05 can run before the one due at 10:00:00",
    ),
)

SCHEDULER_BUGS = (
    on_0_32(
        "every-dedupe-ignores-the-interval",
        "scheduler.py",
        (
            fix(
                '            if timing.type == "interval" and envelope.get("intervalSeconds") != (\n'
                "                timing.interval_seconds\n"
                "            ):\n"
                "                continue\n",
                "",
            ),
        ),
        "the idempotency match compares the cron expression but not an interval's seconds",
        "an idempotent schedule matches only a job with the same type, callback, owner, payload "
        "and cron expression or interval",
        SCHEDULES,
        "schedule_every(60, 'poll') after schedule_every(10, 'poll') returns the 10 s schedule: "
        "no new job, and the callback keeps running every 10 s",
    ),
    on_0_32(
        "migration-drops-interval-seconds",
        "scheduler.py",
        (
            fix(
                '            for key in ("delayInSeconds", "cron", "intervalSeconds"):\n',
                '            for key in ("delayInSeconds", "cron"):\n',
            ),
        ),
        "the move of cf_agents_schedules into jobs copies delayInSeconds and cron into the "
        "envelope but forgets intervalSeconds",
        "a 0.21.0 schedule moved into the job queue keeps its whole timing: an interval still "
        "recurs every intervalSeconds",
        SCHEDULES,
        "after upgrading to 0.32.0, an interval schedule made on 0.21.0 runs once and then again "
        "at once after every run (its recurrence is now + 0 s), and lists with interval 0",
    ),
    on_0_32(
        "schedules-schema-key-put-before-the-move",
        "schema_keys.py",
        (
            fix(
                "        await step(stored)\n        await self.put_current(kv)\n",
                "        await self.put_current(kv)\n        await step(stored)\n",
            ),
        ),
        "a capability's migration puts the current schema version first and then migrates",
        "a migration step that throws leaves the schema key as it was, so the next startup "
        "migrates again",
        SCHEDULES,
        "an upgrade whose first 0.32.0 startup hits a storage fault while moving "
        "cf_agents_schedules into jobs never moves the rest: those schedules never fire again and "
        "list_schedules no longer shows them",
    ),
)

HOST_JOB_BUGS = (
    on_0_32(
        "housekeeping-wake-latest-not-earliest",
        "host_jobs.py",
        (
            fix(
                "        return min(moments) if moments else None\n",
                "        return max(moments) if moments else None\n",
            ),
        ),
        "the housekeeping job is timed at the latest of the moments housekeeping asks for, not "
        "the earliest",
        "cf:housekeeping is due at the earliest of the recovery follow-up and the sub-agents' "
        "fiber-lease wake",
        ("fibers", "facets", "keepalive"),
        "while a root waits out a long recovery backoff for an orphaned fiber, the check of its "
        "sub-agents' fiber leases (due one keepAlive interval ahead) waits for the backoff too: "
        "a sub-agent's interrupted fiber is recovered only when the root's backoff ends",
    ),
)

V0_32_BUGS: tuple[Bug, ...] = (*DRIVER_BUGS, *QUEUE_BUGS, *SCHEDULER_BUGS, *HOST_JOB_BUGS)
