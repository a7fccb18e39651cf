"""Zoo bugs in the durable runtime's core (`agents_core`): keepAlive and the alarm owner,
schedules, fibers and managed fibers, recovery, and sub-agent leases.
"""

# ruff: noqa: E501 - find texts are verbatim lines of the tree, indentation included

from __future__ import annotations

from tests.bugzoo.model import Bug, fix

__all__ = ["RUNTIME_BUGS"]

KEEP_ALIVE_BUGS = (
    Bug(
        "keepalive-first-lease-no-heartbeat",
        "agents_core/keep_alive.py",
        (
            fix(
                "self.refs += 1\n            if self.refs == 1:",
                "self.refs += 1\n            if self.refs == 0:",
            ),
        ),
        "tests the count for zero (as if before the increment) when deciding to arm the heartbeat",
        "while a keepAlive lease is held the agent is woken often enough never to idle out",
        ("keepalive",),
    ),
    Bug(
        "keepalive-while-no-finally",
        "agents_core/keep_alive.py",
        (
            fix(
                "        dispose = await take()\n"
                "        try:\n"
                "            return await fn()\n"
                "        finally:\n"
                "            dispose()\n",
                "        dispose = await take()\n"
                "        result = await fn()\n"
                "        dispose()\n"
                "        return result\n",
            ),
        ),
        "keep_alive_while releases its lease after fn() returns, with no finally",
        "keep_alive_while holds a lease while fn runs and releases it however fn ends",
        ("keepalive",),
    ),
    Bug(
        "multiplexer-latest-candidate",
        "agents_core/lifecycle.py",
        (
            fix(
                "host.alarm.set_alarm(min(candidates))",
                "host.alarm.set_alarm(max(candidates))",
            ),
        ),
        "arms the slot at the latest candidate instead of the earliest",
        "the one alarm slot is armed at the earliest moment anything needs the agent",
        ("all",),
    ),
    Bug(
        "hung-interval-seconds-as-ms",
        "agents_core/schedule_dispatch.py",
        (
            fix(
                'out.append((running[0]["s"] + self._options.hung_schedule_timeout_seconds) * 1000)',
                'out.append(running[0]["s"] + self._options.hung_schedule_timeout_seconds)',
            ),
        ),
        "forgot to convert the hung-interval deadline from seconds to milliseconds",
        "a running interval is re-checked when it would turn hung, not in a busy loop",
        ("schedules",),
    ),
)

SCHEDULE_BUGS = (
    Bug(
        "cron-next-from-previous-due",
        "agents_core/schedule_dispatch.py",
        (
            fix(
                'next_s = next_cron_time_ms(row["cron"] or "", now_ms) // 1000',
                'next_s = next_cron_time_ms(row["cron"] or "", row["time"] * 1000) // 1000',
            ),
        ),
        "computes the next cron occurrence from the previous due time (to avoid drift) instead "
        "of from now",
        "a cron row runs once per wake and then waits for its next occurrence after now",
        ("schedules",),
    ),
    Bug(
        "interval-running-flag-stuck",
        "agents_core/schedule_dispatch.py",
        (
            fix(
                '"UPDATE cf_agents_schedules SET running = 0, time = ? WHERE id = ?",',
                '"UPDATE cf_agents_schedules SET time = ? WHERE id = ?",',
            ),
        ),
        "advancing an interval row forgets to clear its running flag",
        "an interval runs again one interval after each run completes",
        ("schedules",),
    ),
    Bug(
        "one-shot-deleted-before-callback",
        "agents_core/schedule_dispatch.py",
        (
            fix(
                "            if await self._run_due_row(row, now_s):\n"
                "                self._advance_schedule_row(row)\n",
                '            if row["type"] in _ONE_SHOT_TYPES:\n'
                "                # Deleted first, so that a throwing callback cannot run twice.\n"
                "                self._advance_schedule_row(row)\n"
                "                await self._run_due_row(row, now_s)\n"
                "            elif await self._run_due_row(row, now_s):\n"
                "                self._advance_schedule_row(row)\n",
            ),
        ),
        "deletes a one-shot row before awaiting its callback (a statement moved across an await)",
        "a one-shot schedule runs at least once: an eviction mid-callback runs it again",
        ("schedules",),
    ),
    Bug(
        "due-query-strict",
        "agents_core/schedule_dispatch.py",
        (
            fix(
                '"SELECT * FROM cf_agents_schedules WHERE time <= ?", now_s',
                '"SELECT * FROM cf_agents_schedules WHERE time < ?", now_s',
            ),
        ),
        "selects due rows with time < now instead of time <= now",
        "a schedule due at second t runs in the alarm of second t",
        ("schedules",),
    ),
)

