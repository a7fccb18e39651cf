"""What a 0.32.0 recovery continuation checks of the transcript before it runs its turn, and what
a sealed recovery tells `on_exhausted` of the interrupted answer (spec sdk-0.32 §8.1; the dist's
`_chatRecoveryContinueDetached`, `_chatRecoveryRetryDetached` and `exhaustRecoveryGiveUp`).

**Targets.** When a recovery is scheduled, its payload names what the turn will build on:
`targetAssistantId`, the assistant message a continuation extends (the interrupted answer when it
has content, or the transcript's last answer when the turn left no snapshot), or
`targetUserId`, the user message a retry answers again (the one the interrupted turn's snapshot
names). A turn that had answered in full names nothing (the port settles that answer as it
stands, `chat_recovery.py`), and so far neither does a stalled turn's recovery (the dist names
the answer it extends when it has content).

**The check** (`conversation_skip_reason`), once the host is stable: a retry whose transcript no
longer ends with a user message is skipped with `no_unanswered_user_message`, one whose last
message is another user message with `conversation_changed`; a continuation whose transcript's
last answer is not its target is skipped with `conversation_changed` (the conversation moved on
since the incident: another turn answered in between). The dist persists the interrupted answer
when the recovery is scheduled; the port persists it only when it continues it
(docs/divergences.md T17), so while the target is not yet in the transcript, the port asks
whether any answer follows the user message the interrupted turn answered, which is where the
dist's persisted answer stands.

**A sealed recovery's partial answer** (`stream_partial`): the text and parts rebuilt from every
chunk of the stream of the incident's recovery root request, as the dist reads them off the
stream, cut-short parts as they were.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents_core.chat.messages import MessageBuilder

if TYPE_CHECKING:
    from agents_core.chat.messages import ChatMessages
    from agents_core.chat.stream_store import ResumableStream

__all__ = [
    "CONVERSATION_CHANGED",
    "NO_UNANSWERED_USER_MESSAGE",
    "TARGET_ASSISTANT",
    "TARGET_USER",
    "continuation_targets",
    "conversation_skip_reason",
    "stream_partial",
]

CONVERSATION_CHANGED = "conversation_changed"
NO_UNANSWERED_USER_MESSAGE = "no_unanswered_user_message"
TARGET_ASSISTANT = "targetAssistantId"
"""A continuation payload's key: the assistant message the recovered turn extends."""
TARGET_USER = "targetUserId"
"""A continuation payload's key: the user message the recovered turn answers again."""


def continuation_targets(
    messages: ChatMessages,
    *,
    kind: str,
    partial: dict[str, Any] | None,
    snapshot: dict[str, Any],
    lost: bool = False,
    finished: bool = False,
) -> dict[str, str]:
    """The payload keys naming what the recovery of an interrupted turn of `kind` builds on
    (module docstring); `lost`: the turn left no snapshot, `finished`: it answered in full."""
    if finished:
        return {}
    if lost:
        last = messages.last_assistant()
        return {TARGET_ASSISTANT: str(last["id"])} if last is not None else {}
    if kind == "retry":
        latest = snapshot.get("latestUserMessageId")
        return {TARGET_USER: latest} if isinstance(latest, str) else {}
    if partial is not None and partial.get("parts"):
        return {TARGET_ASSISTANT: str(partial["id"])}
    return {}


def conversation_skip_reason(messages: ChatMessages, payload: dict[str, Any]) -> str | None:
    """Why the continuation with `payload` must not run its turn, or None (module docstring)."""
    target_user = payload.get(TARGET_USER)
    if isinstance(target_user, str):
        transcript = messages.all()
        last = transcript[-1] if transcript else None
        if last is None or last.get("role") != "user":
            return NO_UNANSWERED_USER_MESSAGE
        return None if last.get("id") == target_user else CONVERSATION_CHANGED
    target = payload.get(TARGET_ASSISTANT)
    if not isinstance(target, str):
        return None
    if messages.by_id(target) is None:
        snapshot = payload.get("snapshot")
        answered = snapshot.get("latestUserMessageId") if isinstance(snapshot, dict) else None
        return _answered_since(messages.all(), answered)
    last = messages.last_assistant()
    return None if last is not None and last.get("id") == target else CONVERSATION_CHANGED


def _answered_since(transcript: list[dict[str, Any]], user_message_id: Any) -> str | None:
    """`conversation_changed` when an answer follows the user message `user_message_id`, or
    that message is gone; None when nothing names it (nothing to tell by)."""
    if not isinstance(user_message_id, str):
        return None
    ids = [message.get("id") for message in transcript]
    if user_message_id not in ids:
        return CONVERSATION_CHANGED
    after = transcript[ids.index(user_message_id) + 1 :]
    answered = any(message.get("role") == "assistant" for message in after)
    return CONVERSATION_CHANGED if answered else None


def stream_partial(stream: ResumableStream, stream_id: str | None) -> dict[str, Any] | None:
    """The answer rebuilt from every stored chunk of `stream_id` (None without a stream)."""
    if not stream_id:
        return None
    builder = MessageBuilder({"id": "", "role": "assistant", "parts": []})
    for parsed in stream.parsed_chunks(stream_id):
        builder.apply(parsed)
    return builder.message
