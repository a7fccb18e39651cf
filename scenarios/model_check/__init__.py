"""Model-based checking of the registries: a Hypothesis state machine whose rules are API calls
on a simulated root agent and its sub-agents (`agents`), checked after every rule against the
reference model `sim.checkers.models.registries` (`machine`). See docs/model-check.md."""

from scenarios.model_check.agents import RegistryChild, RegistryRoot
from scenarios.model_check.machine import ModelMismatch, registry_machine, run_registry_machine

__all__ = [
    "ModelMismatch",
    "RegistryChild",
    "RegistryRoot",
    "registry_machine",
    "run_registry_machine",
]
