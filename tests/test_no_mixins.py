"""`Agent` is the SDK's surface and nothing more: no class of agents_core mixes behaviour into it.

Every class an agent inherits from is `Agent` or one of its subclasses (the chat hosts); the
runtime's parts are components the agent holds, never bases it inherits."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import agents_core
from agents_core import Agent


def runtime_classes() -> list[type]:
    """Every class defined in a module of agents_core."""
    found: list[type] = []
    for info in pkgutil.walk_packages(agents_core.__path__, "agents_core."):
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if value.__module__ == module.__name__:
                found.append(value)
    return found


def mixed_in(cls: type, root: type) -> list[str]:
    """The classes of `cls`'s MRO that are neither `root`'s line nor `object`."""
    return [
        base.__qualname__
        for base in cls.__mro__
        if base is not object and not issubclass(base, root)
    ]


def test_the_checker_sees_a_mixin() -> None:
    class Helper:
        def helper(self) -> None: ...

    class Mixed(Helper, Agent):
        pass

    assert mixed_in(Mixed, Agent) == ["test_the_checker_sees_a_mixin.<locals>.Helper"]
    assert mixed_in(Agent, Agent) == []


def test_no_agent_class_of_the_runtime_inherits_anything_but_agent() -> None:
    agents = [cls for cls in runtime_classes() if issubclass(cls, Agent)]
    assert {cls.__name__ for cls in agents} >= {"Agent", "ChatHost", "ThinkAgent", "ChatAgent"}
    assert {cls.__name__: mixed_in(cls, Agent) for cls in agents if mixed_in(cls, Agent)} == {}


def test_no_class_of_the_runtime_is_a_mixin() -> None:
    assert sorted(c.__qualname__ for c in runtime_classes() if c.__name__.endswith("Mixin")) == []
