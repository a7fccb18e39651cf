"""The zoo's held-apart set: slips in `agents_core` written from the runtime's code and the spec
alone, without reading any library or hunting story, in code that a story may never run.

Each is a mistake a developer could make while editing that line (a comparison at a boundary, a
key scoped too widely, a status a guard forgets, a count off by one, a lost clean-up), never one
shaped to be found. `seen` says what a user of the runtime would notice. The runner reports this
set apart from the other bugs (`python tests/bugzoo/run.py --held-apart`): what the library
stories' base runs show, what fuzz and explore find beyond them, and how long each hunt took.
"""

# ruff: noqa: E501 - find texts are verbatim lines of the tree, indentation included

from __future__ import annotations

from tests.bugzoo.model import Bug, fix

__all__ = ["HELD_APART_BUGS"]

SCHEDULES = ("schedules",)
FIBERS = ("fibers",)
TOOLS = ("agent_tools",)


def held(
    id: str,
    file: str,
    hunks: tuple,
    story: str,
    promise: str,
    areas: tuple[str, ...],
    seen: str,
) -> Bug:
    return Bug(id, file, hunks, story, promise, areas, held_apart=True, seen=seen)


CRON_BUGS = (
    held(
        "cron-step-range-drops-last",
        "agents_core/cron.py",
        (
            fix(
                "    return range(low, high + 1, int(step_text))\n",
                "    return range(low, high, int(step_text))\n",
            ),
        ),
        "builds a stepped field with range(low, high, step), leaving out the range's upper bound",
        "a stepped range 'a-b/n' includes b when b is on the step",
        SCHEDULES,
        "'0-30/10 * * * *' fires at :00, :10 and :20 but never at :30; 'mon-fri/2' skips Friday",
    ),
    held(
        "cron-dom-and-dow-both-required",
        "agents_core/cron.py",
        (
            fix(
                "        if self.day_of_month_restricted and self.day_of_week_restricted:\n"
                "            return by_day or by_weekday\n"
                "        return by_day and by_weekday\n",
                "        return by_day and by_weekday\n",
            ),
        ),
        "simplified the day match to 'both fields must match', dropping crontab's either-one rule",
        "when day-of-month and day-of-week are both restricted, a day matching either one fires",
        SCHEDULES,
        "'0 9 1 * mon' runs only on a Monday that is the 1st, not on the 1st and on every Monday",
    ),
    held(
        "cron-next-not-strictly-after",
        "agents_core/cron.py",
        (
            fix(
                "divmod(after_ms // 1000 + 1, _SECONDS_PER_DAY)",
                "divmod((after_ms + 999) // 1000, _SECONDS_PER_DAY)",
            ),
        ),
        "rounds the start of the search up to a whole second, so an instant on a whole second is "
        "its own first candidate",
        "the next cron occurrence is strictly after the given instant",
        SCHEDULES,
        "a cron row advanced in the alarm of its own second gets the same second again and runs "
        "twice for one occurrence",
    ),
)

SCHEDULE_BUGS = (
    held(
        "schedule-dedupe-across-owners",
        "agents_core/schedules.py",
        (
            fix(
                '            "AND payload IS ? AND owner_path_key IS ?"\n'
                "        )\n"
                "        params: list[Any] = [timing.type, callback, payload_json, owner_path_key]\n",
                '            "AND payload IS ?"\n'
                "        )\n"
                "        params: list[Any] = [timing.type, callback, payload_json]\n",
            ),
        ),
        "the idempotency lookup matches type, callback and payload but not the owner",
        "idempotent schedules dedupe per owner: a sub-agent's row never stands for another's",
        ("schedules", "facets"),
        "two sub-agents (or a root and its sub-agent) that schedule the same cron callback share "
        "one row: the second owner gets the first one's id and its callback never runs",
    ),
    held(
        "list-schedules-range-end-exclusive",
        "agents_core/schedules.py",
        (
            fix(
                'query += " AND time >= ? AND time <= ?"',
                'query += " AND time >= ? AND time < ?"',
            ),
        ),
        "compares the time range's end with < instead of <=",
        "list_schedules' time_range is inclusive at both ends",
        SCHEDULES,
        "list_schedules(time_range={'end': t}) leaves out the schedule due exactly at t",
    ),
)

