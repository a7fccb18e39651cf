"""The coroutine driver: agent code (`async def`) run directly on a simpy clock.

Every awaitable the host hands out yields a `Wait` holding a simpy event; the driver resumes the
coroutine when that event is processed. Same-time events run in simpy's FIFO order, so a run is
deterministic (with an `Interleave` setting, a seed orders the timers due at one instant
instead: `sim.interleave`). Code between two awaits runs as one *step*; the storage writes of a
step are one turn and commit together when the step ends (the Durable Object output gate).

A task belongs to an owner (an incarnation). When the owner dies its tasks are never resumed:
they are moved to a graveyard that lives as long as the kernel, so that the garbage collector
does not close them (closing would run their `finally` blocks) while the simulation can still be
observed. When the kernel itself goes, it closes them quietly: their `finally` blocks then meet
a dead host (see `sim.host`), and whatever they raise is swallowed rather than printed. A
coroutine that yields anything but a `Wait` gets a `TypeError` thrown back at the line that
awaited it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import sysconfig
import threading
from collections.abc import Awaitable, Callable, Coroutine, Generator
from heapq import heappush
from typing import Any, Protocol, cast

import simpy
from simpy.core import NORMAL

from sim.interleave import Interleave, InterleavingEnvironment, Reordering
from sim.pending import ACTS, LIVE, event_is_live, mark_live

__all__ = [
    "Gone",
    "IncarnationKilled",
    "Kernel",
    "Owner",
    "SimDeferred",
    "SimTask",
    "TurnParticipant",
    "Wait",
]


_GONE = object()


class IncarnationKilled(BaseException):  # noqa: N818 - it is an event, not an error of the caller
    """Thrown into a step whose incarnation died in the middle of it (a crash between two
    statements). A BaseException so that `except Exception` in agent code does not swallow it;
    every host call made after it (from a `finally`, say) is refused the same way."""


class Owner(Protocol):
    """What a task belongs to: an incarnation, alive until killed."""

    alive: bool
    tasks: dict[SimTask, None]


class TurnParticipant(Protocol):
    """Storage that takes part in a turn: begun on first use in a step, committed at its end."""

    def commit_turn(self) -> None: ...


class Gone:
    """What a dead incarnation gets for an await outside any step (a coroutine being closed
    after its death): raising GeneratorExit ends the close cleanly instead of yielding."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, Any, Any]:
        raise GeneratorExit
        yield  # pragma: no cover - makes this a generator


class Wait:
    """The one awaitable the driver understands: resumes when its simpy event is processed."""

    __slots__ = ("event",)

    def __init__(self, event: simpy.Event) -> None:
        self.event = event

    def __await__(self) -> Generator[Wait, Any, Any]:
        return (yield self)


class SimDeferred:
    """A promise settled by code; awaitable any number of times, before or after it settles."""

    __slots__ = ("_event",)

    def __init__(self, kernel: Kernel) -> None:
        self._event = kernel.env.event()

    def resolve(self, value: Any = None) -> None:
        if not self._event.triggered:
            self._event.succeed(value)

    def reject(self, error: BaseException) -> None:
        if not self._event.triggered:
            self._event.defused = True
            # simpy takes any BaseException (it checks that at run time); its annotation says
            # Exception, and a rejection may carry IncarnationKilled, which is not one.
            self._event.fail(error)  # type: ignore[arg-type]

    def done(self) -> bool:
        return self._event.triggered

    @property
    def event(self) -> simpy.Event:
        return self._event

    def __await__(self) -> Generator[Wait, Any, Any]:
        return (yield Wait(self._event))


