"""The sandbox: a nondeterministic call in agent code fails at its line.

A seed replays a run only if agent code reads time and randomness from the host. While agent
code runs in a simulation (inside a step of the driver, `sim.kernel`), the calls in `CAUGHT`
(the real clock, real sleeps, the global random generator, uuid1/uuid4, `os.urandom`, `secrets`,
asyncio's event loop) raise `NondeterministicCall`, a TypeError naming the call, the user's file
and line, and what to use instead. `install()` replaces those module attributes once with
wrappers that are inert outside agent code: each looks at who called it (a harness caller costs
one look-up). The caller that counts is the nearest frame that is not an installed library's
(stdlib, site-packages): the harness's own (agents_core, sim, scenarios, reports) is let
through, so that the runtime, its logging and simpy are never affected, and so are calls made
outside any step (a test, pytest, Dask). A library the agent calls during its turn is caught
too, as in Temporal's workflow sandbox (logging's timestamps are let through: `LOGGING`); the
escape hatches are `allowed()` around a call site, `allow_module(name)` (or
`Simulation(sandbox_allow=(name,))`) for a module, and `Simulation(sandbox=False)` for a run.
Names an agent's module bound before `install()` (`from time import time` above `from agents_core
import Agent`) are rebound to the wrappers when the agent is first constructed
(`guard_agent_modules`), and so are its `datetime` names, to stand-ins whose clock readers are
caught (`sim.sandbox_dates`); `docs/sandbox.md` lists what is not caught.
"""

from __future__ import annotations

import asyncio
import asyncio.events
import contextlib
import contextvars
import functools
import os
import random
import secrets
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from sim.sandbox_dates import stand_ins

__all__ = [
    "CAUGHT",
    "LOGGING",
    "NondeterministicCall",
    "Policy",
    "allow_module",
    "allowed",
    "guard_agent_modules",
    "install",
]

CLOCK = "self.host.clock.now_ms()"
SLEEP = "await self.host.clock.sleep(ms)"
ENTROPY = "self.host.entropy (random() and nanoid())"
LOOP = (
    "the host's awaitables (await self.host.clock.sleep(ms), self.host.tasks.gather(...), "
    "race(...), wait_until(...)); asyncio's event loop does not run in the simulation"
)
_RANDOM = (
    "betavariate",
    "binomialvariate",
    "choice",
    "choices",
    "expovariate",
    "gammavariate",
    "gauss",
    "getrandbits",
    "getstate",
    "lognormvariate",
    "normalvariate",
    "paretovariate",
    "randbytes",
    "randint",
    "random",
    "randrange",
    "sample",
    "seed",
    "setstate",
    "shuffle",
    "triangular",
    "uniform",
    "vonmisesvariate",
    "weibullvariate",
)
_SECRETS = ("choice", "randbelow", "randbits", "token_bytes", "token_hex", "token_urlsafe")

CAUGHT: tuple[tuple[ModuleType, str, str], ...] = (
    *((time, name, CLOCK) for name in ("time", "time_ns", "monotonic", "monotonic_ns")),
    *((time, name, CLOCK) for name in ("perf_counter", "perf_counter_ns")),
    (time, "sleep", SLEEP),
    *((random, name, ENTROPY) for name in _RANDOM if hasattr(random, name)),
    (uuid, "uuid1", ENTROPY),
    (uuid, "uuid4", ENTROPY),
    (os, "urandom", ENTROPY),
    *((secrets, name, ENTROPY) for name in _SECRETS),
    *(
        (module, name, LOOP)
        for module in (asyncio, asyncio.events)
        for name in ("get_running_loop", "get_event_loop", "new_event_loop", "run")
        if hasattr(module, name)
    ),
    *(
        (asyncio.events, name, LOOP)
        for name in ("_get_running_loop", "_get_event_loop")
        if (hasattr(asyncio.events, name))
    ),
)
"""(module, attribute, what to use instead): every call the sandbox catches."""


class NondeterministicCall(TypeError):
    """Agent code called something that makes a seed replay differently (the real clock, real
    randomness, asyncio's loop); the message names the call, the line and what to use instead."""


@dataclass(frozen=True)
class Policy:
    """One run's sandbox: on or off, and the modules whose calls it lets through."""

    enabled: bool = True
    allow: tuple[str, ...] = ()


_installed = threading.Lock()
_done = False
_allowed: contextvars.ContextVar[bool] = contextvars.ContextVar("sandbox_allowed", default=False)
LOGGING = ("logging", "structlog")
"""Let through from the start: a log record's timestamp is output, not a decision of the run."""
_modules: set[str] = set(LOGGING)
_HARNESS_DIRS = tuple(
    str(Path(__file__).resolve().parents[1] / package) + "/"
    for package in ("agents_core", "sim", "scenarios", "reports")
)
_ORIGINALS: dict[tuple[str, str], Callable[..., Any]] = {}
_WRAPPER_OF: dict[int, Callable[..., Any]] = {}
"""id(original) -> its wrapper, for the names agent modules bound before `install()`."""
_GUARDED: set[str] = set()
_DATE_STAND_INS: dict[int, Any] = {}
"""id(the datetime module, its date or datetime class) -> its stand-in (`sim.sandbox_dates`)."""
"""The modules `guard_agent_modules` has looked at (each once per process)."""


