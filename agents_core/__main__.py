"""`python -m agents_core` does nothing: the front door is the `agentsim` command."""
