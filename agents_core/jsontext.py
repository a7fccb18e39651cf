"""JSON text as the SDK stores it: JavaScript's `JSON.stringify` shape, and lenient parsing."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["escape_lone_surrogates", "parse_json_text", "to_json_text"]


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""What `json.dumps` with these options builds on every call (a stash writes on every step)."""


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""A Python string holds a surrogate only alone (a pair is one code point)."""


def to_json_text(data: Any, what: str = "stash data") -> str:
    """No spaces, insertion order, no NaN: the text JavaScript would store. A lone surrogate
    (half of an emoji a JavaScript slice cut through) is escaped as `\\udXXX`, as
    `JSON.stringify` escapes it, so the text stays valid UTF-8."""
    try:
        text = _ENCODER.encode(data)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-serialisable: {exc}; got {data!r}") from None
    return escape_lone_surrogates(text)


def escape_lone_surrogates(text: str) -> str:
    """JSON text with each lone surrogate written as a `\\udXXX` escape (as `JSON.stringify`
    writes it); other text as it is."""
    if text.isascii() or not _LONE_SURROGATE.search(text):
        return text
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def parse_json_text(text: str | None) -> tuple[bool, Any]:
    """(parsed, value): NULL or empty text parses to None; bad JSON does not parse."""
    if text is None or text == "":
        return True, None
    try:
        return True, json.loads(text)
    except ValueError:
        return False, None
