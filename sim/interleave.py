"""Same-instant interleavings: the timers due at one instant run in an order a seed chooses.

By default the kernel runs the events due at one instant in FIFO order (simpy's counter), which
is deterministic but only ever shows one of the orders the real platform could take. With an
`Interleave` setting it runs on `InterleavingEnvironment` instead. When time advances to an
instant, every event due then was scheduled earlier with a delay: a *macro* event (a sleep's
end, an alarm, an idle check, an alarm retry, a model chunk's latency). Two or more of them due
at the same instant that still act (`sim.pending`: not a timer a replaced alarm left behind)
form a *group*; groups are numbered from 1 in the order the run reaches
them. At the groups named by `points` (a PCT-style schedule: a few change points, not a shuffle
of everything) the group runs in a permutation drawn from (seed, group number), never the FIFO
one. Events scheduled at the instant itself (promise continuations, deliveries: delay 0, the
*micro* events) keep their FIFO order after the group, as they always do. Without points the
environment only counts groups and runs exactly the FIFO order: the same trace as the plain
kernel. The permutation of a group depends on the seed and its number alone, so a reproducer
that names its points replays whatever other points it keeps or drops.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Any

import simpy

from sim.pending import event_acts_now

__all__ = [
    "Interleave",
    "InterleavingEnvironment",
    "Reordering",
    "describe_event",
    "draw_points",
    "permutation",
]


@dataclass(frozen=True)
class Interleave:
    """Which same-instant groups run out of FIFO order (`points`, numbered from 1), and the
    seed their permutations are drawn from."""

    seed: int
    points: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"interleave seed must be a whole number >= 0, got {self.seed!r}")
        if any(not isinstance(p, int) or isinstance(p, bool) or p < 1 for p in self.points):
            raise ValueError(f"interleave points are group numbers >= 1, got {self.points!r}")
        object.__setattr__(self, "points", tuple(sorted(set(self.points))))

    def describe(self) -> str:
        """`{seed: 7, points: [3, 11]}`: the scenario key's value, as a reproducer writes it."""
        return f"{{seed: {self.seed}, points: [{', '.join(map(str, self.points))}]}}"


@dataclass(frozen=True)
class Reordering:
    """One group run out of FIFO order: when, its number, and its events (described by what
    they resume) in FIFO order and in the order they ran."""

    t_ms: int
    group: int
    before: tuple[str, ...]
    after: tuple[str, ...]


def _rng(*parts: object) -> random.Random:
    # Seeded from a hash of the parts (as `sim.prng` does), so the draw is the same in any
    # process and under any PYTHONHASHSEED.
    text = ":".join(str(part) for part in ("agentsim-interleave", *parts))
    return random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))


def permutation(seed: int, group: int, size: int) -> list[int]:
    """The order group number `group` of `size` events runs in under `seed`: indices into its
    FIFO order, never the FIFO order itself (for `size` >= 2)."""
    order = list(range(size))
    _rng(seed, "group", group).shuffle(order)
    if size >= 2 and order == sorted(order):
        order = order[1:] + order[:1]
    return order


def draw_points(seed: int, depth: int, groups: int) -> tuple[int, ...]:
    """`depth` distinct group numbers among 1..`groups`, drawn by `seed` (all of them when there
    are fewer groups): the change points of `interleave: {seed, depth}`."""
    if depth < 0 or groups < 0:
        raise ValueError(f"depth and groups must be >= 0, got depth={depth} groups={groups}")
    if depth >= groups:
        return tuple(range(1, groups + 1))
    return tuple(sorted(_rng(seed, "points", depth, groups).sample(range(1, groups + 1), depth)))