class SimTask:
    """A coroutine being driven; awaitable for its result."""

    __slots__ = (
        "kernel",
        "coro",
        "owner",
        "name",
        "finished",
        "context",
        "on_suspend",
        "__weakref__",
    )

    def __init__(
        self, kernel: Kernel, coro: Coroutine[Any, Any, Any] | None, owner: Owner | None, name: str
    ):
        if coro is not None and not inspect.iscoroutine(coro):
            raise TypeError(
                f"a task needs a coroutine (the result of calling an `async def` function), "
                f"got {coro!r}"
            )
        self.kernel = kernel
        self.coro: Any = coro
        self.owner = owner
        self.name = name
        self.finished = kernel.env.event()
        self.finished.defused = True
        # Each task runs in its own copy of the creator's context (as asyncio tasks do), so a
        # context variable set in one task (the current fiber) never leaks into another.
        self.context = contextvars.copy_context()
        self.on_suspend: Callable[[], None] | None = None
        """Called once, the first time the task waits (a task that ends in its first step
        never calls it)."""
        kernel._live[self] = None
        if owner is not None:
            owner.tasks[self] = None

    def done(self) -> bool:
        return self.finished.triggered

    def result(self) -> Any:
        """The value of a finished task (raises its error)."""
        if not self.finished.triggered:
            raise RuntimeError(f"task {self.name!r} has not finished")
        if not self.finished.ok:
            raise cast(BaseException, self.finished.value)  # a failed event holds its error
        return self.finished.value

    def __await__(self) -> Generator[Wait, Any, Any]:
        return (yield Wait(self.finished))

    def _resume(self, event: simpy.Event) -> None:
        # The outcome read off the event's fields: every event a task waits on has them (simpy's
        # and the kernel's light timers), and the properties cost a call each on every step.
        if event._ok:
            self.kernel.step(self, event._value, None)
        else:
            event.defused = True
            self.kernel.step(self, None, event._value)


