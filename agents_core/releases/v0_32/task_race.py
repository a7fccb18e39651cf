"""A Task step's callback raced against its signal (spec sdk-0.32 §6.5; the dist's
`_executeAttempt` and `_raceTimeout`): at the step's timeout, or the run's cancellation, the
step ends at once with the abort's reason, while a callback that ignores its signal runs on,
abandoned (docs/divergences.md T18).

The callback runs in the attempt's own task, stretch by stretch, exactly as a plain `await`
would run it: racing it in a task of its own would move every step's end (and every chat
turn's) to a later event. A task waiting on the callback's await cannot be resumed before that
await completes, so the attempt's body (from its claim to its settlement) is driven by an
`AttemptCarrier` instead of being awaited: when the signal aborts while the callback waits,
the carrier *cuts* the body loose from the callback. A new task takes the body on (as a
promise continuation: a later event at the same instant), throwing the abort's reason in where
the callback was awaited, and the step, the attempt and the run settle from there; the task
that was waiting keeps the abandoned callback, and hands it to a task of its own when its await
completes, then ends once the body has. What the abandoned callback answers or raises is
dropped, as the SDK drops its late settlement; its writes through the step are fenced by the
attempt's generation (`task_journal.py`), its other writes land.

A signal aborted while the callback itself runs (it cancelled its own run) ends the step as the
callback next waits. A step whose await the carrier does not drive (a step the handler runs in
a task of its own, under `gather`, say) cannot be cut: it ends with the abort's reason as its
callback's await completes.

The one form the port keeps of the old limit: the caller of an attached run (the SDK's
`runAttached`, the chat turn's) awaits the attempt in the task that waits on the abandoned
callback, so it goes on at that await's completion rather than at the cut.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any

from agents_core.releases.v0_32.task_errors import TaskCancellation, TaskSuspension

if TYPE_CHECKING:
    from agents_core.host import Deferred, Tasks
    from agents_core.signals import AbortSignal

__all__ = ["AttemptCarrier", "StepRace", "abort_error"]


def abort_error(reason: Any) -> BaseException:
    """What an aborted step raises: its signal's reason (the timeout's error, or the run's
    cancellation)."""
    return reason if isinstance(reason, BaseException) else Exception(str(reason))


class _Cut(Exception):  # noqa: N818 - a signal between the carrier and one race, never seen
    """Thrown into the attempt's body where `race` awaits its callback: the step ends there."""

    def __init__(self, race: StepRace) -> None:
        super().__init__("the step's callback was cut loose")
        self.race = race


class _Leg:
    """One task's stretch of carrying the body: what it waits on, and the callback it keeps if
    the body was cut loose while it waited."""

    __slots__ = ("pending", "loose")

    def __init__(self) -> None:
        self.pending: Any = None
        self.loose: Any = None


class AttemptCarrier:
    """Drives one attempt's body in the task that awaits it, and lets a step's race cut the
    body loose from a callback that outlives its signal."""

    __slots__ = ("_tasks", "_body", "_leg", "_done")

    def __init__(self, tasks: Tasks, finished: Deferred[Any] | None = None) -> None:
        self._tasks = tasks
        self._body: Any = None
        self._leg: _Leg | None = None
        self._done = finished
        """Settled as the body ends, whichever task carries it then (None: made at a cut)."""

    def carry(self, body: Coroutine[Any, Any, Any]) -> Awaitable[Any]:
        """The body's result (or its error), driven in the awaiting task until a cut."""
        self._body = body.__await__()
        return _Awaiting(self._start)

    def _start(self) -> Generator[Any, Any, Any]:
        leg = self._leg = _Leg()
        return self._drive(leg, None, None)

    def _drive(
        self, leg: _Leg, value: Any, error: BaseException | None
    ) -> Generator[Any, Any, Any]:
        body = self._body
        while True:
            try:
                yielded = body.send(value) if error is None else body.throw(error)
            except StopIteration as stop:
                if self._done is not None:
                    self._done.resolve(stop.value)
                return stop.value
            except Exception as exc:
                if self._done is not None:
                    self._done.reject(exc)
                raise
            leg.pending = yielded
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                (body if leg.loose is None else leg.loose).close()
                raise
            except BaseException as exc:  # noqa: BLE001 - handed on, as `yield from` does
                value, error = None, exc
            finally:
                leg.pending = None
            if leg.loose is not None:
                break
        # Cut while this task waited: what woke it is the abandoned callback's.
        if error is not None and not isinstance(error, Exception):
            raise error
        self.abandon(leg.loose, value, error, None)
        done = self._done
        assert done is not None  # made by the cut
        return (yield from done.__await__())

    def cut(self, race: StepRace) -> bool:
        """Cut the body loose from `race`'s callback, whose await the carrying task waits on;
        False when it does not (the step runs in a task of its own)."""
        leg = self._leg
        if leg is None or leg.loose is not None or leg.pending is None:
            return False
        if leg.pending is not race.pending:
            return False
        leg.loose = race.iterator
        carrier = self._leg = _Leg()
        if self._done is None:
            self._done = self._tasks.deferred()
        race.context.run(self._tasks.wait_until, self._carry_on(carrier, race))
        return True

    async def _carry_on(self, leg: _Leg, race: StepRace) -> None:
        # The race's rejection goes on as a promise continuation: after what this instant holds.
        soon = self._tasks.deferred()
        soon.resolve(None)
        await soon
        # The body's error was handed to whoever awaits the attempt (`_done`).
        with contextlib.suppress(Exception):
            await _Awaiting(lambda: self._drive(leg, None, _Cut(race)))

    def abandon(self, iterator: Any, value: Any, error: BaseException | None, pending: Any) -> None:
        """Leave a callback to a task of its own: one stopped at an await not yet waited on
        (`pending`), or one whose await just completed (with `value` or `error`)."""
        self._tasks.wait_until(_abandoned(iterator, value, error, pending))