class InterleavingEnvironment(simpy.Environment):
    """A simpy environment that numbers same-instant groups of macro events and permutes the
    ones its `Interleave` names (see the module docstring)."""

    def __init__(self, interleave: Interleave) -> None:
        super().__init__(initial_time=0)
        self.interleave = interleave
        self._points = frozenset(interleave.points)
        self.sizes: list[int] = []
        """How many events each group the run has reached so far had, in order."""
        self.reorderings: list[Reordering] = []

    def step(self) -> None:
        queue = self._queue
        # Everything due at a later instant than now was scheduled with a delay: a macro event.
        if len(queue) > 1 and queue[0][0] > self._now:
            t = queue[0][0]
            first = heappop(queue)
            group = [first]
            while queue and queue[0][0] == t:
                group.append(heappop(queue))
            # Only events that still act count: a timer left behind by a replaced alarm or a
            # dead incarnation runs as a no-op wherever it goes (`sim.pending`).
            live = [entry for entry in group if event_acts_now(entry[3])]
            if len(live) > 1:
                self.sizes.append(len(live))
                if len(self.sizes) in self._points:
                    dead = [entry for entry in group if not event_acts_now(entry[3])]
                    group = self._permuted(t, live) + dead
            # Fresh counters keep the group's order among itself and ahead of every event the
            # instant schedules later (those get larger counters still).
            for _, priority, _, event in group:
                heappush(queue, (t, priority, next(self._eid), event))
        super().step()

    def _permuted(self, t: Any, group: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        number = len(self.sizes)
        order = permutation(self.interleave.seed, number, len(group))
        permuted = [group[index] for index in order]
        ran = sorted(range(len(permuted)), key=lambda i: (permuted[i][1], i))  # priority first
        self.reorderings.append(
            Reordering(
                t_ms=int(t),
                group=number,
                before=tuple(describe_event(entry[3]) for entry in group),
                after=tuple(describe_event(permuted[i][3]) for i in ran),
            )
        )
        return permuted


# -- saying what an event resumes ------------------------------------------------------------
def describe_event(event: simpy.Event) -> str:
    """What processing `event` resumes, for people: `Worker/w#1 steps (fibers.py:88)` (a task
    and the line it waits at), `Alarms._due (Worker/w)` (a platform timer), 'nothing' for an
    event no one waits for."""
    callbacks = event.callbacks or ()
    parts = [_describe_callback(callback, 3) for callback in callbacks]
    return "; ".join(part for part in parts if part) or "nothing"


def _describe_callback(callback: Any, depth: int) -> str:
    owner = getattr(callback, "__self__", None)
    if owner is not None and hasattr(owner, "coro") and hasattr(owner, "owner"):
        return _describe_task(owner)
    if depth <= 0:
        return ""
    cells = getattr(callback, "__closure__", None) or ()
    contents = []
    for cell in cells:
        try:
            contents.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    for content in contents:
        if callable(content) and not isinstance(content, type):
            inner = _describe_callback(content, depth - 1)
            if inner:
                return inner
    name = getattr(callback, "__qualname__", type(callback).__name__)
    code = getattr(callback, "__code__", None)
    if name.endswith("<lambda>") and code is not None and code.co_names:
        # `lambda: self._due(record, generation)`: name the method the timer calls.
        owner = name.removesuffix(".<locals>.<lambda>").rsplit(".", 1)[0]
        name = f"{owner}.{code.co_names[-1]}"
    name = name.replace(".<locals>.<lambda>", "").replace(".<locals>", "")
    paths = [
        content.path for content in contents if isinstance(getattr(content, "path", None), str)
    ]
    paths += [
        content.record.path
        for content in contents
        if isinstance(getattr(getattr(content, "record", None), "path", None), str)
    ]
    return f"{name} ({paths[0]})" if paths else name


def _describe_task(task: Any) -> str:
    owner = task.owner
    record = getattr(owner, "record", None)
    who = f"{record.path}#{owner.number} " if record is not None else ""
    return f"{who}{_awaiting_line(task.coro) or f'task {task.name!r}'}"


def _awaiting_line(coro: Any) -> str:
    """`function (file.py:88)` of the innermost project frame the coroutine waits in."""
    frames: list[Any] = []
    node = coro
    while node is not None:
        frame = getattr(node, "cr_frame", None) or getattr(node, "gi_frame", None)
        if frame is not None:
            frames.append(frame)
        node = getattr(node, "cr_await", None) or getattr(node, "gi_yieldfrom", None)
    own = [frame for frame in frames if _is_project_file(frame.f_code.co_filename)]
    if not own:
        return ""
    frame = own[-1]
    name = frame.f_code.co_filename.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{frame.f_code.co_name} ({name}:{frame.f_lineno})"


def _is_project_file(filename: str) -> bool:
    parts = filename.replace("\\", "/").split("/")
    return any(part in ("agents_core", "sim", "scenarios", "tests") for part in parts[:-1]) and (
        not filename.endswith(("sim/kernel.py", "sim/host.py"))
    )
