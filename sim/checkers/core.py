"""What every checker shares: the context it reads, the finding it returns, and the error a failed
check raises.

A `CheckContext` is everything a checker may look at once a run is over — the trace records, a
snapshot of every agent's committed storage and the journal of the turns that built it, every
top-level agent's alarm slot, whether the liveness phase ran and went quiet, each agent class's
static options — and nothing of the running runtime. `context_from(sim)` builds one from a
`Simulation`; tests build one by hand. A `Violation` is one broken promise, told in a sentence a
person reads, with the trace records that show it. `InvariantViolation` is the `AssertionError` a
failed check raises: seed, scenario, the violations, the trace tail and the command that replays
the run.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from sim.checkers.models.spec_constants import option_value
from sim.sqlite import Write
from sim.trace import TraceRecord, format_sim_time, holds_sim_time

if TYPE_CHECKING:
    from sim.simulation import Simulation

__all__ = [
    "LIVENESS_GRACE_MS",
    "TAIL_RECORDS",
    "CheckContext",
    "Checker",
    "InvariantViolation",
    "Violation",
    "context_from",
    "json_cell",
    "render_record",
    "time_words",
]

LIVENESS_GRACE_MS = 600_000
"""How long the runtime may take to act on a durable fact before a checker calls it late, when
the liveness phase did not go quiet: the backbone's 120 s cadence cap, the 60 s delivery lease,
a tick's retries, the 300 s fiber recovery backoff cap and the alarm's own retries, with room.
A quiet run gets no grace: nothing is left to happen."""

TAIL_RECORDS = 20
"""Trace records shown at the end of an `InvariantViolation`."""

HARD_TERMINAL = frozenset({"completed", "error", "aborted"})
"""Agent-tool statuses no later write may change (spec agent-tools §1.5)."""


@dataclass(frozen=True)
class Violation:
    """One broken promise: which invariant, where, about what, in a sentence, shown by which
    trace records (their `seq` numbers)."""

    invariant: str
    agent: str
    subject: str
    """The run, fiber or schedule id the sentence is about ('' when it is about the agent)."""
    message: str
    seqs: tuple[int, ...] = ()

    def __str__(self) -> str:
        shown = f" [records {', '.join(f'#{s}' for s in self.seqs)}]" if self.seqs else ""
        return f"{self.invariant}: {self.message}{shown}"


@dataclass(frozen=True)
class CheckContext:
    """The end of a run as checkers see it. Build it with `context_from(sim)` or by hand (tests):
    `end_ms` defaults to the last record's time and `quiet` to what the last `quiesce:end`
    record says (None when no liveness phase ran)."""

    records: Sequence[TraceRecord]
    storage: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]] = field(default_factory=dict)
    """Agent path -> table -> committed rows, at the end of the run."""
    alarms: Mapping[str, int | None] = field(default_factory=dict)
    """Top-level agent path -> the armed alarm time (ms) at the end, or None."""
    quiet: bool | None = None
    seed: int | None = None
    scenario: str | None = None
    end_ms: int | None = None
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Agent path -> its class's static `options` mapping as written; `option()` falls back to
    the spec's defaults (`sim.checkers.models.spec_constants.OPTION_DEFAULTS`) field by field."""
    journals: Mapping[str, Sequence[Sequence[Write]]] = field(default_factory=dict)
    """Agent path -> the writes `(statement, params)` of every committed turn of its current
    storage, in commit order (`FaultyStorage.journal`); empty in a hand-built context."""
    journal_ms: Mapping[str, Sequence[int]] = field(default_factory=dict)
    """Agent path -> the instant (ms) each turn of its journal committed, index for index."""
    departed: Mapping[str, Sequence[tuple[Sequence[Sequence[Write]], Sequence[int]]]] = field(
        default_factory=dict
    )
    """Path of a deleted sub-agent -> (journal, commit instants) of each of its lives, oldest
    first: its storage is gone, but what it kept (a registry of its own sub-agents) was so."""
    release: str | None = None
    """The SDK release the run's agents ran (`0.21.0`, `0.32.0`); None when unknown (a
    hand-built context), which checkers read as 0.21.0's rules. In a run that upgraded
    (`upgraded`), the release it ended on."""

    def __post_init__(self) -> None:
        records = tuple(self.records)
        object.__setattr__(self, "records", records)
        if self.end_ms is None:
            object.__setattr__(self, "end_ms", records[-1].t_ms if records else 0)
        if self.quiet is None:
            ends = [r for r in records if r.event == "quiesce:end"]
            if ends:
                object.__setattr__(self, "quiet", bool(ends[-1].get("quiet")))

    # -- the liveness phase ---------------------------------------------------------------------
    @property
    def liveness_ran(self) -> bool:
        """A liveness phase (`quiesce`) ran: liveness rules apply."""
        return self.quiet is not None

    @property
    def end(self) -> int:
        return int(self.end_ms or 0)

    def had_time_since(self, t_ms: int | None) -> bool:
        """The runtime has had all the time it may need to act on a fact true since `t_ms`: the
        liveness phase went quiet, or `LIVENESS_GRACE_MS` passed before the end."""
        if self.quiet:
            return True
        return t_ms is not None and self.end - t_ms >= LIVENESS_GRACE_MS

    def end_words(self) -> str:
        """'the end (00:30:00.000, quiet)' — how sentences name the end of the run."""
        how = "quiet" if self.quiet else "not quiet" if self.quiet is False else "no liveness phase"
        return f"the end ({format_sim_time(self.end)}, {how})"

    # -- records --------------------------------------------------------------------------------
    @cached_property
    def _by_event(self) -> dict[str, list[TraceRecord]]:
        index: dict[str, list[TraceRecord]] = defaultdict(list)
        for record in self.records:
            index[record.event].append(record)
        return index

    @cached_property
    def upgraded(self) -> bool:
        """Whether a deploy brought another SDK release during the run (`platform:deploy` with
        an `sdk`, written only when the release changes): its agents ran, and stored what they
        stored, under more than one release."""
        return any(record.get("sdk") for record in self.events("platform:deploy"))

    def events(self, event: str, agent: str | None = None, **fields: Any) -> list[TraceRecord]:
        """Records of one event (in trace order), optionally of one agent and with field values."""
        out = []
        for record in self._by_event.get(event, ()):
            if agent is not None and record.agent != agent:
                continue
            if any(record.get(k) != v for k, v in fields.items()):
                continue
            out.append(record)
        return out

    @cached_property
    def _by_agent(self) -> dict[str, list[TraceRecord]]:
        index: dict[str, list[TraceRecord]] = defaultdict(list)
        for record in self.records:
            index[record.agent].append(record)
        return index

    def records_of(self, agent: str, *events: str) -> list[TraceRecord]:
        """The agent's records (in trace order), only of the named events if any are given."""
        found = self._by_agent.get(agent, [])
        return [r for r in found if r.event in events] if events else list(found)

    def agents(self) -> list[str]:
        """Every agent path that has a record or storage, sorted ('' excluded)."""
        return sorted({*(a for a in self._by_agent if a), *self.storage})

    def root_of(self, agent: str) -> str:
        """The top-level agent an agent lives under (itself for a top-level agent)."""
        for root in sorted(self.alarms, key=len, reverse=True):
            if agent == root or agent.startswith(root + "/"):
                return root
        return "/".join(agent.split("/")[:2])

    def incarnation_ends(self, agent: str) -> list[TraceRecord]:
        return self.events("incarnation:end", agent)

    @cached_property
    def _last_life_record(self) -> dict[str, TraceRecord]:
        last: dict[str, TraceRecord] = {}
        for record in self.records:
            if record.event in ("incarnation:start", "incarnation:end"):
                last[record.agent] = record
        return last

    def alive_at_end(self, agent: str) -> int | None:
        """The number of the agent's incarnation still alive at the end, or None."""
        last = self._last_life_record.get(agent)
        return last.inc if last is not None and last.event == "incarnation:start" else None

    def record_resets(self, agent: str) -> list[int]:
        """Seqs at which the platform forgot the agent's record (a `facet:deleted` of it or of an
        ancestor, a `storage:wiped` of an ancestor): a later use of the path is a new record,
        whose incarnations, leases and runs are numbered afresh."""
        seqs = []
        for event in ("facet:deleted", "storage:wiped"):
            for record in self.events(event):
                owner = record.agent
                if agent.startswith(owner + "/") or (event == "facet:deleted" and agent == owner):
                    seqs.append(record.seq)
        return sorted(seqs)

    def life_of(self, record: TraceRecord) -> int:
        """Which record of its path `record` belongs to: 0 until the first reset, then 1, ..."""
        return sum(1 for seq in self.record_resets(record.agent) if seq < record.seq)

    def left_asleep(self, agent: str) -> TraceRecord | None:
        """The `alarm:given_up` after which nothing woke the agent again: the platform stopped
        retrying its top-level agent's alarm after the agent's last completed startup, and the
        slot is empty at the end; None when the agent had a wake-up to come or took one. What
        only a wake-up could finish (a recovery) is then owed to the next event from outside."""
        root = self.root_of(agent)
        given = self.events("alarm:given_up", root)
        if not given or self.alarms.get(root) is not None:
            return None
        done = self.events("startup:done", agent)
        if done and done[-1].seq > given[-1].seq:
            return None
        return given[-1]

    def may_have_rolled_back(self, record: TraceRecord) -> bool:
        """The incarnation that emitted `record` crashed later in the same instant, so the
        storage writes of the turn that emitted it may have been rolled back (storage commits by
        turn; the trace keeps every record)."""
        return any(
            end.seq > record.seq
            and end.inc == record.inc
            and end.t_ms == record.t_ms
            and end.get("reason") == "crash"
            for end in self.incarnation_ends(record.agent)
        )

    def first_after(self, records: Iterable[TraceRecord], seq: int) -> TraceRecord | None:
        return next((r for r in records if r.seq > seq), None)

    # -- storage --------------------------------------------------------------------------------
    def paths(self) -> list[str]:
        return sorted(self.storage)

    def table(self, agent: str, name: str) -> list[Mapping[str, Any]]:
        return list((self.storage.get(agent) or {}).get(name, ()))

    def tree(self, root: str) -> list[str]:
        """The agent and every sub-agent stored under it."""
        return [p for p in self.paths() if p == root or p.startswith(root + "/")]

    def option(self, agent: str, name: str) -> Any:
        """The agent class's option `name`, or the spec's default when it sets none."""
        return option_value(self.options.get(agent), name)

    def child_run(
        self, parent: str, row: Mapping[str, Any]
    ) -> tuple[str, Mapping[str, Any]] | None:
        """The child's own record of an agent-tool run: its path and the row of any table of the
        child facet (`<parent>/<agent_type>/<run_id>`) with `run_id` and `status` columns, other
        than the child's own `cf_agent_tool_runs` registry. None when the child kept none."""
        child = f"{parent}/{row.get('agent_type')}/{row.get('run_id')}"
        for name, rows in sorted((self.storage.get(child) or {}).items()):
            if name == "cf_agent_tool_runs":
                continue
            for candidate in rows:
                if candidate.get("run_id") == row.get("run_id") and "status" in candidate:
                    return child, candidate
        return None


