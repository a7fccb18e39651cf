"""Shrinking a generated scenario that agentsim and the real SDK disagree on, in batches.

`agentsim generate` shrinks with Hypothesis, one run per candidate; a play of the real side is
a vitest run in workerd that takes most of a minute before its first plan, so one play per
candidate would take hours. Here every candidate of a round is played in one vitest run
instead, and the rounds are bounded (`max_rounds`: the shrink costs at most that many plays
of the real side, and the best scenario so far is written when they are used up).

A candidate is the scenario with one thing less (`reductions`), biggest first: an agent (with
its steps, clients and the faults aimed at it), the `faults:` profile, a step, a schedule,
fiber or run (with the calls that name it), an option, an entry of a child's script, a count
brought down to one. A candidate the loader or the plan compiler refuses is dropped before
any play. A round keeps the first candidate that still differs the same way (`signature`);
the other reductions that also kept it are tried together at the head of the next round.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from scenarios.generate.document import Generated
from scenarios.generate.parts import TimedStep

__all__ = ["Reduction", "apply_all", "reductions", "signature"]

LIST_KEYS = ("schedules", "fibers", "runs")
"""The lists of an agent's description whose entries a reduction drops one at a time."""
NAME_KEYS = ("name", "run_id")
"""The key that names an entry of those lists (what calls and evictions refer to)."""
KEPT_KEYS = frozenset(
    ("workload", "name", "run_id", "every", "cron", "after", "at", "schedules", "fibers", "runs")
)
"""Keys a reduction never drops (an entry's kind, its name, the lists themselves)."""


@dataclass(frozen=True)
class Reduction:
    """One thing less: `label` says what, `apply` makes it (None: it no longer applies)."""

    label: str
    apply: Callable[[Generated], Generated | None]


def _names(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _names(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _names(item)


def _mentions(step: TimedStep, words: set[str]) -> bool:
    """Whether the step names one of `words` (an agent alias, a `parent/r1` child, a client,
    a schedule or fiber name, a run id), as an argument or a value."""
    return any(t in words or t.split("/")[0] in words for t in _names(dict(step.args)))


def _keep_steps(generated: Generated, keep: Callable[[int, TimedStep], bool]) -> Generated:
    """`generated` with only the steps `keep(number, step)` keeps (numbers from 1); the fault
    numbers follow the steps that stay."""
    kept: list[TimedStep] = []
    faults: list[int] = []
    for number, step in enumerate(generated.steps, start=1):
        if keep(number, step):
            kept.append(step)
            if number in generated.fault_numbers:
                faults.append(len(kept))
    return replace(generated, steps=tuple(kept), fault_numbers=frozenset(faults))


def _without_agent(alias: str) -> Callable[[Generated], Generated | None]:
    def apply(generated: Generated) -> Generated | None:
        if alias not in generated.agents or len(generated.agents) == 1:
            return None
        agents = {a: spec for a, spec in generated.agents.items() if a != alias}
        clients = {c: a for c, a in generated.clients.items() if a != alias}
        gone = {alias, *(c for c in generated.clients if c not in clients)}
        kinds = {spec.get("workload") for spec in agents.values()}
        trimmed = _keep_steps(generated, lambda _n, step: not _mentions(step, gone))
        areas = tuple(area for area in generated.areas if area in kinds)
        return replace(trimmed, agents=agents, clients=clients, areas=areas)

    return apply


def _step_text(step: TimedStep) -> str:
    return f"{step.at_ms} {step.action} {sorted(dict(step.args).items())!r}"


def _without_step(shown: str) -> Callable[[Generated], Generated | None]:
    def apply(generated: Generated) -> Generated | None:
        if not any(_step_text(step) == shown for step in generated.steps):
            return None
        first = next(n for n, s in enumerate(generated.steps, 1) if _step_text(s) == shown)
        return _keep_steps(generated, lambda number, _step: number != first)

    return apply


def _edit_agent(
    alias: str, edit: Callable[[dict[str, Any]], bool]
) -> Callable[[Generated], Generated | None]:
    """A reduction that edits a copy of `alias`'s description (`edit` says whether it could)."""

    def apply(generated: Generated) -> Generated | None:
        if alias not in generated.agents:
            return None
        spec = _copy(generated.agents[alias])
        if not edit(spec):
            return None
        return replace(generated, agents={**generated.agents, alias: spec})

    return apply


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v) for v in value]
    return value


def _without_entry(alias: str, key: str, name: str) -> Callable[[Generated], Generated | None]:
    """Drop the entry `name` of `alias`'s list `key`, and the calls and faults that name it."""
    edit_agent = _edit_agent(alias, lambda spec: _drop_entry(spec, key, name))

    def apply(generated: Generated) -> Generated | None:
        edited = edit_agent(generated)
        if edited is None:
            return None

        def keep(_number: int, step: TimedStep) -> bool:
            args = dict(step.args)
            if args.get("agent") == f"{alias}/{name}":
                return False  # an eviction of the dropped run's child
            return not (args.get("agent") == alias and name in args.get("args", []))

        return _keep_steps(edited, keep)

    return apply


