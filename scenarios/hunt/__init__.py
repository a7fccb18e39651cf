"""The hunt: looking for fault schedules that break a story's promises, and writing reproducers.

`fuzz` draws schedules with Hypothesis and shrinks the first failure; `explore` crashes at
every stratum of `crash_points` and reorders same-instant groups (`interleavings`);
`fault_sites` names what a base run executed; `emit` writes the steps found into the
scenario's own text, `reproducers` checks and writes the file, `script_reproducer` does the
same for a `FaultDriver` script. `explore_outcome` is explore's report. Both hunts draw with
`fault_draws` and group a run's statements by `statement_shapes`. The Hypothesis API for
users' own agents is `strategies` (over `fault_driver`; `sim.strategies` re-exports it), with
`explanations`, which keeps agentsim's files out of Hypothesis's explanations.
"""

__all__: list[str] = []
