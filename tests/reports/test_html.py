"""The HTML report: verdict and replay on top, a lane per agent, escaped, self-contained."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from reports import render_html
from reports.html import STATIC_ROWS_MAX
from reports.shortlog import detail
from tests.reports.helpers import (
    CHILD,
    ROOT,
    Elements,
    P,
    frame,
    library_names,
    library_run,
    rec,
    report_of,
    story,
)

EVIL = "<script>alert('x')</script>"


def spans(page: Elements, row: str) -> list[dict[str, str]]:
    return page.with_class("a", f"r-{row}")


def status_of(attrs: dict[str, str]) -> str:
    return next(c[3:] for c in attrs["class"].split() if c.startswith("st-"))


def chart_svg(html: str) -> ET.Element:
    match = re.search(r'<svg class="chart.*?</svg>', html, re.S)
    assert match is not None
    return ET.fromstring(match.group())


def test_the_verdict_failures_and_replay_command_come_first() -> None:
    """A failing run shows FAILED, each failure sentence and the replay command in the header."""
    html = render_html(report_of(story(), passed=False))
    header = html[html.index('<header class="verdict fail"') : html.index("</header>")]
    assert '<span class="badge">FAILED</span>' in header
    assert "<li>exactly_once_finish: run r1 was delivered twice</li>" in header
    assert '<code id="replay">agentsim run scenarios/library/story.yaml --seed 42</code>' in header
    assert html.index("</header>") < html.index('id="chart"') < html.index('id="events"')
    assert "<title>FAILED story [seed 42] - agentsim</title>" in html


def test_a_passing_run_says_so_and_still_shows_how_to_replay_it() -> None:
    """PASSED, no failure list, the replay command present."""
    html = render_html(report_of(story()))
    assert 'data-verdict="pass"' in html and "PASSED" in html and 'class="failures"' not in html
    assert "agentsim run scenarios/library/story.yaml --seed 42" in html


def test_an_unknown_verdict_is_never_called_failed() -> None:
    """A trace shown without its run record is titled and badged VERDICT UNKNOWN, in grey."""
    html = render_html(report_of(story(), passed=False, verdict_known=False))
    assert "<title>VERDICT UNKNOWN story [seed 42] - agentsim</title>" in html
    assert '<header class="verdict unknown" id="verdict" data-verdict="unknown">' in html
    assert '<span class="badge">VERDICT UNKNOWN</span>' in html
    assert "FAILED" not in html and "PASSED" not in html


def test_the_page_shows_the_scenario_description() -> None:
    """The description is in the header, escaped; a run without one has no empty paragraph."""
    html = render_html(report_of(story(), description="A parent <recovers> its fiber."))
    header = html[: html.index("</header>")]
    assert '<p class="description" id="description">A parent &lt;recovers&gt; its fiber.</p>' in (
        header
    )
    assert 'id="description"' not in render_html(report_of(story()))


def test_one_lane_per_agent_with_facets_nested_under_their_root() -> None:
    """Platform, the parent and its child facet each get one lane, the facet one level deeper."""
    page = Elements(render_html(report_of(story())))
    lanes = page.with_class("g", "lane")
    assert [(a["data-agent"], a["data-depth"]) for a in lanes] == [
        ("", "0"),
        (P, "0"),
        (CHILD, "1"),
    ]
    assert [a["data-agent"] for a in page.with_class("g", "lane-label")] == ["", P, CHILD]


def test_incarnations_show_their_end_cause() -> None:
    """Each incarnation is a bar coloured by why it ended, labelled trigger → cause."""
    html = render_html(report_of(story()))
    bars = [(a["data-t0"], a["data-t1"], status_of(a)) for a in spans(Elements(html), "inc")]
    assert bars == [
        ("0", "70000", "deploy"),
        ("100000", "1000000", "alarm-limit"),
        ("1200000", "1400000", "idle"),
        ("0", "70000", "deploy"),
    ]
    assert ">#2 alarm → alarm-limit</text>" in html


def test_alarms_fibers_runs_faults_and_hooks_are_drawn() -> None:
    """Alarm handler outcomes, the recovered fiber, the run's two terminals, the fault, hooks."""
    html = render_html(report_of(story()))
    page = Elements(html)
    assert [status_of(a) for a in spans(page, "alarm")] == ["failed", "done", "killed"]
    (fiber,) = spans(page, "fiber")
    assert status_of(fiber) == "recovered" and fiber["data-tm"] == "70000"
    (run,) = spans(page, "run")
    assert status_of(run) == "interrupted"
    assert (run["data-t0"], run["data-tm"], run["data-t1"]) == ("0", "100000", "1200000")
    caps = [a["class"] for t, a in page.found if t == "circle"]
    assert caps == ["cap st-recovered", "cap st-completed"]  # the fiber's, then the run's
    marks = {(a["class"], a["data-t"]) for a in page.with_class("a", "mark")}
    assert ("mark m-fault st-fault", "10000") in marks
    # The failure and the retry at one instant share a mark: the failure's shape, both records.
    assert ("mark m-cross st-failed", "5000") in marks
    shared = re.search(
        r'<a class="mark m-cross st-failed"[^>]*data-t="5000".*?</title>', html, re.S
    )
    assert shared is not None and "alarm:failed" in shared[0] and "alarm:retry" in shared[0]
    assert ("mark m-give-up st-interrupted", "100000") in marks
    assert ("mark m-hook st-completed", "1200000") in marks
    assert [a["data-t"] for a in page.with_class("line", "deploy")] == ["70000"]
    (region,) = page.with_class("rect", "region")
    assert (region["data-t0"], region["data-t1"]) == ("100000", "1500000")


