"""A scripted model provider: an upstream service that answers chat requests with UI chunks.

A `ScriptedModel` holds rules, each a predicate over the request and a reply; the first rule that
matches answers (else the default). A reply is what the model streams for one call:

    model = ScriptedModel(
        rules=[
            when(after_tool("researcher"), reply=text("Both summaries are in.", chunks=3)),
            when(offers("researcher"), reply=tool_calls(call("researcher", {"topic": "x"}))),
        ],
        default=text("ok"),
    )
    sim.register_model(model)  # the service "model", the one chat agents open

Replies: `text(content, chunks=n)`, `tool_calls(call(...), ...)`, `stall(ms, then=reply)`,
`fail(message, after_chunks=n)`; a list `[a, b]` answers the rule's first match with `a`, the
second with `b`, and every later one with the last. The stream is AI-SDK-shaped: `start`,
`text-start` / `text-delta` / `text-end` (with an id), `tool-input-available` (toolCallId,
toolName, input), `finish`; a failure raises `ModelError` mid-stream, or with `in_band=True`
sends an `error` chunk. Latency is seeded (the `latency` stream), and the connection waits on the
agent's clock, so it dies with the incarnation (see `sim.upstream`).

Ids are derived from the request (a digest of its messages), never from a counter: the same
request gets the same tool-call ids, so a retried turn re-issues the same calls.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.prng import Stream

__all__ = [
    "ModelError",
    "Reply",
    "Rule",
    "ScriptedModel",
    "ToolCall",
    "after_tool",
    "asked",
    "call",
    "continuing",
    "fail",
    "offers",
    "stall",
    "text",
    "tool_calls",
    "when",
]

Request = Mapping[str, Any]
Event = tuple[int, Any]
"""One stream event: (delay before it in ms, a UI chunk or an exception to raise)."""

FIRST_CHUNK_MS = (50, 150)
"""Seeded time to the first chunk when a reply gives no `delay_ms`."""
NEXT_CHUNK_MS = (10, 50)
"""Seeded time between content chunks when a reply gives no `delay_ms`."""


class ModelError(RuntimeError):
    """The provider failed mid-stream (a scripted `fail`, or a stall that timed out)."""


@dataclass(frozen=True)
class _Ctx:
    """What a reply needs to build its events: the request's digest and the latency stream."""

    key: str
    latency: Stream

    def first(self, delay_ms: int | None) -> int:
        return delay_ms if delay_ms is not None else self.latency.int_between(*FIRST_CHUNK_MS)

    def next(self, delay_ms: int | None) -> int:
        return delay_ms if delay_ms is not None else self.latency.int_between(*NEXT_CHUNK_MS)


class Reply:
    """What the model streams for one call."""

    def events(self, ctx: _Ctx) -> list[Event]:
        raise NotImplementedError


def _split(content: str, chunks: int) -> list[str]:
    """`content` in `chunks` contiguous pieces (fewer when it is shorter), none empty."""
    count = max(1, min(chunks, len(content)))
    size, extra = divmod(len(content), count)
    out, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        out.append(content[start:end])
        start = end
    return out


def _text_events(ctx: _Ctx, content: str, chunks: int, delay_ms: int | None, n: int) -> list[Event]:
    if not content:
        return []
    part_id = f"text_{ctx.key}_{n}"
    out: list[Event] = [(0, {"type": "text-start", "id": part_id})]
    for piece in _split(content, chunks):
        out.append((ctx.next(delay_ms), {"type": "text-delta", "id": part_id, "delta": piece}))
    out.append((0, {"type": "text-end", "id": part_id}))
    return out


