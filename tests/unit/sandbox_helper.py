"""A module standing for a user's library that reads the real clock (for `allow_module`)."""

from __future__ import annotations

import time


def stamp() -> float:
    return time.time()
