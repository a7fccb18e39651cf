"""Durations in integer milliseconds, and the short text form scenarios use (`90s`, `14m59s`)."""

from __future__ import annotations

import re

__all__ = ["DAY_MS", "HOUR_MS", "MINUTE_MS", "SECOND_MS", "parse_duration_ms"]

SECOND_MS = 1_000
MINUTE_MS = 60 * SECOND_MS
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS

_UNITS = {"d": DAY_MS, "h": HOUR_MS, "m": MINUTE_MS, "s": SECOND_MS, "ms": 1}
_PART = re.compile(r"(\d+)(ms|d|h|m|s)")


def parse_duration_ms(text: str | int) -> int:
    """`1h30m`, `90s`, `14m59s`, `250ms`, `0` or a whole number of ms, to integer ms."""
    if isinstance(text, bool):
        raise ValueError(f"not a duration: {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"a duration cannot be negative, got {text}")
        return text
    if not isinstance(text, str):
        raise ValueError(f"a duration is a string like '90s' or whole milliseconds, got {text!r}")
    compact = text.strip().replace(" ", "")
    if compact.isdigit():
        return int(compact)
    position, total = 0, 0
    seen: list[str] = []
    for match in _PART.finditer(compact):
        if match.start() != position:
            break
        unit = match.group(2)
        if unit in seen or (seen and list(_UNITS).index(unit) <= list(_UNITS).index(seen[-1])):
            raise ValueError(f"duration {text!r}: units must appear once each, largest first")
        seen.append(unit)
        total += int(match.group(1)) * _UNITS[unit]
        position = match.end()
    if position != len(compact) or not seen:
        raise ValueError(
            f"not a duration: {text!r}; write whole numbers with units d, h, m, s, ms "
            f"(largest first), e.g. '90s', '14m59s', '1h30m', '250ms'"
        )
    return total
