"""The hunt: looking for fault schedules that break a story's promises, and writing reproducers.

`fuzz` draws schedules with Hypothesis and shrinks the first failure; `explore` crashes at
every stratum of `crash_points` and reorders same-instant groups (`interleavings`);
`fault_sites` names what a base run executed; `emit` writes the steps found into the
scenario's own text, `reproducers` checks and writes the file, `script_reproducer` does the
same for a `sim.strategies` script. `explore_outcome` is explore's report.
"""

__all__: list[str] = []