def test_every_bar_and_mark_links_to_its_record_in_the_table() -> None:
    """Each link points at a table row that exists."""
    page = Elements(render_html(report_of(story())))
    rows = {a["id"] for t, a in page.found if t == "tr" and "id" in a}
    links = [a["href"] for t, a in page.found if t == "a" and "href" in a]
    assert links and all(link[1:] in rows for link in links)
    assert len(rows) == len(story())


def test_the_summary_counts_what_happened() -> None:
    """Incarnations by cause, alarm outcomes, fibers, runs, faults and hook deliveries."""
    html = render_html(report_of(story()))
    stats = html[html.index('id="stats"') : html.index("</table>", html.index('id="stats"'))]
    assert "<th>incarnations</th><td>4 " in stats
    assert '<span class="chip st-deploy">deploy 2</span>' in stats
    assert '<span class="chip st-alarm-limit">alarm-limit 1</span>' in stats
    assert '<span class="chip st-retry">retried 1</span>' in stats
    assert '<span class="chip st-recovered">recovered 1</span>' in stats
    assert "<th>faults</th><td>1 " in stats
    assert "finish: completed 1" in stats and "give_up: interrupted 1" in stats


def test_the_page_is_self_contained() -> None:
    """No URL, no stylesheet link, no external source; only in-page anchors; a strict CSP."""
    html = render_html(library_run("deploy-mid-work"))
    page = Elements(html)
    assert "http://" not in html and "https://" not in html
    assert "<link" not in html and "@import" not in html and "url(" not in html
    assert not any("src" in attrs for _, attrs in page.found)
    assert all(a["href"].startswith("#") for _, a in page.found if "href" in a)
    assert "default-src 'none'" in html
    assert html.count("<script") == 1 and html.count("<style") == 1


