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
  (in memory blocks allocated): at the loop's checkpoints (`checkpoint`, every
  `sim.budget.CHECK_EVERY` events) and when it returns. The cost of full collections is then
  proportional to the heap's growth, not to its size times the number of events, and garbage
  never outgrows the live heap by more than about its own size.

None of this changes what a run does (the simulator never lets the collector close a coroutine
that could still act: `sim.kernel`), only when memory is reclaimed. A process that turned the
collector off keeps it off; thresholds it set are restored; objects it froze itself stay frozen
(then only the thresholds change).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["RUN_THRESHOLDS", "checkpoint", "running"]

RUN_THRESHOLDS = (100_000, 10, 1_000_000)
"""gen0, gen1, gen2 thresholds inside a run loop (CPython's defaults are 700, 10, 10). With
thousands of agents, what one step allocates lives until that agent's next step; a young
generation of 100,000 objects lets most of it die before it is scanned (the young garbage it
can hold is a few tens of MB at most). gen2's is out of reach: full collections are this
module's to decide."""
HEAP_FLOOR = 500_000
"""The smallest heap the doubling rule assumes (memory blocks), so that a small process does
not collect everything again and again."""


class _State:
    depth = 0
    saved: tuple[int, int, int] | None = None
    frozen = False
    blocks = 0
    """Memory blocks allocated after the last full collection this module ran (0: none yet)."""


def _doubled() -> bool:
    """Whether the heap may have doubled since the last full collection: counted in the memory
    blocks Python has allocated (`sys.getallocatedblocks`, which costs no scan of the heap),
    so that objects that lived across a young collection and died since count for nothing."""
    return sys.getallocatedblocks() >= 2 * max(_State.blocks, HEAP_FLOOR)


def _collect_all() -> None:
    """A full collection of everything (the frozen objects included)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _State.blocks = sys.getallocatedblocks()


def checkpoint() -> None:
    """Between two events of a run loop: collect everything if the heap may have doubled."""
    if _State.frozen and _doubled():
        _collect_all()


@contextmanager
def running() -> Iterator[None]:
    """The policy for the duration of one run loop (nested loops share the outermost's)."""
    if _State.depth == 0 and gc.isenabled():
        _State.saved = gc.get_threshold()
        gc.set_threshold(*RUN_THRESHOLDS)
        if gc.get_freeze_count() == 0:
            if _State.blocks == 0:
                _State.blocks = sys.getallocatedblocks()
            _State.frozen = True
            gc.freeze()
    _State.depth += 1
    try:
        yield
    finally:
        _State.depth -= 1
        if _State.depth == 0 and _State.saved is not None:
            gc.set_threshold(*_State.saved)
            _State.saved = None
            if _State.frozen:
                if _doubled():
                    _collect_all()
                _State.frozen = False
                gc.unfreeze()
