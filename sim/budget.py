"""Run budgets: how much one run may do before it is stopped as a runaway.

A scenario can describe a run that never ends on its own: a 1 ms heartbeat beside a fiber step
of a year, a schedule that re-arms itself at the same instant, a fault that strikes every
statement. Virtual time makes such a run cheap per event but endless, so every run carries a
`RunBudget`: at most so many simulated events (what `Simulation` steps), so many trace records,
so much wall-clock time and so much memory growth. The first two are deterministic (the same
file and seed stop at the same event, with the same message, on any machine) and are the ones
that normally trip; wall clock and memory depend on the machine and are only a last-resort
guard with generous defaults. One more limit guards the code between two events: `turn_s`, the
real time one synchronous stretch of agent code (a step: the code between two awaits) may take;
`sim.watchdog` enforces it, and the wall-clock and memory budgets, while a step runs, so that
`while True: pass` in an agent is stopped too. `BudgetMeter` counts events as the simulation
steps them and checks the rest every `CHECK_EVERY` events, so the cost per event is one
addition and one comparison. A budget that trips raises `BudgetExceeded` (a BaseException, like
`KeyboardInterrupt`: no `except Exception` on the way out swallows it), whose text names the
budget, when it tripped, the busiest agent and the records that filled it.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from sim.trace import TraceRecord, format_sim_time

__all__ = [
    "BUDGET_NAMES",
    "CHECK_EVERY",
    "DEFAULT_BUDGET",
    "DEFAULT_TURN_S",
    "BudgetExceeded",
    "BudgetMeter",
    "RunBudget",
    "rss_bytes",
]

CHECK_EVERY = 1024
"""Records, wall clock and memory are looked at once per this many events."""
DEFAULT_TURN_S = 5.0
"""Real seconds one synchronous stretch of agent code may take, by default: also in a plain
`Simulation()`, which has no other limit (Temporal's test environment likewise reports a workflow
task that does not yield within 2 s as a potential deadlock)."""
SPIN_WINDOW = 8 * CHECK_EVERY
"""How many of the latest events the spin rate (`events_per_second`) is measured over."""


@dataclass(frozen=True)
class RunBudget:
    """The limits of one run; None for no limit."""

    events: int | None = 100_000
    """Simulated events (each step of the event loop: a timer, a delivery, a resumption)."""
    records: int | None = 100_000
    """Trace records."""
    wall_s: float | None = 120.0
    """Wall-clock seconds (machine-dependent: a last-resort guard)."""
    memory_mb: int | None = 1_024
    """Growth of the process's resident memory since the run began, in MB (machine-dependent:
    a last-resort guard)."""
    events_per_second: int | None = 2_000
    """Simulated events per second of *simulated* time, over the last `SPIN_WINDOW` events: a
    run that spins (an alarm re-armed a millisecond ahead, over and over; a loop at one
    instant) is stopped long before its events budget, and named as spinning."""
    turn_s: float | None = DEFAULT_TURN_S
    """Real seconds one synchronous stretch of agent code (a step: the code between two awaits)
    may take (machine-dependent: it stops code that never yields, as `while True: pass`)."""

    @classmethod
    def unlimited(cls, **limits: int | float | None) -> RunBudget:
        """No limit at all (every field None, read off the dataclass so that no limit added
        later keeps a default here), then the given ones."""
        given: dict[str, Any] = {**{f.name: None for f in fields(cls)}, **limits}
        return cls(**given)

    def merged(self, **overrides: int | float | None) -> RunBudget:
        """This budget with the given limits replaced (None values are left as they were)."""
        given: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
        return replace(self, **given)


DEFAULT_BUDGET = RunBudget()
"""Generous for every library story, its fuzzing and exploring (the largest story steps under
1,000 events), and small enough that a runaway stops within seconds (a busy 1 ms heartbeat
steps about 5,000 events a second, a plain one 15,000 or more)."""

BUDGET_NAMES = {
    "events": ("simulated events", "events", "--max-events"),
    "records": ("trace records", "records", "--max-records"),
    "wall_s": ("wall-clock seconds", "wall_clock", "--max-wall-clock"),
    "memory_mb": ("MB of memory growth", "memory_mb", "--max-memory-mb"),
    "events_per_second": (
        "simulated events per simulated second",
        "events_per_second",
        "--max-events-per-second",
    ),
    "turn_s": (
        "wall-clock seconds for one stretch of agent code between two awaits",
        "turn_s",
        "--max-turn",
    ),
}
"""Each budget: how a sentence counts it, its key under `limits:`, its command-line flag."""


class BudgetExceeded(BaseException):  # noqa: N818 - a stop, like KeyboardInterrupt
    """A run used up one of its budgets. `budget` is the field of `RunBudget` that tripped;
    `phase` the part of the run it tripped in: `steps` (the scenario's steps, or whatever a test
    drives) or `liveness` (`Simulation.quiesce`)."""

    def __init__(
        self,
        budget: str,
        limit: float,
        used: float,
        t_ms: int,
        detail: str,
        phase: str = "steps",
    ) -> None:
        self.budget = budget
        self.limit = limit
        self.used = used
        self.t_ms = t_ms
        self.detail = detail
        self.phase = phase
        super().__init__(self.sentence())

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled whole (a worker process hands it back): its fields, not its sentence.
        return (
            BudgetExceeded,
            (self.budget, self.limit, self.used, self.t_ms, self.detail, self.phase),
        )

    @property
    def deterministic(self) -> bool:
        return self.budget in ("events", "records", "events_per_second")

    def sentence(self) -> str:
        noun, key, flag = BUDGET_NAMES[self.budget]
        limit = f"{self.limit:,}" if isinstance(self.limit, int) else f"{self.limit:g}"
        # Worded as the liveness rule's failure (a runaway is a run that would never settle,
        # and the hunts, fuzz and explore, count it as one), then for the phase it was in.
        where = (
            "in its liveness phase"
            if self.phase == "liveness"
            else "during its steps (before any liveness phase)"
        )
        text = (
            f"liveness: the run did not settle {where}: it used up its budget of {limit} "
            f"{noun} (its {key} budget) and was stopped at {format_sim_time(self.t_ms)} (sim "
            f"time); {self.detail}. If the run is meant to be this long, raise it with "
            f"`limits: {{{key}: N}}` or {flag} N"
        )
        if not self.deterministic:
            text += " (this budget depends on the machine: the same run may pass elsewhere)"
        return text


def rss_bytes() -> int | None:
    """The resident memory of this process now (None where it cannot be read cheaply)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def busiest(records: Sequence[TraceRecord], window: int = 50_000) -> str:
    """Which agent wrote most of the last `window` records, and which records they were."""
    recent = records[-window:]
    by_agent = Counter(record.agent or "the platform" for record in recent)
    if not by_agent:
        return "no trace record was written (a timer or a loop at one instant filled it)"
    (agent, count), *_ = sorted(by_agent.items(), key=lambda item: (-item[1], item[0]))
    events = Counter(record.event for record in recent if (record.agent or "the platform") == agent)
    common = sorted(events.items(), key=lambda item: (-item[1], item[0]))[:4]
    shown = ", ".join(f"{event} x{n:,}" for event, n in common)
    span = ""
    if len(recent) > 1:
        span = f" between {format_sim_time(recent[0].t_ms)} and {format_sim_time(recent[-1].t_ms)}"
    return (
        f"the busiest agent was {agent}, with {count:,} of the last {len(recent):,} records"
        f"{span}: {shown}"
    )


