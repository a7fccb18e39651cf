"""Probes: named marks on the rare paths that the runtime's recovery promises rest on.

A probe is not an event and not a check: `probe(host, name)` tells the host "this run reached
that path", and the host counts it. A hunt that never reached a path proves nothing about it, so
`agentsim fuzz`, `explore` and `run --seeds` report how often each probe was hit and which never
were, the fuzzer keeps examples that reach a probe it had not seen, and a scenario can require
probes (`expect: - probes: [...]`) so that a story that stops reaching its rare path fails
instead of passing vacuously. Probes never go into the trace: adding one changes no run's digest.

`RUNTIME_PROBES` is the catalogue of the runtime's own probes (the platform's are in
`sim.probes`); a test keeps it and the call sites in step. User code may hit probes of its own
through `host.trace.probe(name)`; they are counted the same way.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["PROBE_NAME", "RUNTIME_PROBES", "probe"]

PROBE_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
"""`area.what_happened`: lower case words, dot-separated, at least two parts."""

RUNTIME_PROBES: dict[str, str] = {
    "agent_tool.detached_finish_redelivered": (
        "a detached run's finish was delivered again after its claim's 60 s lease expired: the "
        "incarnation that claimed it died before marking it delivered"
    ),
    "chat.recovery_interrupted_attempts_exceeded": (
        "0.32.0: chat recovery gave a turn up because its interrupted attempts (the original "
        "turn and each attempt whose isolate died) reached max_interrupted_attempts"
    ),
    "chat.recovery_aborted_by_caller": (
        "0.32.0: chat recovery gave a turn up because chat_recovery's should_keep_recovering "
        "answered False (recovery_aborted)"
    ),
    "chat.recovery_completed_incident_deleted": (
        "0.32.0: a recovered chat turn completed and its recovery incident was deleted "
        "(chat:recovery:completed)"
    ),
    "chat.recovery_gave_up_partial_saved": (
        "0.32.0: chat recovery gave a turn up whose stream was still open and persisted the "
        "partial answer it held"
    ),
    "chat.recovery_on_exhausted_raised": (
        "0.32.0: chat_recovery's on_exhausted hook raised; the give-up went on to the clients"
    ),
    "chat.recovery_sealed_out_of_memory": (
        "the alarm memory-limit breaker sealed and chat recovery gave a live incident up"
    ),
    "chat.recovery_out_of_memory": (
        "chat recovery gave a turn up with out_of_memory (the memory-limit breaker sealed)"
    ),
    "chat.recovery_redeferred": (
        "0.32.0: a recovered chat turn failed on the platform after its continuation handed it "
        "off, and the continuation was enqueued again 3 s later"
    ),
    "chat.recovery_stable_timeout": (
        "0.32.0: chat recovery gave a turn up because the host stayed busy past "
        "stable_timeout_ms on every attempt (stable_timeout)"
    ),
    "chat.stalled_turn_recovering": (
        "0.32.0: a turn's model stream sent nothing for chat_stream_stall_timeout_ms and chat "
        "recovery took the turn over (the request ends with the outcome recovering)"
    ),
    "chat.recovery_found_complete_answer": (
        "chat recovery found an interrupted turn whose stream already held the answer's finish "
        "chunk (it died in its last step) and persisted that answer instead of continuing it"
    ),
    "ledger.dead_claim_reclaimed": (
        "a delivery claimed a slot whose earlier claim had outlived its lease and was left by "
        "an earlier incarnation: it died between its claim and its delivered mark (or its "
        "handler threw before it died); the at-least-once redelivery across a crash"
    ),
    "ledger.failed_handler_reclaimed": (
        "a delivery claimed a slot whose handler had thrown in this incarnation, once that "
        "claim's lease expired (the throwing handler is run again)"
    ),
    "ledger.unused_claim_released": (
        "a delivery failed after claiming its slot but before any handler ran (writing the "
        "terminal row failed), and gave the claim back for the next delivery to take at once"
    ),
    "ledger.live_claim_outlived_lease": (
        "a delivery found its slot claimed more than 60 s ago by a delivery of this same "
        "incarnation still pending (a startup sweep's deferred hooks), and stood back"
    ),
    "fiber.orphan_recovered": (
        "an orphaned unmanaged fiber row (its incarnation died mid-fiber) was handed to "
        "recovery and the hook succeeded; the row is gone"
    ),
    "fiber.finished_during_scan_skipped": (
        "a recovery scan reached a run row it had read as a candidate, but the fiber had "
        "finished (its row gone) while an earlier hook of the pass ran, and skipped it"
    ),
    "fiber.recovery_failed_row_kept": (
        "an unmanaged fiber's recovery hook threw and the row, younger than the max age, was "
        "kept for a later scan to retry"
    ),
    "fiber.max_age_dropped": (
        "a poison fiber row whose hook threw was older than fiber_recovery_max_age_ms and was "
        "dropped (skipped, max_age_exceeded)"
    ),
    "fiber.recovery_backoff_at_cap": (
        "fiber recovery's follow-up alarm was computed at its 5-minute cap: scans made no "
        "progress so often that the backoff stopped growing"
    ),
    "fiber.recovery_scan_deadline": (
        "a recovery scan ran past its soft deadline and stopped at a row, leaving the rest for "
        "the follow-up alarm"
    ),
    "fiber.recovery_scan_already_running": (
        "a recovery scan was asked for while one was already running in this incarnation, and "
        "returned at once"
    ),
    "fiber.managed_orphan_recovered": (
        "a managed fiber whose incarnation died was marked interrupted and offered to its "
        "recovery hook"
    ),
    "fiber.managed_recovery_hook_threw": (
        "the recovery hook of a managed fiber threw: the ledger stays interrupted with the "
        "hook's error recorded (S1)"
    ),
    "fiber.ledger_only_row_recovered": (
        "a managed ledger row left pending or running with no run row was recovered as interrupted"
    ),
    "fiber.stale_terminal_run_row_dropped": (
        "a run row was found beside a terminal ledger row (cancelled, then its incarnation "
        "died) and was deleted without calling the hook"
    ),
    "fiber.internal_recovery_timed_out": (
        "a framework host's internal recovery handler ran past fiber_recovery_hook_timeout_ms "
        "and the scan stopped waiting for it"
    ),
    "fiber.duplicate_joined_running_execution": (
        "a duplicate waiting start_fiber joined the execution still running in this incarnation"
    ),
    "fiber.duplicate_wait_triggered_recovery": (
        "a duplicate waiting start_fiber found its fiber unfinished with no execution in this "
        "incarnation, and ran a recovery scan"
    ),
    "agent_tool.cap_rejected": (
        "a new run was refused by max_concurrent_agent_tools and recorded as a born-error run"
    ),
    "agent_tool.child_reset_interrupted": (
        "an awaited run's child was reset while the parent lived: the run finished interrupted "
        "and retryable (S6)"
    ),
    "agent_tool.reissue_reattached": (
        "run_agent_tool was called again with the id of a run that is not hard terminal, and "
        "re-attached to its child instead of starting a turn"
    ),
    "agent_tool.recovery_reattached": (
        "startup recovery found an awaited run whose child was still running and queued it for "
        "re-attach"
    ),
    "agent_tool.recovery_inspect_failed": (
        "startup recovery could not inspect a run's child (it timed out or failed) and sealed "
        "the run interrupted"
    ),
    "agent_tool.recovery_deadline": (
        "startup recovery's pass-1 deadline had passed when a run's turn came, and the run was "
        "sealed recovery-deadline"
    ),
    "agent_tool.reattach_rearmed": (
        "a re-attach's tail closed cleanly after forwarding chunks (the child was re-evicted) "
        "and was opened again"
    ),
    "agent_tool.reattach_window_exceeded": (
        "a re-attach hit its max-window ceiling before the child reached a terminal, and gave "
        "up window-exceeded"
    ),
    "agent_tool.give_up_budget_exceeded": (
        "the backbone gave a detached run up because its absolute budget (max_budget_ms) was "
        "exceeded"
    ),
    "agent_tool.give_up_no_progress": (
        "the backbone gave a detached run up because it was silent past its no-progress window"
    ),
    "agent_tool.give_up_teardown_failed": (
        "a detached give-up could not cancel its child, so the child may still run "
        "(childStillRunning true)"
    ),
    "agent_tool.give_up_teardown_retried": (
        "a later backbone tick cancelled the child of a run whose give-up could not tear it "
        "down, while its budget stayed exceeded (B4)"
    ),
    "agent_tool.own_teardown_abort_closed": (
        "a child's abort caused by the parent's own give-up teardown closed the finish slot "
        "silently (S7)"
    ),
    "agent_tool.finish_redelivered_from_row": (
        "a backbone tick delivered the finish of a run whose row was already hard terminal "
        "(a cancel, or a delivery whose handler threw or whose incarnation died) from the row, "
        "while its child had no record of the run or did not report it terminal (S8)"
    ),
    "agent_tool.unstarted_run_finish_closed": (
        "a given-up detached run whose child has no record of it, and whose start no dispatch "
        "of this incarnation has in flight, had its finish slot closed silently (E11)"
    ),
    "agent_tool.unarmed_dispatch_dropped": (
        "arming the backbone for a new detached run failed (a storage error), so its row was "
        "deleted and the dispatch failed as a whole, before anything was announced"
    ),
    "agent_tool.backbone_delivered_finish": (
        "a backbone tick delivered a detached run's finish: no warm fast path of this "
        "incarnation delivered it first"
    ),
    "agent_tool.startup_found_owed_detached_finish": (
        "startup found a detached run still owing its finish and made sure the backbone tick "
        "and the alarm are armed"
    ),
    "agent_tool.milestone_deduped": (
        "a configured milestone was seen again (live or reconciled) and was not notified a "
        "second time (S3)"
    ),
    "agent_tool.milestone_stale_claim_retaken": (
        "a milestone notification's claim was older than its lease (its isolate died mid-call) "
        "and was taken again"
    ),
    "agent_tool.milestone_delivered_by_reconciliation": (
        "a backbone tick, not the live stream, claimed a configured milestone's notification (S3)"
    ),
    "agent_tool.replayed_stored_chunks": (
        "a connecting client was sent the stored chunks of a run again, as replay"
    ),
    "agent_tool.cancel_ignored_settled_run": (
        "cancel_agent_tool was called for a run that is unknown or already hard terminal, and "
        "changed nothing (a cancel is idempotent)"
    ),
    "agent_tool.clear_cancelled_live_run": (
        "clear_agent_tool_runs cancelled the child of a run that was still live before deleting it"
    ),
    "agent_tool.cleared_awaited_run_finished": (
        "an awaited run cleared while its call was in flight ended with its terminal frame and "
        "on_agent_tool_finish, with no row to deliver through (E22)"
    ),
    "agent.sub_agent_request_gated": (
        "a drill-in request to a sub-agent was answered by on_before_sub_agent (refused) "
        "instead of reaching the child"
    ),
    "ledger.finish_after_give_up": (
        "a run's finish slot delivered a genuine result after its give-up had been delivered: "
        "a soft interrupted did not hide a later completion (S7)"
    ),
    "ledger.awaited_redelivery_armed": (
        "startup found an awaited run's hook claimed by an incarnation that died before "
        "marking it delivered, and scheduled its redelivery"
    ),
    "ledger.awaited_redelivery_rearmed": (
        "an awaited runs' redelivery found a claim still within its lease (a later claim of "
        "the dead incarnation) and scheduled itself again for when that lease expires"
    ),
    "ledger.superseded_give_up_closed": (
        "a redelivery found a claimed give-up slot whose run has since reached a real "
        "terminal, and closed it without calling the hooks"
    ),
    "chat.run_lease_failed_settled": (
        "an agent-tool child could not take the keepAlive lease for a run's headless turn (a "
        "storage error arming the heartbeat), so the turn never started and the run was "
        "settled as error"
    ),
    "chat.recovery_continued": (
        "chat recovery continued an interrupted answer that had content, in a new turn"
    ),
    "chat.recovered_turn_continued_stream": (
        "a recovered turn of an agent-tool run continued the interrupted turn's stream, so the "
        "run's chunk numbers go on instead of starting over (S5)"
    ),
    "chat.recovery_retried": (
        "chat recovery ran an interrupted turn again from the same transcript (nothing had "
        "been streamed)"
    ),
    "chat.recovery_exhausted": (
        "chat recovery gave an interrupted turn up after max_chat_recovery_attempts"
    ),
    "chat.recovery_no_progress_timeout": (
        "chat recovery gave an interrupted turn up because it made no progress within "
        "chat_recovery_no_progress_timeout_ms"
    ),
    "chat.stale_child_run_reconciled": (
        "an agent-tool child settled a run row that no live turn of this incarnation drives "
        "(self-heal after a restart)"
    ),
    "chat.submission_interrupted": (
        "a Think-like host started again and found durable submissions whose turn a dead "
        "isolate was running"
    ),
    "chat.submission_drain_unleased": (
        "a Think-like host drained its durable submissions without a keepAlive lease, because "
        "taking one failed"
    ),
    "chat.progress_trailing_flush": (
        "a coalesced progress value was sent when its 200 ms window ended (S4's trailing flush)"
    ),
    "schedule.idempotent_dedupe": (
        "an idempotent schedule() found its row already stored, returned it and re-armed the alarm"
    ),
    "schedule.hung_interval_forced": (
        "an interval schedule still marked running past hung_schedule_timeout_seconds was "
        "forced to run again"
    ),
    "schedule.callback_retried": ("a schedule callback threw and was attempted again in-process"),
    "schedule.one_shot_deferred_to_platform": (
        "a one-shot schedule's failure was re-raised so the platform retries the alarm (code "
        "update or platform transient)"
    ),
    "schedule.facet_dispatch_failed": (
        "dispatching a sub-agent's schedule through the root threw; the row was left to run again"
    ),
    "alarm.memory_limit_backed_off": (
        "an alarm ended in a memory-limit reset and the executing schedule was pushed back"
    ),
    "job.hung_forced": (
        "a single-flight job left running past its hung timeout (its isolate died or its "
        "dispatch hangs) was forced to run again"
    ),
    "job.platform_failure_preserved": (
        "a job's last attempt failed with a platform failure: the job was kept with its time "
        "and the alarm rejected, so the platform runs it again"
    ),
    "job.slow_dispatch": (
        "a job's dispatch outlived its hung timeout and the driver warned (job:slow_dispatch)"
    ),
    "job.memory_limit_backed_off": (
        "an alarm ended in a memory-limit reset and the executing job and the recovery-loop "
        "jobs were pushed back"
    ),
    "job.memory_limit_sealed": (
        "an alarm hit the memory-limit strike budget: the executing job and every recovery-loop "
        "job were purged"
    ),
    "alarm.memory_limit_sealed": (
        "an alarm hit the memory-limit strike budget and the executing schedule was purged"
    ),
    "job.memory_limit_in_handed_off_work": (
        "work a job's dispatch handed off (track_alarm_work) settled with a memory-limit reset: "
        "a strike against that job"
    ),
    "facet.recovery_driven_by_root": (
        "the root's alarm housekeeping ran a sub-agent's fiber recovery scan"
    ),
    "facet.stale_fiber_lease_pruned": (
        "the root dropped a sub-agent's fiber lease whose sub-agent had no run rows left"
    ),
    "facet.schedule_owner_gone_pruned": (
        "a schedule's owning sub-agent was no longer registered, and the root pruned that sub- "
        "tree's rows"
    ),
    "fiber.managed_start_failed": (
        "a managed fiber's execution could not begin (a storage fault on its pending-to-running "
        "update) and the alarm was armed so that recovery takes the accepted row over"
    ),
    "fiber.cleanup_delete_failed": (
        "run_fiber's cleanup could not delete the run row (a storage fault in a fiber's "
        "cleanup); the lease is released and the row is left for recovery"
    ),
    "fiber.outcome_write_failed": (
        "0.32.0: writing a finished fiber's outcome into its run row failed (a storage fault); "
        "swallowed, and the row is deleted all the same"
    ),
    "fiber.finalize_failed_row_left": (
        "0.32.0: a fiber's finally could not delete its run row (a storage fault); logged, not "
        "re-thrown, and the row (with its outcome when that was written) is left for recovery"
    ),
    "fiber.finished_run_row_settled": (
        "0.32.0: the recovery scan found a run row whose fiber had finished (its outcome "
        "written, its delete failed) and deleted it without events or hook, settling a managed "
        "fiber's ledger row with the row's outcome"
    ),
    "alarm.reschedule_failed": (
        "computing the next alarm failed on a storage fault, and a check-back alarm was armed "
        "so that a later alarm computes it again"
    ),
    "keep_alive.acquire_failed": (
        "taking a keepAlive lease failed while arming the heartbeat (a storage fault), and the "
        "ref it had counted was given back"
    ),
    "facet.dead_incarnation_leases_released": (
        "a sub-agent started again after dying on its own (its root lived on) and the root "
        "dropped the keepAlive leases its dead incarnation still held"
    ),
    "ledger.delivered_mark_failed": (
        "a delivery's handlers ran but its delivered mark could not be written (a storage "
        "fault): the slot is kept as handled in memory, so only its mark is owed"
    ),
    "ledger.handled_slot_marked": (
        "a later delivery of a slot whose handlers had run in this incarnation, but whose "
        "delivered mark had failed, wrote the mark only (no hook was called again)"
    ),
    "agent_tool.recovery_finalize_failed": (
        "a recovery sweep could not finalize a run (a storage fault reading its row or claiming "
        "its slot): its outcome is kept and a retry is scheduled"
    ),
    "agent_tool.recovery_finalize_retried": (
        "a retry sweep finalized a run with the outcome an earlier sweep of this incarnation "
        "kept when its own finalization failed"
    ),
    "agent_tool.give_up_teardown_may_have_landed": (
        "a give-up's cancel call failed after it reached the child, which may have aborted "
        "the run before failing: the teardown note is kept, so that abort delivers nothing (S7)"
    ),
    "fiber.managed_accept_read_failed": (
        "start_fiber wrote a managed fiber's pending row but could not read it back for its "
        "answer (a storage fault): the execution was started anyway and the error raised"
    ),
}
"""Name -> what reaching it means, for every probe the runtime's code can hit."""


def probe(host: Any, name: str) -> None:
    """Mark that this run reached the rare path `name` (a key of `RUNTIME_PROBES`)."""
    if name not in RUNTIME_PROBES:
        raise ValueError(f"unknown runtime probe {name!r}; add it to RUNTIME_PROBES first")
    host.trace.probe(name)
