"""`agentsim generate`: whole scenarios drawn by Hypothesis over the workloads' surface, run with
every invariant, each failure shrunk to a scenario file that fails on its own.

A fuzz run perturbs a story somebody wrote; a generated scenario is a story nobody wrote. The
strategies here draw one from the declarative workload descriptions (`scenarios.workloads`):
schedules of every kind, fibers, agent tools and their children, chat hosts and clients, with
platform faults drawn beside them as `agentsim fuzz` draws them
(`scenarios.hunt.fault_draws`). What is drawn is a document the loader accepts, written as YAML
text and read back with `parse_scenario`, so what runs and what a reproducer says are the same file.

| module | holds |
| --- | --- |
| `durations.py` | times drawn to hit a boundary exactly, one millisecond either side, or anywhere |
| `cron.py` | cron expressions in every field form |
| `parts.py` | `Part`: an area's agents, clients and timed steps, and the API/option pairs it uses |
| `schedules.py`, `fibers.py`, `tools.py`, `chat.py`, `facets.py` | one area each |
| `models.py` | the scenario's `model:`: replies in chunks, a tool child's work before them |
| `faults.py` | the platform's faults beside the workload (fuzz's drawing) |
| `document.py` | a drawn scenario, and its YAML text |
| `surface.py` | `Surface`: the choices a caller lets the strategies draw (all, by default) |
| `strategy.py` | `scenarios(areas)`: the whole scenario |
| `coverage.py` | the probes and API/option pairs the runs reached, and those never reached |
| `hunt.py` | the run, the search, the shrinking and the reproducers |
"""

from scenarios.generate.hunt import Finding, GenerateOutcome, drawn, generate, write_generated
from scenarios.generate.strategy import AREAS, scenarios
from scenarios.generate.surface import FULL, Surface

__all__ = [
    "AREAS",
    "FULL",
    "Finding",
    "GenerateOutcome",
    "Surface",
    "drawn",
    "generate",
    "scenarios",
    "write_generated",
]
