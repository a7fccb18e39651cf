"""The upgrade: a deploy that brings another SDK release.

A deploy normally restarts every live incarnation on the same code. `deploy(sdk="0.32.0")`
brings a newer release: from that instant the platform's release is the new one, and every
incarnation that starts after it (roots, and the facets in their isolates) runs that release's
build on the stored state as it is. The deploy record says so (`platform:deploy` with an `sdk`
field, written only when the release changes, so a run that never upgrades keeps its trace).
Only forward: a stored state an upgrade migrated is never read by older code again, so a
downgrade, like a release the runtime does not model, is refused.
"""

from __future__ import annotations

from agents_core.errors import InvalidArgument
from agents_core.releases.registry import RELEASES

__all__ = ["UpgradeRefused", "newer_releases", "upgrade_refusal"]


class UpgradeRefused(InvalidArgument):
    """A deploy to a release the platform cannot move to: unknown, or older than the one
    deployed."""


def upgrade_refusal(current: str, target: str) -> str | None:
    """Why a deploy from release `current` cannot bring `target` (None: it can; the same
    release is a plain deploy)."""
    order = list(RELEASES)
    if target not in RELEASES:
        return (
            f"a deploy cannot bring SDK release {target!r}: it is not modelled; supported "
            f"releases: {', '.join(order)}"
        )
    if current in RELEASES and order.index(target) < order.index(current):
        return (
            f"a deploy cannot bring SDK release {target} over {current}: that is a downgrade, "
            f"and a stored state a newer release migrated is never read by older code; "
            f"upgrades go from older to newer, {' -> '.join(order)}"
        )
    return None


def newer_releases(current: str) -> tuple[str, ...]:
    """The modelled releases a deploy from `current` can upgrade to, oldest first."""
    order = list(RELEASES)
    if current not in RELEASES:
        return ()
    return tuple(order[order.index(current) + 1 :])