Checker = Callable[[CheckContext], list[Violation]]
"""A checker: reads a context, returns the violations it found (empty when the invariant holds)."""


def context_from(sim: Simulation, scenario: str | None = None) -> CheckContext:
    """Everything checkers may read at this instant of `sim`: the trace so far, every agent's
    committed storage and its journal, every top-level alarm slot, whether the last liveness
    phase went quiet."""
    platform = sim.platform
    storage = {}
    journals = {}
    journal_ms = {}
    alarms = {}
    options = {}
    for path, record in sorted(platform.records.items()):
        storage[path] = record.storage.snapshot()
        journals[path] = tuple(record.storage.journal)
        journal_ms[path] = tuple(record.storage.journal_ms)
        if record.parent is None:
            alarms[path] = record.alarm_at_ms
    for path, cls in sorted(platform.classes.items()):
        given = getattr(cls, "options", None)
        options[path] = dict(given) if isinstance(given, Mapping) else {}
    return CheckContext(
        records=tuple(sim.trace.records),
        storage=storage,
        alarms=alarms,
        seed=sim.seed,
        scenario=scenario,
        end_ms=sim.now_ms,
        options=options,
        journals=journals,
        journal_ms=journal_ms,
        departed={path: tuple(lives) for path, lives in sorted(platform.departed.items())},
        release=platform.release,
    )


