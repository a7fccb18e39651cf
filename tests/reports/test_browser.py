"""The HTML report loads in a real headless browser, its script runs and lays out the chart."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from reports import render_html
from tests.reports.helpers import P, library_run, report_of, story

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def headless_browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no headless browser installed")


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


@pytest.mark.browser
def test_a_screenshot_of_a_real_run_is_taken(tmp_path: Path) -> None:
    """The browser renders a library run's report to a PNG."""
    page = tmp_path / "report.html"
    page.write_text(render_html(library_run("storage-crash-mid-turn")), encoding="utf-8")
    shot = tmp_path / "report.png"
    done = run_browser(tmp_path, f"--screenshot={shot}", "--window-size=1400,1000", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
