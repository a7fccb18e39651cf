"""Checkers: named invariants over a finished run's trace and final storage.

A checker is a small function `CheckContext -> list[Violation]` that reads only the context —
trace records, the final storage snapshot, its journal of committed turns and the alarm slot of
every agent, whether the liveness phase went quiet — never the runtime's memory. `CHECKERS`
maps each invariant's name (the names scenario files use) to its checker; `check` runs some or
all of them; `assert_invariants(sim)` raises an `InvariantViolation` (seed, scenario, each
violation in a sentence, the trace tail and the replay command). How to write one:
`docs/checkers.md`.

| invariant | promise |
| --- | --- |
| `exactly_once_finish` | S8: finish delivered exactly once, at least once across a crash |
| `budget_interrupts` | S7: a budget give-up is `interrupted` and never hides a completion |
| `reattach_terminal` | §7: awaited runs cut off by a parent restart end and are delivered |
| `no_lost_stash` | a stash that returned survives eviction (workload convention) |
| `no_leaked_keep_alive` | an alarm armed after quiesce is explained by durable work |
| `schedules_fire` | every due schedule fires; intervals keep their cadence |
| `fibers_settled` | after quiesce every fiber settled or is a failing row within max age |
| `fiber_leases_released` | a fiber gives its keepAlive lease back in the instant it ends |
| `fiber_runs_once` | a fiber's function runs once: no automatic retry |
| `eviction_final` | nothing of an incarnation runs after its death; one life at a time |
| `deaths_are_whole` | a death takes its sub-agents and connections; a deploy takes all |
| `startup_once` | startup runs once per incarnation (again only after it failed) |
| `startup_gates_deliveries` | no handler runs during startup; startup triggers wait for it |
| `turns_atomic` | the journal of committed turns replays to the committed storage |
| `alarms_never_overlap` | two alarm handlers of one agent never run at once |
| `alarm_retries` | a failed handler is retried at 2, 4, 8 ... s, six times, then given up |
| `alarm_limit` | a handler is killed exactly 15 minutes after it started, never sooner |
| `alarm_fires_on_time` | an armed alarm fires at its time, never before |
| `keep_alive_heartbeat` | while a keepAlive lease is held the alarm fires every interval |
| `recovery_once` | the recovery hook runs once per orphan, again only after it failed |
| `recovery_error_kept` | S1: a managed fiber whose hook threw stays `interrupted` with the error |
| `schedules_fire_once` | a schedule never fires twice for one occurrence without a crash |
| `one_shot_completes` | a due one-shot's callback completes or runs again |
| `schedules_armed` | a schedule written re-arms the alarm slot no later than its due time |
| `client_timeline_exact` | S5: a client's reduced timeline never drops or doubles a frame |
| `milestones_once` | S3: a milestone notification is delivered at most once |
| `child_reset_retryable` | S6: a child reset while its parent lives ends the run `interrupted` |
| `give_up_not_early` | S7: a detached run is given up only when its budget or window ran out |
| `delivered_marks_earned` | S8: a slot or milestone is marked delivered only once delivered |
| `claims_wait_for_lease` | S8: a delivery claim is taken over only after its 60 s lease |
| `managed_status_final` | S1: a settled managed fiber's status never changes (bar a resolution) |
| `startup_triggered` | startup runs only for a startup trigger, never a plain RPC |
| `recovery_max_age` | an orphan is dropped for its age exactly when older than the max age |
| `recovery_backoff` | the recovery alarm backs off 2^k while passes make no progress |
| `interval_runs_on_time` | an interval runs again one interval after its run completed |
| `facet_interval_redispatched` | a sub-agent's interval whose dispatch failed is tried again next |
| `facet_runs_watched` | a root indexing a sub-agent's fiber run wakes every keepAlive interval |
| `due_jobs_in_time_order` | one alarm drives the jobs it finds due earliest first (0.32.0) |
| `deferred_job_kept` | a job a platform failure cut is kept, its marker cleared (0.32.0) |
| `startup_fallback_armed` | an alarm with jobs queued first arms 30 s on or later (0.32.0) |
| `deadman_before_drive` | the slot holds now + 30 s when the first due job is driven (0.32.0) |
| `legacy_schedules_moved` | after an upgrade's finished startup no legacy schedule row is left |
| `one_shot_retried_when_cut` | a one-shot cut short mid-callback is run again |
| `failed_finish_redelivered` | S8: a finish whose handler threw is delivered again |
| `chat_turns_serial` | a chat host runs its turns one at a time |
| `progress_done_sent` | S4: progress with fraction >= 1 is sent at once, never coalesced |
| `milestones_stored` | S2: a chat child's milestone is a stored chunk of its stream |
| `chat_recovery_attempts_count` | chat recovery attempts count 1, 2, 3... across restarts |
| `chunk_numbers_stable` | S5: one chunk number of a run names one chunk at every client |
| `fiber_keys_unique` | a managed fiber's idempotency key names one fiber of its agent |
| `interrupted_reason_kept` | an interrupted agent-tool run says why; no other run keeps a reason |
| `agent_tools_under_cap` | no more agent-tool runs live than the cap; a rejection only at the cap |
| `cron_next_occurrence` | a cron row's time is its expression's next occurrence after the write |
| `schedule_attempts_bounded` | a schedule callback is called at most maxAttempts times per run |
| `listings_match` | listFibers, deleteFibers and listSchedules answer as the spec's model |
| `schedules_owned_by_caller` | the schedule an agent is answered with is its own, never another's |
| `memory_limit_breaker` | a memory-limit strike counts one, stays under the budget, backs off |
| `retryable_only_interrupted` | an envelope is retryable exactly when its run is interrupted |
| `silent_runs_given_up` | a detached run silent past its no-progress window is given up in time |
| `finish_notified_once` | notify puts one chat message per finish status; onFinish wins |
| `child_turn_once` | one child turn per runId: a re-issue never starts another |
| `recovered_child_turn_rebound` | a recovered child turn binds to a live run, never a settled one |
| `clear_cancels_child_first` | clearing a live run cancels its child before deleting it |
| `drill_in_gated` | the drill-in gate admits exactly the registry's runs; refusals spawn none |
| `agent_tools_under_instance_cap` | a cap set on the instance holds; a rejection only at the cap |
| `stash_replaces_whole` | a stash replaces the snapshot whole; recovery hands the last one |
| `cancel_aborts_signal` | cancelFiber aborts a running fiber's signal: a watching callback stops |
| `recovery_scan_deadline` | a recovery pass stops at its soft deadline, never before it |
| `waited_status_settled` | a waiting start_fiber answers the settled status the ledger holds |
| `mcp_servers_durable` | an added MCP server is restored at each startup, before recovery |
| `schedule_dedupe_keys` | a schedule is answered with its own key's row; an interval key once |
| `client_runs_grouped` | T-131: a client groups sibling runs by tool call, in display order |
| `client_run_terminals` | T-135, T-139: a client shows each run's terminal status and fields |
| `progress_flushed` | S4: a coalesced progress value is sent when its window ends |
| `milestones_before_finish` | S3: a milestone is announced once reached, before its run finishes |
| `input_preview_derived` | T-36: a run shows its input's preview, in JavaScript characters |
| `cancel_settles_fiber` | a managed fiber cancelFiber answered true for is aborted from then on |
| `alarm_covers_schedules` | the slot is armed by each row's due time; a check-back never delays |
| `sub_agents_registered` | a sub-agent lives only while its parent's registry lists it |
"""

