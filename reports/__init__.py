"""Reports: what people and CI read about runs, made from trace records (JSONL) alone.

`reports` imports nothing else of the project (not the runtime, the simulator or the scenarios):
a trace file and what a runner knows about a run (`RunReport`) are its whole input. Four
renderers, each a pure function whose output is the same bytes for the same input:

- `render_short_log(records)`: one line per event in fixed columns (see `reports/README.md`);
- `render_html(run)`: a self-contained page with the verdict, the replay command, a timeline
  per agent and the full event table;
- `render_junit(runs)`: JUnit XML, a test case per scenario and seed;
- `render_summary(runs)`: a multi-seed table for the terminal with a replay line per failure.
"""

from __future__ import annotations

from reports.html import render as render_html
from reports.junit import render as render_junit
from reports.records import (
    RunReport,
    TraceCut,
    TraceFormatError,
    parse_trace_lines,
    read_trace,
    read_trace_cut,
    trace_digest,
)
from reports.shortlog import render as render_short_log
from reports.summary import render as render_summary

__all__ = [
    "RunReport",
    "TraceCut",
    "TraceFormatError",
    "parse_trace_lines",
    "read_trace",
    "read_trace_cut",
    "render_html",
    "render_junit",
    "render_short_log",
    "render_summary",
    "trace_digest",
]
