"""Sub-agents of a workload: the names a `sub_agents:` list gives, the class each is built as,
and the `open` / `close` calls that create and delete them.

A workload that keeps sub-agents (`schedules`, `fibers`) gives each the same description as its
own: `open(name)` creates the sub-agent (`sub_agent`) and has it begin what its parent began
(set its schedules up, start its fibers), `close(name)` deletes it with its storage and its
own sub-agents (`delete_sub_agent`), and `open(name)` again re-creates it under the same name.
`w1/x` names the sub-agent `x` of the sub-agent `w1`, opened and closed through `w1`;
`twin:w1` names a sub-agent `w1` of a second class, beside the first class's `w1` (a user's
`Researcher/main` beside `Writer/main`). The trace has `workload:sub_agent_opened {name,
created}` and `workload:sub_agent_closed {name, had}` for a sub-agent of the agent itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "TWIN",
    "close_sub_agent",
    "instance",
    "open_sub_agent",
    "sub_agents_problem",
    "sub_class",
]

TWIN = "twin:"
"""`twin:w1` names the sub-agent `w1` of a second class, so that two sub-agents of one parent
share a name."""


def instance(child: str) -> str:
    """The sub-agent's own name: `w1` for `w1` and for `twin:w1`."""
    return child.removeprefix(TWIN)


def sub_agents_problem(names: Sequence[str]) -> str | None:
    """What is wrong with a workload's `sub_agents` names (None: nothing): each is distinct, its
    steps (`w1/x`) are not empty, and a `:` only in the `twin:` prefix of a step."""
    steps = [instance(step) for name in names for step in name.split("/")]
    if len(set(names)) != len(names) or not all(steps) or any(":" in step for step in steps):
        return (
            "sub-agent names must be distinct and not empty, each step of a path (`w1/x`) a "
            "name, `twin:` the only prefix"
        )
    return None


def sub_class(
    cls: type, child: str, base: type, twin_name: str, overrides: Mapping[str, Any]
) -> type:
    """The class of `cls`'s sub-agent `child`: a subclass of `cls` named as `base` (or
    `twin_name` for a `twin:` child), with the sub-agents named below `child` (`child/x`) as its
    own and `overrides` set (how it begins: by its parent's `open`, never at its own startup).
    Made once per workload class and child name."""
    names: Sequence[str] = getattr(cls, "sub_agents", ())
    children = {name.partition("/")[0] for name in names}
    if child not in children:
        raise ValueError(f"no sub-agent named {child!r}; this workload's: {sorted(children)}")
    made: dict[str, type] = cls.__dict__.get("_subs") or {}
    if child not in made:
        below = tuple(name.partition("/")[2] for name in names if name.startswith(child + "/"))
        made[child] = type(
            twin_name if child.startswith(TWIN) else base.__name__,
            (cls,),
            {
                **overrides,
                "sub_agents": below,
                "__module__": cls.__module__,
                "__qualname__": cls.__qualname__,
            },
        )
        setattr(cls, "_subs", made)  # noqa: B010 - kept on this class alone, read by __dict__
    return made[child]


async def open_sub_agent(
    agent: Any, name: str, child_class: type, begin: Callable[[Any], Awaitable[list[str]]]
) -> list[str]:
    """`agent` opens its sub-agent `name` (of `child_class`) and `begin`s it on its stub: what
    it created. `w1/x` is opened by `w1`."""
    child, _, below = name.partition("/")
    stub = await agent.sub_agent(child_class, instance(child))
    created: list[str] = await (stub.open(below) if below else begin(stub))
    if not below:
        agent.host.trace.emit("workload:sub_agent_opened", name=child, created=created)
    return created


async def close_sub_agent(agent: Any, name: str, child_class: type) -> bool:
    """`agent` deletes its sub-agent `name` (of `child_class`): its storage, its own sub-agents
    and its rows on the root. Whether its parent still had it. `w1/x` is closed by `w1`."""
    child, _, below = name.partition("/")
    if below:
        had: bool = await (await agent.sub_agent(child_class, instance(child))).close(below)
        return had
    had = agent.has_sub_agent(child_class, instance(child))
    await agent.delete_sub_agent(child_class, instance(child))
    agent.host.trace.emit("workload:sub_agent_closed", name=child, had=had)
    return had
