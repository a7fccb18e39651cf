"""sim: the simulated Durable Object platform the runtime runs on.

A simpy clock in integer milliseconds, seeded randomness, incarnations that are evicted and
restarted, an alarm slot per agent, in-memory SQLite that injects faults, simulated clients and
upstream services, and the trace. `Simulation` is the facade tests and scenarios use.
"""

# `import sim` then `sim.record_text.render_all(records)`, as the README shows.
from sim import record_text as record_text
from sim import sandbox as sandbox  # `sim.sandbox.allowed()`, as its errors say
from sim.clients import Client
from sim.errors import AgentEvicted
from sim.faults import PROFILES, FaultProfile, profile_named
from sim.kernel import IncarnationKilled
from sim.sandbox import NondeterministicCall
from sim.simulation import AgentRef, Simulation, SimulationStuck
from sim.sqlite import StorageError
from sim.trace import Trace, TraceRecord, format_sim_time
from sim.units import parse_duration_ms

__all__ = [
    "PROFILES",
    "AgentEvicted",
    "AgentRef",
    "Client",
    "FaultProfile",
    "IncarnationKilled",
    "NondeterministicCall",
    "Simulation",
    "SimulationStuck",
    "StorageError",
    "Trace",
    "TraceRecord",
    "format_sim_time",
    "parse_duration_ms",
    "profile_named",
]
