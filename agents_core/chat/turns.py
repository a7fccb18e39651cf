"""Chat turns: one at a time, in order, each a fiber that streams from the model and runs tools.

`save_messages` submits a turn that persists its messages when it starts. Turns queue FIFO (one
runs at a time); clearing the chat bumps a generation so turns still queued are `skipped` and
the running one is aborted. A turn runs in what its release gives it (`_run_chat_turn`,
`turn_runners.py`: the fiber `__cf_internal_chat_turn:<requestId>`, or on 0.32.0 at the top
level a Task run), with a snapshot naming the turn, so that when the incarnation dies mid-turn
chat recovery finds it (`agents_core.chat.chat_recovery`).

Inside a turn: open a stream to `model_service`, store each UI chunk in the resumable stream
and broadcast it as a `cf_agent_use_chat_response` frame; when the model calls tools, run them
(in parallel, each result streamed as it lands), append the results and call the model again,
until it answers without tools (at most `max_steps` model calls). The answer's `finish` chunk
commits in a step of its own; the assistant message is persisted after it, at the end. A model
failure, in-band or raised, becomes one error frame (`error: true`, body = the message) and the
turn's status `error`.

A stream stall (0.32.0, when the host sets `chat_stream_stall_timeout_ms`: no model chunk for
that long) is offered to chat recovery (`_route_stalled_turn`). When recovery schedules the
turn's continuation, this request stops with the outcome `recovering`: its stream ends
`recovering`, its `done` frame says `outcome: "recovering"`, its partial answer is persisted and
its status is `aborted` (as the SDK's stream result is); the same turn goes on under a new
request. When recovery gives the turn up, its terminal message was the turn's last frame and the
stream ends `error`; when recovery declines, the stall is an ordinary model failure.

`ChatTurns` is the component: it owns the queue, the clear generation and the running turns,
writes the transcript through `ChatMessages` and the chunks through `ResumableStream`, and
reaches the host through `TurnHooks` (the user's tools and prompt, what a turn runs in, the
broadcast snoop and the recovery credit). The SDK's counterpart is the hosts' turn machinery
(AIChatAgent's `onChatMessage` loop and `saveMessages`, Think's `TurnQueue`).
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agents_core.agent_tools.tool import set_current_agent
from agents_core.chat.messages import MessageBuilder
from agents_core.jsontext import to_json_text
from agents_core.probes import probe
from agents_core.signals import AbortController, AbortSignal

if TYPE_CHECKING:
    from agents_core.chat.messages import ChatMessages
    from agents_core.chat.recovery_credit import RecoveryCredit
    from agents_core.chat.stream_store import ResumableStream
    from agents_core.context import AgentContext

__all__ = [
    "CHAT_MESSAGES_TYPE",
    "CHAT_RESPONSE_TYPE",
    "CHAT_TURN_FIBER_PREFIX",
    "RECOVERING_OUTCOME",
    "ChatTurnContext",
    "ChatTurns",
    "TurnHooks",
    "TurnPlan",
    "TurnResult",
    "current_chat_turn",
]

CHAT_RESPONSE_TYPE = "cf_agent_use_chat_response"
CHAT_MESSAGES_TYPE = "cf_agent_chat_messages"
CHAT_REQUEST_TYPE = "cf_agent_use_chat_request"
CHAT_TURN_FIBER_PREFIX = "__cf_internal_chat_turn:"


class _Signal:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


_END = _Signal("<end of stream>")
_ABORTED = _Signal("<aborted>")
_STALLED = _Signal("<stalled>")
RECOVERING_OUTCOME = "recovering"
"""The outcome of a request that stopped while recovery continues its turn (sdk-0.32 §8.2)."""


@dataclass(frozen=True)
class TurnResult:
    """How a turn ended: `completed`, `error`, `aborted` or `skipped`."""

    request_id: str
    status: str
    error: str | None = None
    stream_id: str | None = None
    message_id: str | None = None
    cleared: bool = False
    """The chat was cleared while the turn was queued or running."""
    recovering: bool = False
    """The turn's outcome is `recovering` (its status `aborted`): it stalled and chat recovery
    continues it under a new request."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"requestId": self.request_id, "status": self.status}
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass
class TurnPlan:
    """What to run: the turn's request id and where it comes from."""

    request_id: str
    trigger: str = "chat"
    signal: AbortSignal | None = None
    body: Any = None
    origin_request_id: str | None = None
    attempt: int = 0
    continue_message_id: str | None = None
    """Chat recovery's continue path: extend this (persisted, partial) assistant message."""
    prepare: Callable[[str], Any] | None = None
    """Runs when the turn is admitted (after the queue), before its fiber starts."""
    stream_id: str | None = None
    """Chat recovery of an agent-tool run: the interrupted turn's stream, which this turn
    continues instead of opening its own (the run's chunk indices never start over, S5)."""


