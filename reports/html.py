"""The HTML report of one run: one self-contained page a person opens after a failure.

Top: the verdict (PASSED, FAILED, or VERDICT UNKNOWN for a trace read without its run record),
the scenario's description, the failures as sentences and the command that replays the run. Then
what happened in numbers (incarnations by end cause, alarm handler runs, fibers and agent-tool
runs by outcome, faults, hook deliveries), the timeline (a lane per agent path, facets nested
under their root: incarnations from start trigger to end cause, alarm handler runs and alarm
marks, faults, hooks and errors, fibers and agent-tool runs to their terminal status, deploys
across every lane, the liveness phase shaded), a legend, and the full event table. Hovering a
bar or mark shows its records; clicking it jumps to the record in the table.

The page loads nothing (inline CSS, SVG and script, system fonts, a Content-Security-Policy
that forbids every fetch), escapes every trace value, and is the same bytes for the same run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from reports._assets import CSP, CSS, SCRIPT
from reports._dense import thin
from reports._format import duration, one_line, sim_time
from reports._json import dumps
from reports._svg import chart, default_scale, labels
from reports._timeline import Lane, Timeline, build, css_token
from reports.records import RunReport
from reports.shortlog import detail

__all__ = ["render"]


def _esc(text: Any) -> str:
    return escape(one_line(str(text)), quote=True)


def _esc_block(text: Any) -> str:
    """Escaped, keeping line breaks (failure sentences may span lines)."""
    return "\n".join(_esc(line) for line in str(text).split("\n"))


def render(run: RunReport) -> str:
    """The page for `run`, as a string (write it with `encoding="utf-8"`)."""
    timeline = build(run.records)
    scale = default_scale(timeline)
    verdict = _verdict(run)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{verdict} {_esc(run.name)} [seed {run.seed}] - agentsim</title>",
        f"<style>{CSS}{_END_CSS}</style>",
        "</head>",
        "<body>",
        _header(run, verdict),
        "<main>",
        _stats(timeline, run.records),
        _timeline_section(timeline, thin(timeline, scale), scale),
        _table(run.records),
        "</main>",
        f"<script>{SCRIPT}</script>",
        "</body>",
        "</html>",
    ]
    return "\n".join(parts) + "\n"


def _verdict(run: RunReport) -> str:
    """PASSED, FAILED, or VERDICT UNKNOWN for a trace read without its run record (never a
    guess: a page titled FAILED for a run that passed would send someone hunting)."""
    if not run.verdict_known:
        return "VERDICT UNKNOWN"
    return "PASSED" if run.passed else "FAILED"


def _header(run: RunReport, verdict: str) -> str:
    status = ("pass" if run.passed else "fail") if run.verdict_known else "unknown"
    meta = [
        f"seed <b>{run.seed}</b>",
        f'<span class="mono">{_esc(run.path)}</span>',
        f"{len(run.records)} events",
        f"{_esc(duration(run.elapsed_sim_ms))} of sim time ({sim_time(run.elapsed_sim_ms)})",
        f'digest <code title="{_esc(run.digest)}">{_esc(run.digest[:12])}</code>',
    ]
    out = [
        f'<header class="verdict {status}" id="verdict" data-verdict="{status}">',
        f'<span class="badge">{verdict}</span><h1>{_esc(run.name)}</h1>',
        f'<p class="meta">{" · ".join(meta)}</p>',
    ]
    if run.description.strip():
        out.append(f'<p class="description" id="description">{_esc(run.description)}</p>')
    for note in run.notes:
        out.append(f'<p class="note">{_esc_block(note)}</p>')
    if run.failures:
        items = "".join(f"<li>{_esc_block(sentence)}</li>" for sentence in run.failures)
        out.append(f'<ol class="failures">{items}</ol>')
    out.append(
        '<div class="replay"><span>replay</span>'
        f'<pre><code id="replay">{_esc_block(run.replay_command)}</code></pre>'
        '<button id="copy-replay" type="button">copy</button></div>'
    )
    out.append("</header>")
    return "\n".join(out)


def _chips(counts: Iterable[tuple[str, int]]) -> str:
    return "".join(
        f'<span class="chip st-{css_token(status)}">{_esc(status)} {n}</span>'
        for status, n in counts
    )


def _spans(timeline: Timeline, row: str) -> list[str]:
    return [span.status for lane in timeline.lanes for span in lane.spans if span.row == row]


def _stats(timeline: Timeline, records: list[dict[str, Any]]) -> str:
    events = Counter(str(r["event"]) for r in records)
    rows: list[tuple[str, int, str]] = []
    for title, row in (
        ("incarnations", "inc"),
        ("alarm handler runs", "alarm"),
        ("fibers", "fiber"),
        ("agent-tool runs", "run"),
    ):
        statuses = _spans(timeline, row)
        extra = ""
        if row == "alarm":
            extra = "".join(
                f'<span class="chip st-{token}">{name} {events[event]}</span>'
                for event, name, token in _ALARM_EXTRA
                if events[event]
            )
        rows.append((title, len(statuses), _chips(_by_count(statuses)) + extra))
    faults = [(e.split(":", 1)[1], n) for e, n in sorted(events.items()) if e.startswith("fault:")]
    rows.append(("faults", sum(n for name, n in faults if name != "armed"), _fault_chips(faults)))
    hooks = Counter(
        f"{r.get('slot', '?')}: {r.get('status', '?')}"
        for r in records
        if r["event"] == "hook:delivered"
    )
    rows.append(("hook deliveries", sum(hooks.values()), _hook_chips(hooks)))
    body = "".join(f"<tr><th>{title}</th><td>{n} {chips}</td></tr>" for title, n, chips in rows)
    return f'<h2>What happened</h2>\n<table class="stats" id="stats">{body}</table>'


_ALARM_EXTRA = (("alarm:retry", "retried", "retry"), ("alarm:given_up", "given up", "given-up"))


def _by_count(statuses: list[str]) -> list[tuple[str, int]]:
    return sorted(Counter(statuses).items(), key=lambda item: (-item[1], item[0]))


def _fault_chips(faults: list[tuple[str, int]]) -> str:
    return "".join(
        f'<span class="chip st-{"set" if name == "armed" else "fault"}">{_esc(name)} {n}</span>'
        for name, n in faults
    )


def _hook_chips(hooks: Mapping[str, int]) -> str:
    return "".join(
        f'<span class="chip st-{css_token(key.split(": ", 1)[-1])}">{_esc(key)} {n}</span>'
        for key, n in sorted(hooks.items())
    )


def _lane_counts(lane: Lane) -> str:
    kinds = Counter(span.row for span in lane.spans)
    words = (("inc", "inc", "inc"), ("fiber", "fiber", "fibers"), ("run", "run", "runs"))
    parts = [f"{kinds[k]} {one if kinds[k] == 1 else many}" for k, one, many in words if kinds[k]]
    if lane.path == "":
        n = sum(m.count for m in lane.marks)
        parts = [f"{n} platform event{'' if n == 1 else 's'}"]
    return " · ".join(parts)


def _timeline_section(timeline: Timeline, drawn: Timeline, scale: str) -> str:
    """`timeline` counted in the labels, `drawn` (the same, thinned when crowded) drawn."""
    counts = {lane.path: _lane_counts(lane) for lane in timeline.lanes}
    pressed = {name: str(scale == name).lower() for name in ("time", "order")}
    controls = (
        '<div class="controls" role="toolbar" aria-label="timeline controls">'
        "<span>scale</span>"
        f'<button type="button" id="scale-time" aria-pressed="{pressed["time"]}">sim time</button>'
        f'<button type="button" id="scale-order" aria-pressed="{pressed["order"]}">'
        "event order</button>"
        '<span class="sep"></span><span>zoom</span>'
        '<button type="button" id="zoom-out" aria-label="zoom out">−</button>'
        '<span id="zoom-level">1×</span>'
        '<button type="button" id="zoom-in" aria-label="zoom in">+</button>'
        '<button type="button" id="zoom-fit">fit</button>'
        '<span class="sep"></span><span class="hint">hover a bar or mark for its records; '
        "click it to find them in the event table</span></div>"
    )
    return "\n".join(
        [
            f'<h2>Timeline <small class="hint">({len(timeline.lanes)} lanes)</small></h2>',
            controls,
            '<div class="timeline" id="timeline">',
            f'<div class="labels-col">{labels(drawn, counts)}</div>',
            f'<div class="scroll">{chart(drawn, scale)}</div>',
            "</div>",
            _LEGEND,
        ]
    )


def _swatch(status: str, text: str) -> str:
    return f'<span class="chip st-{status}">{text}</span>'


def _shape(shape: str, status: str, path: str, text: str) -> str:
    return (
        f'<svg width="14" height="14" aria-hidden="true"><g class="mark m-{shape} st-{status}" '
        f'transform="translate(7,7)"><path d="{path}"/></g></svg>{text}'
    )


_END_REASONS = (
    "idle",
    "deploy",
    "alarm-limit",
    "explicit",
    "crash",
    "destroyed",
    "deleted",
    "reset",
)
"""Every `incarnation:end` reason (`sim.platform.EVICTION_REASONS`), in the legend's order."""
_END_CSS = ".st-reset{--c:#e6c6ec;--d:#8e24aa}"
"""The colour of a `reset` end (an agent's abort with no alarm retry: 0.32.0's isolate reset
after a memory-limit strike), beside the other ends' in `_assets.CSS`."""

