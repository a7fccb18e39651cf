"""The vocabulary the scenario format is declared in: one definition per kind of value, read by
the loader and rendered as JSON Schema from the same object.

Each part of the format (a step's action, an expectation, a workload, the model section) is a
`Shape`: its keys, the `Value` each key holds, which keys are required and which exclude each
other. The loader builds a `Fields` over a `Shape` and reads every key with `fields.get(key)`,
which checks the value the way the declaration says (a `Text` with `choices`, a `Whole` in a
range, a `Duration`, ...) and raises the located `InvalidScenario`;
`scenarios.language.json_schema` walks the same declarations to write `scenario.schema.json`. What
JSON Schema cannot say (an agent alias that must exist, a method of that agent's class, a run id of
that workload) is checked by the parsers in code; the schema is never stricter than the loader (a
test checks that every document the loader accepts validates).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scenarios.language.fields import DURATION_HINT, MAX_DURATION_MS, Fields, show
from sim.units import parse_duration_ms

__all__ = [
    "DURATION_PATTERN",
    "NO_DEFAULT",
    "Anything",
    "Duration",
    "Flag",
    "Map",
    "Named",
    "Number",
    "OneOf",
    "Ref",
    "Seq",
    "Shape",
    "Text",
    "Value",
    "Whole",
    "definition",
]


class _NoDefault:
    def __repr__(self) -> str:
        return "<no default>"


NO_DEFAULT: Any = _NoDefault()
"""A key with no default: absent means None (or an error, when the key is required)."""

DURATION_PATTERN = (
    r"^\s*(?=\d)(?:[\d ]+|(?:\d[\d ]*d *)?(?:\d[\d ]*h *)?(?:\d[\d ]*m *)?"
    r"(?:\d[\d ]*s *)?(?:\d[\d ]*ms *)?)\s*$"
)
"""What a duration string looks like to an editor (the loader also caps it at 366 days)."""

_DEFINED: dict[str, Value] = {}


def definition(name: str) -> Value:
    """The value declared with `Named(name, ...)`."""
    return _DEFINED[name]


@dataclass(frozen=True, eq=False, kw_only=True)
class Value:
    """One kind of value: how JSON Schema describes it and how the loader reads it."""

    doc: str = ""
    """One sentence for editors (the schema's `description`)."""
    default: Any = NO_DEFAULT

    def schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        out = self._schema(defs)
        if self.doc:
            out["description"] = self.doc
        if self.default is not NO_DEFAULT:
            out["default"] = self.default
        return out

    def _schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {}

    def read(self, fields: Fields, key: str) -> Any:
        """The checked value of `key` (its default, or None, when absent)."""
        return fields.raw(key, self._absent())

    def accepts(self, value: Any) -> bool | None:
        """Whether `value` is one of these (None: only the parser of its key can tell)."""
        return None

    def noun(self) -> str:
        """What one of these is, for errors about a list item."""
        return "a valid item"

    def _absent(self) -> Any:
        return None if self.default is NO_DEFAULT else self.default


@dataclass(frozen=True, eq=False, kw_only=True)
class Anything(Value):
    """Any YAML value (arguments, bodies, rows: plain data passed through)."""

    def accepts(self, value: Any) -> bool | None:
        return True


@dataclass(frozen=True, eq=False, kw_only=True)
class Text(Value):
    choices: Sequence[str] | None = None
    pattern: str | None = None
    """A regular expression the whole string must match."""
    hint: str = "expected a non-empty string"
    empty: bool = False
    """Whether '' is allowed."""
    null: bool = False
    """Whether null is allowed (an expectation that something is absent)."""

    def _schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"type": ["string", "null"] if self.null else "string"}
        if self.choices is not None:
            out["enum"] = list(self.choices)
        if not self.empty and self.choices is None:
            out["minLength"] = 1
        if self.pattern is not None:
            out["pattern"] = f"^(?:{self.pattern})$"
        return out

    def read(self, fields: Fields, key: str) -> Any:
        if key not in fields:
            return self._absent()
        if self.null and fields.raw(key) is None:
            return None
        if self.empty:
            value = fields.raw(key)
            if not isinstance(value, str):
                fields.bad(key, "expected a string, or null" if self.null else "expected a string")
            return value
        value = fields.text(key, choices=self.choices, allowed=self.hint)
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            fields.bad(key, self.hint)
        return value

    def accepts(self, value: Any) -> bool | None:
        if value is None:
            return self.null
        if not isinstance(value, str) or (not value and not self.empty):
            return False
        if self.choices is not None and value not in self.choices:
            return False
        return self.pattern is None or re.fullmatch(self.pattern, value) is not None

    def noun(self) -> str:
        if self.choices is not None:
            return f"one of {list(self.choices)}"
        if self.pattern is not None:
            return self.hint.removeprefix("expected ")
        return "a string" if self.empty else "a non-empty string"


@dataclass(frozen=True, eq=False, kw_only=True)
class Whole(Value):
    minimum: int = 0
    maximum: int = 2**63 - 1

    def _schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"type": "integer", "minimum": self.minimum, "maximum": self.maximum}

    def read(self, fields: Fields, key: str) -> Any:
        return fields.whole(key, self._absent(), minimum=self.minimum, maximum=self.maximum)

    def accepts(self, value: Any) -> bool | None:
        whole = isinstance(value, int) and not isinstance(value, bool)
        return whole and self.minimum <= value <= self.maximum

    def noun(self) -> str:
        return f"a whole number from {self.minimum} to {self.maximum}"