@dataclass(frozen=True)
class ChatTurnContext:
    """The turn the current code runs in (tools use it to find their agent)."""

    agent: Any
    request_id: str
    trigger: str


@dataclass
class _TurnState:
    plan: TurnPlan
    stream_id: str
    builder: MessageBuilder
    controller: AbortController
    aborted: Any
    snapshot: dict[str, Any]
    """The turn's own snapshot (what chat recovery reads to continue it)."""
    started: bool = False


_current_turn: contextvars.ContextVar[ChatTurnContext | None] = contextvars.ContextVar(
    "agents_core_chat_turn", default=None
)


def current_chat_turn() -> ChatTurnContext | None:
    """The chat turn the calling code runs in, or None outside any turn."""
    return _current_turn.get()


class TurnHooks(Protocol):
    """What the turn engine runs of its chat host: the user's overrides (the tools, the
    system prompt, the model service and step budget), the fiber a turn runs in, and the steps
    of the host's other parts (the agent-tool run a turn serves, the broadcast snoop, the
    The host passes itself; a subclass's override is what runs."""

    @property
    def model_service(self) -> str: ...
    @property
    def max_steps(self) -> int: ...
    def get_tools(self) -> Mapping[str, Any]: ...
    def get_system_prompt(self) -> str | None: ...
    async def _run_chat_turn(
        self,
        request_id: str,
        continuation: bool,
        fn: Callable[[Any], Awaitable[Any]],
        *,
        initial_snapshot: Any,
        wrap: Callable[[Any], Any],
    ) -> Any: ...
    def _turn_snapshot_extra(self, request_id: str) -> dict[str, Any]: ...
    def _stream_stall_timeout_ms(self) -> int: ...
    async def _route_stalled_turn(
        self, request_id: str, snapshot: dict[str, Any], partial: dict[str, Any]
    ) -> str | None: ...
    def _on_turn_settled(self, request_id: str) -> None: ...
    def _on_turn_result(self, result: TurnResult) -> None: ...
    def _broadcast_chat_frame(self, frame: Any, chunk_index: int | None = None) -> None: ...
    def broadcast(self, frame: Any, exclude: tuple[str, ...] = ()) -> None: ...


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
    )

    def __init__(
        self,
        ctx: AgentContext,
        messages: ChatMessages,
        stream: ResumableStream,
        credit: RecoveryCredit,
        hooks: TurnHooks,
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
        self.states: dict[str, _TurnState] = {}
        """The running turns by request id."""
        self.active_request_id: str | None = None

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
        controller.signal.add_listener(lambda _reason: aborted.resolve(_ABORTED))
        base = self._messages.by_id(message_id) if plan.continue_message_id else None
        builder = MessageBuilder(base or {"id": message_id, "role": "assistant", "parts": []})
        stream_id = plan.stream_id
        if stream_id is not None and self._stream.adopt(stream_id, rid):
            probe(self._ctx.host, "chat.recovered_turn_continued_stream")
        else:
            stream_id = self._stream.start(rid)
        state = _TurnState(plan, stream_id, builder, controller, aborted, snapshot)
        self.controllers[rid] = controller
        self.states[rid] = state
        self.active_request_id = rid
        outer = _current_turn.get()
        _current_turn.set(ChatTurnContext(self._hooks, rid, plan.trigger))
        outer_agent = set_current_agent(self._hooks)  # the ambient agent tools (agent_tool) run for
        closed = False
        outcome: str | None = None
        try:
            status, error = await self._drive_turn(state)
            if status == "stalled":
                status, error, outcome = await self._route_stall(state)
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
                done = {"type": CHAT_RESPONSE_TYPE, "id": rid, "body": "", "done": True}
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
                _current_turn.set(outer)
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

    async def _route_stall(self, state: _TurnState) -> tuple[str, str | None, str | None]:
        """The model stream stalled: offer the turn to chat recovery, with its snapshot
        pointing past its stored chunks (the continuation builds on the persisted partial
        answer alone); (status, error, outcome)."""
        snapshot = {
            **state.snapshot,
            "streamId": state.stream_id,
            "streamFrom": self._stream.length(state.stream_id),
        }
        partial = MessageBuilder(state.builder.message).message
        routed = await self._hooks._route_stalled_turn(state.plan.request_id, snapshot, partial)
        if routed == "scheduled":
            return "aborted", None, RECOVERING_OUTCOME
        if routed == "exhausted":
            return "aborted", None, "exhausted"
        window = self._hooks._stream_stall_timeout_ms()
        message = f"Chat stream stalled: no model chunk for {window} ms"
        return "error", self._fail(state, message), None

    async def _drive_turn(self, state: _TurnState) -> tuple[str, str | None]:
        signal = state.controller.signal
        pending = state.builder.pending_tool_calls() if state.plan.continue_message_id else []
        for step in range(self._hooks.max_steps):
            if pending:
                if await self._run_tools(state, pending) is _ABORTED:
                    return "aborted", None
                pending = []
            if signal.aborted:
                return "aborted", None
            calls, finish = [], None
            stream = self._ctx.host.outbound.open_stream(
                self._hooks.model_service, self._model_request(state, step)
            )
            while True:
                try:
                    chunk = await self._next_model_chunk(stream, state)
                except Exception as exc:  # noqa: BLE001 - a provider failure ends the turn
                    return "error", self._fail(state, _message(exc))
                if chunk is _ABORTED:
                    return "aborted", None
                if chunk is _STALLED:
                    return "stalled", None
                if chunk is _END:
                    break
                if not isinstance(chunk, Mapping):
                    continue
                kind = chunk.get("type")
                if kind == "start":
                    if state.started:
                        continue
                    state.started = True
                    chunk = {**chunk, "messageId": state.builder.message["id"]}
                elif kind == "finish":
                    finish = dict(chunk)
                    continue
                elif kind == "error":
                    text = chunk.get("errorText")
                    return "error", self._fail(state, str(text or "model stream failed"))
                elif kind == "tool-input-available":
                    calls.append(dict(chunk))
                self.emit_chunk(state, chunk)
            if not calls:
                if state.started:
                    self.emit_chunk(state, finish or {"type": "finish"})
                    # End the step here, so the finish chunk commits on its own: whatever the
                    # turn's last step does next (persist the answer, end the stream, drop the
                    # fiber row, a delivery mark queued behind the turn), a crash in it leaves
                    # the proof that the answer was complete, and chat recovery completes the
                    # answer instead of asking the model for it again.
                    await self._ctx.host.clock.sleep(0)
                return "completed", None
            pending = calls
        return "error", self._fail(
            state,
            f"the model was still calling tools after max_steps={self._hooks.max_steps} calls",
        )

    def _model_request(self, state: _TurnState, step: int) -> dict[str, Any]:
        messages = self._messages.all()
        current = state.builder.message
        if current["parts"]:
            messages = [m for m in messages if m.get("id") != current["id"]] + [current]
        request: dict[str, Any] = {
            "messages": messages,
            "tools": list(self._hooks.get_tools()),
            "system": self._hooks.get_system_prompt(),
            "requestId": state.plan.request_id,
            "trigger": state.plan.trigger,
            "step": step,
        }
        if state.plan.continue_message_id and step == 0:
            request["continuation"] = True
        if state.plan.body is not None:
            request["body"] = state.plan.body
        return request

    async def _next_model_chunk(self, stream: Any, state: _TurnState) -> Any:
        if state.controller.signal.aborted:
            return _ABORTED

        async def pull() -> Any:
            try:
                return await stream.__anext__()
            except StopAsyncIteration:
                return _END

        window = self._hooks._stream_stall_timeout_ms()
        if window <= 0:
            return await self._ctx.host.tasks.race(pull(), state.aborted)

        async def watchdog() -> Any:
            await self._ctx.host.clock.sleep(window)
            return _STALLED

        return await self._ctx.host.tasks.race(pull(), state.aborted, watchdog())

    async def _run_tools(self, state: _TurnState, calls: list[dict[str, Any]]) -> Any:
        tools = self._hooks.get_tools()
        signal = state.controller.signal

        async def run_one(chunk: dict[str, Any]) -> None:
            ok, value = await self._execute_tool(tools, chunk, signal)
            if signal.aborted:
                return
            call_id = chunk.get("toolCallId")
            if ok:
                out = {"type": "tool-output-available", "toolCallId": call_id, "output": value}
            else:
                out = {"type": "tool-output-error", "toolCallId": call_id, "errorText": value}
            self.emit_chunk(state, out)

        everything = self._ctx.host.tasks.gather(*(run_one(c) for c in calls))
        return await self._ctx.host.tasks.race(everything, state.aborted)

    async def _execute_tool(
        self, tools: Mapping[str, Any], chunk: Mapping[str, Any], signal: AbortSignal
    ) -> tuple[bool, Any]:
        name = chunk.get("toolName")
        tool = tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return False, f"Tool {name!r} is not available; tools: {sorted(tools)}"
        try:
            result = tool.execute(
                chunk.get("input"), tool_call_id=chunk.get("toolCallId"), signal=signal
            )
            if inspect.isawaitable(result):
                result = await result
            to_json_text(result, f"the output of tool {name!r}")
            return True, result
        except Exception as exc:  # noqa: BLE001 - a failing tool is reported to the model
            return False, _message(exc)

    # -- frames -------------------------------------------------------------------------------
    def emit_chunk(self, state: _TurnState, chunk: Mapping[str, Any]) -> int | None:
        """Store a UI chunk in the turn's stream, apply it to the answer, broadcast it; its
        index in the stream (None: too large to store, on a release that keeps such out)."""
        body = to_json_text(dict(chunk), "a UI chunk")
        index = self._stream.append(state.stream_id, body)
        self.publish_chunk(state, chunk, body, index)
        return index

    def publish_chunk(
        self, state: _TurnState, chunk: Mapping[str, Any], body: str, index: int | None
    ) -> None:
        """A chunk stored at `index` of the turn's stream (None: not stored): credit it if
        stored, apply it, broadcast it."""
        if index is not None:
            self._credit.stored_chunk(chunk.get("type"))
        state.builder.apply(chunk)
        frame = {"type": CHAT_RESPONSE_TYPE, "id": state.plan.request_id, "body": body}
        self._hooks._broadcast_chat_frame({**frame, "done": False}, chunk_index=index)

    def _fail(self, state: _TurnState, message: str) -> str:
        frame = {"type": CHAT_RESPONSE_TYPE, "id": state.plan.request_id, "body": message}
        self._hooks._broadcast_chat_frame({**frame, "done": False, "error": True})
        return message

    def broadcast_messages(self) -> None:
        """Tell clients the transcript."""
        self._hooks.broadcast({"type": CHAT_MESSAGES_TYPE, "messages": self._messages.all()})


def _message(error: BaseException) -> str:
    return str(error) or type(error).__name__
