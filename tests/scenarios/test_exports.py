"""The public surface of `scenarios` is its `__all__`, pinned here; every module declares one."""

from __future__ import annotations

import importlib
import pkgutil

import scenarios


def test_the_package_exports_exactly_these_names() -> None:
    """Adding to the public API is a decision: this list changes with it."""
    assert sorted(scenarios.__all__) == [
        "InvalidScenario",
        "Scenario",
        "ScenarioResult",
        "load_scenario",
        "parse_scenario",
        "run_scenario",
    ]
    assert all(hasattr(scenarios, name) for name in scenarios.__all__)


def test_every_module_declares_all_and_defines_each_name() -> None:
    """No module exports by accident, and no `__all__` names something missing."""
    for info in pkgutil.iter_modules(scenarios.__path__):
        module = importlib.import_module(f"scenarios.{info.name}")
        assert isinstance(module.__all__, list), info.name
        missing = [name for name in module.__all__ if not hasattr(module, name)]
        assert missing == [], f"scenarios.{info.name} exports undefined {missing}"