DISPATCH_BUGS = (
    held(
        "schedule-retry-one-extra-attempt",
        "agents_core/schedule_dispatch.py",
        (
            fix(
                "if attempt >= retry.max_attempts:",
                "if attempt > retry.max_attempts:",
            ),
        ),
        "the retry loop gives up after attempt max_attempts + 1 (> where >= was meant)",
        "a throwing schedule callback is called at most retry.max_attempts times per due row",
        SCHEDULES,
        "a callback with retry={'max_attempts': 2} is called three times before schedule:error, "
        "which reports attempts=2",
    ),
    held(
        "memory-limit-seal-one-strike-late",
        "agents_core/schedule_dispatch.py",
        (
            fix(
                "sealed = strikes >= limit",
                "sealed = strikes > limit",
            ),
        ),
        "the memory-limit breaker seals after limit + 1 strikes",
        "the alarm memory-limit breaker drops the executing row at the strike limit",
        ("schedules", "alarm"),
        "a one-shot callback that keeps exhausting memory is retried once more than "
        "max_alarm_memory_limit_strikes before it is dropped",
    ),
    held(
        "facet-dispatch-failure-keeps-interval-running",
        "agents_core/schedule_dispatch.py",
        (
            fix(
                "            await self._call_on_error(exc)\n"
                '            if row["type"] == "interval":\n'
                '                self.sql("UPDATE cf_agents_schedules SET running = 0 WHERE id = ?", row["id"])\n'
                "            return False\n",
                "            await self._call_on_error(exc)\n            return False\n",
            ),
        ),
        "when dispatching a sub-agent's row throws, the handler forgets to clear an interval's "
        "running flag",
        "a sub-agent's interval whose dispatch failed runs again at its next due time",
        ("schedules", "facets"),
        "after one failed dispatch a sub-agent's interval is skipped as 'still running' until "
        "the hung-schedule timeout forces it",
    ),
)

FIBER_BUGS = (
    held(
        "start-fiber-key-conflict-unchecked",
        "agents_core/fibers.py",
        (
            fix(
                "        if by_key is not None and (\n"
                '            (by_id is not None and by_id["fiber_id"] != by_key["fiber_id"])\n'
                '            or (explicit_id and by_key["fiber_id"] != fiber_id)\n'
                "        ):\n",
                '        if by_key is not None and by_id is not None and by_id["fiber_id"] != by_key["fiber_id"]:\n',
            ),
        ),
        "the id/key conflict check only looks at the case where both rows exist",
        "start_fiber with a new explicit fiber id and a key another fiber holds is refused",
        FIBERS,
        "start_fiber(fiber_id='b', idempotency_key='k') returns fiber 'a' (accepted False) when "
        "'a' holds 'k', instead of raising; the caller then waits on or cancels 'b', which "
        "does not exist",
    ),
    held(
        "cancel-fiber-forgets-pending",
        "agents_core/fibers.py",
        (
            fix(
                "\"UPDATE cf_agents_fibers SET status = 'aborted', error_message = ?, completed_at = ? \"\n"
                "            \"WHERE fiber_id = ? AND status IN ('pending', 'running')\",",
                "\"UPDATE cf_agents_fibers SET status = 'aborted', error_message = ?, completed_at = ? \"\n"
                "            \"WHERE fiber_id = ? AND status = 'running'\",",
            ),
        ),
        "the cancel UPDATE's guard names 'running' only",
        "cancel_fiber on a pending managed fiber aborts it (it never runs or is recovered)",
        FIBERS,
        "cancel_fiber returns True for a fiber left pending (its start failed on storage), but "
        "the row stays pending and recovery later hands it to on_fiber_recovered",
    ),
    held(
        "list-fibers-status-filter-oldest-first",
        "agents_core/fiber_ledger.py",
        (
            fix(
                'rows.sort(key=lambda r: (r["created_at"], r["fiber_id"]), reverse=True)',
                'rows.sort(key=lambda r: (r["created_at"], r["fiber_id"]))',
            ),
        ),
        "the merge of the per-status queries re-sorts without reverse=True",
        "list_fibers is newest first, with or without a status filter, and its limit keeps the "
        "newest",
        FIBERS,
        "list_fibers(status='completed') lists the oldest first, and with a limit it returns "
        "the oldest rows instead of the newest",
    ),
    held(
        "delete-fibers-settled-before-inclusive",
        "agents_core/fiber_ledger.py",
        (
            fix(
                '"WHERE status = ? AND completed_at IS NOT NULL AND completed_at < ? "',
                '"WHERE status = ? AND completed_at IS NOT NULL AND completed_at <= ? "',
            ),
        ),
        "compares completed_at with settled_before using <=",
        "delete_fibers(settled_before=t) deletes rows settled strictly before t",
        FIBERS,
        "a fiber that settled exactly at t is deleted by delete_fibers(settled_before=t)",
    ),
)

