"""The short log: one line per trace record, in fixed columns, for terminals and CI logs.

    TIME          AGENT                         INC   EVENT                         DETAIL
    00:01:18.480  Counter/counter               #1    incarnation:end               reason=idle

Columns are separated by two spaces: sim time (12 wide, `Nd` in front past the first day),
agent path (28, middle segments elided first), incarnation (`#n`, 4), event (28, never cut:
a longer name pushes the detail right) and the detail, the event's most useful fields first in
a fixed order per family, then the others by name. `reports/README.md` documents each family.

`failure_view` is the short log a failure shows (never a golden's): runs of keepAlive
heartbeats (an alarm that fired, set itself again and was done, nothing else) fold into one
line, and the records the failure names are kept whatever the window.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reports._format import elide_path, one_line, sim_time, value_text
from reports.records import RESERVED_KEYS

__all__ = [
    "AGENT_WIDTH",
    "EVENT_WIDTH",
    "INC_WIDTH",
    "LANDMARKS",
    "TIME_WIDTH",
    "FailureView",
    "detail",
    "failure_view",
    "render",
    "tail",
]

TIME_WIDTH = 12
AGENT_WIDTH = 28
INC_WIDTH = 4
EVENT_WIDTH = 28
VALUE_LIMIT = 60
"""A field value longer than this is cut with `…` in the short log (never in the HTML table)."""
PLATFORM = "(platform)"
"""The agent column of platform-wide records (agent `""`); agent paths always hold a `/`."""

_SEP = "  "

# Lead fields per exact event name, then per family prefix; fields not named follow by name.
_LEAD_BY_EVENT: dict[str, tuple[str, ...]] = {
    "incarnation:start": ("trigger",),
    "incarnation:end": ("reason",),
    "rpc": ("method",),
    "rpc:error": ("method", "error"),
    "request": ("method", "path"),
    "connection:open": ("connection", "client"),
    "connection:close": ("connection", "code", "by", "reason"),
    "alarm:set": ("at",),
    "alarm:deleted": ("was",),
    "alarm:retry": ("attempt", "at"),
    "alarm:killed": ("attempt", "limit_ms"),
    "alarm:interrupted": ("attempt", "reason"),
    "alarm:given_up": ("attempts",),
    "platform:deploy": ("cause",),
    "simulation:start": ("seed",),
}
_LEAD_BY_FAMILY: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("alarm:", ("attempt", "error")),
    ("fault:", ("kind", "match", "statement", "skip", "count")),
    ("fiber:", ("fiberName", "fiberId", "status", "recoveryReason", "reason", "error")),
    ("schedule:", ("callback", "id", "attempt", "attempts", "maxAttempts", "error")),
    ("agent_tool:", ("runId", "agentType", "status", "reason", "error")),
    ("hook:", ("runId", "slot", "status", "callback")),
    ("console:", ("message",)),
    ("connection:", ("connection",)),
    ("startup:", ("error",)),
)
_SIM_TIME_FIELDS = frozenset({"at", "was"})
"""Fields of `alarm:*` records holding an absolute sim time (ms), shown like the time column."""


def render(records: Iterable[Mapping[str, Any]], header: bool = False) -> str:
    """The short log of `records`, one line each (and a column header first if asked)."""
    items = list(records)
    time_width = max([TIME_WIDTH, *(len(sim_time(r["t"])) for r in items)])
    lines = [_header(time_width)] if header else []
    lines += [_line(record, time_width) for record in items]
    return "\n".join(lines)


def tail(records: Sequence[Mapping[str, Any]], count: int = 40) -> str:
    """The short log of the last `count` records."""
    return render(records[-count:] if count > 0 else [])


@dataclass(frozen=True)
class FailureView:
    """What a failure shows of a trace: `lines` of short log (folds included), how many
    records they stand for, how many heartbeats were folded, and the named records that fall
    before the window (`earlier`, already rendered)."""

    lines: list[str]
    records_shown: int
    heartbeats_folded: int
    earlier: list[str]


_HEARTBEAT_EVENTS = frozenset({"alarm:fired", "delivery:begin", "alarm:set", "alarm:done"})


def _heartbeat_end(records: Sequence[Mapping[str, Any]], start: int, keep: Collection[int]) -> int:
    """The index after the heartbeat that starts at `start` (`alarm:fired`, its delivery, the
    alarm set again, `alarm:done`, all of one agent and none named), or `start` if none."""
    first = records[start]
    if first["event"] != "alarm:fired" or first["seq"] in keep:
        return start
    set_again = False
    for index in range(start + 1, len(records)):
        record = records[index]
        event = record["event"]
        if (
            record["agent"] != first["agent"]
            or event not in _HEARTBEAT_EVENTS
            or (record["seq"] in keep)
        ):
            return start
        if event == "delivery:begin" and record.get("trigger") != "alarm":
            return start
        set_again = set_again or event == "alarm:set"
        if event == "alarm:done":
            return index + 1 if set_again else start
        if event == "alarm:fired":
            return start
    return start


def _fold_line(records: Sequence[Mapping[str, Any]], count: int, time_width: int) -> str:
    first, last = records[0], records[-1]
    span = f"{sim_time(first['t'])} to {sim_time(last['t'])}"
    return (
        f"{'...'.rjust(time_width)}  {count} keepAlive heartbeats of "
        f"{_agent_column(str(first['agent']))} folded ({span}, {len(records)} records: "
        f"alarm fired, set again, done) ..."
    )


LANDMARKS = ("platform:deploy", "incarnation:end", "fault:")
"""Records a failure view keeps before its window: what ended an incarnation or a fault (the
causes a failure's last lines are usually the effects of)."""


def _matters(record: Mapping[str, Any], keep: Collection[int]) -> bool:
    return record["seq"] in keep or str(record["event"]).startswith(LANDMARKS)


def failure_view(
    records: Sequence[Mapping[str, Any]], count: int = 20, keep: Collection[int] = ()
) -> FailureView:
    """The last `count` lines of the short log with repeated heartbeats folded (two or more in
    a row of one agent become one line), and the records before those lines that matter: those
    whose `seq` is in `keep` (the failure names them) and the `LANDMARKS`. A named record is
    never folded."""
    time_width = max([TIME_WIDTH, *(len(sim_time(r["t"])) for r in records)])
    keep = frozenset(keep)
    items: list[tuple[str, list[Mapping[str, Any]], int]] = []
    index, folded = 0, 0
    while index < len(records):
        beats: list[Mapping[str, Any]] = []
        beat_count, end = 0, _heartbeat_end(records, index, keep)
        while end > index and (not beats or records[index]["agent"] == beats[0]["agent"]):
            beats += records[index:end]
            beat_count += 1
            index, end = end, _heartbeat_end(records, end, keep) if end < len(records) else end
        if beat_count >= 2:
            items.append((_fold_line(beats, beat_count, time_width), beats, beat_count))
            folded += beat_count
        else:
            items += [(_line(r, time_width), [r], 0) for r in beats]
        if index < len(records) and not beats:
            items.append((_line(records[index], time_width), [records[index]], 0))
            index += 1
    window = items[-count:] if count > 0 else []
    before = items[: len(items) - len(window)]
    earlier = [line for line, rs, _ in before if any(_matters(r, keep) for r in rs)]
    return FailureView(
        lines=[line for line, _, _ in window],
        records_shown=sum(len(rs) for _, rs, _ in window),
        heartbeats_folded=sum(n for _, _, n in window),
        earlier=earlier,
    )


def detail(record: Mapping[str, Any], limit: int | None = VALUE_LIMIT) -> str:
    """The detail column: `key=value` pairs, lead fields first, each value cut to `limit`."""
    event = str(record.get("event", ""))
    fields = {k: v for k, v in record.items() if k not in RESERVED_KEYS}
    parts: list[str] = []
    if event == "connection:frame" and "frame" in fields:
        if "connection" in fields:
            parts.append(_pair("connection", fields.pop("connection"), limit))
        parts += _frame_parts(fields.pop("frame"), limit)
    times = _SIM_TIME_FIELDS if event.startswith("alarm:") else frozenset()
    for key in (*_lead_fields(event), *sorted(fields)):
        if key in fields:
            parts.append(_pair(key, fields.pop(key), limit, as_time=key in times))
    return " ".join(parts)


def _lead_fields(event: str) -> tuple[str, ...]:
    if event in _LEAD_BY_EVENT:
        return _LEAD_BY_EVENT[event]
    for prefix, lead in _LEAD_BY_FAMILY:
        if event.startswith(prefix):
            return lead
    return ()


def _pair(key: str, value: Any, limit: int | None, as_time: bool = False) -> str:
    if as_time and isinstance(value, int) and not isinstance(value, bool):
        return f"{one_line(key)}={sim_time(value)}"
    return f"{one_line(key)}={value_text(value, limit)}"


def _frame_parts(frame: Any, limit: int | None) -> list[str]:
    """A frame sent to a client: its type (and, for an agent-tool event, the event's kind),
    the run it is about, then the rest."""
    if not isinstance(frame, Mapping) or not isinstance(frame.get("type"), str):
        return [_pair("frame", frame, limit)]
    frame = dict(frame)
    kind = value_text(frame.pop("type"), limit)
    inner = frame.get("event")
    if isinstance(inner, Mapping) and isinstance(inner.get("kind"), str):
        inner = dict(inner)
        del frame["event"]
        kind += ":" + value_text(inner.pop("kind"), limit)
        parts = [f"frame={kind}"]
        if "runId" in inner:
            parts.append(_pair("runId", inner.pop("runId"), limit))
        for key in ("sequence", "parentToolCallId", "replay"):
            if key in frame:
                parts.append(_pair(key, frame.pop(key), limit))
        parts += [_pair(key, inner[key], limit) for key in sorted(inner)]
    else:
        parts = [f"frame={kind}"]
    return parts + [_pair(key, frame[key], limit) for key in sorted(frame)]


def _agent_column(agent: str) -> str:
    return PLATFORM if agent == "" else elide_path(agent, AGENT_WIDTH)


def _line(record: Mapping[str, Any], time_width: int) -> str:
    agent = str(record["agent"])
    inc = "-" if agent == "" else f"#{record['inc']}"
    columns = [
        sim_time(record["t"]).rjust(time_width),
        _agent_column(agent).ljust(AGENT_WIDTH),
        inc.ljust(INC_WIDTH),
        one_line(str(record["event"])).ljust(EVENT_WIDTH),
        detail(record),
    ]
    return _SEP.join(columns).rstrip()


def _header(time_width: int) -> str:
    columns = [
        "TIME".ljust(time_width),
        "AGENT".ljust(AGENT_WIDTH),
        "INC".ljust(INC_WIDTH),
        "EVENT".ljust(EVENT_WIDTH),
        "DETAIL",
    ]
    return _SEP.join(columns)
