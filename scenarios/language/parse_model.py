"""The `model:` section (the scripted model provider chat agents stream from) and model replies.

    model:
      rules:
        - asked: research                      # the last user message contains 'research'
          reply: {text: "Both summaries are in.", chunks: 5, delay: 200ms}
        - offers: researcher                   # the request offers the tool 'researcher'
          reply: {tool_calls: [{name: researcher, input: {topic: x}}]}
        - reply: [{stall: 30s}, {text: ok}]    # no predicate: every request; a list: in turn
      default: {fail: boom, after_chunks: 2}

A reply is one of `{text, chunks, delay}`, `{tool_calls: [{name, input, id}], text, delay}`,
`{stall: 30s, then: <reply>}` and `{fail: message, after_chunks, in_band, partial, delay}`, the
`sim.model` replies of the same names. `stall_model` / `fail_model` steps read theirs here too.
"""

from __future__ import annotations

from typing import Any

from scenarios.language.errors import InvalidScenario
from scenarios.language.fields import Fields, line_of, plain, show
from scenarios.language.schema import ModelRule, ModelScript
from scenarios.language.shapes import (
    Anything,
    Duration,
    Flag,
    Named,
    OneOf,
    Ref,
    Seq,
    Shape,
    Text,
    Whole,
)
from sim.model import Reply, call, fail, stall, text, tool_calls

__all__ = ["MODEL", "REPLIES", "REPLY", "parse_model", "read_replies", "read_reply"]

CHUNKS = Whole(minimum=1, maximum=10_000, default=1, doc="How many text-delta chunks.")
DELAY = Duration(doc="Time before each chunk (default: seeded, 10-150 ms).")

TEXT_REPLY = Shape(
    {
        "text": Text(empty=True, doc="The answer's text."),
        "chunks": CHUNKS,
        "delay": DELAY,
    },
    required=("text",),
    doc="The model answers with text.",
)
TOOL_CALL = Shape(
    {
        "name": Text(doc="The tool's name."),
        "input": Anything(doc="The tool's input."),
        "id": Text(doc="The tool call id (default: derived from the request)."),
    },
    required=("name",),
)
TOOL_CALLS_REPLY = Shape(
    {
        "tool_calls": Seq(TOOL_CALL, min_items=1, doc="The calls, made in parallel."),
        "text": Text(empty=True, doc="Text streamed before the calls."),
        "delay": DELAY,
    },
    required=("tool_calls",),
    doc="The model calls tools.",
)
STALL_REPLY = Shape(
    {
        "stall": Duration(doc="How long no chunk comes."),
        "then": Ref("reply", doc="What streams after the stall; without it the call fails."),
    },
    required=("stall",),
    doc="The model stream stalls.",
)
FAIL_REPLY = Shape(
    {
        "fail": Text(doc="The error message."),
        "after_chunks": Whole(default=0, doc="Chunks streamed before the failure."),
        "in_band": Flag(default=False, doc="Send an error chunk instead of raising."),
        "partial": Text(empty=True, doc="The text of the chunks before the failure."),
        "delay": DELAY,
    },
    required=("fail",),
    doc="The model stream fails.",
)
REPLY_SHAPES = {
    "tool_calls": TOOL_CALLS_REPLY,
    "stall": STALL_REPLY,
    "fail": FAIL_REPLY,
    "text": TEXT_REPLY,
}
"""Reply kinds by the key that introduces them (checked in this order: tool calls have text)."""
REPLY = Named("reply", OneOf(tuple(REPLY_SHAPES.values()), doc="One answer of the scripted model."))
REPLIES = OneOf(
    (REPLY, Seq(REPLY, min_items=1)),
    doc="A reply, or a list: the first match gets the first, every later one the last.",
)
RULE = Shape(
    {
        "asked": Text(doc="Matches when the last user message contains this text."),
        "offers": Text(doc="Matches when the request offers this tool."),
        "after_tool": OneOf(
            (Text(), Flag()), doc="Matches when called back with a tool's result (true: any)."
        ),
        "continuing": Flag(doc="Matches when chat recovery continues an interrupted answer."),
        "reply": REPLIES,
    },
    required=("reply",),
    doc="Requests matching every given predicate get this reply (no predicate: all).",
)
MODEL = Shape(
    {
        "rules": Seq(RULE, doc="Tried in order; the first that matches answers."),
        "default": REPLIES,
    },
    doc="The scripted model provider chat agents stream from (service `model`).",
)
REPLY_HINT = (
    "a reply is one of {text: ...}, {tool_calls: [{name: ...}]}, {stall: 30s}, {fail: message}"
)


