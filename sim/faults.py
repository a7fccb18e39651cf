"""Fault profiles: which faults the platform injects by itself, and how often.

Explicit faults (an eviction, a deploy, one armed storage fault) are scripted through the
`Simulation`; a profile adds seeded background faults during the safety phase. `quiesce` turns
every profile fault off for the liveness phase.

Guarantees the injectors preserve whatever the profile: a committed turn is never lost; the
alarm slot and every table survive every fault; time only moves forward.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

__all__ = ["FaultProfile", "PROFILES", "profile_named"]


@dataclass(frozen=True)
class FaultProfile:
    """Seeded background faults. All zero (the default) means a calm platform."""

    deploys_per_day: tuple[int, int] = (0, 0)
    """Deploy restarts per simulated day, drawn uniformly in [low, high] for each day."""
    storage_error_rate: float = 0.0
    """Chance that a statement run by agent code raises a storage error."""
    crash_rate: float = 0.0
    """Chance that the process dies just before a statement run by agent code."""
    idle_eviction: bool = True
    """Whether idle incarnations are evicted after the seeded 70–140 s."""
    name: str = field(default="custom", compare=False)

    def __post_init__(self) -> None:
        low, high = self.deploys_per_day
        if not (isinstance(low, int) and isinstance(high, int) and 0 <= low <= high <= 1000):
            raise ValueError(
                f"deploys_per_day must be two whole numbers 0 <= low <= high <= 1000, "
                f"got {self.deploys_per_day!r}"
            )
        for name in ("storage_error_rate", "crash_rate"):
            rate = getattr(self, name)
            if not (isinstance(rate, int | float) and 0.0 <= rate <= 1.0):
                raise ValueError(f"{name} must be a probability in [0, 1], got {rate!r}")

    @property
    def injects(self) -> bool:
        return self.deploys_per_day != (0, 0) or self.storage_error_rate > 0 or self.crash_rate > 0

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls) if f.name != "name"]


PROFILES: dict[str, FaultProfile] = {
    "none": FaultProfile(name="none"),
    "platform": FaultProfile(deploys_per_day=(1, 2), name="platform"),
    "flaky-storage": FaultProfile(storage_error_rate=0.01, name="flaky-storage"),
    "hostile": FaultProfile(
        deploys_per_day=(1, 2), storage_error_rate=0.005, crash_rate=0.002, name="hostile"
    ),
}
"""Named profiles: `platform` is what production does to an agent (1–2 deploys a day)."""


def profile_named(name: str) -> FaultProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(
            f"unknown fault profile {name!r}; known profiles: {sorted(PROFILES)}"
        ) from None
