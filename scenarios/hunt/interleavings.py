"""Interleavings to explore: which same-instant groups to reorder, PCT-style, without repeats.

The base run, in FIFO order, numbers the groups of timers due at one instant and says how big
each is (`sim.interleave`). An interleaving names a few of them (its change points) and a seed
that permutes each. Exploration comes in two rounds. First every group alone (depth 1), in
spread order over the run (first, last, middle, ...), up to half the budget: this shows which
groups matter at all, since many are timers that find nothing left to do when they fire (an
alarm that was replaced). Then the rest of the budget on `depth` change points drawn by a seed
among the groups that changed the run alone, or were not tried alone, as PCT draws its change
points. Two schedules that would permute the same groups the same way (by the base run's group
sizes) are one: a group of two has one other order, so a run with few groups is explored
exhaustively in a handful of runs instead of the same run many times. Each schedule is written
with its points (`interleave: {seed: 7, points: [3, 11]}`), so a reproducer says exactly what
was done.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from scenarios.hunt.crash_points import spread
from sim.interleave import Interleave, draw_points, permutation

__all__ = ["Planner", "with_interleave"]

DRAWS_PER_SCHEDULE = 20
"""Draws spent per schedule asked for before the distinct ones are deemed all found."""

_Key = tuple[tuple[int, tuple[int, ...]], ...]


@dataclass
class Planner:
    """The schedules of one exploration over groups of these `sizes` (the base run's):
    `singles()` first, then `draws(among)` with the groups that mattered."""

    sizes: Sequence[int]
    count: int
    depth: int
    _seen: set[_Key] = field(default_factory=set)

    @property
    def groups(self) -> int:
        return len(self.sizes)

    def most(self) -> int:
        """At most how many schedules `singles` and `draws` can give: the count, or fewer when
        the groups are few and small (a progress bar's total)."""
        if not self.sizes or self.count <= 0:
            return 0
        singles = len(spread(self.groups)[: self._single_limit()])
        depth = min(self.depth, self.groups)
        if math.comb(self.groups, depth) >= self.count:
            return self.count
        orders = [min(math.factorial(size) - 1, self.count) for size in self.sizes]
        drawn = sum(
            math.prod(orders[group] for group in chosen)
            for chosen in itertools.combinations(range(self.groups), depth)
        )
        return min(self.count, singles + drawn)

    def _single_limit(self) -> int:
        return self.count if self.depth == 1 else (self.count + 1) // 2

    def _new(self, interleave: Interleave) -> bool:
        key = tuple(
            (group, tuple(permutation(interleave.seed, group, self.sizes[group - 1])))
            for group in interleave.points
        )
        if not key or key in self._seen:
            return False
        self._seen.add(key)
        return True

    def singles(self) -> list[Interleave]:
        """Each group alone (its number is the seed), in spread order, up to half the count
        (all of it at depth 1)."""
        out = []
        for index in spread(self.groups)[: self._single_limit()]:
            interleave = Interleave(index + 1, (index + 1,))
            if self._new(interleave):
                out.append(interleave)
        return out

    def draws(self, among: Sequence[int], count: int) -> list[Interleave]:
        """At most `count` new schedules of `depth` points drawn among the groups `among`."""
        pool = sorted(set(among))
        out: list[Interleave] = []
        if not pool or count <= 0:
            return out
        for seed in range(1, count * DRAWS_PER_SCHEDULE + 1):
            if len(out) >= count:
                break
            chosen = draw_points(seed, self.depth, len(pool))
            interleave = Interleave(seed, tuple(pool[i - 1] for i in chosen))
            if self._new(interleave):
                out.append(interleave)
        return out


def with_interleave(text: str, interleave: Interleave) -> str:
    """`text` with a top-level `interleave:` line right after its `seed:` line (a file's own
    `interleave:` must have been removed first)."""
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if line.startswith("seed:"):
            lines.insert(index + 1, f"interleave: {interleave.describe()}")
            return "\n".join(lines)
    raise ValueError(
        "no top-level 'seed:' line; agentsim explore edits files written in block style, like "
        "those in scenarios/library"
    )