def test_trace_values_are_escaped_everywhere() -> None:
    """A script tag in agent paths, event names, fields, failures or the name stays text."""
    records = [
        rec(0, 0, "", 0, "simulation:start", seed=1),
        rec(1, 0, f"A/{EVIL}", 1, "incarnation:start", trigger=EVIL),
        rec(2, 0, f"A/{EVIL}", 1, f"user:{EVIL}", note=EVIL, url="https://evil.example/x.js"),
        rec(3, 5, f"A/{EVIL}", 1, "fiber:run:started", fiberName=EVIL, fiberId='"><i>'),
        rec(4, 9, f"A/{EVIL}", 1, "incarnation:end", reason=EVIL),
    ]
    run = report_of(records, passed=False, name=EVIL, failures=[EVIL], replay_command=EVIL)
    html = render_html(run)
    assert html.count("<script") == 1
    assert "<i>" not in html and "&lt;script&gt;" in html
    page = Elements(html)
    assert not any("src" in attrs for _, attrs in page.found)
    assert all(a["href"].startswith("#") for _, a in page.found if "href" in a)
    chart_svg(html)  # still well-formed: no attribute was broken open


def test_the_chart_is_well_formed_svg() -> None:
    """The timeline parses as XML, with one lane group per agent."""
    svg = chart_svg(render_html(report_of(story())))
    assert len([g for g in svg.iter("g") if g.get("class") == "lane"]) == 3


def test_same_run_same_bytes() -> None:
    """Two renders of one run are identical."""
    assert render_html(report_of(story())) == render_html(report_of(story()))


def test_same_bytes_in_another_process_with_another_hash_seed() -> None:
    """Nothing in the page depends on the process (hash seed, clock, ids)."""
    script = (
        "import hashlib, sys\n"
        "from tests.reports.helpers import library_run\n"
        "from reports import render_html\n"
        "sys.stdout.write(hashlib.sha256(render_html(library_run('storage-crash-mid-turn'))"
        ".encode()).hexdigest())\n"
    )
    digests = set()
    for hash_seed in ("0", "4242"):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env=env,
        )
        digests.add(done.stdout)
    here = hashlib.sha256(render_html(library_run("storage-crash-mid-turn")).encode()).hexdigest()
    assert digests == {here}


@pytest.mark.parametrize("name", library_names())
def test_every_library_scenario_renders_a_lane_per_agent(name: str) -> None:
    """For each real run: its verdict, its replay command, and one lane per agent in the trace."""
    run = library_run(name)
    html = render_html(run)
    page = Elements(html)
    agents = list(dict.fromkeys(str(r["agent"]) for r in run.records))
    assert sorted(a["data-agent"] for a in page.with_class("g", "lane")) == sorted(agents)
    assert f'data-verdict="{"pass" if run.passed else "fail"}"' in html
    assert run.replay_command in html
    assert len([t for t, a in page.found if t == "tr" and "id" in a]) == len(run.records)


def test_crowded_runs_open_on_the_event_order_scale() -> None:
    """Work done at a few instants is laid out by event order; spread-out work by sim time."""
    crowded = [rec(i, 0, "A/a", 1, "rpc", method="m") for i in range(40)]
    crowded.append(rec(40, 90_000, "A/a", 1, "incarnation:end", reason="idle"))
    assert 'data-scale="order"' in render_html(report_of(crowded))
    assert 'data-scale="time"' in render_html(report_of(story()))


def test_an_empty_trace_still_renders() -> None:
    """No records: a page with the verdict and an empty timeline and table."""
    html = render_html(report_of([]))
    assert "PASSED" in html and 'data-count="1"' in html
    assert Elements(html).with_class("g", "lane") == []


def test_what_never_finished_is_drawn_open_to_the_end_of_the_run() -> None:
    """An incarnation still alive, an alarm handler, a fiber and a run with no outcome yet."""
    records = [
        rec(0, 0, "A/a", 1, "incarnation:start", trigger="get"),
        rec(1, 0, "A/a", 1, "fiber:run:started", fiberName="slow", fiberId="f"),
        rec(2, 10, "A/a", 1, "connection:frame", frame=frame("r9", "started", 0)),
        rec(3, 20, "A/a", 1, "alarm:fired", attempt=0),
        rec(4, 5000, "A/a", 1, "rpc", method="poke"),
    ]
    page = Elements(render_html(report_of(records)))
    opened = page.with_class("a", "open")
    assert [(status_of(a), a["data-t1"], a["data-s1"]) for a in opened] == [
        ("alive", "5000", "4"),
        ("running", "5000", "4"),
        ("running", "5000", "4"),
        ("running", "5000", "4"),
    ]
    assert {a["class"].split()[1] for a in opened} == {"r-inc", "r-fiber", "r-run", "r-alarm"}


