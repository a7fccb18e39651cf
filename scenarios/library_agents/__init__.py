"""Agents the bundled library scenarios (`scenarios/library/*.yaml`) name by import path,
`scenarios.library_agents:ClassName`.

Each class tells one story of the seed pages with as little code as the story needs, and
records what it observes through `StoryAgent._note` (a `story_log` row and a `story:<kind>`
trace record), with fields chosen so that an expectation can say what must hold without knowing
seeded ids or timings.

| module | what lives there |
| --- | --- |
| `story.py` | `StoryAgent`, the base |
| `fibers.py` | fiber stories: `Researcher`, `PoisonedResearcher`, `Batcher`, `Webhooks`, ... |
| `children.py` | `StoryChild`, a scripted agent-tool child, and two variants |
| `parents.py` | `StoryParent`, `SlowFinishParent`, `NarratingParent` |
| `team.py` | `Workspace` and its sub-agent `Team`, which keeps schedules of its own |
"""

from scenarios.library_agents.children import MiddleChild, StoryChild, StubbornChild
from scenarios.library_agents.fibers import (
    Batcher,
    Digest,
    Exporter,
    PoisonedResearcher,
    Researcher,
    SlowRecoveryResearcher,
    StrictWebhooks,
    Webhooks,
)
from scenarios.library_agents.parents import NarratingParent, SlowFinishParent, StoryParent
from scenarios.library_agents.story import StoryAgent
from scenarios.library_agents.team import Team, Workspace

__all__ = [
    "Batcher",
    "Digest",
    "Exporter",
    "MiddleChild",
    "NarratingParent",
    "PoisonedResearcher",
    "Researcher",
    "SlowFinishParent",
    "SlowRecoveryResearcher",
    "StoryAgent",
    "StoryChild",
    "StoryParent",
    "StrictWebhooks",
    "StubbornChild",
    "Team",
    "Webhooks",
    "Workspace",
]
