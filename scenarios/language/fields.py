"""Typed, located access to the mappings of a parsed scenario document.

The loader turns YAML into `LineDict` / `LineList` (a dict and a list that remember the source
line of each key or item). `Fields` wraps one such mapping for one part of the scenario
(`step 3 (evict)`, `agents.counter`, ...) and hands out its values with their types checked;
any mismatch raises `InvalidScenario` naming the file, the line of the key, the part, the field,
the bad value and what is allowed. No YAML is imported here: this module only sees plain data.
"""

from __future__ import annotations

import difflib
import functools
import reprlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn, TypeVar

from scenarios.language.errors import InvalidScenario
from sim.units import DAY_MS, parse_duration_ms

T = TypeVar("T")

__all__ = [
    "DURATION_HINT",
    "MAX_DURATION_MS",
    "MISSING",
    "Fields",
    "LineDict",
    "LineList",
    "did_you_mean",
    "duration_ms",
    "gather",
    "line_of",
    "plain",
    "show",
]

MAX_DURATION_MS = 366 * DAY_MS
"""Longer than any scenario needs; a larger value is a typo (ms meant as s, say)."""

DURATION_HINT = (
    "expected a duration: whole numbers with units d, h, m, s, ms, largest first "
    "(e.g. '90s', '14m59s', '1h30m', '250ms'), or whole milliseconds, at most 366d"
)


def did_you_mean(word: Any, candidates: Iterable[Any]) -> str:
    """`did you mean 'call'? ` when a candidate is close to `word` (a misspelt key, action,
    alias or name), else ''; written before the list of what is allowed."""
    if not isinstance(word, str):
        return ""
    names = [name for name in candidates if isinstance(name, str)]
    near = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    if not near:
        near = [name for name in names if name.lower() == word.lower()]
    return f"did you mean {near[0]!r}? " if near else ""


def gather(problems: list[InvalidScenario] | None, read: Callable[..., T], *args: Any) -> T | None:
    """`read(*args)`; with a `problems` list, an `InvalidScenario` it raises is added there
    (every error it stands for) and None returned, so the next part is read too."""
    if problems is None:
        return read(*args)
    try:
        return read(*args)
    except InvalidScenario as error:
        problems.extend(error.errors)
        return None


@functools.lru_cache(maxsize=4096)
def _duration_of_text(text: str) -> int:
    return parse_duration_ms(text)


def duration_ms(value: Any) -> int:
    """`parse_duration_ms`, remembering the spellings a file repeats (`1s` in every step)."""
    return _duration_of_text(value) if type(value) is str else parse_duration_ms(value)


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()
"""Default meaning 'the key is required'."""


class LineDict(dict):
    """A mapping from YAML: `line` is where it starts, `lines[key]` where each key is."""

    __slots__ = ("line", "lines")

    def __init__(self, line: int = 0) -> None:
        super().__init__()
        self.line = line
        self.lines: dict[Any, int] = {}


class LineList(list):
    """A sequence from YAML: `line` is where it starts, `lines[i]` where each item is."""

    __slots__ = ("line", "lines")

    def __init__(self, line: int = 0) -> None:
        super().__init__()
        self.line = line
        self.lines: list[int] = []