def test_a_long_run_s_table_travels_as_json_rows() -> None:
    """Past STATIC_ROWS_MAX records the rows are `[seq, t, agent, inc, event, detail]` in a
    JSON block with names given once, and no `<` of a value is written raw."""
    records = [
        rec(i, i * 10, "A/a" if i % 2 else "", 1, "rpc", method="<m>")
        for i in range(STATIC_ROWS_MAX + 1)
    ]
    html = render_html(report_of(records))
    table = html[html.index('<table id="events"') :]
    table = table[: table.index("</table>")]
    assert table.startswith('<table id="events" data-lazy="1">') and "<tr id=" not in table
    block = re.search(r'<script type="application/json" id="events-data">(.*?)</script>', html)
    assert block is not None and "<m>" not in block.group(1)
    data = json.loads(block.group(1))
    assert data["agents"] == ["", "A/a"] and data["events"] == ["rpc"]
    assert data["families"] == ["rpc"]
    assert len(data["rows"]) == len(records)
    assert data["rows"][1] == [1, 10, 1, 1, 0, detail(records[1], None)]
    short = render_html(report_of(records[:STATIC_ROWS_MAX]))
    assert 'id="events-data"' not in short and '<tr id="e4999"' in short


def test_recovery_scan_records_are_no_fiber_of_their_own() -> None:
    """`fiber:recovery:pass` and `:backoff` name no fiber: the page counts the fibers that ran
    (here two), draws no fiber named '?', and keeps the scan's records as marks."""
    records = [
        rec(0, 0, P, 1, "incarnation:start", trigger="get"),
        rec(1, 0, P, 1, "fiber:run:started", fiberId="f1", fiberName="a", managed=False),
        rec(2, 0, P, 1, "fiber:run:started", fiberId="f2", fiberName="b", managed=False),
        rec(3, 10, P, 1, "incarnation:end", reason="deploy"),
        rec(4, 20, P, 2, "incarnation:start", trigger="alarm"),
        rec(5, 20, P, 2, "fiber:recovery:attempt", fiberId="f1", fiberName="a", attempt=1),
        rec(6, 20, P, 2, "fiber:recovery:pass", progress=True, scans=1),
        rec(7, 20, P, 2, "fiber:recovery:backoff", at=2020, delayMs=2000),
        rec(8, 2020, P, 2, "fiber:recovery:backoff", at=6020, delayMs=4000),
        rec(9, 6020, P, 2, "fiber:run:completed", fiberId="f1", fiberName="a"),
        rec(10, 6020, P, 2, "fiber:run:completed", fiberId="f2", fiberName="b"),
    ]
    html = render_html(report_of(records))
    page = Elements(html)
    names = sorted(a.get("aria-label", "") for a in spans(page, "fiber"))
    assert len(names) == 2, names
    assert 'fiber "?"' not in html
    stats = html[html.index('id="stats"') : html.index("</table>", html.index('id="stats"'))]
    assert "<th>fibers</th><td>2 " in stats
    assert 'href="#e6"' in html and 'href="#e8"' in html  # marks at one instant merge
    assert "fiber:recovery:backoff  at=2020 delayMs=2000" in html


def test_the_legend_names_every_way_an_incarnation_ends() -> None:
    """`reports` imports nothing of `sim`, so its legend keeps its own list of the reasons an
    incarnation ends: it must be the platform's, in the same order."""
    from reports.html import _END_REASONS
    from sim.platform import EVICTION_REASONS

    assert _END_REASONS == EVICTION_REASONS
