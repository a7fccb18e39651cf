"""Hypothesis for your own agents, as `sim.strategies`: a re-export of `scenarios.hunt.strategies`.

Fault schedules drawn as `agentsim fuzz` draws them (`fault_schedules`), a driver that writes
down what it did (`FaultDriver`), a rule-based state machine over your agents (`AgentMachine`,
`run_machine`) and the reproducer writer (`write_reproducer`) live with the other hunting
tools, in `scenarios.hunt`; docs/hypothesis.md says what they promise. They are named here too,
where tests have always imported them (`from sim.strategies import Fault, Schedule` is what a
failing example tells you to paste). This is the one module of `sim` that imports a layer above
it (the exception `tests/test_import_graph.py` lists): nothing else in `sim` imports this one,
so `import sim` loads neither `scenarios` nor Hypothesis (the test extra).
"""

from scenarios.hunt.strategies import (
    DRIVER_FAULT_KINDS,
    PAUSES_MS,
    AgentMachine,
    ExpectationFailed,
    Fault,
    FaultDriver,
    Schedule,
    Script,
    UnstatedFailure,
    fault_schedules,
    run_machine,
    without_explain,
    write_reproducer,
)

__all__ = [
    "DRIVER_FAULT_KINDS",
    "PAUSES_MS",
    "AgentMachine",
    "ExpectationFailed",
    "Fault",
    "FaultDriver",
    "Schedule",
    "Script",
    "UnstatedFailure",
    "fault_schedules",
    "run_machine",
    "without_explain",
    "write_reproducer",
]
