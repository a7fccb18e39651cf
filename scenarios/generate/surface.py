"""`Surface`: which of the workloads' choices a generated scenario may draw.

By default every choice is open (`FULL`). A caller that can play only part of the surface (the
differential stage's real side, `scenarios.diff.playable`) narrows it, so the strategies draw
only what it can play instead of drawing and throwing away. Each tuple keeps the order and the
repeats of the full choice it narrows (a repeat is a weight), and a narrowed choice that keeps
everything draws exactly as the full one does: `FULL` draws what the generator always drew.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FULL", "Surface"]


@dataclass(frozen=True)
class Surface:
    """The hosts, children and fault profiles a drawn scenario may hold."""

    tool_hosts: tuple[str, ...] = ("agent", "think", "chat")
    """`host:` of a tools workload's parent."""
    tool_children: tuple[str, ...] = ("scripted", "think", "chat")
    """`child:` of a tools workload's runs."""
    chat_hosts: tuple[str, ...] = ("think", "chat")
    """`host:` of a chat workload."""
    profiles: tuple[str, ...] = ("platform", "flaky-storage", "hostile")
    """Named `faults:` profiles besides `none` (which is always open)."""
    storage_rates: bool = True
    """Whether a `faults:` profile of drawn storage-error and crash rates may be drawn."""
    aimed_storage: bool = True
    """Whether an `arm_storage_fault` step aimed at a verb and table may be drawn."""
    closed: frozenset[str] = frozenset()
    """`workload.name` of the workload methods and plan fields a draw may not use (a call of
    `fibers.forget`, a `schedules.backoff_ms`)."""
    timed_models: bool = False
    """Whether every model reply must stream at a drawn delay between its chunks (a top-level
    `model:` is drawn, and a chat host always has a model of its own), rather than at the
    port's seeded latency."""

    older_starts: bool = False
    """Whether a scenario may start on a release older than the one asked for and be upgraded
    to it mid-run by a drawn deploy. Closed unless a surface opens it (`FULL` does): a side
    that plays one release per scenario, as the differential stage's real side, cannot play
    an upgrade."""

    def opens(self, workload: str, name: str) -> bool:
        """Whether a draw may use the workload's method or plan field `name`."""
        return f"{workload}.{name}" not in self.closed

    def narrow(self, choices: tuple[str, ...], field: str) -> tuple[str, ...]:
        """`choices` (with their repeats) that this surface keeps open for `field`."""
        kept = tuple(choice for choice in choices if choice in getattr(self, field))
        if not kept:
            raise ValueError(f"the surface leaves no {field} of {list(choices)} to draw")
        return kept


FULL = Surface(older_starts=True)
