"""An agent for the sweep tests: it kills the process running it (a lost worker), once or always."""

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

    async def die_always(self) -> int:
        """Ends the process every time: a seed no worker survives."""
        os._exit(3)