FIBER_BUGS = (
    Bug(
        "fiber-lease-kept-when-delete-fails",
        "agents_core/fibers.py",
        (
            fix(
                '            probe(self.host, "fiber.cleanup_delete_failed")\n'
                "            raise\n"
                "        finally:\n",
                '            probe(self.host, "fiber.cleanup_delete_failed")\n'
                "            raise\n"
                "        else:\n",
            ),
        ),
        "wrote else: where finally: was meant, so the lease is released only when the run "
        "row's DELETE succeeds",
        "a fiber's keepAlive lease is released however the fiber ends",
        ("fibers",),
    ),
    Bug(
        "run-fiber-args-swapped",
        "agents_core/fibers.py",
        (
            fix(
                "return await self._run_fiber_internal(self.host.entropy.nanoid(), name, fn)",
                "return await self._run_fiber_internal(name, self.host.entropy.nanoid(), fn)",
            ),
        ),
        "swapped the fiber id and name arguments of run_fiber",
        "each run_fiber call is its own durable run, recovered under its own name",
        ("fibers",),
    ),
    Bug(
        "managed-complete-unguarded",
        "agents_core/fibers.py",
        (
            fix(
                "\"UPDATE cf_agents_fibers SET status = 'completed', completed_at = ? \"\n"
                "                \"WHERE fiber_id = ? AND status = 'running'\",",
                "\"UPDATE cf_agents_fibers SET status = 'completed', completed_at = ? \"\n"
                '                "WHERE fiber_id = ?",',
            ),
        ),
        "forgot the status condition in the UPDATE that completes a managed fiber",
        "ledger status changes are guarded: a cancelled (aborted) fiber never turns completed",
        ("fibers",),
    ),
    Bug(
        "cancel-fiber-no-abort",
        "agents_core/fibers.py",
        (
            fix(
                "        controller = self._managed_fiber_abort_controllers.get(fiber_id)\n"
                "        if controller is not None:\n"
                "            controller.abort(reason)\n",
                "",
            ),
        ),
        "cancel_fiber marks the row aborted but never aborts the running callback's signal",
        "cancel_fiber aborts a running managed fiber (its signal fires)",
        ("fibers",),
    ),
)

RECOVERY_BUGS = (
    Bug(
        "max-age-inverted",
        "agents_core/recovery.py",
        (
            fix(
                "too_old = max_age > 0 and age > max_age",
                "too_old = max_age > 0 and age < max_age",
            ),
        ),
        "compared the orphan's age with the maximum age the wrong way round",
        "an orphan whose hook keeps failing is retried with backoff until it is older than "
        "the maximum age, then dropped",
        ("fibers",),
    ),
    Bug(
        "s1-hook-error-sets-error",
        "agents_core/recovery.py",
        (
            fix(
                '"UPDATE cf_agents_fibers SET error_message = ? "',
                "\"UPDATE cf_agents_fibers SET status = 'error', error_message = ? \"",
            ),
        ),
        "ported the SDK's status = 'error' when a managed recovery hook throws",
        "S1: a managed fiber whose recovery hook throws stays interrupted, with the hook's error "
        "recorded, and resolve_fiber can still settle it",
        ("fibers",),
    ),
    Bug(
        "scan-guard-not-in-finally",
        "agents_core/recovery.py",
        (
            fix(
                "            progress = await self._recover_ledger_only_rows(scan_start) or progress\n"
                "        finally:\n"
                "            self._run_fiber_recovery_in_progress = False\n",
                "            progress = await self._recover_ledger_only_rows(scan_start) or progress\n"
                "            self._run_fiber_recovery_in_progress = False\n"
                "        finally:\n",
            ),
        ),
        "clears the one-scan-at-a-time guard at the end of the pass instead of in finally",
        "a recovery pass that fails (a storage error) does not stop later passes",
        ("fibers",),
    ),
    Bug(
        "recovers-live-fiber",
        "agents_core/recovery.py",
        (
            fix(
                "            if fiber_id in self._run_fiber_active_fibers:\n"
                "                continue\n"
                "            progress = await self._recover_run_row(row) or progress\n",
                "            progress = await self._recover_run_row(row) or progress\n",
            ),
        ),
        "the scan over run rows lost its check that the fiber is still running in this incarnation",
        "recovery only takes orphans: a fiber still running is never recovered (run twice)",
        ("fibers",),
    ),
    Bug(
        "recovery-backoff-never-resets",
        "agents_core/recovery.py",
        (
            fix(
                "            if progress:\n"
                "                self._recovery_no_progress_scans = 0\n"
                "            elif self._has_pending_fiber_recovery():\n",
                "            if self._has_pending_fiber_recovery():\n",
            ),
        ),
        "the no-progress counter is not reset when a pass makes progress",
        "the follow-up recovery alarm backs off only while passes make no progress",
        ("fibers",),
    ),
)

FACET_BUGS = (
    Bug(
        "facet-lease-token-split",
        "agents_core/keep_alive.py",
        (
            fix(
                'return token.rsplit(":", 1)[0]',
                'return token.split(":", 1)[0]',
            ),
        ),
        "splits the lease token at its first colon, though owner keys contain colons",
        "the keepAlive leases of a dead or deleted sub-agent are released on its root",
        ("facets",),
    ),
    Bug(
        "facet-release-no-decrement",
        "agents_core/keep_alive.py",
        (
            fix(
                "        del self.facet_tokens[token]\n        self.refs = max(0, self.refs - 1)\n",
                "        del self.facet_tokens[token]\n",
            ),
        ),
        "releasing a sub-agent's lease on the root drops the token but not the root's ref",
        "the root's heartbeat runs only while some sub-agent holds a lease",
        ("facets",),
    ),
)

RUNTIME_BUGS = (*KEEP_ALIVE_BUGS, *SCHEDULE_BUGS, *FIBER_BUGS, *RECOVERY_BUGS, *FACET_BUGS)
