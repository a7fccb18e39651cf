"""The releases the runtime models, by name, and the one a run gets when it names none.

`release_named("0.21.0")` gives that release's `build`; a name the runtime does not model is
refused with the list of those it does. Adding a release is adding its module here: its
`build` picks the components it shares with the others and those it swaps. The default is the
newest release, 0.32.0; a run picks 0.21.0 by naming it (`sdk: "0.21.0"`, `--sdk 0.21.0`,
`Simulation(sdk="0.21.0")`, `--agentsim-sdk 0.21.0`).
"""

from __future__ import annotations

from dataclasses import dataclass

from agents_core.errors import InvalidArgument
from agents_core.releases import v0_21, v0_32
from agents_core.releases.runtime import Build

__all__ = ["DEFAULT_RELEASE", "RELEASES", "Release", "UnknownRelease", "release_named"]


@dataclass(frozen=True, slots=True)
class Release:
    """One SDK release: its npm version, its publication date, and how it builds an agent."""

    name: str
    published: str
    build: Build
    not_built: tuple[str, ...] = ()
    """What of the release is not modelled yet (empty: all of it is); a run on a release
    with something left here is a preview, and the tools say so."""

    @property
    def preview(self) -> bool:
        return bool(self.not_built)


RELEASES: dict[str, Release] = {
    v0_21.NAME: Release(v0_21.NAME, "2026-08-18", v0_21.build),
    v0_32.NAME: Release(v0_32.NAME, "2026-10-29", v0_32.build, v0_32.NOT_BUILT),
}
"""Every release the runtime models, oldest first."""

DEFAULT_RELEASE = v0_32.NAME
"""The release of a run that names none: the newest one. While its `not_built` lists anything,
a run on it is a preview and the tools say so (docs/not-built-yet.md)."""


class UnknownRelease(InvalidArgument):
    """A release name the runtime does not model."""


def release_named(name: str) -> Release:
    """The release `name` (an npm version, `0.21.0`), or `UnknownRelease` naming those there are."""
    found = RELEASES.get(name)
    if found is None:
        raise UnknownRelease(
            f"SDK release {name!r} is not modelled; the releases agentsim models are "
            f"{', '.join(RELEASES)}"
        )
    return found