class BudgetMeter:
    """Counts the events of one simulation and stops it when a budget is used up."""

    __slots__ = (
        "budget",
        "events",
        "next_check",
        "_started",
        "_rss0",
        "_records",
        "_now",
        "_checkpoints",
        "phase",
    )

    def __init__(
        self, budget: RunBudget, records: Sequence[TraceRecord], now_ms: Callable[[], int]
    ) -> None:
        self.budget = budget
        self.events = 0
        self._records = records
        self._now = now_ms
        self._started = time.monotonic()
        self._rss0 = rss_bytes() if budget.memory_mb is not None else None
        self.phase = "steps"
        """`steps`, or `liveness` while `Simulation.quiesce` runs (what a stop's sentence says)."""
        self._checkpoints: list[int] = []
        """Sim time at each of the latest checkpoints (one per `CHECK_EVERY` events)."""
        self.next_check = self._next(0)

    @property
    def started_s(self) -> float:
        """`time.monotonic()` when the run began (what the wall-clock budget counts from)."""
        return self._started

    @property
    def rss0(self) -> int | None:
        """The resident memory when the run began (None when it is not measured)."""
        return self._rss0

    def _next(self, events: int) -> int:
        step = events + CHECK_EVERY
        limit = self.budget.events
        return step if limit is None else min(step, limit)

    def check(self) -> None:
        """Called when `events` reaches `next_check`: raise `BudgetExceeded` if a budget is
        used up, else set the next checkpoint."""
        budget, events = self.budget, self.events
        if budget.events is not None and events >= budget.events:
            self._stop("events", budget.events, events)
        if budget.records is not None and len(self._records) > budget.records:
            self._stop("records", budget.records, len(self._records))
        if budget.wall_s is not None:
            elapsed = time.monotonic() - self._started
            if elapsed > budget.wall_s:
                self._stop("wall_s", budget.wall_s, round(elapsed, 1))
        if budget.memory_mb is not None and self._rss0 is not None:
            now = rss_bytes()
            if now is not None and (now - self._rss0) >> 20 > budget.memory_mb:
                self._stop("memory_mb", budget.memory_mb, (now - self._rss0) >> 20)
        if budget.events_per_second is not None and events % CHECK_EVERY == 0:
            self._check_spin(budget.events_per_second)
        self.next_check = self._next(events)

    def _check_spin(self, limit: int) -> None:
        marks = self._checkpoints
        marks.append(self._now())
        window = SPIN_WINDOW // CHECK_EVERY
        if len(marks) <= window:
            return
        del marks[: len(marks) - window - 1]
        span_ms = marks[-1] - marks[0]
        # SPIN_WINDOW events in span_ms of sim time: too many per simulated second?
        if limit * span_ms < SPIN_WINDOW * 1000:
            rate = SPIN_WINDOW * 1000 // max(span_ms, 1)
            self._stop("events_per_second", limit, rate)

    def _stop(self, budget: str, limit: float, used: float) -> None:
        t_ms = self._now()
        raise BudgetExceeded(budget, limit, used, t_ms, busiest(self._records), self.phase)
