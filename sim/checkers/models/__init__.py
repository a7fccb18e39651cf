"""Independent models the checkers compute with, written from the spec and the seeds and sharing
no code with the runtime they check: when a cron or interval schedule is due (`cron`), which
parts and milestones a client must show of an agent-tool run (`ui_parts`), and the constants,
option defaults and key scopes the checkers need, each with its spec citation
(`spec_constants`), and what the registries should hold after each call (`registries`, the
reference of the registry machine, docs/model-check.md). `tests/checkers/test_independence.py`
enforces that nothing here or in `sim.checkers` imports the runtime;
`tests/checkers/test_spec_constants.py` and `tests/checkers/test_cron_model.py` compare the
models with the runtime and with a library.
"""

from sim.checkers.models.cron import (
    CronModel,
    InvalidCron,
    first_interval_due_ms,
    next_cron_due_ms,
    next_interval_due_ms,
    parse_cron,
)
from sim.checkers.models.ui_parts import ClientRunModel, project, project_part

__all__ = [
    "ClientRunModel",
    "CronModel",
    "InvalidCron",
    "first_interval_due_ms",
    "next_cron_due_ms",
    "next_interval_due_ms",
    "parse_cron",
    "project",
    "project_part",
]
