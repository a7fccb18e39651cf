"""The values a Task run persists, and the durations its options take (spec sdk-0.32 §6.5).

A Task's input, metadata, step results and result are stored as JSON text, at most 1 MiB each
(`MAX_SERIALIZED_BYTES`); None (JavaScript's `undefined`) is column NULL. A duration is a
non-negative number of milliseconds or a text such as `"10 seconds"` or `"1 day"` (a number,
one space or more, a unit `second`, `minute`, `hour`, `day` or `week`, optionally plural),
floored to whole milliseconds.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from agents_core.errors import InvalidArgument
from agents_core.releases.v0_32.task_errors import TaskSerializationError

__all__ = [
    "MAX_SERIALIZED_BYTES",
    "deserialize",
    "error_summary",
    "parse_task_duration",
    "serialize",
]

MAX_SERIALIZED_BYTES = 1_048_576
UNIT_MS = {
    "second": 1_000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
    "week": 604_800_000,
}
_DURATION = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s+(second|minute|hour|day|week)s?$")


def serialize(value: Any, what: str = "a Task value") -> str | None:
    """JSON text of a value (None is column NULL); `TaskSerializationError` when it is not JSON
    or its text is over `MAX_SERIALIZED_BYTES`."""
    if value is None:
        return None
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise TaskSerializationError(what, str(error)) from None
    size = len(text.encode())
    if size > MAX_SERIALIZED_BYTES:
        raise TaskSerializationError(
            what, f"serialized size {size} bytes exceeds the {MAX_SERIALIZED_BYTES}-byte limit"
        )
    return text


def deserialize(stored: Any) -> Any:
    return None if stored is None else json.loads(stored)


def error_summary(error: BaseException) -> tuple[str, str]:
    """The `(name, message)` a failed step or run keeps of an error."""
    name = getattr(error, "error_name", None) or (
        "Error" if type(error) is Exception else type(error).__name__
    )
    return str(name), str(error)


def parse_task_duration(value: Any, what: str) -> int:
    """Whole milliseconds of a duration (a number of ms, or a text like `"1 day"`)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value) or value < 0:
            raise InvalidArgument(
                f"Invalid {what}: expected a non-negative number of milliseconds, got {value!r}"
            )
        return math.floor(value)
    match = _DURATION.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise InvalidArgument(
            f'Invalid {what}: expected milliseconds or a duration like "10 seconds", '
            f"got {json.dumps(value) if isinstance(value, str) else repr(value)}"
        )
    return math.floor(float(match.group(1)) * UNIT_MS[match.group(2)])
