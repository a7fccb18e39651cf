"""Scenario text with extra steps put in: how the fuzzer writes what it runs, and its reproducer.

The fuzzer never builds a `Scenario` object by hand: it edits the base file's *text* (the
steps it drew inserted at their times, another name and seed) and loads that with
`parse_scenario`, so what it runs and what it writes down are the same file, byte for byte. A
reproducer is that text with a header comment saying how it was found and how to run it; the
base file's own comments and layout stay as they were.

Edits are line based and need the block style every library file uses (`steps:` followed by
`- ` items, top-level `name:` and `seed:` lines); a file in flow style is refused with a
`ValueError` saying so. Nothing here imports YAML: the loader does all the reading.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scenarios.language.schema import Scenario

__all__ = [
    "InsertedStep",
    "add_expectation",
    "expect_errors",
    "flow_mapping",
    "flow_scalar",
    "keep_always",
    "format_duration",
    "insert_steps",
    "remove_top_level",
    "retitle",
    "with_header",
    "with_sdk",
]

_ITEM = re.compile(r"^(?P<indent>\s*)-(\s|$)")
_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_YAML_WORDS = frozenset(
    {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf", "~"}
)
_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1))


def format_duration(ms: int) -> str:
    """90_500 -> '1m30s500ms'; 0 -> '0s' (the form `sim.units.parse_duration_ms` reads)."""
    if ms == 0:
        return "0s"
    parts = []
    for unit, size in _UNITS:
        count, ms = divmod(ms, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def flow_scalar(value: Any) -> str:
    """A YAML flow scalar that reads back as `value` (strings quoted when YAML would not)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, ensure_ascii=False)  # JSON is YAML flow style
    text = str(value)
    if _BARE.fullmatch(text) and text.lower() not in _YAML_WORDS:
        return text
    if "\\" in text and "'" not in text and text.isprintable():
        return f"'{text}'"  # a regex reads better single-quoted: backslashes stay as written
    # JSON escapes a character outside the BMP as a surrogate pair, which YAML reads as two
    # lone surrogates: such a pair is written as YAML's own 8-digit escape instead.
    return _SURROGATE_PAIR.sub(_astral_escape, json.dumps(text))


_SURROGATE_PAIR = re.compile(r"\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})")


def _astral_escape(match: re.Match[str]) -> str:
    high, low = int(match.group(1), 16), int(match.group(2), 16)
    return f"\\U{0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00):08X}"


def flow_mapping(args: Mapping[str, Any]) -> str:
    """`args` as a one-line YAML flow mapping that reads back as `args`."""
    return "{" + ", ".join(f"{key}: {flow_scalar(value)}" for key, value in args.items()) + "}"


@dataclass(frozen=True)
class InsertedStep:
    """One step to put into a scenario: before base step `before` (0-based; the number of
    steps means after the last one), run at `at_ms` (None: with no `at:`, right when the step
    before it ends, which leaves the base run's timeline as it was), doing `action` with
    `args`."""

    before: int
    at_ms: int | None
    action: str
    args: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""
    """A comment line put above the step."""

    def describe(self) -> str:
        shown = flow_mapping(self.args) if self.args else "{}"
        when = (
            f"before step {self.before + 1}"
            if self.at_ms is None
            else f"at {format_duration(self.at_ms)}"
        )
        return f"{when}: {self.action} {shown}"

    def lines(self, indent: str) -> list[str]:
        out = [f"{indent}# {self.note}"] if self.note else []
        if self.at_ms is None:
            out.append(f"{indent}- {self.action}: {flow_mapping(self.args)}")
            return out
        out.append(f"{indent}- at: {format_duration(self.at_ms)}")
        out.append(f"{indent}  {self.action}: {flow_mapping(self.args)}")
        return out


def _item_indent(lines: Sequence[str], line: int, what: str) -> str:
    match = _ITEM.match(lines[line - 1]) if 0 < line <= len(lines) else None
    if match is None:
        raise ValueError(
            f"line {line}: {what} is not a block list item ('- ...'); the fuzzer edits files "
            f"written in block style, like those in scenarios/library"
        )
    return match.group("indent")


