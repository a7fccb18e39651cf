"""agents_core stays host-agnostic: it imports nothing of the simulator, no event loop, no
clock and no randomness (checked on the source, module by module)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "agents_core"
BANNED_MODULES = {
    "sim",
    "simpy",
    "asyncio",
    "random",
    "time",
    "uuid",
    "secrets",
    "scenarios",
    "reports",
}
BANNED_CALLS = {
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
}


def core_modules() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def violations(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in BANNED_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in BANNED_MODULES:
                found.append(node.module)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name | ast.Attribute):
            owner = node.value.id if isinstance(node.value, ast.Name) else node.value.attr
            if (owner, node.attr) in BANNED_CALLS:
                found.append(f"{owner}.{node.attr}")
    return found


def test_the_checker_sees_what_it_bans() -> None:
    """The checker itself flags each banned form (so a clean result means something)."""
    sample = (
        "import asyncio\nfrom sim.kernel import Wait\nimport time as t\nfrom random import random\n"
        "import datetime\nx = datetime.datetime.now()\nfrom uuid import uuid4\n"
    )
    assert violations(sample) == ["asyncio", "sim.kernel", "time", "random", "uuid", "datetime.now"]


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_agents_core_module_imports_nothing_banned(path: Path) -> None:
    """No module of agents_core reaches the simulator, an event loop, the clock or randomness."""
    assert violations(path.read_text(encoding="utf-8")) == []
