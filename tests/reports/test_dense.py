"""A crowded timeline is thinned for drawing: neighbours closer than a couple of pixels merge,
with their count, and the page still counts every incarnation and fiber."""

from __future__ import annotations

from reports import render_html
from reports._dense import DENSE_DRAWABLES, thin
from reports._svg import default_scale
from reports._timeline import build
from tests.reports.helpers import rec, report_of, story


def crowded(agents: int = 4, lives: int = 1_000) -> list[dict]:
    """Each agent lives `lives` short incarnations, one alarm set in each."""
    records = [rec(0, 0, "", 0, "simulation:start", seed=1)]
    for life in range(1, lives + 1):
        for n in range(agents):
            t = life * 1_000 + n
            path = f"W/w{n}"
            records.append(rec(len(records), t, path, life, "incarnation:start", trigger="rpc"))
            records.append(rec(len(records), t, path, life, "alarm:set", at=t + 5))
            records.append(rec(len(records), t + 1, path, life, "incarnation:end", reason="idle"))
    return records


def test_a_small_timeline_is_drawn_whole() -> None:
    timeline = build(story())
    assert thin(timeline, default_scale(timeline)) is timeline


def test_a_crowded_timeline_merges_neighbours_and_keeps_their_count() -> None:
    """8 000 bars and marks become a few per pixel column; merged marks add up."""
    timeline = build(crowded())
    before = sum(len(lane.spans) + len(lane.marks) for lane in timeline.lanes)
    thinned = thin(timeline, default_scale(timeline))
    after = sum(len(lane.spans) + len(lane.marks) for lane in thinned.lanes)
    assert before > DENSE_DRAWABLES and after < before / 3
    for lane, whole in zip(thinned.lanes, timeline.lanes, strict=True):
        assert sum(m.count for m in lane.marks) == sum(m.count for m in whole.marks)
        assert {s.row for s in lane.spans} == {s.row for s in whole.spans}
        merged = [span for span in lane.spans if span.label.endswith(" merged")]
        if whole.spans:
            heading = "inc bars merged (zoom or read the table for each):"
            assert merged and merged[0].lines[0].endswith(heading)


def test_the_page_counts_what_it_merged() -> None:
    """The summary and the lane labels count every incarnation, not the merged bars."""
    html = render_html(report_of(crowded()))
    assert "<th>incarnations</th><td>4000 " in html
    assert "1000 inc" in html
