"""Scenario files in, validated `Scenario`s out.

Parsing keeps line numbers: `scenarios.language.yaml_lines` builds `LineDict` / `LineList`
(see `scenarios.language.fields`) that remember the line of every key and item, and refuses
duplicate keys, which plain PyYAML would silently let the last one win. A file must be a regular
file of at most `MAX_FILE_BYTES`: a device, a FIFO or a larger file is refused before it is read
(reading /dev/zero would never end). Validation then walks the document
top-down and raises `InvalidScenario` at the first problem, naming file, line, part, field, bad
value and what is allowed. Nothing but `InvalidScenario` leaves `load_scenario` for any input:
YAML's own errors, undecodable bytes and unimportable agent classes are all turned into one.
The format itself is declared, section by section, in `SCENARIO` and the shapes it is made of
(`scenarios.language.shapes`); agents and workloads are read by
`scenarios.language.parse_agents`, the model by `scenarios.language.parse_model`, steps by
`scenarios.language.parse_steps`, expectations by `scenarios.language.parse_expect`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from agents_core.releases.registry import DEFAULT_RELEASE, RELEASES
from scenarios.language.errors import InvalidScenario
from scenarios.language.fields import Fields, gather
from scenarios.language.parse_agents import (
    AGENT,
    CLIENT,
    NAME,
    NAME_PATTERN,
    parse_agents,
    parse_clients,
)
from scenarios.language.parse_expect import EXPECTATION, parse_expectations
from scenarios.language.parse_model import MODEL, parse_model
from scenarios.language.parse_steps import STEP, parse_steps
from scenarios.language.releases import check_release, upgrade_problems
from scenarios.language.schema import (
    DEFAULT_LIVENESS_LIMIT_MS,
    DEFAULT_MODEL,
    MODEL_SERVICE,
    InterleaveSetting,
    Scenario,
)
from scenarios.language.shapes import Duration, Flag, Map, Number, OneOf, Seq, Shape, Text, Whole
from scenarios.language.yaml_lines import read_document
from sim.faults import PROFILES, FaultProfile

__all__ = [
    "MAX_FILE_BYTES",
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
LIMITS = Shape(
    {
        "events": Whole(
            minimum=1,
            maximum=10**9,
            doc="Simulated events the run may step (default 100000; deterministic).",
        ),
        "records": Whole(
            minimum=1, maximum=10**9, doc="Trace records it may write (default 100000)."
        ),
        "wall_clock": Duration(
            doc="Wall-clock time it may take (default 2m; depends on the machine: a last resort)."
        ),
        "memory_mb": Whole(
            minimum=16,
            maximum=1_000_000,
            doc="MB its memory may grow by (default 1024; depends on the machine).",
        ),
        "events_per_second": Whole(
            minimum=1,
            maximum=10**9,
            doc="Simulated events per simulated second before the run counts as spinning "
            "(default 2000; deterministic).",
        ),
        "turn_s": Number(
            minimum=0.01,
            maximum=86_400,
            hint="expected a number of seconds from 0.01 to 86400 (real time)",
            doc="Real seconds one stretch of agent code between two awaits may take (default "
            "5; depends on the machine: it stops code that never yields).",
        ),
    },
    doc="Run budgets: a run that uses one up is stopped and fails (agentsim run --max-*).",
)
SCENARIO = Shape(
    {
        "name": NAME,
        "description": Text(hint="expected a string (one paragraph)", doc="What happens, why."),
        "seed": Whole(doc="The run's seed (agentsim run --seed overrides it)."),
        "sdk": Text(
            hint=f"expected a release agentsim models, one of {list(RELEASES)}",
            doc=f"The SDK release the agents start on, of {', '.join(RELEASES)} (default "
            f"{DEFAULT_RELEASE}; --sdk overrides it; a deploy step may upgrade it).",
        ),
        "faults": OneOf(
            (Text(choices=tuple(PROFILES), default="none"), FAULTS),
            doc="A named fault profile, or explicit settings.",
        ),
        "python_path": Seq(
            Text(),
            doc="Folders, relative to this file, where class: modules are looked for (beside "
            "its own folder and the current directory, which always are).",
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
        "limits": LIMITS,
    },
    required=("name", "description", "seed", "agents", "steps"),
    doc="An agentsim scenario: agents, what happens to them and when, and what must hold.",
)
"""The whole format: what `parse_scenario` checks and `scenarios.language.json_schema` renders."""
TOP_LEVEL_KEYS = SCENARIO.keys
REQUIRED_KEYS = SCENARIO.required
MAX_FILE_BYTES = 10 * 1024 * 1024
"""The largest scenario file read (a long story is a few hundred KB; 5 MB reads in seconds)."""


# -- files ------------------------------------------------------------------------------------
def load_scenario(path: str | Path) -> Scenario:
    """Read and validate one scenario file."""
    shown = str(path)
    try:
        with open(path, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise InvalidScenario(
                    shown, None, "", "not a regular file (a directory, a FIFO or a device)"
                )
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise InvalidScenario(shown, None, "", f"cannot read the file: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise InvalidScenario(
            shown,
            None,
            "",
            f"the file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB",
            "a scenario this large is a generated one: split it, or keep its data in the "
            "agent's code",
        )
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
    # Each part is read even when an earlier one is wrong, so that one `validate` lists every
    # mistake of the file; a part that only fails because of another (`Skipped`) is not listed.
    problems: list[InvalidScenario] = []
    if not isinstance(document, dict):
        Fields(path, "", document, 1, shape=SCENARIO)  # raises: not a mapping
    top = Fields(path, "", document, 1, shape=SCENARIO, problems=problems)

    def part(key: str, read: Any, *args: Any) -> Any:
        if key in REQUIRED_KEYS and key not in top:
            return None  # its absence is already one of the problems
        return gather(problems, read, *args)

    name = part("name", top.get, "name")
    description = part("description", top.get, "description")
    seed = part("seed", top.whole, "seed")
    sdk = gather(problems, _sdk, top)
    faults = gather(problems, _faults, top)
    agents, own_models = part("agents", parse_agents, top) or ({}, {})
    clients = gather(problems, parse_clients, top, agents) or {}
    models = {MODEL_SERVICE: gather(problems, parse_model, top) or DEFAULT_MODEL, **own_models}
    steps = part("steps", parse_steps, top, agents, clients, models) or ()
    expect = gather(problems, parse_expectations, top, agents, clients, steps) or ()
    liveness_limit_ms, liveness_settles = gather(problems, _liveness, top) or (0, True)
    interleave = gather(problems, _interleave, top)
    limits = gather(problems, _limits, top)
    if problems:
        raise InvalidScenario.many(problems)
    assert faults is not None  # gather gives None only after recording a problem
    scenario = Scenario(
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
        interleave=interleave,
        limits=limits or {},
        path=path,
        models=models,
        sdk=sdk or DEFAULT_RELEASE,
        sdk_in_file=sdk,
    )
    downgrades = upgrade_problems(scenario)
    if downgrades:
        raise InvalidScenario.many(downgrades)
    return scenario


# -- sections ---------------------------------------------------------------------------------
def _sdk(top: Fields) -> str | None:
    """The release the file names (None: none), refused unless the runtime models it."""
    if "sdk" not in top:
        return None
    return check_release(top, "sdk")


def _liveness(top: Fields) -> tuple[int, bool]:
    if "liveness" not in top:
        return DEFAULT_LIVENESS_LIMIT_MS, True
    liveness = top.sub("liveness", shape=SCENARIO.fields["liveness"], where="liveness")
    settles = liveness.flag("settles") if "settles" in liveness else True
    return liveness.get("limit"), settles


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


def _limits(top: Fields) -> dict[str, int | float]:
    if "limits" not in top:
        return {}
    section = top.sub("limits", shape=LIMITS, where="limits")
    limits: dict[str, int | float] = {}
    for key in ("events", "records", "memory_mb", "events_per_second", "turn_s"):
        if key in section:
            limits[key] = section.get(key)
    if "wall_clock" in section:
        wall_ms = section.get("wall_clock")
        if wall_ms < 1_000:
            section.bad("wall_clock", "expected at least 1s (a duration of wall-clock time)")
        limits["wall_s"] = wall_ms / 1000
    return limits


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
