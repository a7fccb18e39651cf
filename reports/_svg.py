"""The timeline drawn as inline SVG: a label column and a chart with one lane per agent.

Every positioned element carries its sim time (`data-t*`) and record index (`data-s*`), and is
first laid out here for the default scale at zoom 1, so the chart reads without script; the
page's script only moves x coordinates when the reader zooms or switches between the time scale
and the event-order scale. All text is escaped; numbers are written with one decimal so the
output is the same bytes for the same records.
"""

from __future__ import annotations

from html import escape

from reports._format import elide_path, sim_time
from reports._timeline import Lane, Mark, Span, Timeline

__all__ = ["BASE_WIDTH", "chart", "default_scale", "labels"]

BASE_WIDTH = 1200
LABEL_WIDTH = 260
PAD = 12
AXIS_H = 26
ROW_H = 16
LANE_PAD = 5
MIN_LANE_H = 38
CHAR_W = 6.1
"""Width of one character of a 10px monospace label, to decide whether a label fits its bar."""
_BAR_H = {"inc": 12, "alarm": 6, "fiber": 10, "run": 10}
_SHAPES = {
    "tick": "M0,-6V6",
    "diamond": "M0,-6L5,0L0,6L-5,0Z",
    "cross": "M-4,-4L4,4M4,-4L-4,4",
    "fault": "M0,-6L6,5H-6Z",
    "fault-armed": "M0,-6L6,5H-6Z",
    "hook": "M-4,0A4,4 0 1,0 4,0A4,4 0 1,0 -4,0Z",
    "ring": "M-4,0A4,4 0 1,0 4,0A4,4 0 1,0 -4,0Z",
    "give-up": "M-4,-4H4V4H-4Z",
    "square": "M-4,-4H4V4H-4Z",
    "dot": "M-3,0A3,3 0 1,0 3,0A3,3 0 1,0 -3,0Z",
}
_TITLE_LINES = 16
_TIME_STEPS_MS = (
    *(1, 2, 5, 10, 20, 50, 100, 200, 500),
    *(1000, 2000, 5000, 10_000, 15_000, 30_000),
    *(60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000),
    *(3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000),
    *(86_400_000, 172_800_000, 604_800_000),
)


def _esc(text: str) -> str:
    return escape(text, quote=True)


def _num(value: float) -> str:
    return f"{value:.1f}"


def _title(lines: list[str]) -> str:
    if len(lines) > _TITLE_LINES:
        lines = [*lines[: _TITLE_LINES - 1], f"… and {len(lines) - _TITLE_LINES + 1} more"]
    return f"<title>{_esc(chr(10).join(lines))}</title>"