def time_words(t_ms: Any) -> str:
    """A sim instant as sentences name it (`00:01:05.000`), or "an unknown time" for a value that
    is not a number (a row's missing timestamp)."""
    return format_sim_time(int(t_ms)) if isinstance(t_ms, int | float) else "an unknown time"


def json_cell(value: Any) -> Any:
    """A table cell read as JSON when it is text (None when that text is not JSON); any other
    value as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return None


def render_record(record: TraceRecord, width: int = 200) -> str:
    """One line: `#seq  time  agent#inc  event  key=value ...` (long lines cut at `width`)."""
    where = f"{record.agent}#{record.inc}" if record.agent else "-"
    fields = " ".join(
        f"{k}={format_sim_time(v) if holds_sim_time(record.event, k, v) else _short_value(v)}"
        for k, v in sorted(record.fields.items())
    )
    line = f"#{record.seq:<5} {format_sim_time(record.t_ms)}  {where}  {record.event}  {fields}"
    line = line.rstrip()
    return line if len(line) <= width else line[: width - 3] + "..."


def _short_value(value: Any) -> str:
    if isinstance(value, str) and value and not any(c.isspace() for c in value):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class InvariantViolation(AssertionError):
    """Invariants did not hold: the seed, the scenario, each violation in a sentence, the trace
    tail, and the command that replays the run."""

    def __init__(
        self,
        violations: Sequence[Violation],
        *,
        seed: int | None,
        scenario: str | None = None,
        tail: Sequence[TraceRecord] = (),
        named: Sequence[TraceRecord] = (),
        total_records: int | None = None,
        replay: str | None = None,
    ) -> None:
        self.violations = tuple(violations)
        self.seed = seed
        self.scenario = scenario
        self.tail = tuple(tail)
        self.replay = replay
        lines = [_headline(self.violations, seed, scenario)]
        lines += [f"  - {v}" for v in self.violations]
        if named:
            lines.append("records named above (not in the tail):")
            lines += [f"  {render_record(r)}" for r in named]
        total = len(self.tail) if total_records is None else total_records
        lines.append(f"trace tail (last {len(self.tail)} of {total} records):")
        lines += [f"  {render_record(r)}" for r in self.tail]
        if replay:
            lines.append(f"replay: {replay}")
        super().__init__("\n".join(lines))

    @classmethod
    def from_context(
        cls, context: CheckContext, violations: Sequence[Violation], replay: str | None = None
    ) -> InvariantViolation:
        records = context.records
        tail = records[-TAIL_RECORDS:]
        in_tail = {r.seq for r in tail}
        by_seq = {r.seq: r for r in records}
        wanted = sorted({s for v in violations for s in v.seqs} - in_tail)
        named = [by_seq[s] for s in wanted[:TAIL_RECORDS] if s in by_seq]
        return cls(
            violations,
            seed=context.seed,
            scenario=context.scenario,
            tail=tail,
            named=named,
            total_records=len(records),
            replay=replay if replay is not None else default_replay(context),
        )


def _headline(violations: Sequence[Violation], seed: int | None, scenario: str | None) -> str:
    count = len(violations)
    names = sorted({v.invariant for v in violations})
    where = f"scenario {scenario!r}, seed {seed}" if scenario else f"seed {seed}"
    noun = "violation" if count == 1 else "violations"
    return f"{count} invariant {noun} ({', '.join(names)}) in {where}:"


def default_replay(context: CheckContext) -> str | None:
    """`agentsim run <scenario> --seed N` for a scenario; the running pytest node otherwise."""
    if context.scenario:
        seed = "" if context.seed is None else f" --seed {context.seed}"
        return f"agentsim run {context.scenario}{seed}"
    node = os.environ.get("PYTEST_CURRENT_TEST")
    if node:
        return f"python -m pytest '{node.rsplit(' ', 1)[0]}'"
    return None
