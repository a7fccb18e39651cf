"""Hypothesis's explanations of a failure name the user's code, not agentsim's.

Hypothesis's explain phase reports the lines "always and only run by failing test cases"; it
leaves out its own files, pytest's and the standard library's, since a line there says nothing
about the test. In a test over a simulation most such lines are agentsim's (the alarm slot, a
checker, the fault draws), which say no more: a user reads an explanation to find the line of
their agent that only failing runs took. `hide_agentsim` adds agentsim's package folders
(`agents_core`, `sim`, `scenarios`, `reports`, by absolute path) to the locations Hypothesis
leaves out. Hypothesis offers no public setting for this, so it extends the list its explain
phase reads (`hypothesis.internal.scrutineer.UNHELPFUL_LOCATIONS`); if a Hypothesis release
moves that list, nothing is hidden, and the test of this module says so. Importing the
Hypothesis API (`scenarios.hunt.strategies`, or `sim.strategies`) calls it, and so does the
pytest plugin's `sim` fixture in a Hypothesis test.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["AGENTSIM_FOLDERS", "hide_agentsim"]

_ROOT = Path(__file__).resolve().parents[2]
AGENTSIM_FOLDERS = tuple(
    str(_ROOT / name) for name in ("agents_core", "sim", "scenarios", "reports")
)
"""The folders of agentsim's own code."""
_PLAIN = re.compile(r"[A-Za-z0-9_/.\-]+")
"""A folder Hypothesis's glob patterns can name exactly (it escapes dots only)."""


def hide_agentsim() -> bool:
    """Leave agentsim's own files out of Hypothesis's explanations; True if they now are."""
    try:
        from hypothesis.internal import scrutineer
    except ImportError:  # pragma: no cover - Hypothesis is the test extra
        return False
    current = getattr(scrutineer, "UNHELPFUL_LOCATIONS", None)
    if not isinstance(current, tuple):
        return False
    wanted = [f"{Path(folder).as_posix()}/**" for folder in AGENTSIM_FOLDERS]
    if not all(_PLAIN.fullmatch(pattern.replace("*", "")) for pattern in wanted):
        return False
    scrutineer.UNHELPFUL_LOCATIONS = (*current, *(p for p in wanted if p not in current))
    return True
