"""`python -m scenarios.cli`: the `agentsim` command without its console script."""

from scenarios.cli.command import console

console()