def parse_model(top: Fields) -> ModelScript | None:
    """The `model:` section, or None when the scenario has none."""
    if "model" not in top:
        return None
    section = top.sub("model", shape=MODEL, where="model")
    rules = []
    items = section.get("rules") or []
    lines = getattr(items, "lines", [])
    for index, item in enumerate(items, start=1):
        line = lines[index - 1] if index <= len(lines) else section.line_of("rules")
        rule = Fields(top.path, f"model.rules[{index}]", item, line, shape=RULE)
        after = rule.raw("after_tool")
        if after is not None and not isinstance(after, bool | str) or after == "":
            rule.bad("after_tool", "expected a tool name, or true for any tool")
        rules.append(
            ModelRule(
                replies=read_replies(rule, "reply"),
                asked=rule.get("asked"),
                offers=rule.get("offers"),
                after_tool=after,
                continuing=rule.get("continuing"),
            )
        )
    default = read_replies(section, "default") if "default" in section else ModelScript().default
    return ModelScript(rules=tuple(rules), default=default)


def read_replies(fields: Fields, key: str) -> tuple[Reply, ...]:
    """The reply, or list of replies, under `key`."""
    value = fields.raw(key)
    if isinstance(value, list):
        if not value:
            fields.bad(key, f"expected a reply or a non-empty list of replies; {REPLY_HINT}")
        lines = getattr(value, "lines", [])
        return tuple(
            read_reply(fields, f"{key}[{n}]", item, lines[n - 1] if n <= len(lines) else 0)
            for n, item in enumerate(value, start=1)
        )
    return (read_reply(fields, key, value, fields.line_of(key)),)


def read_reply(owner: Fields, name: str, value: Any, line: int) -> Reply:
    """One reply (`name` is how errors call it: `reply`, `default[2]`, `then`)."""
    line = line_of(value, line or owner.line)
    if not isinstance(value, dict):
        raise InvalidScenario(owner.path, line, owner.where, f"{name}: {show(value)}", REPLY_HINT)
    kind = next((kind for kind in REPLY_SHAPES if kind in value), None)
    if kind is None:
        raise InvalidScenario(
            owner.path, line, owner.where, f"{name}: {show(plain(value))}", REPLY_HINT
        )
    fields = Fields(owner.path, owner.where, value, line, shape=REPLY_SHAPES[kind], name=name)
    delay_ms = None if kind == "stall" else fields.get("delay")
    if kind == "text":
        return text(fields.get("text"), fields.get("chunks"), delay_ms=delay_ms)
    if kind == "tool_calls":
        calls = []
        items = fields.get("tool_calls")
        lines = getattr(items, "lines", [])
        for index, item in enumerate(items, start=1):
            item_line = lines[index - 1] if index <= len(lines) else fields.line
            one = Fields(owner.path, owner.where, item, item_line, shape=TOOL_CALL, name=name)
            calls.append(call(one.get("name"), plain(one.get("input")), id=one.get("id")))
        return tool_calls(*calls, text=fields.get("text"), delay_ms=delay_ms)
    if kind == "stall":
        then = None
        if "then" in fields:
            then = read_reply(fields, "then", fields.raw("then"), fields.line_of("then"))
        return stall(fields.get("stall"), then)
    partial = fields.get("partial")
    return fail(
        fields.get("fail"),
        fields.get("after_chunks"),
        in_band=fields.get("in_band"),
        partial="partial answer" if partial is None else partial,
        delay_ms=delay_ms,
    )
