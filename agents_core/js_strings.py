"""Strings measured and cut as JavaScript does (in UTF-16 code units, not code points), and
plain data written as `JSON.stringify` writes it.

The SDK measures and slices strings with `.length` and `.slice`, which count UTF-16 code units:
a character outside the Basic Multilingual Plane (most emoji) counts two, and a slice may end
between the two halves of one, leaving a lone surrogate. Python counts code points, so the port
measures and cuts through these helpers wherever the SDK's limits are in characters.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["js_json", "js_length", "js_slice"]


def js_length(text: str) -> int:
    """`text.length`: code points, plus one for each outside the BMP."""
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def js_slice(text: str, end: int) -> str:
    """`text.slice(0, end)` for `end >= 0`: a cut between the halves of a pair keeps the high
    half alone, as a lone surrogate, as JavaScript does."""
    if text.isascii() or js_length(text) <= end:
        return text[:end]
    units = text.encode("utf-16-le", "surrogatepass")[: 2 * end]
    return units.decode("utf-16-le", "surrogatepass")


def js_json(value: Any) -> str:
    """`JSON.stringify(value)` for plain data: no spaces, insertion order, a whole float written
    as an integer (`1.0` is `1`, as JavaScript has one number type), NaN and infinities as
    `null`. Raises TypeError or ValueError for what JSON cannot hold."""
    return json.dumps(_as_js(value), separators=(",", ":"), ensure_ascii=False)


def _as_js(value: Any) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return int(value) if value.is_integer() and abs(value) < 1e21 else value
    if isinstance(value, dict):
        return {key: _as_js(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_as_js(item) for item in value]
    return value
