"""Small text helpers shared by the renderers: sim time for people, one-line values, elision.

Sim time is shown as the simulator's own logs show it (`HH:MM:SS.mmm`, a day count in front
past the first day); the few lines are written here rather than imported because `reports`
reads traces and imports nothing else of the project.
"""

from __future__ import annotations

import json
import re
from typing import Any

from reports._json import dumps

__all__ = ["duration", "elide_path", "one_line", "sim_time", "value_text"]

_DAY_MS = 86_400_000
_BARE = re.compile(r"[\w.:/@#+\-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def sim_time(ms: int) -> str:
    """`HH:MM:SS.mmm`, with `Nd` in front from the second day on (`1d00:00:00.000`)."""
    sign = "-" if ms < 0 else ""
    days, rest = divmod(abs(int(ms)), _DAY_MS)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    clock = f"{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}"
    return f"{sign}{days}d{clock}" if days else f"{sign}{clock}"


def duration(ms: int) -> str:
    """A span for people: `850ms`, `12.5s`, `14m59s`, `2h05m`, `3d04h`."""
    ms = int(ms)
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        whole, frac = divmod(ms, 1000)
        return f"{whole}s" if frac == 0 else f"{ms / 1000:.3f}".rstrip("0") + "s"
    if ms < 3_600_000:
        minutes, rest = divmod(ms, 60_000)
        return f"{minutes}m{rest // 1000:02d}s"
    if ms < _DAY_MS:
        hours, rest = divmod(ms, 3_600_000)
        return f"{hours}h{rest // 60_000:02d}m"
    days, rest = divmod(ms, _DAY_MS)
    return f"{days}d{rest // 3_600_000:02d}h"


def one_line(text: str) -> str:
    """`text` with control characters (newlines too) written as escapes, so it stays on a line."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: json.dumps(m.group())[1:-1], text)


def value_text(value: Any, limit: int | None = None) -> str:
    """A field value, compact and on one line: simple strings bare, everything else as JSON
    (sorted keys); cut to `limit` characters with a trailing `…`."""
    if isinstance(value, str) and _BARE.fullmatch(value):
        text = value
    else:
        text = dumps(value, sort_keys=True, separators=(",", ":"))
        text = one_line(text)
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return text


def elide_path(path: str, width: int) -> str:
    """An agent path cut to `width` characters: middle segments give way first
    (`Root/r/…/Child/c`), then the front of what is left (`…/Child/some-long-name`)."""
    path = one_line(path)
    if len(path) <= width:
        return path
    parts = path.split("/")
    head, tail = parts[:2], parts[2:]
    while len(tail) > 1:
        tail = tail[1:]
        candidate = "/".join([*head, "…", *tail])
        if len(candidate) <= width:
            return candidate
    return "…" + path[-(width - 1) :] if width > 1 else path[:width]
