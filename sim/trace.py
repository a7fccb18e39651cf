"""The trace: one record per platform or runtime event, the only input of checkers and reports.

Each record carries a sequence number, the sim time in ms, the agent path, the incarnation
number, the event name and its fields. Records serialise to canonical JSON lines (sorted keys,
no spaces), so the digest of a run is the same byte for byte in any process and under any
`PYTHONHASHSEED`. Field values are reduced to JSON types when recorded: an object that is not
JSON is written as its type name and `str()`, never a `repr` that could hold a memory address.

A record is kept as a plain tuple of its values when it is written (`Trace.add`): a tuple of
strings, numbers and an untracked dict is something the cyclic collector stops tracking the first
time it looks, so a run's hundreds of thousands of records cost no collection time. It becomes a
`TraceRecord` object the first time anyone reads the records (`Trace.records`, iteration,
`select`), once; its canonical line is made once too, from the tuple or the record, and shared by
the digest, the JSONL writer and the determinism check.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableSequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents_core.jsontext import escape_lone_surrogates

__all__ = [
    "TraceRecord",
    "TraceRecords",
    "Trace",
    "format_sim_time",
    "holds_sim_time",
    "jsonable",
]

RESERVED_KEYS = ("seq", "t", "agent", "inc", "event")
_RESERVED = frozenset(RESERVED_KEYS)
_ATOMS = frozenset({str, int, bool, type(None)})
"""Field value types that are JSON as they are (exactly these: a subclass goes to `jsonable`)."""
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _canonical(data: Mapping[str, Any]) -> str:
    """The canonical line of a record: sorted keys, no spaces, UTF-8 as it is, and a lone
    surrogate (half of an emoji a JavaScript slice cut through) escaped as `JSON.stringify`
    escapes it, so that every line is valid UTF-8."""
    return escape_lone_surrogates(_CANONICAL.encode(data))


def jsonable(value: Any) -> Any:
    """Reduce `value` to JSON types, deterministically."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return (
            value if value == value and value not in (float("inf"), float("-inf")) else str(value)
        )
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    if isinstance(value, Mapping):
        return {str(k): jsonable(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((jsonable(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return f"<{type(value).__name__}> {value}"


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One event: when (sim ms), where (agent path, incarnation), what (event name and fields)."""

    seq: int
    t_ms: int
    agent: str
    inc: int
    event: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {"seq": self.seq, "t": self.t_ms, "agent": self.agent, "inc": self.inc}
        out["event"] = self.event
        out.update(self.fields)
        return out

    def to_json(self) -> str:
        """The canonical line: sorted keys, no spaces, UTF-8 as it is."""
        return _canonical(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TraceRecord:
        fields = {k: v for k, v in data.items() if k not in RESERVED_KEYS}
        return cls(
            seq=int(data["seq"]),
            t_ms=int(data["t"]),
            agent=str(data["agent"]),
            inc=int(data["inc"]),
            event=str(data["event"]),
            fields=fields,
        )

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)


Row = tuple[Any, ...]
"""A record as it is written: (seq, t_ms, agent, inc, event, *field names, *field values), one
flat tuple. Not a dict of fields, nor tuples inside: CPython never stops tracking a tuple that
holds a dict (even an untracked one), and stops tracking nested tuples one level per look."""


def _row_fields(row: Row) -> dict[str, Any]:
    count = (len(row) - 5) >> 1
    return dict(zip(row[5 : 5 + count], row[5 + count :], strict=True))


def _row_record(row: Row) -> TraceRecord:
    return TraceRecord(row[0], row[1], row[2], row[3], row[4], _row_fields(row))


def _row_line(row: Row) -> str:
    """The canonical line of a row, the same as its `TraceRecord.to_json`."""
    out = {"seq": row[0], "t": row[1], "agent": row[2], "inc": row[3], "event": row[4]}
    out.update(_row_fields(row))
    return _canonical(out)


class TraceRecords(MutableSequence[TraceRecord]):
    """The records of a trace, a list to whoever reads them: the records written since the last
    read are kept as rows (tuples the collector does not track) and made `TraceRecord` objects,
    once, when they are first read. `version` counts the changes other than appending (a record
    replaced, removed or inserted), after which canonical lines made before are stale."""

    __slots__ = ("_made", "_rows", "version")

    def __init__(self, records: Iterable[TraceRecord] = ()) -> None:
        self._made: list[TraceRecord] = list(records)
        self._rows: list[Row] = []
        self.version = 0

    def _flush(self) -> list[TraceRecord]:
        if self._rows:
            rows, self._rows = self._rows, []
            self._made.extend([_row_record(row) for row in rows])
        return self._made

    def line(self, index: int) -> str:
        """The canonical line of record `index`, made from its row when it has not been read."""
        made = len(self._made)
        if index < made:
            return self._made[index].to_json()
        return _row_line(self._rows[index - made])

    def __len__(self) -> int:
        return len(self._made) + len(self._rows)

    def __getitem__(self, index: Any) -> Any:
        return self._flush()[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        self._flush()[index] = value
        self.version += 1

    def __delitem__(self, index: Any) -> None:
        del self._flush()[index]
        self.version += 1

    def insert(self, index: int, value: TraceRecord) -> None:
        self._flush().insert(index, value)
        self.version += 1

    def append(self, value: TraceRecord) -> None:
        self._flush().append(value)

    def extend(self, values: Iterable[TraceRecord]) -> None:
        self._flush().extend(values)

    def clear(self) -> None:
        self._made, self._rows = [], []
        self.version += 1

    def __iter__(self) -> Iterator[TraceRecord]:
        return iter(self._flush())

    def __reversed__(self) -> Iterator[TraceRecord]:
        return reversed(self._flush())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TraceRecords):
            return self._flush() == other._flush()
        if isinstance(other, list):
            return self._flush() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like the list it stands for

    def __repr__(self) -> str:
        return f"TraceRecords({self._flush()!r})"


def format_sim_time(ms: int) -> str:
    """Sim time for people: `HH:MM:SS.mmm`, with a day count in front past the first day."""
    sign = "-" if ms < 0 else ""
    ms = abs(ms)
    days, rest = divmod(ms, 86_400_000)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    clock = f"{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}"
    return f"{sign}{days}d{clock}" if days else f"{sign}{clock}"


def holds_sim_time(event: str, key: str, value: Any) -> bool:
    """Whether field `key` of an `event` record is an absolute sim time in ms (an alarm's `at`
    and `was`): failure text shows it as `format_sim_time` does, the form of the time column
    and of the short log (`reports.shortlog`), so that one failure uses one form for times."""
    return (
        event.startswith("alarm:")
        and key in ("at", "was")
        and isinstance(value, int)
        and not isinstance(value, bool)
    )


class Trace:
    """The records of one run, in order, with observers called as each is appended."""

    def __init__(self) -> None:
        self._records = TraceRecords()
        self._observers: list[Callable[[TraceRecord], None]] = []
        self._lines: list[str] = []
        """The canonical line of each record, made once, when first asked for (digest, JSONL,
        the determinism check): records are never changed after they are appended."""
        self._lines_version = 0
        self._hasher = hashlib.sha256()
        self._hashed = 0

    @property
    def records(self) -> TraceRecords:
        """Every record, in order (a list to read; reading makes the records written since)."""
        return self._records

    @records.setter
    def records(self, records: Iterable[TraceRecord]) -> None:
        self._records = TraceRecords(records)
        self._lines.clear()
        self._hasher, self._hashed = hashlib.sha256(), 0

    def add(self, t_ms: int, agent: str, inc: int, event: str, fields: Mapping[str, Any]) -> None:
        """Write a record (the simulator's path: no `TraceRecord` is made unless an observer
        wants one)."""
        keys = [key if type(key) is str else str(key) for key in fields]
        if keys and not _RESERVED.isdisjoint(keys):
            key = next(key for key in RESERVED_KEYS if key in keys)
            raise ValueError(f"trace field name {key!r} is reserved (event {event!r})")
        values = [value if type(value) in _ATOMS else jsonable(value) for value in fields.values()]
        records = self._records
        row = (len(records), t_ms, agent, inc, event, *keys, *values)
        if self._observers:
            record = _row_record(row)
            records.append(record)
            for observer in self._observers:
                observer(record)
        else:
            records._rows.append(row)

    def append(
        self, t_ms: int, agent: str, inc: int, event: str, fields: Mapping[str, Any]
    ) -> TraceRecord:
        """Write a record and return it (`add` for whoever does not need it)."""
        self.add(t_ms, agent, inc, event, fields)
        return self._records[-1]

    def subscribe(self, observer: Callable[[TraceRecord], None]) -> Callable[[], None]:
        """Call `observer` with every later record; returns the function that unsubscribes."""
        self._observers.append(observer)
        return lambda: self._observers.remove(observer) if observer in self._observers else None

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[TraceRecord]:
        return iter(self._records)

    def select(
        self, event: str | None = None, agent: str | None = None, **fields: Any
    ) -> list[TraceRecord]:
        """Records with this event (a trailing `*` matches a prefix), agent and field values."""
        out = []
        for record in self.records:
            if event is not None and not _name_matches(record.event, event):
                continue
            if agent is not None and record.agent != agent:
                continue
            if any(record.fields.get(k) != v for k, v in fields.items()):
                continue
            out.append(record)
        return out

    def lines(self) -> Iterator[str]:
        """The canonical JSON line of every record, in order (each one made only once)."""
        self._make_lines()
        return iter(self._lines)

    def _make_lines(self) -> None:
        lines, records = self._lines, self._records
        if records.version != self._lines_version or len(lines) > len(records):
            # A record was replaced, removed or inserted: the lines and the hash start over.
            lines.clear()
            self._hasher, self._hashed = hashlib.sha256(), 0
            self._lines_version = records.version
        lines.extend(records.line(index) for index in range(len(lines), len(records)))

    def digest(self) -> str:
        """sha256 over the canonical JSON lines: the identity of a run (the lines hashed before
        are not hashed again)."""
        self._make_lines()
        hasher = self._hasher
        for line in self._lines[self._hashed :]:
            hasher.update(line.encode())
            hasher.update(b"\n")
        self._hashed = len(self._lines)
        return hasher.copy().hexdigest()

    def write_jsonl(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as out:
            for line in self.lines():
                out.write(line + "\n")
        return path

    @staticmethod
    def read_jsonl(path: str | Path) -> list[TraceRecord]:
        """The records of a JSONL trace; a file that cannot be read, or any line that is not a
        record, is a ValueError naming the file (and line)."""
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ValueError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        records = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise TypeError(f"a JSON {type(data).__name__}, not an object")
                records.append(TraceRecord.from_dict(data))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(
                    f"{path}:{number}: not a trace record ({type(exc).__name__}: {exc}); each "
                    f"line is a JSON object with seq, t, agent, inc and event, as run --trace "
                    f"writes"
                ) from None
        return records


def _name_matches(name: str, pattern: str) -> bool:
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern


def tail(records: Iterable[TraceRecord], count: int = 20) -> list[TraceRecord]:
    items = list(records)
    return items[-count:]
