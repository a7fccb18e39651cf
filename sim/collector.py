"""The cyclic garbage collector's policy while a simulation runs, so nobody has to tune it.

A run allocates millions of short-lived objects (events, closures, coroutine frames) beside a
heap that only grows (the trace, the agents and their databases). With CPython's default
thresholds the collector scans that whole heap again and again: a third to a half of a large
run's time. So, for as long as a run loop (`Simulation.run_*`, `wait`, `quiesce`) runs:

- what existed when the outermost loop began is frozen (`gc.freeze`): set-up, the agents and
  the trace so far are not scanned while it runs; they are unfrozen when it returns;
- the young generations are collected less often (`RUN_THRESHOLDS`), so that what one step of
  simulation allocates mostly dies before it is promoted, and CPython's own full collections
  are off;
- instead, the whole heap is collected once it may have doubled since the last such collection
  (counted in young collections, each `RUN_THRESHOLDS[0]` net new objects): at the loop's
  checkpoints (`checkpoint`, every `sim.budget.CHECK_EVERY` events) and when it returns. The
  cost of full collections is then proportional to the heap's growth, not to its size times the
  number of events, and garbage never outgrows the live heap by more than about its own size.

None of this changes what a run does (the simulator never lets the collector close a coroutine
that could still act: `sim.kernel`), only when memory is reclaimed. A process that turned the
collector off keeps it off; thresholds it set are restored; objects it froze itself stay frozen
(then only the thresholds change).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["RUN_THRESHOLDS", "checkpoint", "running"]

RUN_THRESHOLDS = (10_000, 10, 1_000_000)
"""gen0, gen1, gen2 thresholds inside a run loop (CPython's defaults are 700, 10, 10); gen2's
is out of reach: full collections are this module's to decide."""
HEAP_FLOOR = 100_000
"""The smallest heap the doubling rule assumes (objects), so that a small process does not
collect everything after every few young collections."""


class _State:
    depth = 0
    saved: tuple[int, int, int] | None = None
    frozen = False
    grown = 0
    """Net new tracked objects since the last full collection (as young collections and the
    young generation's count say: a freeze empties the young generation)."""
    counted = 0
    """The young generation's count already added to `grown` when the last loop returned."""
    heap = HEAP_FLOOR
    """Tracked objects after the last full collection this module ran."""


def _count_young(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop" and info["generation"] < 2:
        _State.grown += RUN_THRESHOLDS[0]


def _young_count() -> int:
    return gc.get_count()[0]


def _collect_all() -> None:
    """A full collection of everything (the frozen objects included), then the new heap size."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _State.heap = max(HEAP_FLOOR, gc.get_freeze_count())
    _State.grown = 0


def checkpoint() -> None:
    """Between two events of a run loop: collect everything if the heap may have doubled."""
    if _State.frozen and _State.grown + _young_count() >= _State.heap:
        _collect_all()


@contextmanager
def running() -> Iterator[None]:
    """The policy for the duration of one run loop (nested loops share the outermost's)."""
    if _State.depth == 0 and gc.isenabled():
        _State.saved = gc.get_threshold()
        gc.set_threshold(*RUN_THRESHOLDS)
        gc.callbacks.append(_count_young)
        if gc.get_freeze_count() == 0:
            # What was allocated since the last loop returned (the count a young collection
            # outside any loop restarted is lost: the rule errs towards collecting less).
            young = _young_count()
            _State.grown += young - _State.counted if young >= _State.counted else young
            _State.frozen = True
            gc.freeze()
    _State.depth += 1
    try:
        yield
    finally:
        _State.depth -= 1
        if _State.depth == 0 and _State.saved is not None:
            gc.callbacks.remove(_count_young)
            gc.set_threshold(*_State.saved)
            _State.saved = None
            if _State.frozen:
                young = _young_count()
                if _State.grown + young >= _State.heap:
                    _collect_all()
                    young = 0
                _State.grown += young
                _State.counted = young
                _State.frozen = False
                gc.unfreeze()
