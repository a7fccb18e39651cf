"""Scenario files in, validated `Scenario`s out: the only module of the project that reads YAML.

Parsing keeps line numbers: a `SafeLoader` subclass builds `LineDict` / `LineList` (see
`scenarios.fields`) that remember the line of every key and item, and refuses duplicate keys,
which plain PyYAML would silently let the last one win. Validation then walks the document
top-down and raises `InvalidScenario` at the first problem, naming file, line, part, field, bad
value and what is allowed. Nothing but `InvalidScenario` leaves `load_scenario` for any input:
YAML's own errors, undecodable bytes and unimportable agent classes are all turned into one.
The format itself is declared, section by section, in `SCENARIO` and the shapes it is made of
(`scenarios.shapes`); agents and workloads are read by `scenarios.parse_agents`, the model by
`scenarios.parse_model`, steps by `scenarios.parse_steps`, expectations by
`scenarios.parse_expect`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scenarios.errors import InvalidScenario
from scenarios.fields import Fields, LineDict, LineList, show
from scenarios.parse_agents import AGENT, CLIENT, NAME, NAME_PATTERN, parse_agents, parse_clients
from scenarios.parse_expect import EXPECTATION, parse_expectations
from scenarios.parse_model import MODEL, parse_model
from scenarios.parse_steps import STEP, parse_steps
from scenarios.schema import (
    DEFAULT_LIVENESS_LIMIT_MS,
    DEFAULT_MODEL,
    MODEL_SERVICE,
    InterleaveSetting,
    Scenario,
)
from scenarios.shapes import Duration, Flag, Map, Number, OneOf, Seq, Shape, Text, Whole
from sim.faults import PROFILES, FaultProfile

__all__ = [
    "NAME_PATTERN",
    "SCENARIO",
    "TOP_LEVEL_KEYS",
    "load_scenario",
    "parse_scenario",
    "read_document",
]

FAULTS = Shape(
    {
        "deploys_per_day": Seq(
            Whole(maximum=1000), min_items=2, max_items=2, doc="[low, high] deploys a day."
        ),
        "storage_error_rate": Number(doc="Chance a statement raises a storage error."),
        "crash_rate": Number(doc="Chance the process dies before a statement."),
        "idle_eviction": Flag(doc="Whether idle incarnations are evicted."),
    },
    doc="Explicit fault settings.",
)
INTERLEAVE = Shape(
    {
        "seed": Whole(doc="Seeds the order each reordered group runs in."),
        "points": Seq(
            Whole(minimum=1),
            doc="The same-instant groups (numbered from 1 in the order the run reaches them) "
            "run out of FIFO order.",
        ),
        "depth": Whole(
            minimum=1,
            maximum=1000,
            doc="How many groups to reorder, drawn by the seed among those of the FIFO run.",
        ),
    },
    required=("seed",),
    exclusive=(("points", "depth"),),
    doc="Timers due at the same instant run in an order the seed chooses (agentsim explore).",
)
SCENARIO = Shape(
    {
        "name": NAME,
        "description": Text(hint="expected a string (one paragraph)", doc="What happens, why."),
        "seed": Whole(doc="The run's seed (agentsim run --seed overrides it)."),
        "faults": OneOf(
            (Text(choices=tuple(PROFILES), default="none"), FAULTS),
            doc="A named fault profile, or explicit settings.",
        ),
        "agents": Map(AGENT, key_pattern=NAME_PATTERN.pattern, min_keys=1, doc="By alias."),
        "clients": Map(CLIENT, key_pattern=NAME_PATTERN.pattern, doc="Named clients."),
        "model": MODEL,
        "steps": Seq(STEP, min_items=1, doc="The safety phase, in order."),
        "expect": Seq(EXPECTATION, doc="Checked after the liveness phase."),
        "liveness": Shape(
            {
                "limit": Duration(default="1h", doc="How long the liveness phase may run."),
                "settles": Flag(
                    default=True,
                    doc="Whether it must go quiet within the limit (false: a busy end is meant).",
                ),
            }
        ),
        "interleave": INTERLEAVE,
    },
    required=("name", "description", "seed", "agents", "steps"),
    doc="An agentsim scenario: agents, what happens to them and when, and what must hold.",
)
"""The whole format: what `parse_scenario` checks and `scenarios.json_schema` renders."""
TOP_LEVEL_KEYS = SCENARIO.keys
REQUIRED_KEYS = SCENARIO.required


_SYNTAX_HINT = (
    "check the indentation (spaces only, the same amount for keys of one mapping) "
    "and quote values that contain ': ' or start with a special character"
)


# -- YAML with line numbers -------------------------------------------------------------------
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
            raise yaml.constructor.ConstructorError(
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
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"a mapping key cannot be a {'list' if isinstance(key, list) else 'mapping'}",
                key_node.start_mark,
            ) from None
        if id(key_node) in own_keys:
            if key in own_seen:
                raise yaml.constructor.ConstructorError(
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


def read_document(text: str, path: str) -> Any:
    """The YAML document in `text`, with line numbers; `InvalidScenario` if it is not YAML."""
    try:
        return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = " ".join(str(part) for part in (exc.context, exc.problem) if part)
        syntax = not isinstance(exc, yaml.constructor.ConstructorError)
        raise InvalidScenario(
            path,
            line,
            "not valid YAML",
            problem or "unreadable",
            _SYNTAX_HINT if syntax else "",
        ) from None
    except RecursionError:
        raise InvalidScenario(path, None, "not valid YAML", "nested too deeply") from None
    except Exception as exc:  # PyYAML also raises plain ValueErrors (a date like 2024-02-30)
        raise InvalidScenario(
            path, None, "not valid YAML", f"{type(exc).__name__}: {exc}"
        ) from None


# -- files ------------------------------------------------------------------------------------
def load_scenario(path: str | Path) -> Scenario:
    """Read and validate one scenario file."""
    shown = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidScenario(shown, None, "", f"cannot read the file: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidScenario(
            shown, None, "", f"not UTF-8 text (byte {exc.start})", "save the file as UTF-8"
        ) from None
    return parse_scenario(text, shown)


def parse_scenario(text: str, path: str = "<scenario>") -> Scenario:
    """Validate a scenario given as YAML text; `path` is what errors and replays name."""
    document = read_document(text, path)
    if document is None:
        raise InvalidScenario(
            path,
            1,
            "",
            "the document is empty",
            f"a scenario is a mapping with keys {list(TOP_LEVEL_KEYS)}",
        )
    top = Fields(path, "", document, 1, shape=SCENARIO)
    name = top.get("name")
    description = top.get("description")
    seed = top.whole("seed")
    faults = _faults(top)
    agents, own_models = parse_agents(top)
    clients = parse_clients(top, agents)
    models = {MODEL_SERVICE: parse_model(top) or DEFAULT_MODEL, **own_models}
    steps = parse_steps(top, agents, clients, models)
    expect = parse_expectations(top, agents, clients, steps)
    liveness_limit_ms = DEFAULT_LIVENESS_LIMIT_MS
    liveness_settles = True
    if "liveness" in top:
        liveness = top.sub("liveness", shape=SCENARIO.fields["liveness"], where="liveness")
        liveness_limit_ms = liveness.get("limit")
        liveness_settles = liveness.flag("settles") if "settles" in liveness else True
    return Scenario(
        name=name,
        description=description,
        seed=seed,
        faults=faults,
        agents=tuple(agents.values()),
        clients=tuple(clients.values()),
        steps=steps,
        expect=expect,
        liveness_limit_ms=liveness_limit_ms,
        liveness_settles=liveness_settles,
        interleave=_interleave(top),
        path=path,
        models=models,
    )


# -- sections ---------------------------------------------------------------------------------
def _interleave(top: Fields) -> InterleaveSetting | None:
    if "interleave" not in top:
        return None
    section = top.sub("interleave", shape=INTERLEAVE, where="interleave")
    if "points" not in section and "depth" not in section:
        section.fail(
            "seed",
            "neither points: nor depth:",
            "points: [3, 11] reorders those same-instant groups; depth: 2 draws two of them",
        )
    points = section.get("points")
    return InterleaveSetting(
        seed=section.get("seed"),
        points=None if points is None else tuple(sorted(set(points))),
        depth=section.get("depth"),
    )


def _faults(top: Fields) -> FaultProfile:
    value = top.raw("faults", "none")
    if isinstance(value, str):
        if value not in PROFILES:
            top.bad("faults", f"known profiles: {sorted(PROFILES)}, or a mapping of settings")
        return PROFILES[value]
    section = Fields(top.path, "faults", value, top.line_of("faults"), shape=FAULTS)
    settings: dict[str, Any] = {}
    if "deploys_per_day" in section:
        pair = section.raw("deploys_per_day")
        if not (
            isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in pair)
        ):
            section.bad("deploys_per_day", "expected two whole numbers [low, high]")
        settings["deploys_per_day"] = (pair[0], pair[1])
    for rate in ("storage_error_rate", "crash_rate"):
        if rate in section:
            number = section.raw(rate)
            if isinstance(number, bool) or not isinstance(number, int | float):
                section.bad(rate, "expected a probability from 0 to 1")
            settings[rate] = number
    if "idle_eviction" in section:
        settings["idle_eviction"] = section.flag("idle_eviction")
    try:
        return FaultProfile(**settings)
    except ValueError as exc:
        raise InvalidScenario(top.path, section.line, "faults", str(exc)) from None
