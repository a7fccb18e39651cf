"""Chat turns: one at a time, in order, each a fiber that streams from the model and runs tools.

`save_messages` submits a turn that persists its messages when it starts. Turns queue FIFO (one
runs at a time); clearing the chat bumps a generation so turns still queued are `skipped` and
the running one is aborted. A turn runs in what its release gives it (`_run_chat_turn`,
`turn_runners.py`: the fiber `__cf_internal_chat_turn:<requestId>`, or on 0.32.0 at the top
level a Task run), with a snapshot naming the turn, so that when the incarnation dies mid-turn
chat recovery finds it (`agents_core.chat.chat_recovery`).

Inside a turn, its model and tool steps (`turn_steps.py`) stream the answer; the assistant
message is persisted after them, at the end. A model failure ends the turn with the status
`error`. The parts a turn is made of (its plan, result, state and `TurnHooks`) are
`turn_types.py`, re-exported here.

A stream stall (0.32.0, when the host sets `chat_stream_stall_timeout_ms`: nothing streamed
for that long, a tool call's run included) is offered to chat recovery (`_route_stalled_turn`).
When recovery schedules the turn's continuation, this request stops with the outcome
`recovering`: its stream ends `recovering`, its `done` frame says `outcome: "recovering"`, its
partial answer is persisted and its status is `aborted` (as the SDK's stream result is); the
same turn goes on under a new request. When recovery gives the turn up, its terminal message
was the turn's last frame and the stream ends `error`; when recovery declines, the stall is an
ordinary model failure. On 0.32.0 a platform-transient read error of the model stream takes the
same route, its continuation scheduled after a backoff, and fails the turn with its own message
when recovery declines (`stream_watchdog.py`).

`ChatTurns` is the component: it owns the queue, the clear generation and the running turns,
writes the transcript through `ChatMessages` and the chunks through `ResumableStream`, and
reaches the host through `TurnHooks` (the user's tools and prompt, what a turn runs in, the
broadcast snoop and the recovery credit). The SDK's counterpart is the hosts' turn machinery
(AIChatAgent's `onChatMessage` loop and `saveMessages`, Think's `TurnQueue`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agents_core.agent_tools.tool import set_current_agent
from agents_core.chat.messages import MessageBuilder
from agents_core.chat.stream_watchdog import PLAIN_READING, StreamReading
from agents_core.chat.turn_steps import TurnSteps
from agents_core.chat.turn_types import (
    ABORTED,
    CHAT_MESSAGES_TYPE,
    CHAT_REQUEST_TYPE,
    CHAT_RESPONSE_TYPE,
    CHAT_TURN_FIBER_PREFIX,
    RECOVERING_OUTCOME,
    ChatTurnContext,
    TurnHooks,
    TurnPlan,
    TurnResult,
    TurnState,
    current_chat_turn,
    enter_chat_turn,
    leave_chat_turn,
)
from agents_core.probes import probe
from agents_core.signals import AbortController, AbortSignal

if TYPE_CHECKING:
    from agents_core.chat.messages import ChatMessages
    from agents_core.chat.recovery_credit import RecoveryCredit
    from agents_core.chat.stream_store import ResumableStream
    from agents_core.context import AgentContext

__all__ = [
    "CHAT_MESSAGES_TYPE",
    "CHAT_REQUEST_TYPE",
    "CHAT_RESPONSE_TYPE",
    "CHAT_TURN_FIBER_PREFIX",
    "RECOVERING_OUTCOME",
    "ChatTurnContext",
    "ChatTurns",
    "TurnHooks",
    "TurnPlan",
    "TurnResult",
    "TurnState",
    "current_chat_turn",
]


class ChatTurns:
    """One chat host's turns: the FIFO queue, the clear generation, the running turns."""

    __slots__ = (
        "_ctx",
        "_messages",
        "_stream",
        "_credit",
        "_hooks",
        "tail",
        "generation",
        "controllers",
        "states",
        "active_request_id",
        "_steps",
    )

    def __init__(
        self,
        ctx: AgentContext,
        messages: ChatMessages,
        stream: ResumableStream,
        credit: RecoveryCredit,
        hooks: TurnHooks,
        *,
        reading: StreamReading = PLAIN_READING,
    ) -> None:
        self._ctx = ctx
        self._messages = messages
        self._stream = stream
        self._credit = credit
        self._hooks = hooks
        self.tail: Any = None
        """The last turn (or serialized delivery) queued: the next one waits for it."""
        self.generation = 0
        """Bumped by a clear: turns queued before it are skipped."""
        self.controllers: dict[str, AbortController] = {}
        self.states: dict[str, TurnState] = {}
        """The running turns by request id."""
        self.active_request_id: str | None = None
        self._steps = TurnSteps(ctx, messages, stream, credit, hooks, reading)

    # -- the SDK's surface --------------------------------------------------------------------
    async def save_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        signal: AbortSignal | None = None,
    ) -> dict[str, Any]:
        """Run one turn that persists `messages` when it starts, after the turns queued before
        it (as the SDK's saveMessages does: three messages saved in a row are answered one by
        one, each turn seeing the answers before it); `{"requestId", "status", "error"?}`. A
        turn skipped by a clear persists nothing."""
        checked = self._messages.check(messages)

        def persist(_request_id: str) -> None:
            self.persist_messages(checked)

        plan = TurnPlan(
            self._ctx.host.entropy.nanoid(), trigger="chat", signal=signal, prepare=persist
        )
        return (await self.submit(plan)).to_dict()

    def persist_messages(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Save `messages` and tell clients the transcript."""
        for message in messages:
            self._messages.persist(message)
        self.broadcast_messages()

    async def clear(self) -> None:
        """Forget the transcript: queued turns are skipped, the running one is aborted."""
        self.generation += 1
        for controller in list(self.controllers.values()):
            controller.abort("chat cleared")
        self._messages.clear()
        self.broadcast_messages()

    async def on_message(self, connection: Any, message: Any) -> None:
        """A chat client's request (`cf_agent_use_chat_request` with `messages`) runs a turn.
        Unlike `save_messages`, the request's messages are persisted as it arrives, and its turn
        queues behind the running one (the SDK's WebSocket path)."""
        if isinstance(message, Mapping) and message.get("type") == CHAT_REQUEST_TYPE:
            self.persist_messages(self._messages.check(message.get("messages") or []))
            plan = TurnPlan(self._ctx.host.entropy.nanoid(), trigger="chat")
            await self.submit(plan)

    # -- the queue ----------------------------------------------------------------------------
    async def submit(self, plan: TurnPlan) -> TurnResult:
        """Queue the turn behind the ones before it, then run it (skipped after a clear)."""
        generation = self.generation
        previous = self.tail
        done = self._ctx.host.tasks.deferred()
        self.tail = done
        try:
            if previous is not None and not previous.done():
                await previous
            if generation != self.generation:
                return TurnResult(plan.request_id, "skipped", cleared=True)
            if plan.prepare is not None:
                plan.prepare(plan.request_id)
            result = await self.run_fiber(plan, generation)
            self._hooks._on_turn_result(result)
            return result
        finally:
            if self.tail is done:
                self.tail = None
            done.resolve(None)

    async def between_turns(self, invoke: Callable[[], Awaitable[None]]) -> None:
        """Await `invoke()` holding the queue, strictly between turns: the FIFO chain `submit`
        uses, without its clear-generation check (a clear skips queued turns, never a delivery
        the ledger owes)."""
        previous = self.tail
        done = self._ctx.host.tasks.deferred()
        self.tail = done
        try:
            if previous is not None and not previous.done():
                await previous
            await invoke()
        finally:
            if self.tail is done:
                self.tail = None
            done.resolve(None)

    def queue_busy(self) -> bool:
        """A turn or a serialized delivery holds the turn queue."""
        return self.tail is not None and not self.tail.done()

    async def run_fiber(self, plan: TurnPlan, generation: int) -> TurnResult:
        """Run the turn now, as a fiber named for it (chat recovery finds it after a death)."""
        message_id = plan.continue_message_id or self._ctx.host.entropy.nanoid()
        snapshot = {
            "requestId": plan.request_id,
            "messageId": message_id,
            "trigger": plan.trigger,
            "originRequestId": plan.origin_request_id or plan.request_id,
            "attempt": plan.attempt,
            **self._hooks._turn_snapshot_extra(plan.request_id),
        }
        if plan.stream_id is not None:
            # Where this turn's own chunks begin in the stream it continues: recovering it
            # rebuilds the answer from those alone (the earlier ones are in the persisted
            # message it continues).
            snapshot["streamId"] = plan.stream_id
            snapshot["streamFrom"] = self._stream.length(plan.stream_id)

        async def body(_ctx: Any) -> TurnResult:
            return await self._run_turn(plan, message_id, generation, snapshot)

        result: TurnResult = await self._hooks._run_chat_turn(
            plan.request_id,
            plan.continue_message_id is not None,
            body,
            initial_snapshot=snapshot,
            wrap=lambda data: {**snapshot, "data": data},
        )
        return result

    # -- one turn -----------------------------------------------------------------------------
    async def _run_turn(
        self, plan: TurnPlan, message_id: str, generation: int, snapshot: dict[str, Any]
    ) -> TurnResult:
        rid = plan.request_id
        controller = AbortController()
        if plan.signal is not None:
            plan.signal.add_listener(controller.abort)
        aborted = self._ctx.host.tasks.deferred()
        controller.signal.add_listener(lambda _reason: aborted.resolve(ABORTED))
        base = self._messages.by_id(message_id) if plan.continue_message_id else None
        builder = MessageBuilder(base or {"id": message_id, "role": "assistant", "parts": []})
        stream_id = plan.stream_id
        if stream_id is not None and self._stream.adopt(stream_id, rid):
            probe(self._ctx.host, "chat.recovered_turn_continued_stream")
        else:
            stream_id = self._stream.start(rid)
        state = TurnState(plan, stream_id, builder, controller, aborted, snapshot)
        self.controllers[rid] = controller
        self.states[rid] = state
        self.active_request_id = rid
        outer = enter_chat_turn(ChatTurnContext(self._hooks, rid, plan.trigger))
        outer_agent = set_current_agent(self._hooks)  # the ambient agent tools (agent_tool) run for
        closed = False
        outcome: str | None = None
        try:
            status, error = await self._steps.drive(state)
            if status in ("stalled", "interrupted"):
                read_error = error if status == "interrupted" else None
                status, error, outcome = await self._route_stall(state, read_error)
            if controller.signal.aborted and status != "error":
                status, error = "aborted", None
            cleared = generation != self.generation
            keep = bool(builder.parts) and not cleared
            if keep:
                self._messages.persist(builder.message)
            if outcome == "exhausted":
                # Recovery gave the turn up: its terminal message was the turn's last frame.
                self._stream.finish(state.stream_id, "error")
            else:
                self._stream.finish(state.stream_id, outcome or status)
                done = self._steps.response_frame(state, "", done=True)
                if outcome == RECOVERING_OUTCOME:
                    done["outcome"] = RECOVERING_OUTCOME
                self._hooks._broadcast_chat_frame(done)
            if keep:
                self.broadcast_messages()
        except GeneratorExit:
            # Closed after its incarnation died (by the kernel or the garbage collector), in
            # whatever context that runs: restoring context variables there would leak them.
            closed = True
            raise
        finally:
            # Also when a storage error escapes: a turn that is over must not look active.
            if not closed:
                leave_chat_turn(outer)
                set_current_agent(outer_agent)
            self.controllers.pop(rid, None)
            self.states.pop(rid, None)
            if self.active_request_id == rid:
                self.active_request_id = None
            self._hooks._on_turn_settled(rid)
        return TurnResult(
            rid,
            status,
            error,
            stream_id=state.stream_id,
            message_id=message_id,
            cleared=cleared,
            recovering=outcome == RECOVERING_OUTCOME,
        )

    async def _route_stall(
        self, state: TurnState, read_error: str | None = None
    ) -> tuple[str, str | None, str | None]:
        """The model stream stalled (or, with `read_error`, failed to read with a platform
        transient): offer the turn to chat recovery, with its snapshot pointing past its stored
        chunks (the continuation builds on the persisted partial answer alone); (status,
        error, outcome)."""
        snapshot = {
            **state.snapshot,
            "streamId": state.stream_id,
            "streamFrom": self._stream.length(state.stream_id),
        }
        partial = MessageBuilder(state.builder.message).message
        routed = await self._hooks._route_stalled_turn(
            state.plan.request_id, snapshot, partial, backoff=read_error is not None
        )
        if routed == "scheduled":
            return "aborted", None, RECOVERING_OUTCOME
        if routed == "exhausted":
            return "aborted", None, "exhausted"
        if read_error is not None:
            return "error", self._steps.fail(state, read_error), None
        window = self._hooks._stream_stall_timeout_ms()
        message = f"Chat stream stalled: nothing streamed for {window} ms"
        return "error", self._steps.fail(state, message), None

    # -- frames -------------------------------------------------------------------------------
    def emit_chunk(self, state: TurnState, chunk: Mapping[str, Any]) -> int | None:
        """Store a UI chunk in the turn's stream, apply it, broadcast it (`TurnSteps`)."""
        return self._steps.emit_chunk(state, chunk)

    def publish_chunk(
        self, state: TurnState, chunk: Mapping[str, Any], body: str, index: int | None
    ) -> None:
        """A chunk stored at `index` of the turn's stream (None: not stored) (`TurnSteps`)."""
        self._steps.publish_chunk(state, chunk, body, index)

    def broadcast_messages(self) -> None:
        """Tell clients the transcript."""
        self._hooks.broadcast({"type": CHAT_MESSAGES_TYPE, "messages": self._messages.all()})
