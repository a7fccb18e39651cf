"""JSON text as the SDK stores it: JavaScript's `JSON.stringify` shape, and lenient parsing."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["parse_json_text", "to_json_text"]


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""What `json.dumps` with these options builds on every call (a stash writes on every step)."""


def to_json_text(data: Any, what: str = "stash data") -> str:
    """No spaces, insertion order, no NaN: the text JavaScript would store."""
    try:
        return _ENCODER.encode(data)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-serialisable: {exc}; got {data!r}") from None


def parse_json_text(text: str | None) -> tuple[bool, Any]:
    """(parsed, value): NULL or empty text parses to None; bad JSON does not parse."""
    if text is None or text == "":
        return True, None
    try:
        return True, json.loads(text)
    except ValueError:
        return False, None
