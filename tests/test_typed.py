"""The packages are typed (PEP 561): each ships a `py.typed` marker, and the wheel carries it.

mypy itself runs in CI (`.ci/run`, configured by `[tool.mypy]`), not here: it takes longer than
the whole default suite."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
FOUND = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
PACKAGES = [pattern.rstrip("*") for pattern in FOUND]


def test_the_packages_are_the_ones_mypy_checks() -> None:
    assert sorted(PACKAGES) == sorted(PYPROJECT["tool"]["mypy"]["packages"])


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_ships_its_marker(package: str) -> None:
    assert (ROOT / package / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"].get(package, [])


# What `mypy --strict` turns on that can be set per module (warn_redundant_casts and
# warn_unused_ignores are global; the latter is on for every package).
STRICT_FLAGS = (
    "disallow_any_generics",
    "disallow_subclassing_any",
    "disallow_untyped_calls",
    "disallow_untyped_defs",
    "disallow_incomplete_defs",
    "check_untyped_defs",
    "disallow_untyped_decorators",
    "warn_return_any",
    "no_implicit_reexport",
    "strict_equality",
    "extra_checks",
)


def test_the_runtime_is_checked_strictly() -> None:
    """pyproject sets every per-module strict flag for agents_core, and CI runs
    `mypy --strict agents_core`."""
    overrides = PYPROJECT["tool"]["mypy"]["overrides"]
    runtime = [o for o in overrides if "agents_core.*" in o["module"]]
    assert len(runtime) == 1
    assert {flag: runtime[0].get(flag) for flag in STRICT_FLAGS} == dict.fromkeys(
        STRICT_FLAGS, True
    )
    assert PYPROJECT["tool"]["mypy"].get("warn_unused_ignores") is True
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "\n.venv/bin/python -m mypy --strict agents_core\n" in ci