def default_scale(timeline: Timeline) -> str:
    """`time`, unless most records crowd into a few instants (a run whose work happens at
    t=0 and then idles out): then `order`, one step per record."""
    if timeline.end_t <= 0:
        return "order"
    buckets = {t * 200 // timeline.end_t for t in timeline.times}
    return "order" if len(buckets) * 5 < min(len(timeline.times), 200) else "time"


class _Geometry:
    def __init__(self, timeline: Timeline, scale: str) -> None:
        self.end_t = timeline.end_t
        self.count = max(timeline.count, 1)
        self.scale = scale
        self.inner = BASE_WIDTH - 2 * PAD

    def x(self, t: int, s: int) -> float:
        if self.scale == "time":
            return PAD + (t / self.end_t if self.end_t > 0 else 0.0) * self.inner
        return PAD + (s + 0.5) / self.count * self.inner


def lane_height(lane: Lane) -> int:
    return max(MIN_LANE_H, 2 * LANE_PAD + len(lane.rows) * ROW_H)


def _row_center(lane: Lane, top: int, row: str, sub: int = 0) -> float:
    index = lane.rows.index((row, sub)) if (row, sub) in lane.rows else 0
    return top + LANE_PAD + index * ROW_H + ROW_H / 2


def labels(timeline: Timeline, counts: dict[str, str]) -> str:
    """The label column: each lane's path (relative to its owner, indented) and its counts."""
    height = AXIS_H + sum(lane_height(lane) for lane in timeline.lanes)
    out = [f'<svg class="labels" width="{LABEL_WIDTH}" height="{height}" role="list">']
    out.append(f'<text class="axis-title" x="8" y="{AXIS_H - 9}">agent</text>')
    top = AXIS_H
    for n, lane in enumerate(timeline.lanes):
        h = lane_height(lane)
        indent = 8 + lane.depth * 14
        chars = int((LABEL_WIDTH - indent - 8) / 7.0)
        name = ("↳ " if lane.depth else "") + elide_path(lane.label, chars - 2 * bool(lane.depth))
        zebra = " odd" if n % 2 else ""
        out.append(f'<g class="lane-label" data-agent="{_esc(lane.path)}" role="listitem">')
        out.append(f"<title>{_esc(lane.path or 'platform-wide events')}</title>")
        out.append(
            f'<rect class="lane-bg{zebra}" x="0" y="{top}" width="{LABEL_WIDTH}" height="{h}"/>'
        )
        out.append(f'<text class="name" x="{indent}" y="{top + 16}">{_esc(name)}</text>')
        out.append(
            f'<text class="counts" x="{indent}" y="{top + 30}">'
            f"{_esc(counts.get(lane.path, ''))}</text></g>"
        )
        top += h
    out.append("</svg>")
    return "".join(out)


def chart(timeline: Timeline, scale: str) -> str:
    """The chart: axes for both scales, lane backgrounds, the liveness phase, deploys (across
    every lane), then each lane's spans and marks."""
    geo = _Geometry(timeline, scale)
    height = AXIS_H + sum(lane_height(lane) for lane in timeline.lanes)
    out = [
        f'<svg class="chart scale-{scale}" id="chart" width="{BASE_WIDTH}" height="{height}" '
        f'data-base="{BASE_WIDTH}" data-pad="{PAD}" data-end="{timeline.end_t}" '
        f'data-count="{geo.count}" data-scale="{scale}">'
    ]
    top = AXIS_H
    for n, lane in enumerate(timeline.lanes):
        zebra = " odd" if n % 2 else ""
        h = lane_height(lane)
        out.append(f'<rect class="lane-bg{zebra}" x="0" y="{top}" width="100%" height="{h}"/>')
        top += h
    out += [_time_axis(geo, height), _order_axis(geo, height, timeline)]
    for region in timeline.regions:
        x0, x1 = geo.x(region.t0, region.s0), geo.x(region.t1, region.s1)
        out.append(
            f'<rect class="region st-{region.status}" {_span_data(region)} x="{_num(x0)}" '
            f'y="{AXIS_H}" width="{_num(max(x1 - x0, 1))}" height="{height - AXIS_H}">'
            f"{_title([region.label, *region.lines])}</rect>"
        )
    for deploy in timeline.deploys:
        x = _num(geo.x(deploy.t, deploy.s))
        out.append(
            f'<line class="deploy" data-t="{deploy.t}" data-s="{deploy.s}" x1="{x}" x2="{x}" '
            f'y1="{AXIS_H}" y2="{height}">{_title(deploy.lines)}</line>'
        )
    top = AXIS_H
    for lane in timeline.lanes:
        out.append(f'<g class="lane" data-agent="{_esc(lane.path)}" data-depth="{lane.depth}">')
        out += [_span(geo, lane, top, span) for span in lane.spans]
        out += [_mark(geo, lane, top, mark) for mark in lane.marks]
        out.append("</g>")
        top += lane_height(lane)
    out.append("</svg>")
    return "".join(out)


def _span_data(span: Span) -> str:
    data = f'data-t0="{span.t0}" data-t1="{span.t1}" data-s0="{span.s0}" data-s1="{span.s1}"'
    if span.mid is not None:
        data += f' data-tm="{span.mid[0]}" data-sm="{span.mid[1]}"'
    return data


def _span(geo: _Geometry, lane: Lane, top: int, span: Span) -> str:
    cy = _row_center(lane, top, span.row, span.sub)
    bar_h = _BAR_H.get(span.row, 10)
    x0 = geo.x(span.t0, span.s0)
    x1 = max(geo.x(span.t1, span.s1), x0 + 2)
    xm = max(geo.x(*span.mid), x0 + 2) if span.mid is not None else x1
    classes = f"span r-{span.row} st-{span.status}" + (" open" if span.open_end else "")
    out = [f'<a class="{classes}" href="#e{span.seq}" {_span_data(span)} data-y="{_num(cy)}">']
    out.append(_title(span.lines))
    out.append(
        f'<rect class="bar" x="{_num(x0)}" y="{_num(cy - bar_h / 2)}" '
        f'width="{_num(xm - x0)}" height="{bar_h}" rx="2"/>'
    )
    if span.mid is not None:
        out.append(
            f'<line class="tail" x1="{_num(xm)}" x2="{_num(x1)}" y1="{_num(cy)}" y2="{_num(cy)}"/>'
            f'<circle class="cap st-{span.end_status}" cx="{_num(x1)}" cy="{_num(cy)}" r="3.5"/>'
        )
    if span.row in ("inc", "fiber", "run") and span.label:
        need = len(span.label) * CHAR_W + 6
        hidden = "" if xm - x0 >= need else ' visibility="hidden"'
        out.append(
            f'<text class="lbl" x="{_num(x0 + 3)}" y="{_num(cy + 3.5)}" data-w="{_num(need)}"'
            f"{hidden}>{_esc(span.label)}</text>"
        )
    out.append("</a>")
    return "".join(out)


def _mark(geo: _Geometry, lane: Lane, top: int, mark: Mark) -> str:
    cy = _row_center(lane, top, mark.row)
    x = geo.x(mark.t, mark.s)
    many = f' data-count="{mark.count}"' if mark.count > 1 else ""
    return (
        f'<a class="mark m-{mark.shape} st-{mark.status}" href="#e{mark.seq}" data-t="{mark.t}" '
        f'data-s="{mark.s}" data-y="{_num(cy)}"{many} transform="translate({_num(x)},{_num(cy)})">'
        f'{_title(mark.lines)}<path d="{_SHAPES.get(mark.shape, _SHAPES["dot"])}"/></a>'
    )


def _tick(key: str, value: int, x: float, height: int, label: str) -> str:
    return (
        f'<g class="tick" data-{key}="{value}" transform="translate({_num(x)},0)">'
        f'<line class="grid" x1="0" x2="0" y1="{AXIS_H - 6}" y2="{height}"/>'
        f'<text x="3" y="{AXIS_H - 10}">{_esc(label)}</text></g>'
    )


def _time_axis(geo: _Geometry, height: int) -> str:
    out = ['<g class="axis axis-time">']
    step = next((s for s in _TIME_STEPS_MS if geo.end_t / s <= 10), _TIME_STEPS_MS[-1])
    for t in range(0, geo.end_t + 1, step) if geo.end_t > 0 else [0]:
        label = _axis_time(t, step, geo.end_t)
        saved, geo.scale = geo.scale, "time"
        out.append(_tick("t", t, geo.x(t, 0), height, label))
        geo.scale = saved
    out.append("</g>")
    return "".join(out)


def _axis_time(t: int, step: int, end_t: int) -> str:
    text = sim_time(t)
    if step % 1000 == 0:
        text = text[:-4]
    if end_t < 3_600_000 and "d" not in text:
        text = text[3:]
    return text


def _order_axis(geo: _Geometry, height: int, timeline: Timeline) -> str:
    out = ['<g class="axis axis-order">']
    count = timeline.count
    step = max(1, -(-count // 10))
    saved, geo.scale = geo.scale, "order"
    for s in range(0, count, step):
        label = f"#{timeline.seqs[s]} {_axis_time(timeline.times[s], 1, geo.end_t)}"
        out.append(_tick("s", s, geo.x(0, s), height, label))
    geo.scale = saved
    out.append("</g>")
    return "".join(out)
