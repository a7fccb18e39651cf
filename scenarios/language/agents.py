"""Agent classes named in scenario files: import by `package.module:Class`, apply options.

A scenario names a class by import path and may give it class options. Options become a
subclass with the same name (so trace paths read `Counter/alias`, not a generated name): a key
that is one of the runtime's static options (`keep_alive_interval_ms`, ...; see
`agents_core.options`) is merged into a copy of the class's `options` mapping and checked the way
the runtime checks it; any other key must name a public class attribute of the agent
(`initial_state`, a workload's `step_ms`) and replaces it. String values of keys ending in `_ms`
are durations such as `'20s'`. Errors are `ValueError`s whose text says what is allowed; the
loader adds the file and line. A `class:` module is imported from the installed packages, the
scenario file's folder or the current directory (`search_dirs`), so that `agentsim run` finds
a user's agents beside their scenarios with no `PYTHONPATH`: importing it runs its code, as a
test file's imports do.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, cast

from agents_core import Agent
from agents_core.options import AgentOptions, resolve_options
from sim.units import parse_duration_ms

__all__ = [
    "IMPORTED_FROM",
    "call_signature_error",
    "option_names",
    "origins",
    "public_methods",
    "resolve",
    "resolve_function",
    "search_dirs",
    "with_options",
]

_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_AGENT_BASE_NAMES = frozenset(name for klass in Agent.__mro__ for name in vars(klass))
_RUNTIME_OPTIONS = tuple(f.name for f in fields(AgentOptions))


IMPORTED_FROM: dict[str, str] = {}
"""Top-level module name -> the search directory it was imported from (what a reproducer
written elsewhere must name in its `python_path:` to import it again)."""


def search_dirs(scenario_path: str | Path, python_path: Sequence[str] = ()) -> tuple[str, ...]:
    """Where a scenario's `class:` modules are looked for besides the installed packages: the
    file's `python_path:` directories (relative to the file), its own directory, then the
    current directory (as `python -m pytest` would find a test's helpers), whatever command
    runs it."""
    here = Path(scenario_path).parent if str(scenario_path) != "<scenario>" else Path(".")
    dirs = [str((here / extra).resolve()) for extra in python_path]
    return tuple(dict.fromkeys([*dirs, str(here.resolve()), str(Path.cwd())]))


@contextlib.contextmanager
def _importable_from(dirs: Sequence[str]) -> Iterator[None]:
    """`dirs` first on `sys.path` while a scenario's modules are imported. Put back after:
    what was imported stays in `sys.modules`, and nothing else the process imports later is
    shadowed by a scenario's folder."""
    added = [d for d in dirs if d not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for directory in added:
            with contextlib.suppress(ValueError):
                sys.path.remove(directory)


def _note_origin(top: str, search: Sequence[str]) -> None:
    file = getattr(sys.modules.get(top), "__file__", None)
    if file is None:
        return
    for directory in search:
        if Path(file).resolve().is_relative_to(directory):
            IMPORTED_FROM[top] = directory
            return


def origins(classes: Iterable[type]) -> list[str]:
    """The search directories the modules of `classes` were imported from, in order (empty for
    classes of installed packages)."""
    found = (IMPORTED_FROM.get(cls.__module__.split(".", 1)[0]) for cls in classes)
    return list(dict.fromkeys(directory for directory in found if directory is not None))


def _import_module(import_path: str, search: Sequence[str], name: str) -> tuple[Any, str]:
    """The module of `package.module:Name` (imported, found in `search` if need be) and the
    `Name` part; a ValueError saying what is wrong otherwise (`name`: 'Class' or 'function')."""
    if not isinstance(import_path, str) or not _IMPORT_PATH.fullmatch(import_path):
        example = "scenarios.workloads:Counter" if name == "Class" else "checks:read_total"
        raise ValueError(
            f"{import_path!r} is not an import path; write 'package.module:{name}', "
            f"e.g. {example!r}"
        )
    module_name, _, qualname = import_path.partition(":")
    try:
        top = module_name.split(".", 1)[0]
        # Only a module that nothing else would find is noted as coming from a search folder.
        found_anyway = top in sys.modules or importlib.util.find_spec(top) is not None
        with _importable_from(search):
            module: Any = importlib.import_module(module_name)
        if not found_anyway:
            _note_origin(top, search)
    except Exception as exc:  # any import failure is the file's fault, reported not raised
        where = ", ".join(search) if search else "the current directory"
        raise ValueError(
            f"cannot import module {module_name!r} ({type(exc).__name__}: {exc}); "
            f"the module must be importable from the installed packages or sit in {where}"
        ) from None
    return module, qualname


def resolve(import_path: str, search: Sequence[str] = ()) -> type:
    """The Agent subclass at `package.module:Class`; the module may also live in one of the
    `search` directories (`search_dirs` of the scenario file)."""
    target, qualname = _import_module(import_path, search, "Class")
    module_name = target.__name__
    for part in qualname.split("."):
        if not hasattr(target, part):
            names = sorted(
                name
                for name, value in vars(target).items()
                if isinstance(value, type) and issubclass(value, Agent) and value is not Agent
            )
            raise ValueError(f"{module_name} has no {qualname!r}; Agent classes there: {names}")
        target = getattr(target, part)
    if not (isinstance(target, type) and issubclass(target, Agent)) or target is Agent:
        raise ValueError(f"{import_path!r} is not a subclass of agents_core.Agent")
    return target


def resolve_function(import_path: str, search: Sequence[str] = ()) -> Callable[..., Any]:
    """The function at `package.module:name` (a `run_in` step's), found as `resolve` finds
    classes; it must be callable and not a class."""
    target, qualname = _import_module(import_path, search, "function")
    module_name = target.__name__
    for part in qualname.split("."):
        if not hasattr(target, part):
            names = sorted(
                name
                for name, value in vars(target).items()
                if inspect.isfunction(value) and not name.startswith("_")
            )
            raise ValueError(f"{module_name} has no {qualname!r}; functions there: {names}")
        target = getattr(target, part)
    if not callable(target) or isinstance(target, type):
        raise ValueError(f"{import_path!r} is not a function")
    return cast(Callable[..., Any], target)


def option_names(cls: type) -> list[str]:
    """What a scenario may set for `cls`: runtime options and its public class attributes."""
    names = set(_RUNTIME_OPTIONS) | set(getattr(cls, "options", {}) or {})
    for klass in cls.__mro__:
        if klass is object:
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name == "options" or callable(value):
                continue
            if isinstance(value, property | staticmethod | classmethod):
                continue
            names.add(name)
    return sorted(names)


def with_options(cls: type, options: Mapping[str, Any]) -> type:
    """`cls` itself when `options` is empty, else a subclass of the same name with them set."""
    if not options:
        return cls
    allowed = option_names(cls)
    base_options = dict(getattr(cls, "options", {}) or {})
    attributes: dict[str, Any] = {}
    merged = dict(base_options)
    for key, value in options.items():
        if key not in allowed:
            raise ValueError(
                f"unknown option {key!r} for {cls.__qualname__}; known options: {allowed}"
            )
        if key.endswith("_ms") and isinstance(value, str):
            try:
                value = parse_duration_ms(value)
            except ValueError as exc:
                raise ValueError(f"option {key}: {exc}") from None
        if key in _RUNTIME_OPTIONS or key in base_options:
            merged[key] = value
        else:
            attributes[key] = value
    try:
        resolve_options(merged)
    except (ValueError, TypeError) as exc:
        raise ValueError(str(exc)) from None
    attributes["options"] = merged
    attributes["__module__"] = cls.__module__
    attributes["__qualname__"] = cls.__qualname__
    attributes["__doc__"] = cls.__doc__
    return type(cls.__name__, (cls,), attributes)


def public_methods(cls: type) -> list[str]:
    """Methods a `call` step may name: public callables, the Agent base's own left out of the
    list (they are callable, but listing them would drown the class's own methods)."""
    return sorted(
        name
        for name in dir(cls)
        if not name.startswith("_")
        and name not in _AGENT_BASE_NAMES
        and callable(getattr(cls, name, None))
    )


@functools.lru_cache(maxsize=1024)
def _signature(cls: type, method: str) -> tuple[inspect.Signature | None, bool]:
    """The method's signature (None for none) and whether it is static or a class method:
    read once per class and method (a long scenario calls the same few thousands of times)."""
    function = getattr(cls, method, None)
    try:
        # None (no such attribute) makes inspect.signature raise TypeError, handled below.
        signature = inspect.signature(function)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None, False
    static = isinstance(inspect.getattr_static(cls, method, None), staticmethod | classmethod)
    return signature, static


def call_signature_error(cls: type, method: str, args: tuple[Any, ...], kwargs: Mapping) -> str:
    """Why `method(*args, **kwargs)` cannot be called on an instance of `cls`; '' if it can."""
    signature, static = _signature(cls, method)
    if signature is None:
        return ""  # no signature to check against (a builtin); the call itself will tell
    receiver = () if static else (None,)
    try:
        signature.bind(*receiver, *args, **kwargs)
    except TypeError as exc:
        # Shown without `self` and without annotations (strings, under postponed evaluation).
        parameters = list(signature.parameters.values())[len(receiver) :]
        shown = ", ".join(str(p.replace(annotation=inspect.Parameter.empty)) for p in parameters)
        return f"{exc}; {method} takes ({shown})"
    return ""
