"""The HTML report in a real headless browser: it loads without a console error, its script
lays out and draws the timeline, a click on a record shows that record's fields, and a run of
100 000 events gives a page under 10 MB whose table is built and whose marks still answer a
click. How fast that page opens is a benchmark (`tests/bench/test_report_open.py`), not a
test: a timing asserted here would fail on a loaded machine.

Chromium is driven over the DevTools protocol (`tests.reports.cdp`). Where no Chromium is
installed the tests skip, except in CI (`CI` set), where `.ci/run` installs Debian's package
first and a missing browser is a failure, not a skip.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from reports import render_html
from reports.shortlog import detail
from tests.reports.cdp import Browser, find_browser, png_pixels
from tests.reports.helpers import P, library_run, rec, report_of, story

PAGE_BYTES_MAX = 10 * 1024 * 1024


def headless_browser() -> str:
    found = find_browser()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium in CI: .ci/run installs it (apt-get install -y chromium)")
        pytest.skip("no headless browser installed (apt-get install -y chromium)")
    return found


def run_browser(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        headless_browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={tmp_path / 'profile'}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def opened(tmp_path: Path, html: str) -> tuple[Browser, float]:
    """A browser with the page loaded and its script finished; seconds until it was."""
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    browser = Browser(headless_browser(), tmp_path / "profile")
    try:
        started = time.monotonic()
        browser.open(page.as_uri())
        ready = "document.getElementById('chart').getAttribute('data-ready')"
        while browser.evaluate(ready) != "1":
            assert time.monotonic() - started < 60, "the page's script never finished"
            time.sleep(0.05)
        return browser, time.monotonic() - started
    except BaseException:
        browser.close()
        raise


def box(browser: Browser, selector: str) -> dict[str, float]:
    """The viewport rectangle of the first element matching `selector`, scrolled into view."""
    rect = browser.evaluate(
        f"(function () {{ var e = document.querySelector({selector!r}); "
        "e.scrollIntoView({block: 'center', inline: 'center'}); "
        "var r = e.getBoundingClientRect(); "
        "return {x: r.left, y: r.top, width: r.width, height: r.height}; })()"
    )
    assert rect["width"] > 0 and rect["height"] > 0, f"{selector} is not drawn: {rect}"
    return rect


# -- the page in a browser ----------------------------------------------------------------------
@pytest.mark.browser
def test_the_report_loads_without_a_console_error_and_draws_its_timeline(tmp_path: Path) -> None:
    """No exception and no console error; the timeline's screenshot is a picture, not a blank
    (many colours, most of the area not the background)."""
    browser, _ = opened(tmp_path, render_html(library_run("storage-crash-mid-turn")))
    with browser:
        assert browser.console_errors() == []
        assert browser.evaluate("document.querySelectorAll('#chart a.span').length") > 0
        rect = box(browser, "#timeline")
        scroll = browser.evaluate("[window.scrollX, window.scrollY]")
        clip = {**rect, "x": rect["x"] + scroll[0], "y": rect["y"] + scroll[1]}
        clip["width"] = min(clip["width"], 1200)
        colours = Counter(pixel[:3] for pixel in png_pixels(browser.screenshot(clip)))
        background, most = colours.most_common(1)[0]
        drawn = sum(colours.values()) - most
        assert len(colours) >= 8, f"only {len(colours)} colours: the timeline looks blank"
        assert drawn / sum(colours.values()) > 0.05, f"only {drawn} pixels differ from {background}"


@pytest.mark.browser
def test_a_click_on_a_record_shows_its_fields(tmp_path: Path) -> None:
    """Clicking a mark on the timeline (here the storage fault) goes to its record in the
    event table, highlighted, and the row shows the record's fields."""
    records = story()
    browser, _ = opened(tmp_path, render_html(report_of(records, passed=False)))
    with browser:
        fault = next(r for r in records if r["event"] == "fault:storage_error")
        selector = f'#chart a.mark[href="#e{fault["seq"]}"]'
        rect = box(browser, selector)
        browser.click(rect["x"] + rect["width"] / 2, rect["y"] + rect["height"] / 2)
        deadline = time.monotonic() + 10
        while browser.evaluate("location.hash") != f"#e{fault['seq']}":
            assert time.monotonic() < deadline, "the click did not go to the record"
            time.sleep(0.05)
        row = browser.evaluate(
            "(function () { var r = document.querySelector('#events tr:target'); "
            "return r && {id: r.id, text: r.innerText, "
            "shown: r.getBoundingClientRect().height > 0}; })()"
        )
        assert row is not None and row["id"] == f"e{fault['seq']}" and row["shown"]
        assert "fault:storage_error" in row["text"]
        assert detail(fault, None) in row["text"]
        assert "UPDATE cf_agents_fibers SET x = ?" in row["text"]
        assert browser.console_errors() == []


