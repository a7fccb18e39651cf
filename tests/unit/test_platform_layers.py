"""The platform's parts import the shared records from below, never the platform that owns them
(not even for type checking), so every import between them points one way."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SIM = Path(__file__).resolve().parents[2] / "sim"
PARTS = ("alarms", "clients", "host", "incarnation", "lifecycle", "stubs", "upstream")


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("part", PARTS)
def test_a_part_of_the_platform_does_not_import_the_platform(part: str) -> None:
    assert "sim.platform" not in imported_modules(SIM / f"{part}.py")


def test_the_records_module_imports_no_part_that_uses_the_platform() -> None:
    """sim.incarnation sits below alarms, lifecycle, host and stubs."""
    imported = imported_modules(SIM / "incarnation.py")
    assert not imported & {"sim.alarms", "sim.lifecycle", "sim.host", "sim.stubs", "sim.platform"}
