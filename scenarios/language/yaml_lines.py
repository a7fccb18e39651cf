"""YAML text to plain data that remembers its lines: the only YAML parsing of the project.

`read_document` turns a scenario file's text into `LineDict` / `LineList` (see
`scenarios.language.fields`), refusing duplicate keys (which plain PyYAML lets the last one win),
unhashable keys, several documents and nesting deeper than `MAX_DEPTH`. Any problem is one
`InvalidScenario` with the line.

Two readers give the same data. The fast one reads the event stream of PyYAML's C parser
(libyaml, `CSafeLoader`) and builds the containers itself, with plain scalars resolved once per
distinct spelling: a 5 MB file reads in about a second, where composing PyYAML nodes first
costs ten times that in time and memory. It handles what scenario files use (mappings,
sequences, plain and quoted scalars, anchors and aliases, the standard scalar tags). Anything
else (a merge key `<<`, `!!set`, a tag of one's own) and any machine without libyaml take the
second reader: PyYAML's pure-Python `SafeLoader`, taught the same line-keeping constructors.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.nodes import ScalarNode

from scenarios.language.errors import InvalidScenario
from scenarios.language.fields import LineDict, LineList, show

__all__ = ["MAX_DEPTH", "MAX_VALUES", "SYNTAX_HINT", "check_characters", "read_document"]

MAX_DEPTH = 64
"""Mappings and lists nested deeper than this are refused (a scenario needs a dozen)."""
MAX_VALUES = 5_000_000
"""The most values a document may stand for once its aliases are expanded: nine aliases of
nine aliases of ... of a list is a few lines that would print as billions of items."""

SYNTAX_HINT = (
    "check the indentation (spaces only, the same amount for keys of one mapping) "
    "and quote values that contain ': ' or start with a special character"
)
_NOT_YAML = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""What YAML refuses to read anywhere in a file (its printable set, inverted)."""

_SECOND_OPINION_CHARS = 256 * 1024
"""A file with a syntax error up to this size is read again by PyYAML for its message."""
_STR = "tag:yaml.org,2002:str"
_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}"
    for name in ("str", "int", "float", "bool", "null", "timestamp", "binary")
)
_MAP_TAGS = frozenset({None, "!", "tag:yaml.org,2002:map"})
_SEQ_TAGS = frozenset({None, "!", "tag:yaml.org,2002:seq"})


class _Unusual(Exception):
    """Something the fast reader leaves to the pure-Python one."""


def check_characters(text: str, path: str) -> None:
    """A character YAML cannot hold (NUL, BEL, ESC, a lone surrogate...) is an error at its
    line and column, named, before any parser sees it."""
    found = _NOT_YAML.search(text)
    if found is None:
        return
    offset = found.start()
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    char = found.group(0)
    name = unicodedata.name(char, "") or {0: "NUL", 7: "BEL", 27: "ESC", 127: "DEL"}.get(
        ord(char), "a control character"
    )
    raise InvalidScenario(
        path,
        line,
        "",
        f"character U+{ord(char):04X} ({name}) at column {column} is not allowed in YAML",
        'remove it; in a double-quoted string it can be written as an escape, e.g. "\\x07"',
    )


