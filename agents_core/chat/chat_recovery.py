"""Chat recovery: a turn interrupted by eviction is continued or restarted after the restart.

The fiber recovery scan (`agents_core.recovery`) offers every orphaned fiber to
`_handle_internal_fiber_recovery`; chat hosts claim the ones named
`__cf_internal_chat_turn:<requestId>`. Claiming records an *incident* (in the agent's KV, keyed
by the turn that was first interrupted) and schedules `_chatRecoveryContinue` (the method
`_chat_recovery_continue`) for now, so the recovered turn runs from the alarm, after startup.
There the host rebuilds the partial answer from the interrupted stream's stored chunks and
decides:

- **continue** when the answer had content: persist the partial assistant message and run a new
  turn that extends it (the model request says `continuation: true`; tool calls that never got a
  result are run again first, with their original ids);
- **retry** when nothing was streamed: run the turn again from the same transcript;
- **complete** when the stream already holds the answer's `finish` chunk: the turn had answered
  in full and died before its last step committed (the persisted message, the stream's end and
  the fiber row's delete roll back together), so the rebuilt answer is persisted as it is and no
  model call is made. Continuing it would ask the model again and append the same reply twice.

A continued or retried turn has a new request id (and is itself a fiber, so an eviction during
it is recovered the same way). Recovery gives up (incident `exhausted`, `chat:recovery:exhausted`
with the SDK's reason) when the turn made no progress for `chat_recovery_no_progress_timeout_ms`
(the SDK's primary bound, 5 min by default: `no_progress_timeout`), or after
`max_chat_recovery_attempts` (`max_attempts_exceeded`). Progress is the durable counter under
`cf:chat-recovery:progress` (`agents_core.chat.parent`): each stored chunk that starts a segment
or settles a tool bumps it, streaming deltas at most once per 5 s, and so does a parent turn
forwarding its agent-tool child's chunks (§7.8). The incident keeps the highest count it saw and
when it last rose (`lastProgressAt`); each recovery compares. `on_chat_recovery(ctx)` can
override the decision. Incident statuses: `scheduled`, `attempting`, `recovered`, `failed`,
`exhausted`.

`ChatRecovery` is the component: it owns the incidents and the recoveries this isolate drives;
it reads the transcript, the stream and the FiberRunner's live fibers, runs the recovered turn
through `ChatTurns`, and reaches the host through `ChatRecoveryHooks` (`on_chat_recovery`, the
budget, keepAlive, `schedule`, and the agent-tool child side's steps). The host claims a chat
turn's fiber for it in `_handle_internal_fiber_recovery`. The SDK's counterpart is the hosts'
chat recovery (`chatRecovery`, `onChatRecovery`, `_chatRecoveryContinue`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agents_core.chat.messages import MessageBuilder
from agents_core.chat.turns import CHAT_RESPONSE_TYPE, CHAT_TURN_FIBER_PREFIX, TurnPlan
from agents_core.probes import probe
from agents_core.stored_names import CHAT_RECOVERY_CALLBACK

if TYPE_CHECKING:
    from agents_core.chat.messages import ChatMessages
    from agents_core.chat.recovery_credit import RecoveryCredit
    from agents_core.chat.stream_store import ResumableStream
    from agents_core.chat.turns import ChatTurns, TurnResult
    from agents_core.context import AgentContext
    from agents_core.fibers import FiberRunner

__all__ = [
    "ChatRecovery",
    "ChatRecoveryContext",
    "ChatRecoveryHooks",
    "DEFAULT_NO_PROGRESS_TIMEOUT_MS",
    "INCIDENT_PREFIX",
    "PARTIAL_PERSISTED",
    "is_chat_turn_fiber",
]

INCIDENT_PREFIX = "cf:chat-recovery:incident:"
"""The SDK's KV prefix of recovery incidents (the key's tail is ours: the origin request id)."""
RECOVERY_DECISIONS = ("continue", "retry", "skip", "complete")
PARTIAL_PERSISTED = "partialPersisted"
"""A continuation's payload key: an earlier attempt of it already persisted the partial answer
(0.32.0's continuation enqueued again after its turn failed on the platform)."""
DEFAULT_NO_PROGRESS_TIMEOUT_MS = 300_000
_LIVE_STATUSES = ("scheduled", "attempting")
_FAILED_STATUSES = ("failed", "exhausted")


@dataclass(frozen=True)
class ChatRecoveryContext:
    """What `on_chat_recovery` decides on."""

    request_id: str
    """The interrupted turn."""
    origin_request_id: str
    """The turn first interrupted (the same unless a recovered turn was interrupted again)."""
    attempt: int
    mode: str
    """The framework's choice: `complete` (the answer was streamed in full), `continue` (it had
    content) or `retry` (it had none)."""
    partial_message: dict[str, Any] | None


class ChatRecoveryHooks(Protocol):
    """What chat recovery runs of its host: the user's `on_chat_recovery` and budget, the
    keepAlive and the schedule it takes, and the agent-tool child side's steps around a
    recovered turn. The host passes itself; a subclass's override is what runs."""

    @property
    def max_chat_recovery_attempts(self) -> int: ...
    @property
    def chat_recovery_no_progress_timeout_ms(self) -> int: ...
    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> str | None: ...
    async def keep_alive(self) -> Callable[[], None]: ...
    async def schedule(
        self,
        when: Any,
        callback: str,
        payload: Any = None,
        *,
        idempotent: bool | None = None,
        run_id: str | None = None,
    ) -> Any: ...
    def track_alarm_work(self, work: Any) -> bool: ...
    def _broadcast_chat_frame(self, frame: Any, chunk_index: int | None = None) -> None: ...
    def _rebind_agent_tool_run_for_recovery(self, request_id: str, incident_key: str) -> None: ...
    def _stream_for_recovered_turn(self, request_id: str, payload: dict[str, Any]) -> Any: ...
    async def _after_chat_recovery(self, request_id: str | None) -> None: ...
    def _has_orphaned_task_turn(self) -> bool: ...


def is_chat_turn_fiber(name: str) -> bool:
    """A fiber a chat turn runs in (chat recovery claims it)."""
    return name.startswith(CHAT_TURN_FIBER_PREFIX)


class ChatRecovery:
    """One chat host's recovery of interrupted turns: its incidents (KV) and the recoveries
    this isolate drives."""

    __slots__ = ("_ctx", "_messages", "_stream", "_turns", "_fibers", "_credit", "_hooks", "live")

    def __init__(
        self,
        ctx: AgentContext,
        messages: ChatMessages,
        stream: ResumableStream,
        turns: ChatTurns,
        fibers: FiberRunner,
        credit: RecoveryCredit,
        hooks: ChatRecoveryHooks,
    ) -> None:
        self._ctx = ctx
        self._messages = messages
        self._stream = stream
        self._turns = turns
        self._fibers = fibers
        self._credit = credit
        self._hooks = hooks
        self.live: set[str] = set()
        """The origin request ids of the recoveries this isolate runs."""

    # -- claiming the fiber ----------------------------------------------------------------------
    async def claim(self, ctx: Any) -> bool:
        """Take an interrupted chat turn's fiber (`is_chat_turn_fiber`): record the incident and
        schedule the recovered turn for now."""
        snapshot = ctx.snapshot if isinstance(ctx.snapshot, dict) else {}
        request_id = snapshot.get("requestId") or ctx.name[len(CHAT_TURN_FIBER_PREFIX) :]
        origin = snapshot.get("originRequestId") or request_id
        host = self._ctx.host
        now = host.clock.now_ms()
        key = INCIDENT_PREFIX + origin
        incident = host.kv.get(key) or {
            "originRequestId": origin,
            "attempts": 0,
            "detectedAt": now,
            "progress": self._credit.count(),
            "lastProgressAt": now,
        }
        incident.update(
            status="scheduled",
            requestId=request_id,
            runId=snapshot.get("runId", incident.get("runId")),
            updatedAt=now,
        )
        host.kv.put(key, incident)
        host.trace.emit("chat:recovery:scheduled", requestId=request_id, originRequestId=origin)
        payload = {"requestId": request_id, "originRequestId": origin, "snapshot": snapshot}
        await self._hooks.schedule(0, CHAT_RECOVERY_CALLBACK, payload, idempotent=True)
        return True

    # -- running the recovered turn --------------------------------------------------------------
    def incident_key_of(self, payload: Any) -> str:
        """The KV key of the incident a continuation's payload belongs to (0.21.0: the origin
        request id's)."""
        return INCIDENT_PREFIX + str(payload["originRequestId"])

    async def continue_turn(self, payload: Any) -> None:
        origin = payload["originRequestId"]
        key = self.incident_key_of(payload)
        incident = self._ctx.host.kv.get(key)
        if incident is None or incident.get("status") != "scheduled":
            return
        reason = self._exhausted_reason(incident)
        if reason is not None:
            self._exhaust(key, incident, reason, payload["requestId"])
            await self._hooks._after_chat_recovery(None)
            return
        incident["attempts"] += 1
        self.set_incident(key, incident, "attempting")
        self.live.add(origin)
        self._ctx.host.tasks.wait_until(self._run(payload, incident["attempts"]))

    def _exhausted_reason(self, incident: dict[str, Any]) -> str | None:
        """The SDK's budget, in its order: `no_progress_timeout` when the progress counter has
        not risen for longer than the window, else `max_attempts_exceeded`; None to go on. A
        rise since the last look moves `lastProgressAt` to now (kept in `incident`)."""
        now = self._ctx.host.clock.now_ms()
        progress = self._credit.count()
        if progress > (incident.get("progress") or 0):
            incident.update(progress=progress, lastProgressAt=now)
        last = incident.get("lastProgressAt", incident.get("detectedAt", now))
        if now - last > self._hooks.chat_recovery_no_progress_timeout_ms:
            return "no_progress_timeout"
        if incident["attempts"] >= self._hooks.max_chat_recovery_attempts:
            return "max_attempts_exceeded"
        return None

    def _exhaust(self, key: str, incident: dict[str, Any], reason: str, request_id: str) -> None:
        origin = incident.get("originRequestId")
        if reason == "no_progress_timeout":
            probe(self._ctx.host, "chat.recovery_no_progress_timeout")
            window = self._hooks.chat_recovery_no_progress_timeout_ms
            why = f"made no progress for more than {window} ms"
        else:
            probe(self._ctx.host, "chat.recovery_exhausted")
            why = f"gave up after {incident['attempts']} attempts"
        incident["reason"] = reason
        self.set_incident(key, incident, "exhausted")
        self._ctx.host.trace.emit(
            "chat:recovery:exhausted",
            requestId=request_id,
            originRequestId=origin,
            attempt=incident["attempts"],
            reason=reason,
        )
        self._ctx.log("warn", f"chat recovery of turn {origin} {why}")

    async def _run(self, payload: dict[str, Any], attempt: int) -> None:
        origin = payload["originRequestId"]
        key = self.incident_key_of(payload)
        dispose = await self._hooks.keep_alive()
        try:
            snapshot = payload.get("snapshot") or {}
            lost = self._snapshot_lost(snapshot)
            partial, finished = self._rebuild_interrupted_answer(payload["requestId"], snapshot)
            if payload.get(PARTIAL_PERSISTED) and partial is not None:
                # The stream's chunks are in the persisted message already (which a later turn
                # may have extended): applying them again would repeat them.
                partial = self._messages.by_id(partial["id"]) or partial
            if lost:
                mode = "continue"
            elif finished:
                mode = "complete"
            else:
                mode = "continue" if partial is not None and partial["parts"] else "retry"
            ctx = ChatRecoveryContext(payload["requestId"], origin, attempt, mode, partial)
            # A stalled turn's recovery was decided when the stall was routed (0.32.0).
            decision = payload.get("decision") or await self._hooks.on_chat_recovery(ctx) or mode
            if decision not in RECOVERY_DECISIONS:
                raise ValueError(
                    f"on_chat_recovery must return 'continue', 'retry', 'skip', 'complete' or "
                    f"None, got {decision!r}"
                )
            last_answer: dict[str, Any] | None = None
            if lost and decision != "skip":
                last_answer = self._messages.last_assistant()
                if last_answer is None:
                    self._recovery_ended(key, "skipped")
                    await self._hooks._after_chat_recovery(None)
                    return
                decision = "continue"
            if decision == "complete" and not finished:
                decision = mode
            has_parts = partial is not None and bool(partial["parts"])
            if decision == "continue" and last_answer is None and not has_parts:
                decision = "retry"
            if decision == "skip":
                self._recovery_ended(key, "skipped", "continue_disabled")
                await self._hooks._after_chat_recovery(None)
                return
            if decision == "complete":
                assert partial is not None
                self._complete_interrupted_answer(
                    payload["requestId"], origin, attempt, partial, snapshot
                )
                self._recovery_ended(key, "completed")
                return
            request_id = self._ctx.host.entropy.nanoid()
            self._report_attempt(request_id, origin, decision, attempt)
            self._hooks._rebind_agent_tool_run_for_recovery(request_id, key)
            plan = TurnPlan(
                request_id,
                trigger="recovery",
                origin_request_id=origin,
                attempt=attempt,
                stream_id=self._hooks._stream_for_recovered_turn(request_id, payload),
            )
            if last_answer is not None:
                probe(self._ctx.host, "chat.recovery_continued")
                plan.continue_message_id = last_answer["id"]
            elif decision == "continue":
                probe(self._ctx.host, "chat.recovery_continued")
                assert partial is not None
                self._messages.persist(partial)
                plan.continue_message_id = partial["id"]
            else:
                probe(self._ctx.host, "chat.recovery_retried")
            self._turn_starting(payload)
            result = await self._turns.submit(plan)
            if not result.recovering:  # else it stalled and its own recovery is scheduled
                outcome = result.status if result.status in ("completed", "skipped") else "failed"
                self._recovery_ended(key, outcome, result.error)
                self._ctx.host.trace.emit(
                    "chat:recovery:settled", requestId=request_id, status=result.status
                )
        except Exception as exc:  # noqa: BLE001 - a recovery failure is recorded, never raised
            if self._hands_back(key, exc):
                raise
            self._recovery_ended(key, "failed", str(exc))
            self._ctx.log("error", f"chat recovery of turn {origin} failed: {exc}")
        finally:
            self.live.discard(origin)
            dispose()
        await self._hooks._after_chat_recovery(None)

    def _snapshot_lost(self, snapshot: dict[str, Any]) -> bool:
        """Whether the interrupted turn left no snapshot, so that its recovery can only
        continue the transcript's last answer (0.21.0: a fiber row always holds one)."""
        return False

    def _turn_starting(self, payload: dict[str, Any]) -> None:
        """The recovered turn is about to be queued (0.21.0: nothing to tell)."""

    def _hands_back(self, key: str, error: Exception) -> bool:
        """Whether the recovery's failure `error` goes back to the continuation instead of
        being recorded (0.21.0: never)."""
        return False

    def _recovery_ended(self, key: str, outcome: str, reason: str | None = None) -> None:
        """The recovered turn ended: `completed`, `skipped` or `failed` (with why). 0.21.0 keeps
        the incident, `recovered` for a completed turn and `failed` for any other."""
        status = "recovered" if outcome == "completed" else "failed"
        self.set_incident(key, self._ctx.host.kv.get(key) or {}, status)

    def _rebuild_interrupted_answer(
        self, request_id: str, snapshot: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, bool]:
        """The interrupted assistant message (the persisted one, a continuation's, plus every
        chunk its stream stored; None when there is nothing to build on), and whether the
        stream holds the answer's `finish` chunk (the model had answered in full: a turn
        stores it last, after its final model call, and never for an error or an abort)."""
        message_id = snapshot.get("messageId")
        if not isinstance(message_id, str):
            return None, False
        base = self._messages.by_id(message_id) or {
            "id": message_id,
            "role": "assistant",
            "parts": [],
        }
        builder = MessageBuilder(base)
        finished = False
        stream_id, begins = self.interrupted_stream(request_id, snapshot)
        for parsed in self._stream.parsed_chunks(stream_id, begins - 1):
            builder.apply(parsed)
            finished = finished or parsed.get("type") == "finish"
        for part in builder.parts:
            if part.get("state") == "streaming":
                part["state"] = "done"  # cut short: the continuation adds its own parts
        return builder.message, finished

    def interrupted_stream(
        self, request_id: str, snapshot: dict[str, Any]
    ) -> tuple[str | None, int]:
        """The interrupted turn's stream and the index its own chunks begin at: the stream it
        continued (from its snapshot, 0 onwards for a turn that opened its own), else the
        stream of its request id."""
        stream_id = snapshot.get("streamId")
        begins = snapshot.get("streamFrom")
        if isinstance(stream_id, str) and isinstance(begins, int):
            return stream_id, begins
        return self._stream.for_request(request_id), 0

    def _complete_interrupted_answer(
        self,
        request_id: str,
        origin: str,
        attempt: int,
        answer: dict[str, Any],
        snapshot: dict[str, Any],
    ) -> None:
        """Settle a turn that had answered in full before its incarnation died: persist the
        answer rebuilt from its stream, end that stream and tell clients the turn is done; no
        new turn, no model call."""
        probe(self._ctx.host, "chat.recovery_found_complete_answer")
        self._report_attempt(request_id, origin, "complete", attempt)
        self._messages.persist(answer)
        stream_id, _ = self.interrupted_stream(request_id, snapshot)
        if stream_id is not None:
            self._stream.finish(stream_id, "completed")
        self._hooks._broadcast_chat_frame(
            {"type": CHAT_RESPONSE_TYPE, "id": request_id, "body": "", "done": True}
        )
        self._turns.broadcast_messages()
        self._ctx.host.trace.emit("chat:recovery:settled", requestId=request_id, status="completed")

    def _report_attempt(self, request_id: str, origin: str, mode: str, attempt: int) -> None:
        """A recovered turn starts (or a complete answer is settled): `chat:recovery:attempt`."""
        self._ctx.host.trace.emit(
            "chat:recovery:attempt",
            requestId=request_id,
            originRequestId=origin,
            mode=mode,
            attempt=attempt,
        )

    def turn_snapshot_extra(self) -> dict[str, Any]:
        """More keys for a turn's snapshot (0.21.0: none)."""
        return {}

    # -- a stalled model stream (0.21.0: no watchdog) ---------------------------------------------
    def stream_stall_timeout_ms(self) -> int:
        """How long a turn's model stream may send nothing before it counts as stalled; 0:
        no watchdog."""
        return 0

    async def route_stall(
        self,
        request_id: str,
        snapshot: dict[str, Any],
        partial: dict[str, Any],
        *,
        backoff: bool = False,
    ) -> str | None:
        """Take a stalled turn into recovery (`backoff`: a transient read error's, scheduled
        after a backoff): `scheduled` (its continuation is scheduled), `exhausted` (it was given
        up), or None (the stall fails the turn)."""
        return None

    # -- what clients learn of a turn (0.21.0: nothing beyond the turn's own frames) -----------
    def turn_ended(self, result: TurnResult) -> None:
        """A turn of the queue settled."""

    def chat_request(self) -> None:
        """A client's chat request arrived (before its turn is queued)."""

    def chat_cleared(self) -> None:
        """The chat was cleared."""

    def on_connect(self, connection: Any, streaming: bool) -> None:
        """A client connected (`streaming`: a turn streams now)."""

    def on_message(self, connection: Any, message: Any, streaming: bool) -> bool:
        """A client's message this component answers (True), else False."""
        return False

    def set_incident(self, key: str, incident: dict[str, Any], status: str) -> None:
        incident = dict(incident)
        incident.update(status=status, updatedAt=self._ctx.host.clock.now_ms())
        self._ctx.host.kv.put(key, incident)

    # -- classification ----------------------------------------------------------------------------
    def classify(self, run_id: str | None = None) -> str:
        """`in-progress` (an interrupted turn is still being recovered), `failed` (recovery gave
        up or its turn failed) or `none`; with `run_id`, only incidents of that run count."""
        incidents = [
            value
            for value in self._ctx.host.kv.list(INCIDENT_PREFIX).values()
            if isinstance(value, dict) and (run_id is None or value.get("runId") == run_id)
        ]
        for incident in incidents:
            status = incident.get("status")
            if status == "scheduled" or (
                status == "attempting" and incident.get("originRequestId") in self.live
            ):
                return "in-progress"
        if self._has_orphaned_turn():
            return "in-progress"
        for incident in incidents:
            status = incident.get("status")
            # An `attempting` incident no turn of this isolate drives died with its isolate.
            if status in _FAILED_STATUSES or status == "attempting":
                return "failed"
        return "none"

    async def seal_memory_limited(self) -> None:
        """The alarm memory-limit breaker sealed at its strike limit (0.32.0's host hook). On
        0.21.0 it is never called: that release's breaker tells no host."""

    def _has_orphaned_turn(self) -> bool:
        """A chat-turn fiber row no turn of this incarnation runs: recovery has yet to see it."""
        rows = self._ctx.sql(
            "SELECT id FROM cf_agents_runs WHERE substr(name, 1, ?) = ?",
            len(CHAT_TURN_FIBER_PREFIX),
            CHAT_TURN_FIBER_PREFIX,
        )
        return any(row["id"] not in self._fibers.active for row in rows)
