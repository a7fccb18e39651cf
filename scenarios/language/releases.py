"""The SDK releases a scenario names: its top-level `sdk:` and the `sdk:` of a deploy step.

`check_release` refuses a name agentsim does not model, at its line, with the list of those it
does. `upgrade_problems` walks the deploy steps in order from the release the run starts on
and refuses one that would bring an older release than the one deployed (a downgrade).
`preview_notes` is what the tools print, once, on stderr, for a run on a release modelled in
part (`Release.not_built`), so that nobody takes its results for the whole release's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from agents_core.releases.registry import DEFAULT_RELEASE, RELEASES, release_named
from scenarios.language.errors import InvalidScenario
from scenarios.language.fields import Fields
from scenarios.language.schema import DeployStep, Scenario
from sim.upgrades import upgrade_refusal

__all__ = [
    "check_release",
    "preview_notes",
    "release_flag_problem",
    "releases_run",
    "upgrade_problems",
    "upgrades",
]


def check_release(fields: Fields, key: str) -> str:
    """The release name at `key`, refused with the list of releases agentsim models (a number
    written unquoted, `sdk: 0.32`, is refused too: YAML reads it as a float)."""
    value = fields.raw(key)
    if not isinstance(value, str) or value not in RELEASES:
        fields.fail(
            key,
            f"{key}: {value!r} is not an SDK release agentsim models",
            f"supported releases: {', '.join(RELEASES)} (quote the version: {key}: "
            f'"{DEFAULT_RELEASE}")',
        )
    return value


def upgrades(scenario: Scenario) -> Iterator[tuple[DeployStep, str, str]]:
    """Each deploy step that names a release, with the release deployed before it and the one
    it names, in step order, from the release the run starts on (`scenario.sdk`)."""
    current = scenario.sdk
    for step in scenario.steps:
        if isinstance(step, DeployStep) and step.sdk is not None:
            yield step, current, step.sdk
            if upgrade_refusal(current, step.sdk) is None:
                current = step.sdk


def upgrade_problems(scenario: Scenario) -> list[InvalidScenario]:
    """A deploy step that would downgrade the release of a run of `scenario`, one error each."""
    return [
        InvalidScenario(scenario.path, step.line, step.label, refusal)
        for step, before, after in upgrades(scenario)
        if (refusal := upgrade_refusal(before, after)) is not None
    ]


def releases_run(scenarios: Iterable[Scenario]) -> list[str]:
    """Every release a run of `scenarios` runs on: each one's start release and the releases
    its deploys bring, oldest first."""
    named = {scenario.sdk for scenario in scenarios}
    for scenario in scenarios:
        named.update(after for _, _, after in upgrades(scenario))
    return [name for name in RELEASES if name in named]


def preview_notes(releases: Iterable[str], command: str) -> list[str]:
    """One line per release of `releases` modelled in part: that it is a preview and what of it
    is not built (the registry's list), for `command` (`agentsim run`) to print on stderr."""
    lines = []
    for name in dict.fromkeys(releases):
        release = release_named(name)
        if release.preview:
            count = len(release.not_built)
            lines.append(
                f"{command}: note: SDK release {name} is modelled in part: {count} "
                f"{'part' if count == 1 else 'parts'} of it {'is' if count == 1 else 'are'} not "
                f"built yet, where a run behaves as the release before it "
                f"(docs/not-built-yet.md lists them)"
            )
    return lines


def release_flag_problem(text: str) -> str | None:
    """Why `--sdk text` names no release agentsim models (None: it names one)."""
    if text in RELEASES:
        return None
    return f"SDK release {text!r} is not modelled; supported releases: {', '.join(RELEASES)}"
