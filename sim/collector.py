"""The cyclic garbage collector's policy in a process that simulates, so nobody has to tune it.

A run allocates millions of short-lived objects (events, closures, coroutine frames) beside a
heap that only grows (the trace, the agents and their databases). With CPython's default
thresholds the collector scans that whole heap again and again: a third to a half of a large
run's time. So, from the first run loop (`Simulation.run_*`, `wait`, `quiesce`) on:

- what exists when a loop begins is frozen (`gc.freeze`): set-up, the agents and the trace so
  far are not scanned again, neither while the loop runs nor between loops (starting 10,000
  calls, checkers reading a trace), where CPython's full collections would otherwise scan that
  whole heap;
- the young generations are collected less often (`RUN_THRESHOLDS`), so that what one step of
  simulation allocates mostly dies before it is promoted, and CPython's own full collections
  are off;
- instead, the whole heap (the frozen part included) is collected once it may have doubled
  since the last such collection (in memory blocks allocated): at a loop's checkpoints
  (`checkpoint`, every `sim.budget.CHECK_EVERY` events) and when it returns. The cost of full
  collections is then proportional to the heap's growth, not to its size times the number of
  events, and garbage never outgrows the live heap by more than about its own size.

`release` ends the policy: the thresholds as they were, the frozen objects back in CPython's
hands. None of this changes what a run does (the simulator never lets the collector close a
coroutine that could still act: `sim.kernel`), only when memory is reclaimed. A process that
turned the collector off keeps it off; objects it froze itself before the first loop stay
frozen and out of every collection, and then nothing else is frozen.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["RUN_THRESHOLDS", "checkpoint", "engaged", "release", "running"]

RUN_THRESHOLDS = (100_000, 10, 1_000_000)
"""gen0, gen1, gen2 thresholds under the policy (CPython's defaults are 700, 10, 10). With
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
    """The thresholds before the policy began (None: not in force)."""
    frozen = False
    """Whether the frozen objects are this module's (frozen by a loop, not by the process)."""
    blocks = 0
    """Memory blocks allocated after the last full collection this module ran (0: none yet)."""


def _doubled() -> bool:
    """Whether the heap may have doubled since the last full collection: counted in the memory
    blocks Python has allocated (`sys.getallocatedblocks`, which costs no scan of the heap),
    so that objects that lived across a young collection and died since count for nothing."""
    return sys.getallocatedblocks() >= 2 * max(_State.blocks, HEAP_FLOOR)


def _collect_all() -> None:
    """A full collection of everything (what this module froze included; what the process
    froze itself stays out of it)."""
    if _State.frozen:
        gc.unfreeze()
        gc.collect()
        gc.freeze()
    else:
        gc.collect()
    _State.blocks = sys.getallocatedblocks()


def checkpoint() -> None:
    """Between two events of a run loop: collect everything if the heap may have doubled."""
    if _State.saved is not None and gc.isenabled() and _doubled():
        _collect_all()


def engaged() -> bool:
    """Whether the policy is in force (a loop ran since the start or the last `release`)."""
    return _State.saved is not None


def release() -> None:
    """End the policy (outside any loop): CPython's thresholds as they were before it, and what
    it froze back in the collector's hands. The next loop starts it again."""
    if _State.depth or _State.saved is None:
        return
    gc.set_threshold(*_State.saved)
    _State.saved = None
    if _State.frozen:
        _State.frozen = False
        gc.unfreeze()


@contextmanager
def running() -> Iterator[None]:
    """One run loop under the policy (nested loops share the outermost's)."""
    if _State.depth == 0 and gc.isenabled():
        if _State.saved is None:
            _State.saved = gc.get_threshold()
            _State.frozen = gc.get_freeze_count() == 0
        gc.set_threshold(*RUN_THRESHOLDS)
        if _State.blocks == 0:
            _State.blocks = sys.getallocatedblocks()
        if _State.frozen:
            gc.freeze()  # what was made since the last loop joins what that loop froze
    _State.depth += 1
    try:
        yield
    finally:
        _State.depth -= 1
        if _State.depth == 0 and _State.saved is not None and gc.isenabled() and _doubled():
            _collect_all()