# -- the fast reader ----------------------------------------------------------------------------
class _Builder:
    """Builds the document from libyaml's events."""

    def __init__(self) -> None:
        self.resolver = yaml.resolver.Resolver()
        self.constructor = yaml.constructor.SafeConstructor()
        self.plain: dict[str, Any] = {}
        """Plain scalars already resolved, by spelling (`call`, `30s`, `true`, `5`)."""
        self.anchors: dict[str, tuple[Any, int]] = {}

    def scalar(self, event: ScalarEvent) -> Any:
        value, tag = event.value, event.tag
        if tag is None or tag == "!":
            if not event.implicit[0]:
                return value
            known = self.plain.get(value, self)
            if known is not self:
                return known
            tag = self.resolver.resolve(ScalarNode, value, event.implicit)
            result = value if tag == _STR else self.construct(tag, event)
            self.plain[value] = result
            return result
        if tag == _STR:
            return value
        return self.construct(tag, event)

    def construct(self, tag: str, event: ScalarEvent) -> Any:
        if tag not in _SCALAR_TAGS:
            raise _Unusual(tag)  # a merge key `<<`, `=`, a tag of one's own
        # libyaml's events carry yaml._yaml.Mark, which the constructors read as they read
        # yaml.error.Mark (name, line, column); the stubs name only the latter.
        start: Any = event.start_mark
        end: Any = event.end_mark
        node = ScalarNode(tag, event.value, start, end, event.style)
        try:
            return self.constructor.yaml_constructors[tag](self.constructor, node)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, OverflowError) as exc:
            raise ConstructorError(None, None, f"{show(event.value)}: {exc}", start) from None

    def build(self, next_event: Any) -> Any:
        """The one document of the stream (None for an empty one); `next_event()` gives the
        parser's events in order."""
        event = next_event()
        if type(event) is not StreamStartEvent:
            raise _Unusual(event)
        event = next_event()
        if type(event) is StreamEndEvent:
            return None
        if type(event) is not DocumentStartEvent:
            raise _Unusual(event)
        document = self.node(next_event, next_event())
        if type(next_event()) is not DocumentEndEvent:
            raise _Unusual("document end")
        event = next_event()
        if type(event) is not StreamEndEvent:
            raise yaml.composer.ComposerError(
                "expected a single document in the stream",
                None,
                "but found another document",
                event.start_mark,
            )
        return document

    def node(self, next_event: Any, event: Any) -> Any:
        """The value that starts with `event`, its containers built without recursion."""
        # Each open container: [container, its line, pending key (or _NO_KEY), the key's line].
        stack: list[list[Any]] = []
        scalar, add = self.scalar, self.add
        while True:
            kind = type(event)
            if kind is ScalarEvent:
                value, line = scalar(event), event.start_mark.line + 1
                if event.anchor is not None:
                    self.anchors[event.anchor] = (value, line)
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                mapping = kind is MappingStartEvent
                if event.tag not in (_MAP_TAGS if mapping else _SEQ_TAGS):
                    raise _Unusual(event.tag)
                line = event.start_mark.line + 1
                value = LineDict(line) if mapping else LineList(line)
                if event.anchor is not None:
                    self.anchors[event.anchor] = (value, line)
                if len(stack) >= MAX_DEPTH:
                    raise ConstructorError(
                        None,
                        None,
                        f"nested deeper than {MAX_DEPTH} levels of mappings and lists",
                        event.start_mark,
                    )
                stack.append([value, line, _NO_KEY, 0])
                event = next_event()
                continue
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                value, line, _, _ = stack.pop()
            elif kind is AliasEvent:
                if event.anchor not in self.anchors:
                    raise yaml.composer.ComposerError(
                        None, None, f"found undefined alias {event.anchor!r}", event.start_mark
                    )
                value, line = self.anchors[event.anchor]
                if any(frame[0] is value for frame in stack):
                    raise ConstructorError(
                        None, None, "found unconstructable recursive node", event.start_mark
                    )
            else:
                raise _Unusual(event)
            if not stack:
                return value
            frame = stack[-1]
            container = frame[0]
            if type(container) is LineList:
                container.append(value)
                container.lines.append(line)
            elif frame[2] is _NO_KEY:
                add(frame, value, line, event)
            else:
                container[frame[2]] = value
                container.lines[frame[2]] = frame[3]
                frame[2] = _NO_KEY
            event = next_event()

    def add(self, frame: list[Any], key: Any, line: int, event: Any) -> None:
        """`key` read in the mapping of `frame`: checked, and kept until its value comes."""
        try:
            hash(key)
        except TypeError:
            kind = "list" if isinstance(key, list) else "mapping"
            raise ConstructorError(
                None, None, f"a mapping key cannot be a {kind}", event.start_mark
            ) from None
        if key in frame[0]:
            raise ConstructorError(
                None,
                None,
                f"duplicate key {show(key)}; each key may appear once in a mapping",
                event.start_mark,
            )
        frame[2], frame[3] = key, line


