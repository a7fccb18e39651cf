"""Zoo bugs in agent tools (the delivery ledger, the detached backbone and its budgets, milestones,
re-attach, the client reducer, child resets) and in the chat hosts (turns, chat recovery,
progress and milestones of a chat child).
"""

# ruff: noqa: E501 - find texts are verbatim lines of the tree, indentation included

from __future__ import annotations

from tests.bugzoo.model import Bug, fix

__all__ = ["TOOL_BUGS"]

TOOLS = ("agent_tools",)
CHAT = ("chat",)

AGENT_TOOL_BUGS = (
    Bug(
        "claim-lease-inverted",
        "agents_core/agent_tools/ledger.py",
        (
            fix(
                'f"AND ({slot}_claimed_at IS NULL OR {slot}_claimed_at < ?)",',
                'f"AND ({slot}_claimed_at IS NULL OR {slot}_claimed_at > ?)",',
            ),
        ),
        "the claim's compare-and-set takes a claim newer than the lease instead of an expired one",
        "S8: a run's finish is delivered exactly once normally (at least once across a crash)",
        TOOLS,
    ),
    Bug(
        "delivered-mark-before-handlers",
        "agents_core/agent_tools/ledger.py",
        (
            fix(
                "        async def complete() -> None:\n"
                "            if serialize:\n"
                "                await self._agent._run_serialized_delivery(invoke)\n"
                "            else:\n"
                "                await invoke()\n"
                "            try:\n"
                "                self.write_delivered_mark(run_id, slot, result.status, now)\n",
                "        async def complete() -> None:\n"
                "            self._ctx.sql(\n"
                '                f"UPDATE cf_agent_tool_runs SET {slot}_delivered_at = ? "\n'
                '                f"WHERE run_id = ? AND {slot}_claimed_at = ?",\n'
                "                self._ctx.host.clock.now_ms(),\n"
                "                run_id,\n"
                "                now,\n"
                "            )\n"
                "            if serialize:\n"
                "                await self._agent._run_serialized_delivery(invoke)\n"
                "            else:\n"
                "                await invoke()\n"
                "            try:\n"
                '                self._ctx.host.trace.emit("hook:delivered", runId=run_id, slot=slot, '
                "status=result.status)\n",
            ),
        ),
        "marks the slot delivered before awaiting the handlers (a write moved across an await)",
        "S8: a finish whose handler was cut short by a crash is delivered again",
        TOOLS,
    ),
    Bug(
        "own-teardown-marker-inverted",
        "agents_core/agent_tools/backbone.py",
        (
            fix(
                "        if not reached:\n            self._ctx.host.kv.delete(marker)\n",
                "        if reached:\n            self._ctx.host.kv.delete(marker)\n",
            ),
        ),
        "inverted the condition that drops the teardown note, so it is dropped when the cancel "
        "reached the child",
        "S7: a budget give-up is delivered once as interrupted; the abort the parent's own "
        "teardown caused delivers nothing more",
        TOOLS,
    ),
    Bug(
        "backbone-skips-given-up-runs",
        "agents_core/agent_tools/backbone.py",
        (
            fix(
                '"AND finish_delivered_at IS NULL ORDER BY started_at, rowid"',
                '"AND finish_delivered_at IS NULL AND give_up_delivered_at IS NULL "\n'
                '                "ORDER BY started_at, rowid"',
            ),
        ),
        "the reconcile tick skips runs already given up, taking them for finished",
        "S7: a genuine completion after a budget give-up still re-fires on_finish",
        TOOLS,
    ),
    Bug(
        "backbone-reschedule-only-on-clean-pass",
        "agents_core/agent_tools/backbone.py",
        (
            fix(
                "        try:\n"
                "            for run in self._ctx.sql(\n"
                '                "SELECT * FROM cf_agent_tool_runs WHERE detached = 1 "\n'
                '                "AND finish_delivered_at IS NULL ORDER BY started_at, rowid"\n'
                "            ):\n"
                '                await self.reconcile_run(run["run_id"])\n'
                "        finally:\n",
                "        for run in self._ctx.sql(\n"
                '            "SELECT * FROM cf_agent_tool_runs WHERE detached = 1 "\n'
                '            "AND finish_delivered_at IS NULL ORDER BY started_at, rowid"\n'
                "        ):\n"
                '            await self.reconcile_run(run["run_id"])\n'
                "        if self._ledger.owes_detached_finish():\n",
            ),
        ),
        "schedules the next reconcile tick only after a clean pass, as the SDK does",
        "S8: an owed detached finish is delivered at least once, even after its handler threw",
        TOOLS,
    ),
    Bug(
        "milestone-claim-dropped",
        "agents_core/agent_tools/notify.py",
        (
            fix(
                '        self._ctx.host.kv.put(key, {"state": "claimed", "at": now})\n',
                "",
            ),
        ),
        "dropped the durable claim written before the milestone hook, relying on the "
        "delivered mark written after it",
        "S3: a milestone is notified at most once per run and name, live or reconciled",
        TOOLS,
    ),
    Bug(
        "reattach-rearms-without-progress",
        "agents_core/agent_tools/reattach.py",
        (
            fix(
                'if ended != "done" or forwarded == 0:',
                'if ended != "done" and forwarded == 0:',
            ),
        ),
        "wrote and for or in the re-attach's give-up test",
        "re-attach gives up after a no-progress window and never waits forever on a silent child",
        TOOLS,
    ),
    Bug(
        "reducer-wire-sequence-dedupe",
        "agents_core/agent_tools/reducer.py",
        (
            fix(
                "        chunk_sequence = _chunk_sequence(event)\n"
                "        if chunk_sequence is not None:\n"
                '            return _first_time(self._seen_chunks, (event["runId"], chunk_sequence))\n',
                "",
            ),
        ),
        "the client reducer dedupes stored chunks by their wire sequence again (the SDK's key)",
        "S5: the client reducer never drops a genuine frame and never doubles one",
        TOOLS,
    ),
    Bug(
        "child-reset-not-retryable",
        "agents_core/agent_tools/runs.py",
        (
            fix(
                '"interrupted",\n                child_still_running=True,',
                '"error",\n                child_still_running=True,',
            ),
        ),
        "ported the SDK's error status for a child reset while its parent lives",
        "S6: a child reset by a deploy while the parent lives is interrupted and retryable",
        TOOLS,
    ),
)