_LEGEND = (
    '<div class="legend" id="legend">'
    "<div><b>incarnation ended by</b>"
    + "".join(_swatch(s, s) for s in _END_REASONS)
    + _swatch("alive", "alive at the end")
    + "</div><div><b>alarm handler</b>"
    + "".join(_swatch(s, s) for s in ("done", "failed", "killed", "interrupted"))
    + "</div><div><b>fiber</b>"
    + "".join(
        _swatch(s, s)
        for s in ("completed", "failed", "interrupted", "recovered", "recovery-failed", "skipped")
    )
    + _swatch("running", "running")
    + "</div><div><b>agent-tool run</b>"
    + "".join(_swatch(s, s) for s in ("completed", "error", "aborted", "interrupted", "running"))
    + "</div><div><b>marks</b>"
    + _shape("tick", "set", "M0,-6V6", "alarm set")
    + _shape("ring", "retry", "M-4,0A4,4 0 1,0 4,0A4,4 0 1,0 -4,0Z", "alarm retry")
    + _shape("cross", "killed", "M-4,-4L4,4M4,-4L-4,4", "alarm failed / killed")
    + _shape("fault", "fault", "M0,-6L6,5H-6Z", "fault")
    + _shape("hook", "completed", "M-4,0A4,4 0 1,0 4,0A4,4 0 1,0 -4,0Z", "hook (finish)")
    + _shape("give-up", "interrupted", "M-4,-4H4V4H-4Z", "hook (give up)")
    + _shape("dot", "error", "M-3,0A3,3 0 1,0 3,0A3,3 0 1,0 -3,0Z", "error")
    + "</div><div><b>across lanes</b>"
    '<span class="chip" style="--c:#fff;border:1px dashed #7e57c2">deploy</span>'
    '<span class="chip" style="--c:rgba(90,100,120,.12)">liveness phase (quiesce)</span>'
    "<b>dashed tail</b> the incarnation died before the outcome, or a later terminal followed"
    "</div></div>"
)