class StepRace:
    """One step callback's awaitable (its `__await__` iterator), raced against the step's
    signal; awaited in the attempt's body."""

    __slots__ = ("_carrier", "_signal", "iterator", "context", "pending", "_running", "_ended")

    def __init__(
        self, carrier: AttemptCarrier | None, awaitable: Awaitable[Any], signal: AbortSignal
    ) -> None:
        self._carrier = carrier
        self._signal = signal
        self.iterator: Any = awaitable.__await__()
        self.context = contextvars.copy_context()
        """The body's context as the step began: where the body goes on after a cut."""
        self.pending: Any = None
        self._running = False
        self._ended = False

    def _on_abort(self, _reason: Any) -> None:
        if self._running or self._ended or self.pending is None or self._carrier is None:
            return
        self._carrier.cut(self)

    def __await__(self) -> Generator[Any, Any, Any]:
        iterator = self.iterator
        signal = self._signal
        value: Any = None
        error: BaseException | None = None
        listening = False
        while True:
            self._running = True
            try:
                yielded = iterator.send(value) if error is None else iterator.throw(error)
            except StopIteration as stop:
                self._ended = True
                if signal.aborted:
                    raise abort_error(signal.reason) from None
                return stop.value
            except (Exception, TaskCancellation):
                self._ended = True
                if signal.aborted:
                    raise abort_error(signal.reason) from None
                raise
            except BaseException:
                self._ended = True
                raise
            finally:
                self._running = False
            if signal.aborted:
                # Aborted while the callback ran: it goes on alone from the await it stopped at.
                self._ended = True
                self._abandon(None, None, yielded)
                raise abort_error(signal.reason)
            if not listening:
                # After the callback's first stretch, as the SDK's race listens after calling it.
                signal.add_listener(self._on_abort)
                listening = True
            self.pending = yielded
            try:
                value, error = (yield yielded), None
            except _Cut as cut:
                if cut.race is not self:
                    value, error = None, cut  # a race further in (a step inside this callback)
                else:
                    self._ended = True
                    raise abort_error(signal.reason) from None
            except GeneratorExit:
                self._ended = True
                iterator.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - handed on, as `yield from` does
                value, error = None, exc
            finally:
                self.pending = None
            if signal.aborted and not isinstance(error, _Cut):
                # Aborted while it waited, in a task the carrier could not cut: it ends now.
                self._ended = True
                self._abandon(value, error, None)
                raise abort_error(signal.reason)

    def _abandon(self, value: Any, error: BaseException | None, pending: Any) -> None:
        if self._carrier is not None:
            self._carrier.abandon(self.iterator, value, error, pending)
        else:
            self.iterator.close()


class _Awaiting:
    """An awaitable over a generator made when it is awaited."""

    __slots__ = ("_make",)

    def __init__(self, make: Callable[[], Generator[Any, Any, Any]]) -> None:
        self._make = make

    def __await__(self) -> Generator[Any, Any, Any]:
        return self._make()


async def _abandoned(iterator: Any, value: Any, error: BaseException | None, pending: Any) -> None:
    """Run an abandoned callback on to its end; what it answers or raises is dropped (the
    SDK's race ignores a late settlement)."""
    with contextlib.suppress(Exception, TaskCancellation, TaskSuspension):
        await _Awaiting(lambda: _pump(iterator, value, error, pending))


def _pump(
    iterator: Any, value: Any, error: BaseException | None, pending: Any
) -> Generator[Any, Any, Any]:
    if pending is not None:
        try:
            value, error = (yield pending), None
        except GeneratorExit:
            iterator.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - handed on, as `yield from` does
            value, error = None, exc
    while True:
        try:
            yielded = iterator.send(value) if error is None else iterator.throw(error)
        except StopIteration as stop:
            return stop.value
        try:
            value, error = (yield yielded), None
        except GeneratorExit:
            iterator.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - handed on, as `yield from` does
            value, error = None, exc