RECOVERY_BUGS = (
    held(
        "ledger-only-scan-forgets-pending",
        "agents_core/recovery.py",
        (
            fix(
                "\"SELECT * FROM cf_agents_fibers WHERE status IN ('pending', 'running') \"",
                "\"SELECT * FROM cf_agents_fibers WHERE status = 'running' \"",
            ),
        ),
        "the scan of ledger rows without a run row selects 'running' only",
        "a managed fiber accepted but never started (left pending) is recovered as interrupted",
        FIBERS,
        "a managed fiber whose start failed on storage stays pending for ever: on_fiber_recovered "
        "never sees it, a waiting start_fiber never returns, and the follow-up recovery alarm "
        "backs off for ever",
    ),
    held(
        "recovery-backoff-starts-doubled",
        "agents_core/recovery.py",
        (
            fix(
                "exponent = min(self._recovery_no_progress_scans, FIBER_RECOVERY_BACKOFF_MAX_EXP)",
                "exponent = min(self._recovery_no_progress_scans + 1, FIBER_RECOVERY_BACKOFF_MAX_EXP)",
            ),
        ),
        "counts the passes without progress from one, so the first follow-up is already doubled",
        "the follow-up recovery alarm comes one keepAlive interval after a pass, doubling only "
        "after passes that made no progress",
        FIBERS,
        "an orphan whose recovery hook throws is offered again two keepAlive intervals later "
        "instead of one (60 s, not 30 s), and every later follow-up twice as late",
    ),
)

KEEP_ALIVE_AND_FACET_BUGS = (
    held(
        "facet-lease-prefix-without-slash",
        "agents_core/keep_alive.py",
        (
            fix(
                'below = not exact and owner_key.startswith(prefix_key + "/")',
                "below = not exact and owner_key.startswith(prefix_key)",
            ),
        ),
        "matches the sub-tree of a deleted sub-agent by a bare string prefix of its owner key",
        "deleting a sub-agent drops the leases of its own sub-tree only",
        ("facets", "keepalive"),
        "deleting sub-agent 'w1' also drops the keepAlive leases of its sibling 'w10', whose root "
        "then stops its heartbeat while w10 still works",
    ),
    held(
        "has-sub-agent-ignores-class",
        "agents_core/facets.py",
        (
            fix(
                '"SELECT 1 AS x FROM cf_agents_sub_agents WHERE class = ? AND name = ?", class_name, name',
                '"SELECT 1 AS x FROM cf_agents_sub_agents WHERE name = ?", name',
            ),
        ),
        "the registry lookup matches the name alone",
        "a sub-agent is registered per (class, name): a deleted one is not found through another "
        "class's child of the same name",
        ("facets",),
        "has_sub_agent(A, 'x') is True when only B 'x' exists; the root's walks then revive a "
        "deleted A 'x' to run its schedules and recovery",
    ),
    held(
        "rearm-check-back-latest",
        "agents_core/lifecycle.py",
        (
            fix(
                "host.alarm.set_alarm(check_back if armed is None else min(armed, check_back))",
                "host.alarm.set_alarm(check_back if armed is None else max(armed, check_back))",
            ),
        ),
        "when the alarm sources cannot be read, keeps the later of the armed alarm and the "
        "check-back",
        "a re-arm that fails on storage arms a check-back no later than one keepAlive interval "
        "and never postpones an earlier alarm",
        ("all",),
        "a schedule due in 2 s runs 30 s late (or a check-back is lost behind a far alarm) when a "
        "re-arm hits a storage fault",
    ),
    held(
        "mcp-remove-not-durable",
        "agents_core/mcp.py",
        (
            fix(
                '        self._ctx.sql("DELETE FROM cf_agents_mcp_servers WHERE id = ?", server_id)\n',
                "",
            ),
        ),
        "remove_server drops the connection and broadcasts, but forgets the DELETE of its row",
        "a removed MCP server stays removed across restarts",
        ("all",),
        "an MCP server removed with remove_mcp_server comes back, connected, after the next "
        "eviction",
    ),
)