def _drop_entry(spec: dict[str, Any], key: str, name: str) -> bool:
    entries = spec.get(key) or []
    kept = [e for e in entries if not any(e.get(k) == name for k in NAME_KEYS)]
    if len(kept) == len(entries) or not kept:
        return False
    spec[key] = kept
    return True


def _at_path(spec: dict[str, Any], path: tuple[Any, ...]) -> Any:
    value: Any = spec
    for part in path:
        value = value[part]
    return value


def _drop_key(path: tuple[Any, ...], key: str) -> Callable[[dict[str, Any]], bool]:
    def edit(spec: dict[str, Any]) -> bool:
        try:
            holder = _at_path(spec, path)
        except (KeyError, IndexError, TypeError):
            return False
        if not isinstance(holder, dict) or key not in holder:
            return False
        del holder[key]
        return True

    return edit


def _set_value(path: tuple[Any, ...], key: Any, value: Any) -> Callable[[dict[str, Any]], bool]:
    def edit(spec: dict[str, Any]) -> bool:
        try:
            holder = _at_path(spec, path)
            if holder[key] == value:
                return False
        except (KeyError, IndexError, TypeError):
            return False
        holder[key] = value
        return True

    return edit


def _drop_item(path: tuple[Any, ...], index: int) -> Callable[[dict[str, Any]], bool]:
    def edit(spec: dict[str, Any]) -> bool:
        try:
            items = _at_path(spec, path)
        except (KeyError, IndexError, TypeError):
            return False
        if not isinstance(items, list) or index >= len(items):
            return False
        del items[index]
        return True

    return edit


def _option_edits(
    value: Any, path: tuple[Any, ...]
) -> Iterator[tuple[str, Callable[[dict[str, Any]], bool]]]:
    """Edits of the options inside an agent's description: a key dropped, a count set to 1, an
    entry of a child's script dropped (depth first, in the description's order)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = "/".join(str(p) for p in (*path, key))
            if key not in KEPT_KEYS:
                yield f"drop {where}", _drop_key(path, key)
            if isinstance(item, int) and not isinstance(item, bool) and item > 1:
                yield f"{where} = 1", _set_value(path, key, 1)
            yield from _option_edits(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if path and path[-1] == "steps":
                yield f"drop {'/'.join(map(str, path))}[{index}]", _drop_item(path, index)
            yield from _option_edits(item, (*path, index))


def reductions(generated: Generated) -> list[Reduction]:
    """Every one-thing-less candidate of `generated`, biggest first."""
    out: list[Reduction] = []
    for alias in generated.agents:
        out.append(Reduction(f"drop agent {alias}", _without_agent(alias)))
    if generated.faults != "none":
        out.append(Reduction("faults: none", lambda g: replace(g, faults="none")))
    faults = [generated.steps[n - 1] for n in sorted(generated.fault_numbers)]
    workload = [s for n, s in enumerate(generated.steps, 1) if n not in generated.fault_numbers]
    for step in [*faults, *workload]:
        shown = _step_text(step)
        out.append(Reduction(f"drop step {shown}", _without_step(shown)))
    for alias, spec in generated.agents.items():
        for key in LIST_KEYS:
            for entry in spec.get(key) or []:
                name = next((entry[k] for k in NAME_KEYS if k in entry), None)
                if name is not None and len(spec[key]) > 1:
                    label = f"drop {alias} {key} {name}"
                    out.append(Reduction(label, _without_entry(alias, key, name)))
    for alias, spec in generated.agents.items():
        for label, edit in _option_edits(spec, ()):
            out.append(Reduction(f"{alias}: {label}", _edit_agent(alias, edit)))
    return out


def apply_all(generated: Generated, chosen: list[Reduction]) -> Generated | None:
    """`generated` with every reduction of `chosen` that still applies, in order; None when
    none does."""
    current, changed = generated, False
    for reduction in chosen:
        reduced = reduction.apply(current)
        if reduced is not None:
            current, changed = reduced, True
    return current if changed else None


_RECORD = re.compile(r"^\s*(\S+) only: (\S+) (\S+)")


def signature(lines: tuple[str, ...]) -> frozenset[str]:
    """What a DIFFER verdict's first difference is about, coarsely, so that a shrunk scenario
    can be asked to differ the same way: the record types each side alone has at its first
    differing instant (`agentsim only: schedule:execute`), or the table that differs."""
    if not lines:
        return frozenset()
    first = lines[0].splitlines()
    head = first[0].strip() if first else ""
    if head.startswith("table "):
        return frozenset({head.split(":")[0].split(".", 1)[-1]})
    found = set()
    for line in first[1:]:
        match = _RECORD.match(line)
        if match:
            found.add(f"{match.group(1)} only: {match.group(3)}")
    return frozenset(found or {head})
