"""The import graph of the project's packages: no module imports one that imports it back, and
no package imports one the layering table keeps it from (docs/architecture.md).

Imports are read from the source with `ast`, all of them: those under `if TYPE_CHECKING:` and
those inside functions count, because a circle the type checker needs is still a circle a reader
has to hold in their head. `from package import name` is an arrow to `package.name` when that is
a module, and to `package` otherwise; relative imports are resolved against the importing module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agents_core", "sim", "scenarios", "reports")

# Which package may import which. A name missing from a row is forbidden to it; packages outside
# this table (the standard library, structlog, ...) are not governed here (test_layering.py keeps
# agents_core away from the clock, randomness and event loops).
GOVERNED = (*PACKAGES, "hypothesis", "simpy", "yaml")
MAY_IMPORT: dict[str, frozenset[str]] = {
    "agents_core": frozenset(),
    "sim": frozenset({"agents_core", "simpy"}),
    "scenarios": frozenset({"agents_core", "sim", "reports", "hypothesis", "simpy", "yaml"}),
    "reports": frozenset(),
}

# The imports against the table that are meant: file -> the governed packages it may import
# beyond its package's row, and why.
EXCEPTIONS: dict[str, tuple[frozenset[str], str]] = {
    "sim/strategies.py": (
        frozenset({"scenarios"}),
        "re-exports the Hypothesis API (scenarios.hunt.strategies) where tests import it from",
    ),
}

# Arrows against the table that main still has; each names the issue that removes it. strict: the
# mark fails the test once the arrow is gone, so that it is taken off with the arrow.
KNOWN_ARROWS: dict[tuple[str, str], str] = {}
KNOWN_CIRCLES: dict[str, str] = {}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules_of(package: str, root: Path = ROOT) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}


def imported_names(module: str, source: str, is_package: bool) -> Iterator[str]:
    """Every dotted name `module` imports, relative imports made absolute; for `from X import
    a`, both `X` and `X.a` (the caller keeps whichever is a module)."""
    here = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            for alias in node.names:
                yield f"{origin}\0{alias.name}"


def arrows(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of `known` that `module` imports (the nearest enclosing known module of each
    name), itself left out."""
    out = set()
    for name in imported_names(
        module, path.read_text(encoding="utf-8"), path.name == "__init__.py"
    ):
        origin, _, member = name.partition("\0")
        target = f"{origin}.{member}" if member and f"{origin}.{member}" in known else origin
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != module:
            out.add(target)
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def package_graph(package: str) -> dict[str, set[str]]:
    known = modules_of(package)
    return {name: arrows(name, path, known) for name, path in known.items()}


def top_level_imports(
    package: str,
    root: Path = ROOT,
    exceptions: dict[str, tuple[frozenset[str], str]] = EXCEPTIONS,
) -> dict[str, set[str]]:
    """For each governed package `package` (a directory under `root`) imports: the files that
    import it, leaving out what `exceptions` lets a file import."""
    out: dict[str, set[str]] = {}
    for name, path in modules_of(package, root).items():
        where = path.relative_to(root).as_posix()
        allowed = exceptions.get(where, (frozenset(), ""))[0]
        for imported in imported_names(name, path.read_text(encoding="utf-8"), False):
            top = imported.partition("\0")[0].split(".")[0]
            if top in GOVERNED and top != package and top not in allowed:
                out.setdefault(top, set()).add(where)
    return out


def test_the_reader_sees_type_checking_relative_and_function_imports(tmp_path: Path) -> None:
    """The graph reader finds a circle made of a TYPE_CHECKING import, a relative import and an
    import inside a function, and none once one arrow is gone (so a clean result means
    something)."""
    known = {"pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py", "pkg.c": tmp_path / "c.py"}
    known["pkg.a"].write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.b\n"
    )
    known["pkg.b"].write_text("from . import c\n")
    known["pkg.c"].write_text("def f():\n    from pkg.a import x\n")
    graph = {name: arrows(name, path, known) for name, path in known.items()}
    assert graph == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.c"}, "pkg.c": {"pkg.a"}}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    known["pkg.c"].write_text("def f():\n    from pkg import x\n")
    graph = {name: arrows(name, path, known) for name, path in known.items()}
    assert circles(graph) == []


def _circle_cases() -> Iterator[object]:
    for package in ("agents_core", "sim", "reports"):
        reason = KNOWN_CIRCLES.get(package)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        yield pytest.param(package, id=package, marks=marks)


@pytest.mark.parametrize("package", list(_circle_cases()))
def test_no_import_circle_in(package: str) -> None:
    """No module of the package imports, however indirectly, a module that imports it back."""
    assert circles(package_graph(package)) == []


def test_the_layering_reader_flags_a_forbidden_import_and_honours_an_exception(
    tmp_path: Path,
) -> None:
    """On a tree of its own, the reader finds a runtime module that imports the simulator (in a
    function, under a relative-free dotted name) and leaves out the one file an exception lets
    through, so an empty result on the project means something."""
    (tmp_path / "agents_core").mkdir()
    (tmp_path / "agents_core" / "__init__.py").write_text("")
    (tmp_path / "agents_core" / "clock.py").write_text("def now():\n    import sim.kernel\n")
    (tmp_path / "agents_core" / "bridge.py").write_text("from sim import platform\n")
    found = top_level_imports("agents_core", tmp_path, exceptions={})
    assert found == {"sim": {"agents_core/clock.py", "agents_core/bridge.py"}}
    allowed = {"agents_core/bridge.py": (frozenset({"sim"}), "a sample exception")}
    assert top_level_imports("agents_core", tmp_path, exceptions=allowed) == {
        "sim": {"agents_core/clock.py"}
    }


@pytest.mark.parametrize("where", sorted(EXCEPTIONS))
def test_every_exception_is_still_needed(where: str) -> None:
    """An exception to the layering table names a file that exists and still imports each
    package it is let through to; once the import is gone, the exception goes with it."""
    path = ROOT / where
    assert path.is_file(), f"{where} is gone: remove its exception"
    package = where.split("/")[0]
    without = {other: entry for other, entry in EXCEPTIONS.items() if other != where}
    needed = {
        imported
        for imported, files in top_level_imports(package, ROOT, without).items()
        if where in files
    }
    unused = sorted(EXCEPTIONS[where][0] - needed)
    assert unused == [], f"{where} no longer imports {unused}: narrow or remove its exception"


def _arrow_cases() -> Iterator[object]:
    for importer in PACKAGES:
        for imported in GOVERNED:
            if imported == importer or imported in MAY_IMPORT[importer]:
                continue
            reason = KNOWN_ARROWS.get((importer, imported))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            yield pytest.param(importer, imported, id=f"{importer}-not-{imported}", marks=marks)


@pytest.mark.parametrize(("importer", "imported"), list(_arrow_cases()))
def test_layering_table_holds(importer: str, imported: str) -> None:
    """A package imports no package its row of the layering table leaves out."""
    assert sorted(top_level_imports(importer).get(imported, ())) == []


def test_the_runtime_core_imports_nothing_of_chat() -> None:
    """No module of agents_core outside agents_core/chat imports a chat module: chat hosts are
    built on the core, never the other way round."""
    graph = package_graph("agents_core")
    arrows_into_chat = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if not module.startswith("agents_core.chat")
        for target in targets
        if target.startswith("agents_core.chat")
    )
    assert arrows_into_chat == []