# Importing a module registers its invariants; `check` runs them in this order: the original
# seven first, then the platform's rules, storage, fibers, schedules and agent tools.
from sim.checkers import alarms, delivery, fibers  # noqa: F401, I001
from sim.checkers import lives, storage, alarm_slot, recovery, schedules  # noqa: F401, I001
from sim.checkers import timeline, tools, ledgers  # noqa: F401, I001
from sim.checkers import schedule_runs, redelivery, chat, chunk_identity  # noqa: F401, I001
from sim.checkers import fiber_keys, tool_rows, cron_due, schedule_attempts  # noqa: F401, I001
from sim.checkers import listings, schedule_owners  # noqa: F401, I001
from sim.checkers import memory_breaker  # noqa: F401, I001
from sim.checkers import tool_promises, tool_notices, tool_children, tool_registry  # noqa: F401, I001
from sim.checkers import stash_snapshots, fiber_promises, schedule_keys  # noqa: F401, I001
from sim.checkers import fiber_waits, mcp_servers  # noqa: F401, I001
from sim.checkers import reducer_promises, signal_timing, tool_previews  # noqa: F401, I001
from sim.checkers import fiber_cancels, alarm_cover, sub_agent_lives, facet_watch  # noqa: F401, I001
from sim.checkers import job_order, job_failures, job_wakes, migrations  # noqa: F401, I001
from sim.checkers.core import (
    LIVENESS_GRACE_MS,
    CheckContext,
    Checker,
    InvariantViolation,
    Violation,
    context_from,
    render_record,
)
from sim.checkers.registry import CHECKERS, assert_invariants, check, invariant, register

__all__ = [
    "CHECKERS",
    "LIVENESS_GRACE_MS",
    "CheckContext",
    "Checker",
    "InvariantViolation",
    "Violation",
    "assert_invariants",
    "check",
    "context_from",
    "invariant",
    "register",
    "render_record",
]
