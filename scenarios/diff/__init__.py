"""The differential stage: a scenario runs in agentsim and on the real Agents SDK in workerd,
and the two traces are compared (`agentsim diff`).

| module | what lives there |
| --- | --- |
| `plan.py` | the agentsim run and the JSON plan compiled from it; what is Python-only |
| `workerd.py` | the npm project in `differential/`, played through vitest |
| `normalise.py` | both sides' records and tables in one form (ordinals, relative times) |
| `compare.py` | instant-by-instant comparison and the allow-list of divergence rows |
| `command.py` | the verdict lines and exit codes of `agentsim diff` |
"""

from scenarios.diff.command import Verdict, diff_command, diff_scenarios

__all__ = ["Verdict", "diff_command", "diff_scenarios"]