@contextlib.contextmanager
def allowed() -> Iterator[None]:
    """Within the block, in this task, no call is caught: an explicit, local escape hatch
    (`with allowed(): started = time.time()`)."""
    token = _allowed.set(True)
    try:
        yield
    finally:
        _allowed.reset(token)


def allow_module(name: str) -> None:
    """Let every call made from the module `name` (and its submodules) through, in every run:
    for a library the agent uses whose clock or randomness does not change what it does."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"allow_module takes a module name such as 'mylib', got {name!r}")
    _modules.add(name)


def install() -> None:
    """Put the wrappers in place (once per process; a later call does nothing)."""
    global _done
    with _installed:
        if _done:
            return
        for module, name, instead in CAUGHT:
            original = getattr(module, name)
            _ORIGINALS.setdefault((module.__name__, name), original)
            wrapper = _wrap(original, f"{module.__name__}.{name}", instead)
            _WRAPPER_OF[id(original)] = wrapper
            setattr(module, name, wrapper)
        _DATE_STAND_INS.update(stand_ins(_check, _HARNESS_DIRS))
        _done = True


def guard_agent_modules(cls: type) -> None:
    """Rebind, in the modules that define `cls` and its base classes, the names that hold a
    caught function imported before `install()` (`from time import time`, `from uuid import
    uuid4` above `from agents_core import Agent`, as import sorting puts them): each then
    names the wrapper, so agent code that calls it is caught as `time.time()` is. A name
    holding the `datetime` module or its `date` or `datetime` class names its stand-in, whose
    clock readers (`now`, `utcnow`, `today`) are caught likewise (`sim.sandbox_dates`). Harness
    and installed libraries' modules are left as they are; each module is looked at once."""
    if not _WRAPPER_OF:
        return
    from sim.kernel import _is_library_file

    for klass in cls.__mro__:
        name = klass.__module__
        if name in _GUARDED:
            continue
        _GUARDED.add(name)
        module = sys.modules.get(name)
        filename = getattr(module, "__file__", None)
        if module is None or not isinstance(filename, str):
            continue
        if filename.startswith(_HARNESS_DIRS) or _is_library_file(filename):
            continue
        namespace = vars(module)
        for key, value in list(namespace.items()):
            wrapper = _WRAPPER_OF.get(id(value))
            if wrapper is not None and getattr(wrapper, "__agentsim_original__", None) is value:
                namespace[key] = wrapper
            elif id(value) in _DATE_STAND_INS:
                namespace[key] = _DATE_STAND_INS[id(value)]


def _wrap(original: Callable[..., Any], call: str, instead: str) -> Callable[..., Any]:
    @functools.wraps(original)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        frame = sys._getframe(1)
        if not frame.f_code.co_filename.startswith(_HARNESS_DIRS):
            _check(frame, call, instead)
        return original(*args, **kwargs)

    guarded.__agentsim_original__ = original  # type: ignore[attr-defined]
    return guarded


def _check(frame: FrameType, call: str, instead: str) -> None:
    """Raise `NondeterministicCall` if the call from `frame` is made for agent code in a step."""
    from sim.kernel import Kernel, _is_library_file

    user: FrameType | None = None
    allowed_by: set[str] = set(_modules)
    node: FrameType | None = frame
    while node is not None:
        code = node.f_code
        if code is _DRIVER:
            break
        if user is None:
            name = code.co_filename
            if _allows(node, allowed_by):
                return
            if not _is_library_file(name):
                if name.startswith(_HARNESS_DIRS):
                    return  # the harness (or a library it called) asked
                user = node
        node = node.f_back
    else:
        return  # no step is running in this thread
    if user is None or _allowed.get():
        return
    kernel = node.f_locals.get("self")
    policy = kernel.sandbox if isinstance(kernel, Kernel) else None
    if isinstance(policy, Policy):
        if not policy.enabled:
            return
        if policy.allow and _allows_any(frame, user, set(policy.allow)):
            return
    where = f"{user.f_code.co_filename}:{user.f_lineno}"
    what = f"{call}()"
    if frame is not user:  # through a library: name what the agent called, too
        entry = frame
        while entry.f_back is not None and entry.f_back is not user:
            entry = entry.f_back
        module = entry.f_globals.get("__name__", "?")
        what = f"{module}.{entry.f_code.co_qualname}() (it calls {call}())"
    raise NondeterministicCall(
        f"{where}: {what} was called in agent code, which makes a seed replay differently "
        f"(or hides real time inside virtual time); use {instead}. To allow it on purpose: "
        f"`with sim.sandbox.allowed(): ...` around the call, or "
        f"sim.sandbox.allow_module({user.f_globals.get('__name__', '?')!r}) for its module"
    )


def _allows(frame: FrameType, modules: set[str]) -> bool:
    if not modules:
        return False
    name = frame.f_globals.get("__name__", "")
    return isinstance(name, str) and any(
        name == allowed or name.startswith(allowed + ".") for allowed in modules
    )


def _allows_any(frame: FrameType, user: FrameType, modules: set[str]) -> bool:
    """Whether a frame from the caller up to the user's frame is in one of `modules`."""
    node: FrameType | None = frame
    while node is not None:
        if _allows(node, modules):
            return True
        if node is user:
            return False
        node = node.f_back
    return False


def _driver_code() -> Any:
    from sim.kernel import Kernel

    return Kernel._advance.__code__


_DRIVER = _driver_code()