@dataclass(frozen=True)
class _Text(Reply):
    content: str
    chunks: int
    delay_ms: int | None

    def events(self, ctx: _Ctx) -> list[Event]:
        return [
            (ctx.first(self.delay_ms), {"type": "start"}),
            *_text_events(ctx, self.content, self.chunks, self.delay_ms, 0),
            (0, {"type": "finish"}),
        ]


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model makes; `id` defaults to one derived from the request."""

    tool_name: str
    input: Any
    id: str | None = None


@dataclass(frozen=True)
class _ToolCalls(Reply):
    calls: tuple[ToolCall, ...]
    text: str | None
    delay_ms: int | None

    def events(self, ctx: _Ctx) -> list[Event]:
        out: list[Event] = [(ctx.first(self.delay_ms), {"type": "start"})]
        out += _text_events(ctx, self.text or "", 1, self.delay_ms, 0)
        for index, tool_call in enumerate(self.calls):
            chunk = {
                "type": "tool-input-available",
                "toolCallId": tool_call.id or f"call_{ctx.key}_{index}",
                "toolName": tool_call.tool_name,
                "input": copy.deepcopy(tool_call.input),
            }
            out.append((ctx.next(self.delay_ms), chunk))
        out.append((0, {"type": "finish"}))
        return out


@dataclass(frozen=True)
class _Stall(Reply):
    ms: int
    then: Reply | None

    def events(self, ctx: _Ctx) -> list[Event]:
        if self.then is None:
            return [(self.ms, ModelError(f"model stream stalled: no chunk for {self.ms} ms"))]
        events = self.then.events(ctx)
        if not events:
            return events
        delay, chunk = events[0]
        return [(self.ms + delay, chunk), *events[1:]]


@dataclass(frozen=True)
class _Fail(Reply):
    message: str
    after_chunks: int
    in_band: bool
    partial: str
    delay_ms: int | None

    def events(self, ctx: _Ctx) -> list[Event]:
        pieces = max(1, self.after_chunks - 2)
        full = [
            (ctx.first(self.delay_ms), {"type": "start"}),
            *_text_events(ctx, self.partial, pieces, self.delay_ms, 0),
        ]
        out = full[: self.after_chunks]
        delay = ctx.first(self.delay_ms) if not out else ctx.next(self.delay_ms)
        if self.in_band:
            return [*out, (delay, {"type": "error", "errorText": self.message})]
        return [*out, (delay, ModelError(self.message))]


# -- building replies ---------------------------------------------------------------------------
def text(content: str, chunks: int = 1, *, delay_ms: int | None = None) -> Reply:
    """A text answer in `chunks` text-delta chunks: start, text-start, deltas, text-end, finish
    (an empty `content` streams only start and finish)."""
    if not isinstance(content, str):
        raise TypeError(f"text(content) takes a string, got {content!r}")
    if not isinstance(chunks, int) or chunks < 1:
        raise ValueError(f"text(chunks=) must be an integer >= 1, got {chunks!r}")
    return _Text(content, chunks, delay_ms)


def call(tool_name: str, input: Any = None, *, id: str | None = None) -> ToolCall:
    """One tool call, for `tool_calls(...)`."""
    if not isinstance(tool_name, str) or not tool_name:
        raise ValueError(f"call(tool_name) must be a non-empty string, got {tool_name!r}")
    return ToolCall(tool_name, {} if input is None else input, id)


def tool_calls(*calls: ToolCall, text: str | None = None, delay_ms: int | None = None) -> Reply:
    """The model decides to call tools (in parallel): start, [text], one
    tool-input-available chunk per call, finish."""
    if not calls or not all(isinstance(c, ToolCall) for c in calls):
        raise TypeError(f"tool_calls(...) takes one or more call(...) values, got {calls!r}")
    return _ToolCalls(tuple(calls), text, delay_ms)


def stall(ms: int, then: Reply | None = None) -> Reply:
    """Nothing for `ms`, then `then`'s stream; without `then` the call times out with a
    `ModelError` after `ms`."""
    if not isinstance(ms, int) or ms < 0:
        raise ValueError(f"stall(ms) takes integer milliseconds >= 0, got {ms!r}")
    return _Stall(ms, then)


def fail(
    message: str,
    after_chunks: int = 0,
    *,
    in_band: bool = False,
    partial: str = "partial answer",
    delay_ms: int | None = None,
) -> Reply:
    """Stream `after_chunks` chunks of a text answer (start, text-start, deltas of `partial`),
    then fail: raise `ModelError(message)`, or with `in_band` send `{"type": "error",
    "errorText": message}` and end."""
    if not isinstance(after_chunks, int) or after_chunks < 0:
        raise ValueError(f"fail(after_chunks=) must be an integer >= 0, got {after_chunks!r}")
    return _Fail(message, after_chunks, in_band, partial, delay_ms)


# -- predicates ---------------------------------------------------------------------------------
def _text_of(message: Mapping[str, Any]) -> str:
    parts = message.get("parts") or []
    return "".join(
        p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text"
    )


def asked(substring: str) -> Callable[[Request], bool]:
    """The last user message's text contains `substring`."""

    def predicate(request: Request) -> bool:
        users = [m for m in request.get("messages", []) if m.get("role") == "user"]
        return bool(users) and substring in _text_of(users[-1])

    return predicate