TOOL_BUGS = (
    held(
        "reducer-started-reopens-settled-run",
        "agents_core/agent_tools/reducer.py",
        (
            fix(
                "    if run is not None and run.status in TERMINAL_STATUSES:\n",
                '    if run is not None and run.status == "completed":\n',
            ),
        ),
        "the guard against a replayed 'started' checks for 'completed' only",
        "a replayed started frame never reopens a settled run in the client",
        TOOLS,
        "after a reconnect replay, a run that ended in error, aborted or interrupted shows as "
        "running again in the client",
    ),
    held(
        "input-preview-cut-at-limit",
        "agents_core/agent_tools/registry.py",
        (
            fix(
                "    if js_length(text) > INPUT_PREVIEW_LIMIT:\n",
                "    if js_length(text) >= INPUT_PREVIEW_LIMIT:\n",
            ),
        ),
        "the preview of a non-string input is cut when it is exactly at the limit",
        "an input whose JSON text is at most 500 characters is previewed whole",
        TOOLS,
        "an input whose JSON is exactly 500 characters is previewed with its last three "
        "characters replaced by '...'",
    ),
    held(
        "data-part-matched-by-id-alone",
        "agents_core/agent_tools/ui_chunks.py",
        (
            fix(
                'index = _find(out, lambda p: p.get("type") == kind and p.get("id") == part_id)',
                'index = _find(out, lambda p: p.get("id") == part_id)',
            ),
        ),
        "a data chunk with an id updates the latest part with that id, whatever its type",
        "a data-* chunk with an id replaces the data of the part with the same type and id",
        ("agent_tools", "chat"),
        "a 'data-status' chunk with id 'x' overwrites the data of an earlier 'data-plan' part "
        "with id 'x' (the part keeps its type, the status part never appears)",
    ),
    held(
        "stream-chunks-after-inclusive",
        "agents_core/chat/stream_store.py",
        (
            fix(
                '"WHERE stream_id = ? AND chunk_index > ? ORDER BY chunk_index",',
                '"WHERE stream_id = ? AND chunk_index >= ? ORDER BY chunk_index",',
            ),
        ),
        "reads the chunks after an index with >=, so the index itself comes again",
        "chunks(stream, after) returns the chunks with index greater than `after`",
        ("chat", "agent_tools"),
        "a resumed stream repeats its last chunk: a recovered chat turn rebuilds its message with "
        "one delta twice, and a child's chunks after a sequence start with the one already seen",
    ),
)

HELD_APART_BUGS: tuple[Bug, ...] = (
    *CRON_BUGS,
    *SCHEDULE_BUGS,
    *DISPATCH_BUGS,
    *FIBER_BUGS,
    *RECOVERY_BUGS,
    *KEEP_ALIVE_AND_FACET_BUGS,
    *TOOL_BUGS,
)
