"""The watchdog: agent code that never yields is stopped, and named at its line.

Budgets are otherwise checked between simulated events, so `while True: pass` in an agent
method would never reach a check. One daemon thread per process watches every kernel that has
a limit: the driver (`sim.kernel`) counts `ticks`, odd while agent code runs (one addition before
and one after each `send`/`throw` into an agent coroutine, the whole cost on the hot path). When
the watchdog sees the same odd count across polls for longer than the run's `turn_s`, or sees the
run's wall-clock or memory budget used up while one step runs, it names the innermost frame of
the user's code (`sys._current_frames()`), then raises `BudgetExceeded` in the running thread
with `PyThreadState_SetAsyncExc`, which works in any thread (Dask's, pytest's), where a signal
only reaches the main thread. The count is read again around the injection: if the step ended
meanwhile the exception is taken back, so that it never lands in harness code between steps.
Injection needs the exception's type, so its details wait in a slot the type's constructor reads
in the stopped thread. A step whose code swallows it (`except BaseException`) gets it again; a
step paused at a debugger's breakpoint (pdb) is left alone.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from sim.budget import BudgetExceeded, rss_bytes

__all__ = ["POLL_S", "AgentCodeStopped", "Guard", "innermost_user_frame", "watch"]

POLL_S = 0.05
"""How often the watchdog looks (real seconds): a stop comes at most this much after its bound."""
AGAIN_S = 1.0
"""How long a step that swallowed its stop runs before it is stopped again."""

_HARNESS_DIRS = tuple(
    str(Path(__file__).resolve().parents[1] / package) + "/"
    for package in ("agents_core", "sim", "scenarios", "reports")
)
_sleep = time.sleep  # the real one, whatever the sandbox does to the module's name
_monotonic = time.monotonic


class Watched(Protocol):
    """What the watchdog reads of a kernel."""

    ticks: int
    thread: int
    guard: Guard | None
    _stack: list[Any]

    @property
    def now_ms(self) -> int: ...


@dataclass
class Guard:
    """The limits one kernel's steps are held to, and what the watchdog saw of them."""

    turn_s: float | None
    wall_deadline_s: float | None
    """`time.monotonic()` after which the run's wall-clock budget is used up."""
    wall_s: float | None
    memory_mb: int | None
    rss0: int | None
    phase: Callable[[], str]
    started_s: float
    seen_ticks: int = -1
    seen_at: float = 0.0
    fired_at: float | None = None


def watch(kernel: Watched, guard: Guard) -> None:
    """Hold `kernel`'s steps to `guard` from now on (the watchdog starts with the first one)."""
    kernel.guard = guard
    _kernels.add(kernel)
    _start()


def innermost_user_frame(frame: FrameType | None) -> FrameType | None:
    """The innermost frame of the user's code (neither the harness nor an installed library) in
    the stack that ends at `frame`; the innermost frame when none is the user's."""
    from sim.kernel import _is_library_file  # the one definition of "installed library code"

    first = frame
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(_HARNESS_DIRS) and not _is_library_file(name):
            return frame
        frame = frame.f_back
    return first


class AgentCodeStopped(BudgetExceeded):
    """What the watchdog raises in a thread: built there with no argument, from the slot the
    watchdog filled for that thread just before."""

    def __init__(self, *args: Any) -> None:
        if args:
            super().__init__(*args)
            return
        details = _pending.get(threading.get_ident())
        if details is None:  # pragma: no cover - a stop is always filled in before it is raised
            details = ("turn_s", 0.0, 0.0, 0, "agent code was stopped", "steps")
        super().__init__(*details)


_kernels: weakref.WeakSet[Any] = weakref.WeakSet()
_pending: dict[int, tuple[str, float, float, int, str, str]] = {}
_started = threading.Lock()
_thread: threading.Thread | None = None
# The same C function twice: raising takes the exception's type, taking it back takes NULL.
_set_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)
_clear_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)


def _start() -> None:
    global _thread
    with _started:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_loop, name="agentsim-watchdog", daemon=True)
            _thread.start()


def _loop() -> None:
    while True:
        _sleep(POLL_S)
        for kernel in list(_kernels):
            try:
                _look(kernel)
            except Exception:  # noqa: BLE001, S112 - one odd kernel must not end the watch
                continue


def _look(kernel: Watched) -> None:
    guard = kernel.guard
    ticks = kernel.ticks
    if guard is None or not ticks & 1:
        return
    now = _monotonic()
    if ticks != guard.seen_ticks:
        guard.seen_ticks, guard.seen_at, guard.fired_at = ticks, now, None
        return
    if guard.fired_at is not None and now - guard.fired_at < AGAIN_S:
        return
    ran_s = now - guard.seen_at
    if guard.turn_s is not None and ran_s >= guard.turn_s:
        _stop(kernel, guard, ticks, "turn_s", guard.turn_s, round(ran_s, 2), ran_s)
    elif guard.wall_deadline_s is not None and now >= guard.wall_deadline_s:
        used = round(now - guard.started_s, 1)
        _stop(kernel, guard, ticks, "wall_s", guard.wall_s or 0.0, used, ran_s)
    elif guard.memory_mb is not None and guard.rss0 is not None:
        rss = rss_bytes()
        if rss is not None and (rss - guard.rss0) >> 20 > guard.memory_mb:
            used_mb = (rss - guard.rss0) >> 20
            _stop(kernel, guard, ticks, "memory_mb", guard.memory_mb, used_mb, ran_s)


def _stop(
    kernel: Watched, guard: Guard, ticks: int, budget: str, limit: float, used: float, ran_s: float
) -> None:
    thread = kernel.thread
    stack = sys._current_frames().get(thread)
    if _in_debugger(stack):
        return  # stopped at a breakpoint: the person debugging is the one taking the time
    frame = innermost_user_frame(stack)
    detail = _describe(kernel, frame, ran_s)
    _pending[thread] = (budget, limit, used, kernel.now_ms, detail, guard.phase())
    if kernel.ticks != ticks:
        return  # the step ended while it was being described
    _set_async_exc(thread, AgentCodeStopped)
    if kernel.ticks != ticks:
        _clear_async_exc(thread, None)  # ended just now: take it back before it lands elsewhere
        return
    guard.fired_at = _monotonic()


def _in_debugger(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.endswith(("bdb.py", "pdb.py")):
            return True
        frame = frame.f_back
    return False


def _describe(kernel: Watched, frame: FrameType | None, ran_s: float) -> str:
    """Who was running what, where: the sentence's detail."""
    task = kernel._stack[-1] if kernel._stack else None
    record = getattr(getattr(task, "owner", None), "record", None)
    agent = getattr(record, "path", None) or "the platform"
    if frame is None:
        where = "at a line that could not be read"
    else:
        code = frame.f_code
        where = f"in {code.co_qualname} at {code.co_filename}:{frame.f_lineno}"
    text = (
        f"{agent} was running {where} for {ran_s:.1f} s of real time without an await "
        f"(potential deadlock: agent code must await the host to let time pass; a loop that "
        f"never awaits never ends in the simulation)"
    )
    return text
