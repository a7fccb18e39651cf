"""The `agentsim` command (`scenarios.cli:console`): its commands, arguments, progress and sweeps.

`command` parses the command line and runs each command, `inputs` checks what the command
accepts (argument types, budgets, paths), `progress` draws the bar, `sweeps` spreads seeds
over a local process pool or a Dask cluster.
"""

from scenarios.cli.command import console, main

__all__ = ["console", "main"]