CHAT_BUGS = (
    Bug(
        "turn-queue-tail-after-await",
        "agents_core/chat/turns.py",
        (
            fix(
                "        done = self._ctx.host.tasks.deferred()\n"
                "        self.tail = done\n"
                "        try:\n"
                "            if previous is not None and not previous.done():\n"
                "                await previous\n"
                "            if generation != self.generation:\n",
                "        done = self._ctx.host.tasks.deferred()\n"
                "        try:\n"
                "            if previous is not None and not previous.done():\n"
                "                await previous\n"
                "            self.tail = done\n"
                "            if generation != self.generation:\n",
            ),
        ),
        "takes the turn queue's tail after waiting for the previous turn (moved across an await)",
        "chat turns run one at a time, in the order they were submitted",
        CHAT,
    ),
    Bug(
        "recovery-attempts-not-persisted",
        "agents_core/chat/chat_recovery.py",
        (
            fix(
                '        incident["attempts"] += 1\n'
                '        self.set_incident(key, incident, "attempting")\n',
                '        self.set_incident(key, incident, "attempting")\n'
                '        incident["attempts"] += 1\n',
            ),
        ),
        "counts the recovery attempt after the incident is written, so the stored count lags",
        "chat recovery of an interrupted turn gives up after max_chat_recovery_attempts",
        CHAT,
    ),
    Bug(
        "progress-done-coalesced",
        "agents_core/chat/progress.py",
        (
            fix(
                "done = _number(fraction) and fraction >= 1",
                "done = _number(fraction) and fraction > 1",
            ),
        ),
        "tests fraction > 1 for a finished progress report",
        "S4: progress with fraction >= 1 is always sent at once, never coalesced",
        CHAT,
    ),
    Bug(
        "milestone-state-by-run-id",
        "agents_core/chat/progress.py",
        (
            fix(
                "state = self._turns.states.get(request_id)",
                "state = self._turns.states.get(run_id)",
            ),
        ),
        "looks the turn up by the run id instead of the request id, so milestones are only "
        "broadcast",
        "S2: a milestone is stored in the child's stream, survives eviction and is replayed",
        CHAT,
    ),
)

TOOL_BUGS = (*AGENT_TOOL_BUGS, *CHAT_BUGS)
