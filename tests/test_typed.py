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
