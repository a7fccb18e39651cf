"""A sub-agent that keeps schedules of its own: a team's reminders under its workspace.

`Workspace.open_team(name)` resolves the `Team` sub-agent and has it set its schedules up: a
stand-up every minute (an interval that cancels itself after `standups` runs) and a one-shot
retro `retro_s` from then. A sub-agent has no alarm of its own: its rows are run by its root's
alarm, through the root's isolate. Each run is one `team_runs` row and a `story:<callback>` note
of the sub-agent.
"""

from __future__ import annotations

from typing import Any, ClassVar

from scenarios.library_agents.story import StoryAgent

__all__ = ["Team", "Workspace"]


class Team(StoryAgent):
    """The sub-agent: an interval stand-up and a one-shot retro, each run written down."""

    standups: ClassVar[int] = 4
    every_s: ClassVar[int] = 60
    retro_s: ClassVar[int] = 150

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql("CREATE TABLE IF NOT EXISTS team_runs (callback TEXT NOT NULL, at INTEGER)")

    async def set_up(self) -> int:
        """The schedules, once (a second call finds them and adds none); how many it made."""
        if await self.list_schedules():
            return 0
        await self.schedule_every(self.every_s, "standup")
        await self.schedule(self.retro_s, "retro")
        return 2

    async def standup(self, payload: Any = None, row: Any = None) -> None:
        self._run("standup")
        done = self.sql("SELECT count(*) AS n FROM team_runs WHERE callback = 'standup'")
        if done[0]["n"] >= self.standups and row is not None:
            await self.cancel_schedule(row["id"])  # the row whose callback runs now

    async def retro(self, payload: Any = None, row: Any = None) -> None:
        self._run("retro")

    def _run(self, callback: str) -> None:
        now = self.host.clock.now_ms()
        self.sql("INSERT INTO team_runs VALUES (?, ?)", callback, now)
        self._note(callback, at=now)


class Workspace(StoryAgent):
    """The root: it opens a team, whose schedules its alarm runs."""

    async def open_team(self, name: str) -> int:
        team = await self.sub_agent(Team, name)
        made: int = await team.set_up()
        self._note("team_opened", team=name, made=made)
        return made
