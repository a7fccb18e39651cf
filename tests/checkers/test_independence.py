"""The checkers share no code with what they check: no module under `sim/checkers` (its models
included) imports anything of the runtime (`agents_core`), and of the simulator only the trace's
and the storage journal's data types, plus `sim.client_views` (the runtime's client reducer read
back as data: the subject `client_timeline_exact` judges, never an oracle) and, for types alone,
`sim.simulation`. Imports are read with `ast`, so those under `TYPE_CHECKING`, inside functions
and relative ones count too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKERS = ROOT / "sim" / "checkers"
ALLOWED_SIM = {
    "sim.trace": "the trace's data types",
    "sim.sqlite": "the journal's `Write` and the KV table's layout",
    "sim.client_views": "what a client's reducer shows: the subject, not an oracle",
    "sim.simulation": "the `Simulation` type that `context_from` reads",
}


def package_of(path: Path) -> str:
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return (
        package.removesuffix(".__init__")
        if path.name == "__init__.py"
        else package.rpartition(".")[0]
    )


def imported_modules(source: str, package: str) -> list[str]:
    """Every module an import statement of `source` names, relative imports made absolute."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.append(module)
            found += [f"{module}.{alias.name}" for alias in node.names if module == "sim"]
    return found


def forbidden(modules: list[str]) -> list[str]:
    out = []
    for module in modules:
        top = module.split(".")[0]
        if top == "agents_core" or (
            top == "sim"
            and module != "sim"
            and not module.startswith("sim.checkers")
            and not any(module == a or module.startswith(a + ".") for a in ALLOWED_SIM)
        ):
            out.append(module)
    return out


def test_the_reader_sees_every_form_of_import() -> None:
    """A clean result means something: each form of import is seen."""
    text = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from agents_core.options import X\n"
        "import agents_core.cron as c\ndef f():\n    from agents_core import y\n"
        "from sim.alarms import Z\nfrom ..core import W\nfrom sim import kernel\n"
    )
    modules = imported_modules(text, "sim.checkers.models")
    assert "sim.checkers.core" in modules
    assert sorted(forbidden(modules)) == [
        "agents_core",
        "agents_core.cron",
        "agents_core.options",
        "sim.alarms",
        "sim.kernel",
    ]


@pytest.mark.parametrize(
    "path", sorted(CHECKERS.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_no_checker_imports_the_runtime(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert forbidden(imported_modules(source, package_of(path))) == []
