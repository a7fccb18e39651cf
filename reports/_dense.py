"""A crowded timeline thinned to what the chart can show: neighbours merged, titles cut short.

A run of 100 000 events can have tens of thousands of incarnations, alarm runs and marks, most
of them narrower than a pixel at the chart's base width: drawn one element each they would make
a page of tens of megabytes that no one can read. Past `DENSE_DRAWABLES` bars and marks, the
bars of one row that touch or lie within `GAP_PX` of each other on the default scale become one
bar (from the first one's start to the last one's end, in the colour most of them have), and so
do the marks of one row; each merged element says how many it stands for and lists the first
few, and links to the first record. The event table below still has every record. Below the
threshold the timeline is returned as it is, so small runs draw every element exactly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from reports._svg import BASE_WIDTH, PAD
from reports._timeline import Lane, Mark, Span, Timeline, _rank

Place = Callable[[int, int], float]
"""Where (sim time, record index) lies on the chart at zoom 1, in px from the left pad."""

__all__ = ["DENSE_DRAWABLES", "GAP_PX", "TITLE_LINES_DENSE", "thin"]

DENSE_DRAWABLES = 3_000
"""More bars and marks than this, and neighbours are merged."""
GAP_PX = 2.0
"""Elements of one row closer than this (at zoom 1, on the default scale) are merged."""
TITLE_LINES_DENSE = 4
"""Lines of each tooltip kept in a thinned timeline."""


def thin(timeline: Timeline, scale: str) -> Timeline:
    """`timeline` itself when it is small enough; else a copy with neighbours merged."""
    drawables = sum(len(lane.spans) + len(lane.marks) for lane in timeline.lanes)
    if drawables <= DENSE_DRAWABLES:
        return timeline
    inner = BASE_WIDTH - 2 * PAD
    count = max(timeline.count, 1)

    def x(t: int, s: int) -> float:
        if scale == "time":
            return (t / timeline.end_t if timeline.end_t > 0 else 0.0) * inner
        return (s + 0.5) / count * inner

    lanes = [_thin_lane(lane, x) for lane in timeline.lanes]
    return replace(timeline, lanes=lanes)


def _thin_lane(lane: Lane, x: Place) -> Lane:
    spans: list[Span] = []
    by_row: dict[tuple[str, int], list[Span]] = {}
    for span in lane.spans:
        by_row.setdefault((span.row, span.sub), []).append(span)
    for group in by_row.values():
        spans += _merge_spans(sorted(group, key=lambda s: (s.s0, s.s1)), x)
    marks: list[Mark] = []
    by_mark_row: dict[str, list[Mark]] = {}
    for mark in lane.marks:
        by_mark_row.setdefault(mark.row, []).append(mark)
    for row_marks in by_mark_row.values():
        marks += _merge_marks(sorted(row_marks, key=lambda m: m.s), x)
    spans.sort(key=lambda s: (s.s0, s.row, s.sub))
    marks.sort(key=lambda m: (m.s, m.row))
    return replace(lane, spans=spans, marks=marks)


def _merge_spans(spans: list[Span], x: Place) -> list[Span]:
    out: list[Span] = []
    group: list[Span] = []
    right = 0.0
    for span in spans:
        left = x(span.t0, span.s0)
        end = max(x(span.t1, span.s1), left)
        if group and left > right + GAP_PX:
            out.append(_merged_span(group))
            group = []
        if not group:
            right = end
        group.append(span)
        right = max(right, end)
    if group:
        out.append(_merged_span(group))
    return out


def _merged_span(group: list[Span]) -> Span:
    if len(group) == 1:
        return replace(group[0], lines=_short(group[0].lines))
    first, last = group[0], max(group, key=lambda s: (s.s1, s.t1))
    status = Counter(span.status for span in group).most_common(1)[0][0]
    lines = [f"{len(group)} {first.row} bars merged (zoom or read the table for each):"]
    for span in group[: TITLE_LINES_DENSE - 1]:
        lines.append(span.lines[0] if span.lines else span.label)
    return Span(
        row=first.row,
        t0=min(span.t0 for span in group),
        s0=first.s0,
        t1=last.t1,
        s1=last.s1,
        status=status,
        label=f"{len(group)} merged",
        lines=lines,
        seq=first.seq,
        open_end=any(span.open_end for span in group),
        sub=first.sub,
    )


def _merge_marks(marks: list[Mark], x: Place) -> list[Mark]:
    out: list[Mark] = []
    group: list[Mark] = []
    for mark in marks:
        at = x(mark.t, mark.s)
        if group and at > x(group[0].t, group[0].s) + GAP_PX:
            out.append(_merged_mark(group))
            group = []
        group.append(mark)
    if group:
        out.append(_merged_mark(group))
    return out


def _merged_mark(group: list[Mark]) -> Mark:
    first = group[0]
    if len(group) == 1:
        return replace(first, lines=_short(first.lines))
    best = min(group, key=lambda m: _rank(m.status))
    total = sum(mark.count for mark in group)
    lines = [f"{total} records merged (zoom or read the table for each):"]
    lines += [line for mark in group for line in mark.lines][: TITLE_LINES_DENSE - 1]
    return Mark(first.row, first.t, first.s, best.shape, best.status, lines, first.seq, total)


def _short(lines: list[str]) -> list[str]:
    if len(lines) <= TITLE_LINES_DENSE:
        return lines
    return [*lines[: TITLE_LINES_DENSE - 1], f"… and {len(lines) - TITLE_LINES_DENSE + 1} more"]
