"""Every module of `scenarios` declares its `__all__` (the package's own list is pinned in
tests/test_exports.py)."""

from __future__ import annotations

import importlib
import pkgutil

import scenarios


def test_every_module_declares_all_and_defines_each_name() -> None:
    """No module exports by accident, and no `__all__` names something missing."""
    for info in pkgutil.iter_modules(scenarios.__path__):
        module = importlib.import_module(f"scenarios.{info.name}")
        assert isinstance(module.__all__, list), info.name
        missing = [name for name in module.__all__ if not hasattr(module, name)]
        assert missing == [], f"scenarios.{info.name} exports undefined {missing}"
