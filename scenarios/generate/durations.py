"""Times drawn so that boundaries are hit exactly as well as missed.

A deadline, a budget or a backoff that lands exactly on a tick or an alarm is where an
off-by-one in a comparison shows (`<` written for `<=`); a time drawn uniformly almost never
lands there. `aligned` draws a duration as a whole multiple of one of the scenario's own
periods (a keepAlive interval, a schedule's period, a step's length), one millisecond either
side of one, or anywhere in the range, each about as often. Whole seconds come first, so a
shrunk time reads as a round number.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

__all__ = ["aligned", "seconds"]


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def aligned(st: Any, periods: Sequence[int], low: int, high: int) -> Any:
    """Milliseconds in [low, high]: k times a period of `periods` (each > 0), that +-1 ms, or any
    whole second, or any millisecond."""
    return _aligned(st, tuple(sorted({period for period in periods if period > 0})), low, high)


# Strategies are values: one built for the same arguments is the same strategy, and building it
# again (and Hypothesis validating it again) in every example and every shrink step is what a
# generated scenario's drawing spent most of its time on.
@lru_cache(maxsize=4096)
def _multiple(st: Any, base: int, off: int, low: int, high: int) -> Any:
    top = max(1, high // base)
    return st.integers(1, top).map(lambda k: _clamp(k * base + off, low, high))


@lru_cache(maxsize=4096)
def _aligned(st: Any, bases: tuple[int, ...], low: int, high: int) -> Any:
    choices = [st.integers(low // 1000, high // 1000).map(lambda s: _clamp(s * 1000, low, high))]
    if bases:
        period = st.sampled_from(bases)
        choices.append(period.flatmap(lambda base: _multiple(st, base, 0, low, high)))
        choices.append(
            st.tuples(period, st.sampled_from((-1, 1))).flatmap(
                lambda t: _multiple(st, t[0], t[1], low, high)
            )
        )
    choices.append(st.integers(low, high))
    return st.one_of(choices)


@lru_cache(maxsize=1024)
def seconds(st: Any, low_s: int, high_s: int) -> Any:
    """Whole seconds in [low_s, high_s], as milliseconds (what schedules keep)."""
    return st.integers(low_s, high_s).map(lambda s: s * 1000)