class Kernel:
    """The simpy environment, the step in progress and the graveyard of killed tasks."""

    def __init__(self, interleave: Interleave | None = None) -> None:
        # Without an interleave setting, the plain environment: FIFO at every instant, and not
        # one instruction more per event than before interleavings existed.
        self.env = (
            simpy.Environment(initial_time=0)
            if interleave is None
            else InterleavingEnvironment(interleave)
        )
        self.interleave = interleave
        self.graveyard: list[SimTask] = []
        self._live: dict[SimTask, None] = {}
        self._stack: list[SimTask] = []
        self._turn: dict[TurnParticipant, None] = {}
        self._after_turn: list[Callable[[], None]] = []
        self._committing = False
        self.turns = 0
        """How many turns (outermost steps) have begun: a turn's number names it in logs."""
        self.ticks = 0
        """Odd while agent code runs (a `send` or `throw` of the outermost step): what the
        watchdog (`sim.watchdog`) reads to stop code that never yields."""
        self.thread = 0
        """The thread the latest turn ran in (the one the watchdog stops)."""
        self.guard: Any = None
        """The watchdog's `Guard` of this kernel's steps, or None."""
        self.sandbox: Any = None
        """The run's sandbox setting (`sim.sandbox.Policy`), or None for the default."""

    def close(self) -> None:
        """End the simulation's coroutines now, quietly: the buried ones, and the live ones after
        their owners are marked dead (so their `finally` blocks meet a dead host, exactly as the
        buried ones do). Called when the kernel goes, or by `Simulation.close()`."""
        self.guard = None  # no watch of a kernel that will not run again
        for task in list(self._live):
            if task.owner is not None:
                task.owner.alive = False
        live = [task for task in self._live if task.coro is not None]
        self._live.clear()
        graveyard, self.graveyard = self.graveyard, []
        for task in [*graveyard, *live]:
            # In the task's own context, so its finally blocks restore context variables there and
            # not in whoever closes it; a dead task's last words (an error) go nowhere.
            with contextlib.suppress(BaseException):
                task.context.run(task.coro.close)

    def __del__(self) -> None:
        self.close()

    # -- same-instant groups (`sim.interleave`) -------------------------------------------------
    @property
    def group_sizes(self) -> tuple[int, ...]:
        """The size of each same-instant group of timers reached so far (none are counted
        without an interleave setting)."""
        env = self.env
        return tuple(env.sizes) if isinstance(env, InterleavingEnvironment) else ()

    @property
    def reorderings(self) -> list[Reordering]:
        """The groups run out of FIFO order so far."""
        env = self.env
        return list(env.reorderings) if isinstance(env, InterleavingEnvironment) else []

    # -- time -------------------------------------------------------------------------------
    @property
    def now_ms(self) -> int:
        return int(self.env.now)

    def timeout(self, ms: int, value: Any = None) -> simpy.Event:
        if not isinstance(ms, int) or isinstance(ms, bool):
            raise TypeError(f"time is integer milliseconds, got {ms!r}")
        if ms < 0:
            raise ValueError(f"negative delay {ms} ms")
        return self.env.timeout(ms, value)

    def call_at(
        self, at_ms: int, callback: Callable[[], None], live: Callable[[], bool] | None = None
    ) -> None:
        """Run a platform callback (not agent code) at `at_ms` (now if already past). `live`
        says whether it will still do anything when it fires (`sim.pending`): a timer that
        would not keeps no run from being quiet."""
        event = self.timeout(max(0, at_ms - self.now_ms))
        event.callbacks.append(lambda _event: callback())
        if live is not None:
            mark_live(event, live)

    def sleep(self, ms: int) -> Any:
        """A timer for a task to wait on (`Wait`): what `timeout` gives, lighter. It stands in
        the queue where a simpy timeout would, and reads as a succeeded event with no value."""
        if type(ms) is not int and (not isinstance(ms, int) or isinstance(ms, bool)):
            raise TypeError(f"time is integer milliseconds, got {ms!r}")
        if ms < 0:
            raise ValueError(f"negative delay {ms} ms")
        env = self.env
        timer = _Timer()
        queue: list[Any] = env._queue
        heappush(queue, (env._now + ms, NORMAL, next(env._eid), timer))
        return timer

    def reserve_slot(self) -> int:
        """A place in the order of events due at one instant: the one a timer scheduled now
        would take. A timer armed later in this slot (`call_in_slot`) runs, among the events
        due at its instant, where a timer scheduled now would have run."""
        return next(self.env._eid)

    def call_in_slot(
        self,
        at_ms: int,
        slot: int,
        callback: Callable[[], None],
        live: Callable[[], bool],
        acts: Callable[[], bool],
    ) -> None:
        """Run a platform callback at `at_ms` (later than now) in a reserved `slot`. `live` says
        whether it will still do anything, now or by arming another timer (`sim.pending`);
        `acts` whether it does something at its own instant (what same-instant groups count)."""
        # simpy's queue holds events; these entries are lighter things its loop treats alike.
        queue: list[Any] = self.env._queue
        heappush(queue, (at_ms, NORMAL, slot, _SlotTimer(callback, live, acts)))

    def any_live(self) -> bool:
        """Whether any pending event would still do something (`sim.pending`)."""
        return any(event_is_live(entry[3]) for entry in self.env._queue)

    def call_soon(self, callback: Callable[[], None]) -> None:
        self.call_at(self.now_ms, callback)

    def settled(self, ok: bool, value: Any) -> simpy.Event:
        """An event processed at the current time with this outcome."""
        event = self.env.event()
        if ok:
            event.succeed(value)
        else:
            event.defused = True
            event.fail(value)
        return event

    # -- tasks ------------------------------------------------------------------------------
    def spawn(self, coro: Coroutine[Any, Any, Any], owner: Owner | None, name: str) -> SimTask:
        """Start a task now, running it up to its first await inside the current step. If that
        first stretch kills the incarnation the spawning task belongs to (a crash fault on one
        of its statements), the spawner dies at this call too, as it would at a statement of
        its own: no line of a dead incarnation runs after its death."""
        task = SimTask(self, coro, owner, name)
        self.step(task, None, None)
        spawner = self.current_task
        if spawner is not None and spawner.owner is not None and not spawner.owner.alive:
            raise IncarnationKilled("the process died in a task this one started")
        return task

    def spawn_soon(
        self, factory: Callable[[], Coroutine[Any, Any, Any]], owner: Owner | None, name: str
    ) -> SimTask:
        """Start a task as a later event at the current time (a delivery from outside). The
        coroutine is made only when it starts, so one that never starts leaves nothing behind."""
        task = SimTask(self, None, owner, name)

        def start(_event: simpy.Event) -> None:
            if owner is not None and not owner.alive:
                owner.tasks.pop(task, None)
                return  # its incarnation died first: the coroutine is never even made
            task.coro = factory()
            self.step(task, None, None)

        # Its place among the events of this instant is taken now, as a settled event's would
        # be, by a bare callback entry (no simpy event to build and settle per delivery).
        env = self.env
        queue: list[Any] = env._queue
        heappush(queue, (env._now, NORMAL, next(env._eid), _Soon(start)))
        return task

    @property
    def current_task(self) -> SimTask | None:
        return self._stack[-1] if self._stack else None

    def in_step_of(self, owner: Owner) -> bool:
        return any(task.owner is owner for task in self._stack)

    def join_turn(self, participant: TurnParticipant) -> bool:
        """Register storage used in this step; False when no step runs (a test reading storage)."""
        if not self._stack:
            return False
        self._turn[participant] = None
        return True

    def leave_turn(self, participant: TurnParticipant) -> None:
        self._turn.pop(participant, None)

    def step(self, task: SimTask, value: Any, error: BaseException | None) -> None:
        owner = task.owner
        if owner is not None and not owner.alive:
            self._bury(task)
            return
        if not self._stack:
            self.turns += 1
            self.thread = _get_ident()
        self._stack.append(task)
        try:
            self._advance(task, value, error)
        finally:
            self._stack.pop()
            if not self._stack:
                if self.ticks & 1:  # a stop landed between a send and its count: disarm
                    self.ticks += 1
                turn, self._turn = self._turn, {}
                self._committing = True
                try:
                    for participant in turn:
                        participant.commit_turn()
                finally:
                    self._committing = False
                if self._after_turn:
                    after, self._after_turn = self._after_turn, []
                    for callback in after:
                        callback()

    def after_turn(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the current turn has committed, before anything else happens
        (a crash at the instant after a commit); at once when no step runs."""
        if self._stack or self._committing:
            self._after_turn.append(callback)
        else:
            callback()

    def _advance(self, task: SimTask, value: Any, error: BaseException | None) -> None:
        coro = task.coro
        # Only the outermost step counts ticks: a task started inside it runs in its stretch.
        outer = len(self._stack) == 1
        while True:
            try:
                if outer:
                    self.ticks += 1
                    try:
                        if error is None:
                            yielded = task.context.run(coro.send, value)
                        else:
                            yielded = task.context.run(coro.throw, error)
                    finally:
                        self.ticks += 1
                elif error is None:
                    yielded = task.context.run(coro.send, value)
                else:
                    yielded = task.context.run(coro.throw, error)
            except StopIteration as stop:
                self._finish(task, True, stop.value)
                return
            except IncarnationKilled:
                if task.owner is not None and not task.owner.alive:
                    self._bury(task)
                    return
                raise
            except Exception as exc:  # noqa: BLE001 - the task's error is its result
                if task.owner is not None and not task.owner.alive:
                    self._bury(task)
                    return
                self._finish(task, False, exc)
                return
            if task.owner is not None and not task.owner.alive:
                self._bury(task)
                return
            if isinstance(yielded, Wait):
                event = yielded.event
                if event.callbacks is None:
                    event = self.settled(event.ok, event.value)
                event.callbacks.append(task._resume)
                if task.on_suspend is not None:
                    on_suspend, task.on_suspend = task.on_suspend, None
                    on_suspend()
                return
            value, error = None, _bad_await(coro, yielded)

    def _finish(self, task: SimTask, ok: bool, value: Any) -> None:
        self._live.pop(task, None)
        if task.owner is not None:
            task.owner.tasks.pop(task, None)
        if ok:
            task.finished.succeed(value)
        else:
            task.finished.fail(value)

    def _bury(self, task: SimTask) -> None:
        self._live.pop(task, None)
        if task.owner is not None and task.owner.tasks.pop(task, _GONE) is _GONE:
            return
        if task.coro is None:
            return
        if inspect.getcoroutinestate(task.coro) == inspect.CORO_CREATED:
            task.coro.close()  # never started: closing runs none of its lines
        else:
            self.graveyard.append(task)

    def bury_all(self, owner: Owner) -> None:
        """Called at the instant an owner dies: none of its tasks will run again."""
        for task in list(owner.tasks):
            self._bury(task)

    # -- combinators --------------------------------------------------------------------------
    def as_event(self, awaitable: Awaitable[Any], owner: Owner | None) -> simpy.Event:
        if isinstance(awaitable, SimTask):
            return awaitable.finished
        if isinstance(awaitable, SimDeferred):
            return awaitable.event
        if isinstance(awaitable, Wait):
            return awaitable.event
        if inspect.iscoroutine(awaitable):
            return self.spawn(awaitable, owner, _coro_name(awaitable)).finished
        raise TypeError(
            f"gather/race take coroutines, tasks, deferreds or host awaitables, got {awaitable!r}"
        )

    def as_events(
        self, awaitables: tuple[Awaitable[Any], ...], owner: Owner | None
    ) -> list[simpy.Event]:
        """`as_event` of each, in order. When starting one kills the incarnation, the
        coroutines after it, made by the dying turn, never start: they are closed, quietly."""
        events: list[simpy.Event] = []
        try:
            for awaitable in awaitables:
                events.append(self.as_event(awaitable, owner))
        except BaseException:
            for later in awaitables[len(events) + 1 :]:
                if inspect.iscoroutine(later):
                    later.close()
            raise
        return events

    def gather(self, awaitables: tuple[Awaitable[Any], ...], owner: Owner | None) -> SimDeferred:
        events = self.as_events(awaitables, owner)
        result = SimDeferred(self)
        values: list[Any] = [None] * len(events)
        remaining = [len(events)]
        if not events:
            result.resolve([])
            return result

        def on_settle(index: int, event: simpy.Event) -> None:
            if not event.ok:
                event.defused = True
                result.reject(cast(BaseException, event.value))
                return
            values[index] = event.value
            remaining[0] -= 1
            if remaining[0] == 0:
                result.resolve(values)

        for index, event in enumerate(events):
            self._on_settled(event, functools.partial(on_settle, index))
        return result

    def race(self, awaitables: tuple[Awaitable[Any], ...], owner: Owner | None) -> SimDeferred:
        if not awaitables:
            raise ValueError("race needs at least one awaitable (an empty race never settles)")
        result = SimDeferred(self)

        def on_settle(event: simpy.Event) -> None:
            if event.ok:
                result.resolve(event.value)
            else:
                event.defused = True
                result.reject(cast(BaseException, event.value))

        for event in self.as_events(awaitables, owner):
            self._on_settled(event, on_settle)
        return result

    def _on_settled(self, event: simpy.Event, callback: Callable[[simpy.Event], None]) -> None:
        if event.callbacks is None:
            event = self.settled(event.ok, event.value)
        event.callbacks.append(callback)


class _Timer:
    """A sleep's timer: what simpy's loop and a waiting task read of a succeeded event."""

    __slots__ = ("callbacks",)
    _ok = True
    _value = None
    ok = True
    value = None

    def __init__(self) -> None:
        self.callbacks: list[Callable[[Any], None]] | None = []


class _Soon:
    """A callback queued at the current instant: what simpy's loop needs of an event."""

    __slots__ = ("callbacks",)
    _ok = True
    _value = None

    def __init__(self, callback: Callable[[Any], None]) -> None:
        self.callbacks: list[Callable[[Any], None]] | None = [callback]


class _SlotTimer:
    """A platform timer in a reserved slot: what simpy's loop needs of an event (callbacks, an
    outcome) and the predicates `sim.pending` reads, without a simpy event's weight."""

    __slots__ = ("callbacks", LIVE, ACTS)
    _ok = True
    _value = None

    def __init__(
        self, callback: Callable[[], None], live: Callable[[], bool], acts: Callable[[], bool]
    ) -> None:
        self.callbacks: list[Callable[[Any], None]] | None = [lambda _timer: callback()]
        setattr(self, LIVE, live)
        setattr(self, ACTS, acts)


def _coro_name(coro: Any) -> str:
    return getattr(coro, "__qualname__", type(coro).__name__)


def _bad_await(coro: Coroutine[Any, Any, Any], yielded: Any) -> TypeError:
    """The error for awaiting something the simulator cannot drive, naming the line that did."""
    frames = []
    node: Any = coro
    while node is not None:
        frame = getattr(node, "cr_frame", None) or getattr(node, "gi_frame", None)
        if frame is not None:
            frames.append(frame)
        node = getattr(node, "cr_await", None) or getattr(node, "gi_yieldfrom", None)
    # The chain is the agent's own coroutines, then the foreign awaitable's internals (asyncio's,
    # say): name the last frame that is not library code, i.e. the line that awaited it.
    own = [f for f in frames if not _is_library_file(f.f_code.co_filename)]
    frame = own[-1] if own else (frames[-1] if frames else None)
    where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "<unknown>"
    return TypeError(
        f"{where}: awaited {yielded!r}, which is not a host awaitable. In the simulation only "
        f"the host's awaitables (sleep, gather, race, deferred, wait_until tasks, streams) and "
        f"coroutines built on them can be awaited; asyncio and other event loops do not run here."
    )


_get_ident = threading.get_ident

_PROJECT_PACKAGES = ("agents_core", "sim", "scenarios", "reports")
_LIBRARY_ROOTS = tuple(
    sorted({sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")})
)


def _is_library_file(filename: str) -> bool:
    if not filename.startswith(_LIBRARY_ROOTS):
        return False
    parts = filename.replace("\\", "/").split("/")
    return not any(part in _PROJECT_PACKAGES for part in parts)
