"""scenarios: scenario files (YAML) that script what happens to agents, and the runner.

`load_scenario(path)` validates a file into a `Scenario` (or raises `InvalidScenario` naming the
file, line, step and field); `run_scenario(scenario, seed)` runs it on a fresh `Simulation` and
returns a `ScenarioResult` with the failures (`scenarios.run.failure.Failure`, each its sentence
as a `str`) and the command that replays the run.
The `agentsim` console script (`scenarios.cli:console`) is the front door over both.
"""

from scenarios.language.errors import InvalidScenario
from scenarios.language.loader import load_scenario, parse_scenario
from scenarios.language.schema import Scenario
from scenarios.run.runner import ScenarioResult, run_scenario

__all__ = [
    "InvalidScenario",
    "Scenario",
    "ScenarioResult",
    "load_scenario",
    "parse_scenario",
    "run_scenario",
]
