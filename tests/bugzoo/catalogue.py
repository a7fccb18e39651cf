"""The zoo's catalogue: every bug (the measured set, the held-apart set and the SDK 0.32.0 set),
and which library stories belong to which feature area.

A story's areas come from the classes of its agents (a class named by `class:`, or the one a
`workload:` builds), looked up along each class's MRO: a developer who changed, say, fiber
recovery fuzzes every story whose agents run fibers. The map is written from what each class
does, once, and never narrowed after seeing what a hunt finds. A story whose agents match no
known class is counted in `all` only (and the runner says so).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path

from scenarios.language.errors import InvalidScenario
from scenarios.language.loader import load_scenario
from tests.bugzoo.bugs_held_apart import HELD_APART_BUGS
from tests.bugzoo.bugs_platform import PLATFORM_BUGS
from tests.bugzoo.bugs_runtime import RUNTIME_BUGS
from tests.bugzoo.bugs_tools import TOOL_BUGS
from tests.bugzoo.bugs_v0_32 import V0_32_BUGS
from tests.bugzoo.model import Bug

__all__ = [
    "ALL_BUGS",
    "BUGS",
    "CLASS_AREAS",
    "HELD_APART",
    "V0_32",
    "stories_for",
    "story_areas",
    "unknown_classes",
]

BUGS: tuple[Bug, ...] = (*PLATFORM_BUGS, *RUNTIME_BUGS, *TOOL_BUGS)
"""The zoo's bugs that a plain run measures (many written beside the stories that show them)."""
HELD_APART: tuple[Bug, ...] = HELD_APART_BUGS
"""The held-apart set, written without reading the stories; measured with `--held-apart`."""
V0_32: tuple[Bug, ...] = V0_32_BUGS
"""The SDK 0.32.0 set, in the release's own components, written in the held-apart style;
hunted on 0.32.0 with `--set v0_32` and reported apart."""
ALL_BUGS: tuple[Bug, ...] = (*BUGS, *HELD_APART, *V0_32)

_FIBER_AGENT = frozenset({"fibers", "keepalive", "alarm"})
_TOOL_PARENT = frozenset({"agent_tools", "facets", "keepalive", "schedules", "alarm"})
_CHAT_HOST = frozenset({"chat", "fibers", "keepalive", "schedules", "alarm"})

CLASS_AREAS: dict[str, frozenset[str]] = {
    # workloads
    "Counter": frozenset({"alarm"}),
    "FiberWorkload": _FIBER_AGENT,
    "ToolsWorkload": _TOOL_PARENT,
    "ThinkToolsWorkload": _TOOL_PARENT | _CHAT_HOST,
    "AiChatToolsWorkload": _TOOL_PARENT | _CHAT_HOST,
    "ThinkWorkload": _CHAT_HOST,
    "AiChatWorkload": _CHAT_HOST,
    # the chat hosts themselves, for any agent built on them
    "ThinkAgent": _CHAT_HOST,
    "ChatAgent": _CHAT_HOST,
    # library agents: fibers (seed 002); the researcher can also schedule its research
    "Researcher": _FIBER_AGENT | {"schedules"},
    "PoisonedResearcher": _FIBER_AGENT | {"schedules"},
    "Batcher": frozenset({"schedules", "alarm"}),
    "Webhooks": _FIBER_AGENT,
    "StrictWebhooks": _FIBER_AGENT,
    "Exporter": _FIBER_AGENT,
    "Digest": frozenset({"schedules", "alarm"}),
    # library agents: agent tools (seed 000); the detached backbone is a schedule row
    "StoryParent": _TOOL_PARENT,
    "SlowFinishParent": _TOOL_PARENT,
    "NarratingParent": _TOOL_PARENT,
    # the hunting workloads
    "ScheduleWorkload": frozenset({"schedules", "alarm", "keepalive", "fibers"}),
}
"""Agent class name -> the feature areas a story using it exercises."""


@cache
def _agent_classes(path: Path) -> tuple[type, ...]:
    try:
        scenario = load_scenario(str(path))
    except InvalidScenario:
        return ()
    return tuple(spec.cls for spec in scenario.agents)


def story_areas(path: Path) -> frozenset[str]:
    """The areas of the story at `path` (`all` included)."""
    areas: set[str] = {"all"}
    for cls in _agent_classes(path):
        for klass in cls.__mro__:
            areas |= CLASS_AREAS.get(klass.__name__, frozenset())
    return frozenset(areas)


def unknown_classes(path: Path) -> list[str]:
    """Agent classes of the story that match nothing in `CLASS_AREAS` along their MRO."""
    return [
        cls.__name__
        for cls in _agent_classes(path)
        if not any(klass.__name__ in CLASS_AREAS for klass in cls.__mro__)
    ]


def stories_for(areas: Iterable[str], library: Path) -> list[Path]:
    """The library stories (sorted by name) that belong to any of `areas`."""
    wanted = set(areas)
    return [
        path
        for path in sorted(library.glob("*.yaml"), key=lambda p: p.name)
        if wanted & story_areas(path)
    ]
