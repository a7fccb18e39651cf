"""The cyclic garbage collector's policy while a simulation runs, so nobody has to tune it.

A run allocates millions of short-lived objects (events, closures, coroutine frames) beside a
heap that only grows (the trace, the agents and their databases). With CPython's default
thresholds the collector scans that whole heap again and again, and spends a third to a half of
a large run's time doing it. So, for as long as a run loop (`Simulation.run_*`, `wait`,
`quiesce`) runs:

- what existed when the loop began is frozen (`gc.freeze`): set-up, agents and the trace so far
  are not scanned while it runs, and are unfrozen when the outermost loop returns, so nothing
  stays pinned past it and a later collection frees whatever of it became garbage;
- the young generations are collected less often (`RUN_THRESHOLDS`), so that the objects one
  step of simulation allocates die young instead of being promoted and scanned again;
- whenever a full collection runs inside the loop, what survived it is frozen as well: it was
  reachable a moment ago and mostly stays so (the trace), so the next full collection scans
  only what was promoted since.

None of this changes what a run does (the simulator never lets the collector close a coroutine
that could still act: `sim.kernel`), only when memory is reclaimed: garbage from before the
loop, or that survived a full collection inside it, is freed after the loop returns.
A process that turned the collector off keeps it off; thresholds it set are restored.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["RUN_THRESHOLDS", "running"]

RUN_THRESHOLDS = tuple(
    int(x) for x in os.environ.get("AGENTSIM_GC_THRESHOLDS", "20000,20,10").split(",")
)
"""gen0, gen1, gen2 thresholds inside a run loop (CPython's defaults are 700, 10, 10)."""
_MODE = os.environ.get("AGENTSIM_GC_MODE", "freeze-survivors")

_depth = 0
_saved: tuple[int, int, int] | None = None
_frozen = False


def _freeze_survivors(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()


@contextmanager
def running() -> Iterator[None]:
    """The policy for the duration of one run loop (nested loops share the outermost's)."""
    global _depth, _saved, _frozen
    # Objects someone else froze are theirs to unfreeze: then only the thresholds change.
    if _depth == 0 and gc.isenabled() and _MODE != "off":
        _saved = gc.get_threshold()
        gc.set_threshold(*RUN_THRESHOLDS)
        if gc.get_freeze_count() == 0 and _MODE != "thresholds":
            _frozen = True
            gc.freeze()
            if _MODE == "freeze-survivors":
                gc.callbacks.append(_freeze_survivors)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0 and _saved is not None:
            gc.set_threshold(*_saved)
            _saved = None
            if _frozen:
                _frozen = False
                if _freeze_survivors in gc.callbacks:
                    gc.callbacks.remove(_freeze_survivors)
                gc.unfreeze()