def offers(tool_name: str) -> Callable[[Request], bool]:
    """The request offers the tool `tool_name`."""
    return lambda request: tool_name in (request.get("tools") or [])


def after_tool(tool_name: str | None = None) -> Callable[[Request], bool]:
    """The conversation ends with an assistant message holding a settled result of `tool_name`
    (any tool when None): the model is being called back with tool results."""

    def predicate(request: Request) -> bool:
        messages = request.get("messages") or []
        if not messages or messages[-1].get("role") != "assistant":
            return False
        for part in messages[-1].get("parts") or []:
            kind = part.get("type", "") if isinstance(part, dict) else ""
            if not kind.startswith("tool-"):
                continue
            if tool_name is not None and kind != f"tool-{tool_name}":
                continue
            if part.get("state") in ("output-available", "output-error"):
                return True
        return False

    return predicate


def continuing() -> Callable[[Request], bool]:
    """The host is continuing an interrupted answer (chat recovery's continue path)."""
    return lambda request: bool(request.get("continuation"))


# -- the model ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """A predicate over the request and the reply (or replies, in order) it gets."""

    predicate: Callable[[Request], bool]
    replies: tuple[Reply, ...]


def _replies(reply: Reply | Sequence[Reply], where: str) -> tuple[Reply, ...]:
    replies = (reply,) if isinstance(reply, Reply) else tuple(reply)
    if not replies or not all(isinstance(r, Reply) for r in replies):
        raise TypeError(
            f"{where} takes a reply (text(...), tool_calls(...), stall(...), fail(...)) or a "
            f"non-empty list of them, got {reply!r}"
        )
    return replies


def when(predicate: Callable[[Request], bool], reply: Reply | Sequence[Reply]) -> Rule:
    """A rule: requests for which `predicate(request)` is true get `reply`."""
    if not callable(predicate):
        raise TypeError(f"when(predicate) takes a function of the request, got {predicate!r}")
    return Rule(predicate, _replies(reply, "when(reply=)"))


@dataclass
class ScriptedModel:
    """A model provider answering by rules; it records every request it received."""

    rules: Sequence[Rule] = ()
    default: Reply | Sequence[Reply] = field(default_factory=lambda: text("ok"))
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rules = tuple(self.rules)
        for rule in self.rules:
            if not isinstance(rule, Rule):
                raise TypeError(f"ScriptedModel(rules=) takes when(...) rules, got {rule!r}")
        self._default = _replies(self.default, "ScriptedModel(default=)")
        self._matches: dict[int, int] = {}

    def reply_for(self, request: Request) -> Reply:
        """The reply this request gets (counting it as a match of its rule)."""
        for index, rule in enumerate(self.rules):
            if rule.predicate(request):
                return self._nth(index, rule.replies)
        return self._nth(-1, self._default)

    def _nth(self, index: int, replies: tuple[Reply, ...]) -> Reply:
        used = self._matches.get(index, 0)
        self._matches[index] = used + 1
        return replies[min(used, len(replies) - 1)]

    def __call__(self, request: Request, latency: Stream) -> list[Event]:
        frozen = json.loads(json.dumps(request, sort_keys=True, default=str))
        self.requests.append(frozen)
        digest = hashlib.sha256(
            json.dumps(frozen.get("messages", []), sort_keys=True).encode()
        ).hexdigest()[:12]
        return self.reply_for(frozen).events(_Ctx(digest, latency))