class _Shower(reprlib.Repr):
    """reprlib, taught that our dict and list subclasses are dicts and lists (it dispatches on
    the type's name, and would otherwise print the whole value before cutting it)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = 80
        self.maxother = 80
        self.maxdict = 6
        self.maxlist = 6
        self.maxlevel = 3

    def repr_LineDict(self, x: Any, level: int) -> str:  # noqa: N802 - reprlib's naming
        return self.repr_dict(x, level)

    def repr_LineList(self, x: Any, level: int) -> str:  # noqa: N802 - reprlib's naming
        return self.repr_list(x, level)


_shower = _Shower()


def show(value: Any) -> str:
    """A short, one-line, deterministic rendering of a value from the file."""
    return _shower.repr(value)


def line_of(value: Any, default: int) -> int:
    return getattr(value, "line", default) or default


def plain(value: Any) -> Any:
    """Plain dicts and lists in place of the located ones (shared nodes stay shared, so a file
    full of YAML aliases does not blow up)."""
    memo: dict[int, Any] = {}

    def convert(item: Any) -> Any:
        if not isinstance(item, dict | list):
            return item
        found = memo.get(id(item))
        if found is not None:
            return found
        if isinstance(item, dict):
            out: Any = {}
            memo[id(item)] = out
            for key, inner in item.items():
                out[key] = convert(inner)
        else:
            out = []
            memo[id(item)] = out
            out.extend(convert(inner) for inner in item)
        return out

    return convert(value)


class Fields:
    """One mapping of the document, for one part of the scenario, with its keys checked.

    Given a `shape` (a `scenarios.language.shapes.Shape`), its keys, required keys and exclusive
    pairs are the ones checked, and `get(key)` reads a key the way the shape declares it."""

    def __init__(
        self,
        path: str,
        where: str,
        value: Any,
        line: int,
        *,
        keys: Sequence[str] = (),
        required: Sequence[str] = (),
        hint: str = "",
        name: str = "",
        shape: Any = None,
        problems: list[InvalidScenario] | None = None,
    ) -> None:
        self.path = path
        self.where = where
        self.line = line_of(value, line)
        self.shape = shape
        if shape is not None:
            keys, required = shape.keys, shape.required
        if value is None and not required:
            value = LineDict(line)  # `deploy:` with nothing after it means `deploy: {}`
        if not isinstance(value, dict):
            shown = f"{name}: {show(value)}" if name else f"{show(value)} is not a mapping"
            self._fail(line, shown, f"expected a mapping with keys {list(keys)}")
        self.data: dict[Any, Any] = value
        self._lines: dict[Any, int] = getattr(value, "lines", {})
        self.problems: list[InvalidScenario] | None = problems
        """Where errors of this part's children are gathered (`gather`); None: raise the first."""
        self.broken_agents: set[str] = set()
        self.broken_clients: set[str] = set()
        """(Top level) aliases and clients whose declaration was wrong: what names them later
        is skipped rather than reported again."""
        found: list[InvalidScenario] = []
        for key in value:
            if not isinstance(key, str) or key not in keys:
                extra = hint if key in ("at", "after") and hint else ""
                found.append(
                    self._error(
                        self.line_of(key),
                        f"unknown key {show(key)}{extra}",
                        f"{'' if extra else did_you_mean(key, keys)}allowed keys: {sorted(keys)}",
                    )
                )
        for key in required:
            if key not in value:
                found.append(
                    self._error(
                        self.line, f"missing key {key!r}", f"required keys: {list(required)}"
                    )
                )
        for first, second in getattr(shape, "exclusive", ()):
            if first in value and second in value:
                found.append(
                    self._error(
                        self.line_of(second), f"both {first}: and {second}:", "give one of them"
                    )
                )
        if found:
            if problems is None:
                raise found[0] if len(found) == 1 else InvalidScenario.many(found)
            problems.extend(found)

    # -- errors -----------------------------------------------------------------------------
    def _error(self, line: int, problem: str, allowed: str = "") -> InvalidScenario:
        return InvalidScenario(self.path, line, self.where, problem, allowed)

    def _fail(self, line: int, problem: str, allowed: str = "") -> NoReturn:
        raise self._error(line, problem, allowed)

    def fail(self, key: str, problem: str, allowed: str = "") -> NoReturn:
        """An error about the value of `key`, at its line."""
        self._fail(self.line_of(key), problem, allowed)

    def bad(self, key: str, allowed: str) -> NoReturn:
        """`key: <its value>; <allowed>`: the usual shape of a field error."""
        self.fail(key, f"{key}: {show(self.data.get(key))}", allowed)

    def line_of(self, key: Any) -> int:
        return self._lines.get(key, self.line)

    # -- values -----------------------------------------------------------------------------
    def __contains__(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def get(self, key: str) -> Any:
        """The value of `key`, checked as the shape declares it (its default when absent)."""
        if self.shape is None or key not in self.shape.fields:
            raise KeyError(f"{self.where}: {key!r} is not a key of this part's shape")
        return self.shape.fields[key].read(self, key)

    def _get(self, key: str, default: Any) -> Any:
        if key not in self.data:
            if default is MISSING:
                self._fail(self.line, f"missing key {key!r}")
            return default
        return self.data[key]

    def text(
        self,
        key: str,
        default: Any = MISSING,
        *,
        choices: Sequence[str] | None = None,
        allowed: str = "expected a non-empty string",
    ) -> Any:
        value = self._get(key, default)
        if value is default and key not in self.data:
            return value
        if choices is not None and value not in choices:
            self.bad(key, f"{did_you_mean(value, choices)}allowed: {list(choices)}")
        if not isinstance(value, str) or not value:
            self.bad(key, allowed)
        return value

    def whole(
        self, key: str, default: Any = MISSING, *, minimum: int = 0, maximum: int = 2**63 - 1
    ) -> Any:
        value = self._get(key, default)
        if value is default and key not in self.data:
            return value
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            self.bad(key, f"expected a whole number from {minimum} to {maximum}")
        return value

    def flag(self, key: str, default: Any = MISSING) -> Any:
        value = self._get(key, default)
        if not isinstance(value, bool):
            self.bad(key, "expected true or false")
        return value

    def duration(self, key: str, default: Any = MISSING) -> Any:
        value = self._get(key, default)
        if value is default and key not in self.data:
            return value
        return self.duration_value(key, value)

    def duration_value(self, key: str, value: Any) -> int:
        try:
            ms = duration_ms(value)
        except ValueError:
            self.fail(key, f"{key}: {show(value)}", DURATION_HINT)
        if ms > MAX_DURATION_MS:
            self.fail(key, f"{key}: {show(value)}", DURATION_HINT)
        return ms

    def mapping(self, key: str, default: Any = MISSING) -> Any:
        value = self._get(key, default)
        if value is default and key not in self.data:
            return value
        if not isinstance(value, dict) or any(not isinstance(k, str) for k in value):
            self.bad(key, "expected a mapping with string keys")
        return value

    def sequence(self, key: str, default: Any = MISSING) -> Any:
        value = self._get(key, default)
        if value is default and key not in self.data:
            return value
        if not isinstance(value, list):
            self.bad(key, "expected a list")
        return value

    def sub(
        self,
        key: str,
        *,
        keys: Sequence[str] = (),
        required: Sequence[str] = (),
        shape: Any = None,
        where: str | None = None,
    ) -> Fields:
        """The mapping under `key` as its own `Fields` (same part of the scenario, unless
        `where` names a narrower one)."""
        return Fields(
            self.path,
            self.where if where is None else where,
            self._get(key, MISSING),
            self.line_of(key),
            keys=keys,
            required=required,
            name=key,
            shape=shape,
        )