def big_run(events: int) -> list[dict[str, Any]]:
    """A run of `events` records: agents waking and dying, alarms, fibers and RPCs with
    fields, as a long hunt produces them."""
    records: list[dict[str, Any]] = [rec(0, 0, "", 0, "simulation:start", seed=1)]
    agents = [f"Worker/w{n}" for n in range(8)]
    incarnation = dict.fromkeys(agents, 0)
    seq = 1
    while seq < events:
        agent = agents[seq % len(agents)]
        t = seq * 50
        if seq % 400 < len(agents):
            if incarnation[agent]:
                records.append(
                    rec(seq, t, agent, incarnation[agent], "incarnation:end", reason="idle")
                )
                seq += 1
            incarnation[agent] += 1
            records.append(
                rec(seq, t, agent, incarnation[agent], "incarnation:start", trigger="alarm")
            )
        elif seq % 5 == 0:
            records.append(rec(seq, t, agent, incarnation[agent], "alarm:set", at=t + 2_000))
        elif seq % 5 == 1:
            records.append(rec(seq, t, agent, incarnation[agent], "alarm:fired", attempt=0))
        elif seq % 5 == 2:
            records.append(
                rec(
                    seq,
                    t,
                    agent,
                    incarnation[agent],
                    "fiber:run:started",
                    fiberId=f"f{seq}",
                    fiberName="ingest",
                    managed=False,
                )
            )
        else:
            records.append(
                rec(seq, t, agent, incarnation[agent], "rpc", method="increment", args=[seq])
            )
        seq += 1
    return records[:events]


def test_a_run_of_100k_events_gives_a_page_under_10_mb() -> None:
    """The page of a 100 000-event run stays under 10 MB (it is one file a person opens)."""
    html = render_html(report_of(big_run(100_000)))
    size = len(html.encode("utf-8"))
    assert size < PAGE_BYTES_MAX, f"{size:,} bytes"


@pytest.mark.browser
def test_a_run_of_100k_events_builds_its_table_and_answers_a_click(tmp_path: Path) -> None:
    """Loaded, laid out and drawn, with no console error; then every row of the table is
    built, and a click on a mark still shows its record."""
    browser, _ = opened(tmp_path, render_html(report_of(big_run(100_000))))
    with browser:
        count = "+document.getElementById('events').getAttribute('data-built')"
        deadline = time.monotonic() + 60
        while browser.evaluate(count) < 100_000:
            assert time.monotonic() < deadline, "the table's rows were never all built"
            time.sleep(0.2)
        href = browser.evaluate(
            "Array.from(document.querySelectorAll('#chart a.span .bar'))"
            ".find(function (e) { return e.getBoundingClientRect().width > 4; })"
            ".parentNode.getAttribute('href')"
        )
        rect = box(browser, f'#chart a[href="{href}"] .bar')
        browser.click(rect["x"] + rect["width"] / 2, rect["y"] + rect["height"] / 2)
        deadline = time.monotonic() + 10
        marked = "(document.querySelector('tr.target') || {}).id"
        while browser.evaluate(marked) != href[1:]:
            assert time.monotonic() < deadline, "the click did not mark its record"
            time.sleep(0.05)
        assert browser.console_errors() == []


# -- the page as Chromium dumps it --------------------------------------------------------------
@pytest.mark.browser
def test_the_report_loads_and_its_script_runs(tmp_path: Path) -> None:
    """The DOM after load holds the verdict and every lane, and the script ran to its end."""
    page = tmp_path / "report.html"
    page.write_text(render_html(report_of(story(), passed=False)), encoding="utf-8")
    done = run_browser(tmp_path, "--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert 'data-ready="1"' in dom, "the page's script did not finish"
    assert "Uncaught" not in done.stderr
    assert 'data-verdict="fail"' in dom and "agentsim run scenarios/library/story.yaml" in dom
    assert dom.count('<g class="lane"') == 3


@pytest.mark.browser
def test_the_script_relays_the_chart_for_another_scale_and_zoom(tmp_path: Path) -> None:
    """Opened as `#view=order,4`, the chart is 4x wide and bars sit where the order scale puts
    them (the script and the Python layout agree on the geometry)."""
    page = tmp_path / "report.html"
    page.write_text(render_html(report_of(story())), encoding="utf-8")
    done = run_browser(tmp_path, "--dump-dom", page.as_uri() + "#view=order,4")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert '<svg class="chart scale-order" id="chart" width="4800"' in dom
    first_bar = 12 + (1 + 0.5) / len(story()) * (4800 - 24)  # P's incarnation #1 starts at s=1
    lane = dom[dom.index(f'data-agent="{P}" data-depth="0"') :]
    assert f'<rect class="bar" x="{first_bar:.1f}"' in lane
