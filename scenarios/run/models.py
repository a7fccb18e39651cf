"""The scripted model services of one run, built from the scenario's `ModelScript`s.

A `ScenarioModel` is a `sim.model.ScriptedModel` that a step can re-script while the run goes
on: `stall_model` and `fail_model` make it answer every later request (or the next `times`) with
a stall or a failure, whatever its rules say. A fresh one is built for every run, so the match
counters of `[a, b]` reply lists and the recorded requests never leak from one seed to the next.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scenarios.language.schema import ModelRule, ModelScript
from sim import Simulation
from sim.model import Reply, Rule, ScriptedModel, after_tool, asked, continuing, offers

__all__ = ["ScenarioModel", "build_model", "register_models"]


class ScenarioModel(ScriptedModel):
    """A scripted model whose answers a scenario step can override from now on."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._override: Reply | None = None
        self._override_left: int | None = None

    def rescript(self, reply: Reply, times: int | None = None) -> None:
        """Answer the next `times` requests (every later one: None) with `reply`."""
        self._override, self._override_left = reply, times

    def reply_for(self, request: Mapping[str, Any]) -> Reply:
        if self._override is not None and self._override_left != 0:
            if self._override_left is not None:
                self._override_left -= 1
            return self._override
        return super().reply_for(request)


def _predicate(rule: ModelRule) -> Any:
    checks = []
    if rule.asked is not None:
        checks.append(asked(rule.asked))
    if rule.offers is not None:
        checks.append(offers(rule.offers))
    if rule.after_tool is not None and rule.after_tool is not False:
        checks.append(after_tool(None if rule.after_tool is True else rule.after_tool))
    if rule.continuing:
        checks.append(continuing())
    return lambda request: all(check(request) for check in checks)


def build_model(script: ModelScript) -> ScenarioModel:
    """A fresh model answering by `script`'s rules, then its default."""
    rules = [Rule(_predicate(rule), rule.replies) for rule in script.rules]
    return ScenarioModel(rules=rules, default=script.default)


def register_models(sim: Simulation, models: Mapping[str, ModelScript]) -> dict[str, ScenarioModel]:
    """Build and register every model service of a scenario on `sim`; the models by name."""
    built = {}
    for service, script in models.items():
        built[service] = model = build_model(script)
        sim.register_model(model, service)
    return built
