"""Drawing that depends on the seed alone, not on which modules the process has loaded.

Hypothesis mixes into its draws, now and then, literals it reads from the source of the local
modules loaded so far (`hypothesis.internal.conjecture.providers._get_local_constants`). That
is good for finding bugs in a test's own code, and it makes a draw depend on the process: the
same seed drew other scenarios under pytest, which had loaded the test modules, than on the
command line. `seed_only()` turns that source off while a hunt draws (the built-in constants
stay), so the same seed gives the same scenarios byte for byte in any process. With a
Hypothesis that no longer has the hook it changes nothing, and a test of determinism says so.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["seed_only"]

HOOK = "_get_local_constants"


@contextmanager
def seed_only() -> Iterator[None]:
    """While it is entered, Hypothesis draws no constants from the loaded modules' source."""
    providers = importlib.import_module("hypothesis.internal.conjecture.providers")
    original = getattr(providers, HOOK, None)
    make = getattr(providers, "Constants", None)
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    if original is None or make is None:
        yield
        return
    empty = make()
    if cache is not None:
        cache.clear()
    setattr(providers, HOOK, lambda: empty)
    try:
        yield
    finally:
        setattr(providers, HOOK, original)
        if cache is not None:
            cache.clear()
