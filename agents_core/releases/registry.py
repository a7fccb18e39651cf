"""The releases the runtime models, by name, and the one a run gets when it names none.

`release_named("0.21.0")` gives that release's `build`; a name the runtime does not model is
refused with the list of those it does. Adding a release is adding its module here: its
`build` picks the components it shares with the others and those it swaps.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents_core.errors import InvalidArgument
from agents_core.releases import v0_21
from agents_core.releases.runtime import Build

__all__ = ["DEFAULT_RELEASE", "RELEASES", "Release", "UnknownRelease", "release_named"]


@dataclass(frozen=True, slots=True)
class Release:
    """One SDK release: its npm version, its publication date, and how it builds an agent."""

    name: str
    published: str
    build: Build


RELEASES: dict[str, Release] = {
    v0_21.NAME: Release(v0_21.NAME, "2026-08-18", v0_21.build),
}
"""Every release the runtime models, oldest first."""

DEFAULT_RELEASE = v0_21.NAME
"""The release of a run that names none."""


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