@dataclass(frozen=True, eq=False, kw_only=True)
class Number(Value):
    minimum: float = 0.0
    maximum: float = 1.0
    hint: str = "expected a number from 0 to 1"

    def _schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"type": "number", "minimum": self.minimum, "maximum": self.maximum}

    def read(self, fields: Fields, key: str) -> Any:
        if key not in fields:
            return self._absent()
        value = fields.raw(key)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not self.minimum <= value <= self.maximum
        ):
            fields.bad(key, self.hint)
        return value


@dataclass(frozen=True, eq=False, kw_only=True)
class Flag(Value):
    def _schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"type": "boolean"}

    def read(self, fields: Fields, key: str) -> Any:
        if key not in fields:
            return self._absent()
        return fields.flag(key)


@dataclass(frozen=True, eq=False, kw_only=True)
class Duration(Value):
    """'90s', '14m59s', '1h30m', '250ms', or whole milliseconds; read as integer ms."""

    def _schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return Ref("duration").schema(defs)

    def read(self, fields: Fields, key: str) -> Any:
        if key not in fields:
            default = self._absent()
            return default if default is None else parse_duration_ms(default)
        return fields.duration(key)


@dataclass(frozen=True, eq=False)
class Seq(Value):
    item: Value = field(default_factory=Anything)
    min_items: int = 0
    max_items: int | None = None

    def _schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "array", "items": self.item.schema(defs)}
        if self.min_items:
            out["minItems"] = self.min_items
        if self.max_items is not None:
            out["maxItems"] = self.max_items
        return out

    def read(self, fields: Fields, key: str) -> Any:
        value = fields.sequence(key, self._absent())
        if value is None:
            return value
        for number, item in enumerate(value, start=1):
            if self.item.accepts(item) is False:
                problem = f"{key}: {show(value)}"
                fields.fail(key, problem, f"item {number} is not {self.item.noun()}")
        if len(value) < self.min_items or (
            self.max_items is not None and len(value) > self.max_items
        ):
            if self.max_items == self.min_items:
                fields.bad(key, f"expected a list of exactly {self.min_items} items")
            if self.max_items is not None:
                fields.bad(key, f"expected a list of {self.min_items} to {self.max_items} items")
            noun = "item" if self.min_items == 1 else "items"
            fields.bad(key, f"expected a list of at least {self.min_items} {noun}")
        return value


@dataclass(frozen=True, eq=False)
class Map(Value):
    """A mapping with free string keys (`kwargs`, `options`, `agents`)."""

    values: Value = field(default_factory=Anything)
    key_pattern: str | None = None
    min_keys: int = 0

    def _schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "object", "additionalProperties": self.values.schema(defs)}
        if self.key_pattern is not None:
            out["propertyNames"] = {"pattern": f"^(?:{self.key_pattern})$"}
        if self.min_keys:
            out["minProperties"] = self.min_keys
        return out

    def read(self, fields: Fields, key: str) -> Any:
        return fields.mapping(key, self._absent())


@dataclass(frozen=True, eq=False)
class Shape(Value):
    """A mapping with known keys: what `Fields` checks (unknown, missing) and reads by key."""

    fields: Mapping[str, Value]
    required: tuple[str, ...] = ()
    exclusive: tuple[tuple[str, str], ...] = ()
    """Pairs of keys that may not appear together."""

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.fields)

    def _schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            # A shape nothing is required of may be written empty (`deploy:`), which YAML reads
            # as null; the loader reads that as {}.
            "type": "object" if self.required else ["object", "null"],
            "properties": {key: value.schema(defs) for key, value in self.fields.items()},
            "additionalProperties": False,
        }
        if self.required:
            out["required"] = list(self.required)
        if self.exclusive:
            out["allOf"] = [{"not": {"required": list(pair)}} for pair in self.exclusive]
        return out

    def read(self, fields: Fields, key: str) -> Any:
        return fields.raw(key, self._absent())


@dataclass(frozen=True, eq=False)
class OneOf(Value):
    """One of several values (a profile name or a mapping of settings, ...); the parser that
    owns the key decides which one it got."""

    options: tuple[Value, ...]

    def _schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"anyOf": [option.schema(defs) for option in self.options]}


@dataclass(frozen=True, eq=False)
class Ref(Value):
    """A value declared once with `Named` (shared, or recursive like a model reply)."""

    name: str

    def _schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        if self.name not in defs:
            defs[self.name] = {}  # placeholder first: a recursive definition refers to itself
            defs[self.name] = definition(self.name).schema(defs)
        return {"$ref": f"#/$defs/{self.name}"}

    def read(self, fields: Fields, key: str) -> Any:
        return self.resolve().read(fields, key)

    def resolve(self) -> Any:
        """The declared value (a `Shape`, for most names)."""
        return definition(self.name)


def Named(name: str, value: Value) -> Ref:  # noqa: N802 - reads as a declaration
    """Declare `value` under `name` (a `$defs` entry of the schema); returns a `Ref` to it."""
    _DEFINED[name] = value
    return Ref(name)


@dataclass(frozen=True, eq=False, kw_only=True)
class _DurationValue(Value):
    def _schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {
            "anyOf": [
                {"type": "integer", "minimum": 0, "maximum": MAX_DURATION_MS},
                {"type": "string", "pattern": DURATION_PATTERN},
            ]
        }


Named("duration", _DurationValue(doc=DURATION_HINT.removeprefix("expected ")))
