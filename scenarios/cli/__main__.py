"""`python -m scenarios.cli`: the `agentsim` command without its console script."""

import sys

from scenarios.cli.command import main

sys.exit(main())
