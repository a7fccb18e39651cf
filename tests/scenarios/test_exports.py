"""Every module of `scenarios`, in every subpackage, declares its `__all__` (the package's own
list is pinned in tests/test_exports.py)."""

from __future__ import annotations

import importlib
import pkgutil

import scenarios


def test_every_module_declares_all_and_defines_each_name() -> None:
    """No module exports by accident, and no `__all__` names something missing."""
    names = [
        info.name
        for info in pkgutil.walk_packages(scenarios.__path__, "scenarios.")
        if not info.name.endswith(".__main__")  # running it is the command itself
    ]
    assert "scenarios.hunt.fuzz" in names and "scenarios.language.loader" in names
    for name in names:
        module = importlib.import_module(name)
        assert isinstance(module.__all__, list), name
        missing = [export for export in module.__all__ if not hasattr(module, export)]
        assert missing == [], f"{name} exports undefined {missing}"