STATIC_ROWS_MAX = 5_000
"""Up to this many records the event table is plain HTML. A longer run's rows travel as
compact JSON (agent and event names once each) that the page's script turns into rows after
load, so that a page of 100 000 events stays under 10 MB and opens in seconds."""


def _table(records: list[dict[str, Any]]) -> str:
    if len(records) > STATIC_ROWS_MAX:
        return _lazy_table(records)
    rows = []
    for record in records:
        agent = str(record["agent"])
        family = css_token(str(record["event"]).split(":", 1)[0])
        inc = "" if agent == "" else f"#{record['inc']}"
        rows.append(
            f'<tr id="e{_esc(record["seq"])}" class="f-{family}">'
            f'<td class="num">{_esc(record["seq"])}</td><td>{sim_time(record["t"])}</td>'
            f"<td>{_esc(agent or '(platform)')}</td><td>{inc}</td>"
            f'<td class="ev">{_esc(record["event"])}</td>'
            f'<td class="detail">{_esc(detail(record, None))}</td></tr>'
        )
    return "\n".join([*_table_head(len(records), lazy=False), *rows, "</tbody></table>"])


def _table_head(count: int, lazy: bool) -> list[str]:
    return [
        f'<h2>Events <small class="hint">({count})</small></h2>',
        '<input id="filter" type="search" placeholder="filter: any text of a row" '
        'aria-label="filter events">',
        f'<table id="events"{LAZY_ATTRIBUTE if lazy else ""}><thead><tr><th>seq</th>'
        "<th>time</th><th>agent</th><th>inc</th><th>event</th><th>detail</th></tr></thead>"
        "<tbody>",
    ]


LAZY_ATTRIBUTE = ' data-lazy="1"'


def _lazy_table(records: list[dict[str, Any]]) -> str:
    """The table as `[seq, t, agent index, inc, event index, detail]` rows in a JSON data
    block; every value is escaped by the script (`textContent`), and `<` is written `\\u003c`
    so that nothing in a value can end the block."""
    agents: dict[str, int] = {}
    events: dict[str, int] = {}
    rows = [
        [
            record["seq"],
            record["t"],
            agents.setdefault(one_line(str(record["agent"])), len(agents)),
            record["inc"],
            events.setdefault(one_line(str(record["event"])), len(events)),
            one_line(detail(record, None)),
        ]
        for record in records
    ]
    data = {
        "agents": list(agents),
        "events": list(events),
        "families": [css_token(event.split(":", 1)[0]) for event in events],
        "rows": rows,
    }
    text = dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    return "\n".join(
        [
            *_table_head(len(records), lazy=True),
            "</tbody></table>",
            '<div id="events-more"></div>',
            f'<script type="application/json" id="events-data">{text}</script>',
        ]
    )
