"""JSON text for what reports write: UTF-8 as it is, with a lone surrogate escaped.

A run's values may hold half of a character outside the BMP on its own (a JavaScript slice cut
through an emoji); `JSON.stringify` writes it as a `\\udXXX` escape, and so do these, so that the
text can be written as UTF-8 (the simulator's trace lines do the same)."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["dumps"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(value: Any, **options: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, **options)`, lone surrogates escaped."""
    text = json.dumps(value, ensure_ascii=False, **options)
    if text.isascii() or not _LONE_SURROGATE.search(text):
        return text
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