def _before_item(lines: Sequence[str], line: int, indent: str) -> int:
    """The index to insert at so that a new item lands before the item on `line` (1-based) and
    before the comment lines directly above it, which belong to it."""
    index = line - 1
    while index > 0:
        above = lines[index - 1]
        if above.strip().startswith("#") and above[: len(above) - len(above.lstrip())] == indent:
            index -= 1
        else:
            break
    return index


def _after_item(lines: Sequence[str], line: int, indent: str) -> int:
    """The index just after the last content line of the item starting on `line` (1-based)."""
    end = line
    for index in range(line, len(lines)):
        text = lines[index]
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        own = len(text) - len(text.lstrip())
        if own > len(indent):
            end = index + 1
            continue
        break
    return end


def insert_steps(text: str, scenario: Scenario, steps: Sequence[InsertedStep]) -> str:
    """`text` (the file `scenario` was read from) with `steps` inserted before the base steps
    they name, in the order given."""
    lines = text.split("\n")
    base = scenario.steps
    if not base:
        raise ValueError("the scenario has no steps to insert between")
    indent = _item_indent(lines, base[0].line, base[0].label)
    positions: dict[int, list[InsertedStep]] = {}
    for step in steps:
        if not 0 <= step.before <= len(base):
            raise ValueError(f"no base step {step.before} to insert before (0..{len(base)})")
        positions.setdefault(step.before, []).append(step)
    # From the bottom up, so earlier line numbers stay valid.
    for before in sorted(positions, reverse=True):
        new = [line for step in positions[before] for line in step.lines(indent)]
        if before == len(base):
            last = base[-1]
            index = _after_item(lines, last.line, _item_indent(lines, last.line, last.label))
        else:
            target = base[before]
            index = _before_item(lines, target.line, _item_indent(lines, target.line, target.label))
        lines[index:index] = new
    return "\n".join(lines)


def _replace_top(lines: list[str], key: str, value: str) -> None:
    pattern = re.compile(rf"^{key}:(\s|$)")
    for index, line in enumerate(lines):
        if pattern.match(line):
            lines[index] = f"{key}: {value}"
            return
    raise ValueError(
        f"no top-level '{key}:' line; the fuzzer edits files written in block style, like "
        f"those in scenarios/library"
    )


def with_sdk(text: str, sdk: str) -> str:
    """`text` with its top-level `sdk:` set to `sdk` (the line replaced, or put right after
    the `seed:` line): a run on another release than the file's, written so that it replays
    on that release."""
    lines = text.split("\n")
    try:
        _replace_top(lines, "sdk", flow_scalar(sdk))
    except ValueError:
        seed = next((i for i, line in enumerate(lines) if re.match(r"^seed:(\s|$)", line)), None)
        if seed is None:
            raise ValueError(
                "no top-level 'seed:' line; the hunts edit files written in block style, like "
                "those in scenarios/library"
            ) from None
        lines.insert(seed + 1, f"sdk: {flow_scalar(sdk)}")
    return "\n".join(lines)


def retitle(text: str, name: str, seed: int) -> str:
    """`text` with its top-level `name:` and `seed:` values replaced."""
    lines = text.split("\n")
    _replace_top(lines, "name", flow_scalar(name))
    _replace_top(lines, "seed", str(seed))
    return "\n".join(lines)


def add_expectation(text: str, scenario: Scenario, item: str) -> str:
    """`text` with one more expectation, `item` a one-line mapping (`invariants: [a, b]`),
    after the last one (or in a new `expect:` list)."""
    lines = text.split("\n")
    if scenario.expect:
        last = scenario.expect[-1]
        indent = _item_indent(lines, last.line, last.label)
        index = _after_item(lines, last.line, indent)
        lines[index:index] = [f"{indent}- {item}"]
        return "\n".join(lines)
    empty = re.compile(r"^expect:\s*(\[\s*\])?\s*(#.*)?$")
    for index, line in enumerate(lines):
        if empty.match(line):
            lines[index : index + 1] = ["expect:", f"  - {item}"]
            return "\n".join(lines)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join([*lines, "expect:", f"  - {item}", ""])


