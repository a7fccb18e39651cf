"""`finish_notified_once`: a detached run's `notify: true` puts one message per finish status
in the parent's chat (agent-tools §4.9), and an explicit `onFinish` wins over it (§4.2).

Finish notices live in a chat host's transcript (`cf_ai_chat_agent_messages`): an
AIChatAgent-like host injects a message whose `metadata` holds `{runId, status}`; a Think-like
host submits it (a `cf_think_submissions` row whose `metadata_json` holds `{runId, status}`), and
the notice is the transcript message that submission lists. A metadata with a `milestone` is a
milestone notice (`milestones_once`), not a finish notice. The notify hook's calls are the
`hook:on_finish {runId, slot, status, callback}` records whose callback is the hook's name, and a
delivery completed with its `hook:delivered`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.core import json_cell as _json
from sim.checkers.core import time_words as _at
from sim.checkers.models.spec_constants import DETACHED_NOTIFY_CALLBACK
from sim.checkers.registry import invariant

__all__ = ["finish_notices", "finish_notified_once"]

RUNS = "cf_agent_tool_runs"
MESSAGES = "cf_ai_chat_agent_messages"
SUBMISSIONS = "cf_think_submissions"


def finish_notices(context: CheckContext, agent: str) -> dict[tuple[str, str], list[Any]]:
    """(runId, status) -> the ids of the messages of `agent`'s chat transcript that announce
    that run's finish with that status (see the module docstring), in transcript order."""
    transcript = {str(row.get("id")): row for row in context.table(agent, MESSAGES)}
    found: dict[str, tuple[str, str]] = {}
    for message_id, row in transcript.items():
        message = _json(row.get("message"))
        metadata = message.get("metadata") if isinstance(message, Mapping) else None
        key = _finish_key(metadata)
        if key is not None:
            found[message_id] = key
    for submission in context.table(agent, SUBMISSIONS):
        submitted = _finish_key(_json(submission.get("metadata_json")))
        listed = _json(submission.get("messages_json"))
        if submitted is None or not isinstance(listed, list):
            continue
        for message in listed:
            listed_id = str(message.get("id")) if isinstance(message, Mapping) else None
            if listed_id is not None and listed_id in transcript:
                found.setdefault(listed_id, submitted)
    out: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for message_id in transcript:
        if message_id in found:
            out[found[message_id]].append(message_id)
    return dict(out)


def _finish_key(metadata: Any) -> tuple[str, str] | None:
    if not isinstance(metadata, Mapping) or metadata.get("milestone") is not None:
        return None
    run_id, status = metadata.get("runId"), metadata.get("status")
    if not isinstance(run_id, str) or not isinstance(status, str):
        return None
    return run_id, status


@invariant("finish_notified_once")
def finish_notified_once(context: CheckContext) -> list[Violation]:
    """agent-tools §4.2, §4.9 and the seed — `notify: true` injects one chat message when a
    detached run finishes (one per status: a give-up and a later real result are two); an
    explicit `onFinish` wins, and then nothing is injected.

    For every chat host (an agent with a `cf_ai_chat_agent_messages` table) and its finish
    notices (see the module docstring):
    1. at most one message announces one (run, status);
    2. a message that announces a run whose row was inserted no later than the message was
       written belongs to a detached row whose `detached_on_finish` is the notify hook
       (`DETACHED_NOTIFY_CALLBACK`), never another method (onFinish wins) or none;
    3. after a liveness phase, every `hook:delivered {runId, slot, status}` (not rolled back)
       whose delivery called the notify hook (the last `hook:on_finish` of that run and slot
       before it, in its incarnation, names it) has a message announcing (run, status), once
       the run had time since the delivery (a Think-like host's submission may wait for a turn
       in progress). The default formatter, which the workloads' hosts keep, never answers an
       empty text.
    """
    out = []
    for agent in context.paths():
        if MESSAGES not in (context.storage.get(agent) or {}):
            continue
        notices = finish_notices(context, agent)
        created = {str(r.get("id")): r.get("created_at") for r in context.table(agent, MESSAGES)}
        rows = {str(r.get("run_id")): r for r in context.table(agent, RUNS)}
        for (run_id, status), ids in sorted(notices.items()):
            if len(ids) > 1:
                out.append(
                    Violation(
                        "finish_notified_once",
                        agent,
                        run_id,
                        f"run {run_id} was announced {status} {len(ids)} times in the chat of "
                        f"{agent} (messages {', '.join(ids)}); notify injects one message per "
                        "finish status",
                    )
                )
            row = rows.get(run_id)
            written = created.get(ids[0])
            if (
                row is None
                or not isinstance(written, int)
                or written < (row.get("started_at") or 0)
            ):
                continue
            callback = row.get("detached_on_finish") if row.get("detached") else None
            if callback == DETACHED_NOTIFY_CALLBACK:
                continue
            why = (
                f"its row names {callback!r} as its finish callback: an explicit onFinish wins "
                "over notify"
                if callback
                else "the run asked for no notify"
            )
            out.append(
                Violation(
                    "finish_notified_once",
                    agent,
                    run_id,
                    f"the chat of {agent} announces run {run_id} {status} (message {ids[0]}, "
                    f"at {_at(written)}), but {why}",
                )
            )
        if context.liveness_ran:
            out += _unannounced(context, agent, notices)
    return out


def _unannounced(
    context: CheckContext, agent: str, notices: Mapping[tuple[str, str], list[Any]]
) -> list[Violation]:
    out = []
    failed = _failed_submissions(context, agent)
    for mark in context.events("hook:delivered", agent):
        run_id, slot, status = str(mark.get("runId")), mark.get("slot"), mark.get("status")
        if (run_id, status) in notices or context.may_have_rolled_back(mark):
            continue
        if (run_id, status) in failed:
            continue  # its submission failed, and says so in its row: not lost unseen
        if not context.had_time_since(mark.t_ms):
            continue
        calls = [
            c
            for c in context.events("hook:on_finish", agent, runId=run_id, slot=slot)
            if c.seq < mark.seq and c.inc == mark.inc
        ]
        if not calls or calls[-1].get("callback") != DETACHED_NOTIFY_CALLBACK:
            continue
        out.append(
            Violation(
                "finish_notified_once",
                agent,
                run_id,
                f"detached run {run_id} of {agent} delivered its {slot} slot ({status}) through "
                f"the notify hook at {_at(mark.t_ms)}, but no message of its chat announces it "
                f"by {context.end_words()}",
                (calls[-1].seq, mark.seq),
            )
        )
    return out


def _failed_submissions(context: CheckContext, agent: str) -> set[tuple[str, str]]:
    """(run, status) of the finish notices a Think-like host accepted as a submission whose turn
    then failed (`cf_think_submissions.status = 'error'`, its error kept in the row): the notice
    was handed over and its failure is on record."""
    out: set[tuple[str, str]] = set()
    for row in context.table(agent, "cf_think_submissions"):
        if row.get("status") != "error":
            continue
        key = _finish_key(_json(row.get("metadata_json")))
        if key is not None:
            out.add(key)
    return out
