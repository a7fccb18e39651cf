"""`reports` reads trace records and imports nothing else of the project (checked on source)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import reports

ROOT = Path(__file__).resolve().parents[2]
PROJECT = {"agents_core", "sim", "scenarios", "tests"}


def imported(source: str) -> list[str]:
    """Top-level names of every absolute import in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module.split(".")[0])
    return found


def not_allowed(source: str) -> list[str]:
    allowed = set(sys.stdlib_module_names) | {"reports", "__future__"}
    return [name for name in imported(source) if name in PROJECT or name not in allowed]


def test_the_checker_sees_what_it_bans() -> None:
    """A sample importing the simulator, the runtime, the scenarios and a third party is caught."""
    sample = (
        "import json\nfrom sim.trace import Trace\nimport agents_core.host\n"
        "from scenarios.run import runner\nimport yaml\nfrom reports.records import read_trace\n"
        "def f():\n    import sim\n"
    )
    assert not_allowed(sample) == ["sim", "agents_core", "scenarios", "yaml", "sim"]


@pytest.mark.parametrize("path", sorted((ROOT / "reports").glob("*.py")), ids=lambda p: p.name)
def test_reports_module_imports_only_the_standard_library(path: Path) -> None:
    """No module of reports imports agents_core, sim, scenarios or anything outside stdlib."""
    assert not_allowed(path.read_text(encoding="utf-8")) == []


def test_the_public_surface_is_pinned() -> None:
    """The package exports exactly these names, each defined."""
    assert reports.__all__ == [
        "RunReport",
        "TraceCut",
        "TraceFormatError",
        "parse_trace_lines",
        "read_trace",
        "read_trace_cut",
        "render_html",
        "render_junit",
        "render_short_log",
        "render_summary",
        "trace_digest",
    ]
    assert all(hasattr(reports, name) for name in reports.__all__)


def test_every_module_declares_all() -> None:
    """Each module names its exports, and each exported name exists."""
    import importlib

    for path in sorted((ROOT / "reports").glob("*.py")):
        if path.stem == "__init__":
            continue
        module = importlib.import_module(f"reports.{path.stem}")
        assert isinstance(module.__all__, list), path.name
        assert [n for n in module.__all__ if not hasattr(module, n)] == [], path.name
