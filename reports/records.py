"""Trace records as reports see them: plain dicts read from JSONL, and the verdict of one run.

`reports` reads traces and nothing else of the project, so this module is its whole input
model: `read_trace` turns a JSONL file (one canonical JSON object per line, as `run --trace`
writes it) into dicts with the five reserved keys `seq`, `t` (sim ms), `agent`, `inc` and
`event`, and `RunReport` carries what a runner knows about one run of one scenario with one
seed. A bad line is refused with one sentence naming the file, the line and what is wrong,
except the last line of a file cut in the middle of a record (a run killed while writing):
`read_trace_cut` keeps the whole records before it and says where the file is cut (`TraceCut`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reports._json import dumps

__all__ = [
    "RESERVED_KEYS",
    "Record",
    "RunReport",
    "TraceCut",
    "TraceFormatError",
    "elapsed_sim_ms",
    "parse_trace_lines",
    "read_trace",
    "read_trace_cut",
    "trace_digest",
]

Record = dict[str, Any]
"""One trace record: `seq`, `t`, `agent`, `inc`, `event`, then the event's own fields."""

RESERVED_KEYS = ("seq", "t", "agent", "inc", "event")
_TYPES: dict[str, type] = {"seq": int, "t": int, "agent": str, "inc": int, "event": str}


class TraceFormatError(ValueError):
    """A trace file that is not one JSON trace record per line (the message names file:line)."""


def read_trace(path: str | Path) -> list[Record]:
    """The records of a JSONL trace file, in file order. Raises `TraceFormatError` for a bad
    line or a file that is not UTF-8, and `OSError` when the file cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_trace_lines(text.splitlines(), source=str(path))


@dataclass(frozen=True)
class TraceCut:
    """Where a trace file ends inside a record: its last line has no newline and is not a
    whole JSON object (or not whole UTF-8)."""

    line: int
    """The number of the cut line (1 for the first)."""
    byte: int
    """The offset of the cut line's first byte: the file's whole records end there."""
    size: int
    """The file's size in bytes (where the cut record stops)."""

    def sentence(self, source: str, kept: int) -> str:
        return (
            f"{source}: the file is cut at line {self.line} (byte {self.byte} of {self.size}): "
            f"that line is the start of a record, not a whole one (was the run killed while "
            f"writing?); shown: the {kept} record(s) before it"
        )


def split_cut(data: bytes) -> tuple[bytes, TraceCut | None]:
    """The bytes of a trace file's whole lines, and where it is cut (None when it is not: a
    last line without its newline that is a whole JSON object is a whole record)."""
    if not data or data.endswith(b"\n"):
        return data, None
    start = data.rfind(b"\n") + 1
    last = data[start:]
    if not last.strip():
        return data, None
    try:
        whole = isinstance(json.loads(last.decode("utf-8")), dict)
    except (UnicodeDecodeError, ValueError):
        whole = False
    if whole:
        return data, None
    return data[:start], TraceCut(line=data.count(b"\n", 0, start) + 1, byte=start, size=len(data))


def read_trace_cut(path: str | Path) -> tuple[list[Record], TraceCut | None]:
    """`read_trace` for a file that may be cut in the middle of its last record: the whole
    records before the cut, and where it is (None for a whole file). A bad line before the
    cut is still a `TraceFormatError`."""
    whole, cut = split_cut(Path(path).read_bytes())
    try:
        text = whole.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_trace_lines(text.splitlines(), source=str(path)), cut


def parse_trace_lines(lines: Iterable[str], source: str = "<trace>") -> list[Record]:
    """Records from JSONL lines (blank lines are skipped); `source` names them in errors."""
    records: list[Record] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            what = f"not JSON ({exc.msg} at column {exc.colno})"
            raise _bad_line(source, number, what, line) from None
        if not isinstance(data, dict):
            raise _bad_line(source, number, f"a JSON {type(data).__name__}, not an object", line)
        for key in RESERVED_KEYS:
            if key not in data:
                raise _bad_line(source, number, f"no {key!r} key", line)
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, _TYPES[key]):
                wanted = _TYPES[key].__name__
                raise _bad_line(source, number, f"{key!r} must be {wanted}, got {value!r}", line)
        records.append(data)
    return records


def _bad_line(source: str, number: int, what: str, line: str) -> TraceFormatError:
    shown = line if len(line) <= 80 else line[:77] + "..."
    return TraceFormatError(
        f"{source}:{number}: not a trace record: {what}; each line is a JSON object with "
        f"seq, t, agent, inc and event (as `agentsim run --trace` writes); the line: {shown!r}"
    )


def trace_digest(records: Iterable[Mapping[str, Any]]) -> str:
    """sha256 over the canonical JSON lines (sorted keys, no spaces): the identity of a run,
    the same digest the simulator computes for the trace it wrote."""
    hasher = hashlib.sha256()
    for record in records:
        line = dumps(record, sort_keys=True, separators=(",", ":"))  # as the simulator writes it
        hasher.update(line.encode())
        hasher.update(b"\n")
    return hasher.hexdigest()


def elapsed_sim_ms(records: Iterable[Mapping[str, Any]]) -> int:
    """How much sim time the records span: the latest `t` (runs start at 0), 0 for none."""
    return max((int(record["t"]) for record in records), default=0)


@dataclass(frozen=True)
class RunReport:
    """What reports know about one run of one scenario with one seed."""

    name: str
    """The scenario's name."""
    path: str
    """The scenario file, as the runner was given it."""
    seed: int
    passed: bool
    failures: list[str]
    """Each failed expectation or invariant as one sentence; empty when the run passed."""
    replay_command: str
    """The one command that replays this run."""
    digest: str
    """sha256 of the trace (see `trace_digest`)."""
    records: list[Record] = field(repr=False)
    elapsed_sim_ms: int
    """Sim time from the start of the run to its last record."""
    description: str = ""
    """The scenario's description (what the run is meant to show)."""
    verdict_known: bool = True
    """False for a trace read without its run record: `passed` is then only a placeholder,
    and reports say the verdict is unknown instead of guessing it."""
    wall_s: float = 0.0
    """Wall-clock seconds the run took (JUnit's `time`; 0 when not measured)."""
    notes: list[str] = field(default_factory=list)
    """What a page must say about its input beside the verdict (a trace file cut short)."""

    @classmethod
    def from_records(
        cls,
        *,
        name: str,
        path: str,
        seed: int,
        passed: bool,
        failures: Sequence[str],
        replay_command: str,
        records: Sequence[Mapping[str, Any]],
        digest: str | None = None,
        description: str = "",
        verdict_known: bool = True,
        wall_s: float = 0.0,
        notes: Sequence[str] = (),
    ) -> RunReport:
        """A report whose digest (unless given) and elapsed time are computed from `records`."""
        plain = [dict(record) for record in records]
        return cls(
            name=name,
            path=path,
            seed=seed,
            passed=passed,
            failures=list(failures),
            replay_command=replay_command,
            digest=digest if digest is not None else trace_digest(plain),
            records=plain,
            elapsed_sim_ms=elapsed_sim_ms(plain),
            description=description,
            verdict_known=verdict_known,
            wall_s=wall_s,
            notes=list(notes),
        )