_ACTION = re.compile(r"^(?P<lead>\s*(-\s+)?)(call|request|connect|reconnect):(?P<rest>.*)$")


def expect_errors(
    text: str, scenario: Scenario, errors: Mapping[int, str], key_name: str = "expect_error"
) -> str:
    """`text` with `expect_error: CLASS` (or `key_name`: `may_fail_with`) added to the call or
    request step on each line of `errors` (a step's line: CLASS), unless that step already says
    what it expects (or, for `expect_error`, checks what it returns); a connect or reconnect
    step gets `may_fail_with` either way (a connection expects nothing else). A value in flow style
    (`{agent: a, method: m}`) gets it before its closing brace, a block mapping as one more key
    line at the indentation of its keys."""
    lines = text.split("\n")
    by_line = {step.line: step for step in scenario.steps}
    # From the bottom up, so earlier line numbers stay valid.
    for line in sorted(errors, reverse=True):
        step = by_line.get(line)
        if step is None or step.kind not in ("call", "request", "connect", "reconnect"):
            continue
        # A connection says only what may refuse it.
        key_name_here = "may_fail_with" if step.kind in ("connect", "reconnect") else key_name
        if getattr(step, "expect_error", False) is not False or getattr(
            step, "may_fail_with", None
        ):
            continue
        if key_name_here == "expect_error" and getattr(step, "checks_return", False):
            continue
        end = _after_item(lines, line, _item_indent(lines, line, step.label))
        found = [(i, m) for i in range(line - 1, end) if (m := _ACTION.match(lines[i]))]
        if not found:
            continue
        index, match = found[0]
        key = f"{key_name_here}: {errors[line]}"
        rest = match.group("rest")
        value = rest.split(" #")[0].rstrip()  # a comment after the value stays after it
        if value.strip().startswith("{") and value.endswith("}"):
            close = match.start("rest") + len(value) - 1
            lines[index] = f"{lines[index][:close].rstrip()}, {key}{lines[index][close:]}"
        elif not value.strip():
            keys = [
                i
                for i in range(index + 1, end)
                if lines[i].strip() and not lines[i].lstrip().startswith("#")
            ]
            if keys:
                indent = lines[keys[0]][: len(lines[keys[0]]) - len(lines[keys[0]].lstrip())]
                lines.insert(keys[0], indent + key)
    return "\n".join(lines)


def keep_always(text: str, scenario: Scenario, note: str) -> str:
    """`text` with only its `always: true` expectations (what a hunt keeps: a story's other
    expectations pin counts and times any fault changes); without one, the whole `expect`
    section goes, a `# note` in its place."""
    if not any(expectation.always for expectation in scenario.expect):
        return remove_top_level(text, "expect", note)
    lines = text.split("\n")
    # From the bottom up, so earlier line numbers stay valid.
    for expectation in reversed(scenario.expect):
        if expectation.always:
            continue
        indent = _item_indent(lines, expectation.line, expectation.label)
        start = _before_item(lines, expectation.line, indent)
        end = _after_item(lines, expectation.line, indent)
        lines[start:end] = []
    return "\n".join(lines)


def remove_top_level(text: str, key: str, note: str) -> str:
    """`text` without the top-level `key:` and everything under it, a `# note` in its place
    (the text unchanged when there is no such key)."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if re.match(rf"^{key}:(\s|$)", line)), None)
    if start is None:
        return text
    end = start + 1
    while end < len(lines) and not re.match(r"^[A-Za-z_\"']", lines[end]):
        end += 1
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1  # comments and blank lines before the next key belong to it
    lines[start:end] = [f"# {note}"]
    return "\n".join(lines)


def with_header(text: str, header: Sequence[str]) -> str:
    """`text` with `# ` comment lines in front."""
    return "".join(f"# {line}".rstrip() + "\n" for line in header) + text
