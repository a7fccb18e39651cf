"""An agent for the sweep tests: it kills the process that runs it, once (a lost worker)."""

from __future__ import annotations

import os
from pathlib import Path

from scenarios.workloads import Counter


class DiesOnce(Counter):
    """A counter whose `die_once(marker)` ends the whole process the first time it runs anywhere
    (the marker file remembers it across processes), as a worker lost mid-task does."""

    async def die_once(self, marker: str) -> int:
        path = Path(marker)
        if not path.exists():
            path.write_text("died once\n", encoding="utf-8")
            os._exit(3)
        return self._count("die_once")