_NO_KEY: Any = object()


def _read_fast(text: str) -> Any:
    if not getattr(yaml, "__with_libyaml__", False):
        raise _Unusual("no libyaml")
    parser = yaml.CSafeLoader(text)
    try:
        return _Builder().build(parser.get_event)
    finally:
        parser.dispose()


# -- the pure-Python reader ---------------------------------------------------------------------
class _LineLoader(yaml.SafeLoader):
    """SafeLoader whose mappings and sequences remember the line of each key and item."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        # PyYAML's scalar constructors raise bare ValueErrors (a date like 2024-02-30) that
        # carry no line; give them the node's.
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, OverflowError) as exc:
            raise ConstructorError(
                None, None, f"{show(node.value)}: {exc}", node.start_mark
            ) from None


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> LineDict:
    own_keys = {id(key_node) for key_node, _ in node.value}
    loader.flatten_mapping(node)  # resolves `<<` merge keys; merged entries come first
    data = LineDict(node.start_mark.line + 1)
    own_seen: set[Any] = set()
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise ConstructorError(
                None,
                None,
                f"a mapping key cannot be a {'list' if isinstance(key, list) else 'mapping'}",
                key_node.start_mark,
            ) from None
        if id(key_node) in own_keys:
            if key in own_seen:
                raise ConstructorError(
                    None,
                    None,
                    f"duplicate key {show(key)}; each key may appear once in a mapping",
                    key_node.start_mark,
                )
            own_seen.add(key)
        data[key] = loader.construct_object(value_node, deep=True)
        data.lines[key] = key_node.start_mark.line + 1
    return data


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> LineList:
    data = LineList(node.start_mark.line + 1)
    for item_node in node.value:
        data.append(loader.construct_object(item_node, deep=True))
        data.lines.append(item_node.start_mark.line + 1)
    return data


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)
_LineLoader.add_constructor("tag:yaml.org,2002:seq", _construct_sequence)


def _read_slow(text: str) -> Any:
    return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass


# -- both ---------------------------------------------------------------------------------------
def read_document(text: str, path: str) -> Any:
    """The YAML document in `text`, with line numbers; `InvalidScenario` if it is not YAML."""
    check_characters(text, path)
    document = _read(text, path)
    values = _expanded_size(document)
    if values > MAX_VALUES:
        raise InvalidScenario(
            path,
            None,
            "not valid YAML",
            f"its aliases expand to more than {MAX_VALUES:,} values",
            "write the values out, or alias fewer of them",
        )
    return document


def _expanded_size(document: Any) -> int:
    """How many values `document` stands for with every alias expanded (shared containers
    are counted once per use, each counted in one pass)."""
    sizes: dict[int, int] = {}

    def size(value: Any) -> int:
        if not isinstance(value, dict | list):
            return 1
        known = sizes.get(id(value))
        if known is not None:
            return known
        items = value.values() if isinstance(value, dict) else value
        total = 1 + len(value) + sum(size(item) for item in items if isinstance(item, dict | list))
        sizes[id(value)] = total
        return total

    return size(document)


def _read(text: str, path: str) -> Any:
    try:
        try:
            return _read_fast(text)
        except _Unusual:
            return _read_slow(text)
        except (yaml.scanner.ScannerError, yaml.parser.ParserError):
            if len(text) > _SECOND_OPINION_CHARS:
                raise
            # libyaml's syntax errors say less than PyYAML's own ("expected <block end>, but
            # found '-'"): a small broken file is read again for the better sentence.
            return _read_slow(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = " ".join(str(part) for part in (exc.context, exc.problem) if part)
        syntax = not isinstance(exc, ConstructorError)
        raise InvalidScenario(
            path, line, "not valid YAML", problem or "unreadable", SYNTAX_HINT if syntax else ""
        ) from None
    except RecursionError:
        raise InvalidScenario(path, None, "not valid YAML", "nested too deeply") from None
    except Exception as exc:  # PyYAML also raises plain errors of its own
        raise InvalidScenario(
            path, None, "not valid YAML", f"{type(exc).__name__}: {exc}"
        ) from None
