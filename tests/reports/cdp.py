"""A headless Chromium driven over the DevTools protocol, for the HTML report's browser tests.

Chromium started with `--remote-debugging-pipe` reads protocol commands from its file
descriptor 3 and writes replies and events to descriptor 4, each message one JSON object ended
by a NUL byte. That needs no WebSocket library and no port: `Browser` opens the two pipes,
starts the browser with them as descriptors 3 and 4, attaches to one page and sends commands
to it (`send`), keeping every event that arrives meanwhile (`events`), so that a test can say
what the console logged and what the page threw. Chromium comes from Debian's `chromium`
package (`.ci/run` installs it when it is missing); `find_browser` returns None without it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

__all__ = ["Browser", "CdpError", "find_browser", "png_pixels"]

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


class CdpError(RuntimeError):
    """A protocol command the browser answered with an error, or no answer in time."""


def find_browser() -> str | None:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless browser with one page attached; a context manager that always ends it."""

    def __init__(self, executable: str, profile: Path, width: int = 1400, height: int = 1000):
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()
        command = [
            executable,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]

        def descriptors() -> None:
            # Moved out of the way first: either end may already be numbered 3 or 4.
            high_read = os.dup(to_browser_read)
            high_write = os.dup(from_browser_write)
            os.dup2(high_read, 3)
            os.dup2(high_write, 4)

        self.process = subprocess.Popen(  # noqa: S603 - a fixed command line
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            close_fds=False,
            preexec_fn=descriptors,  # noqa: PLW1509 - the test process has no other threads
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session = ""
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self.send(
            "Target.attachToTarget",
            {"targetId": target["targetId"], "flatten": True},
            session=False,
        )
        self.session = attached["sessionId"]

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process.stderr is not None:
            self.process.stderr.close()

    # -- the protocol -----------------------------------------------------------------------
    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: bool = True,
        timeout_s: float = 60.0,
    ) -> dict[str, Any]:
        """Send one command (to the page unless `session=False`) and return its result; the
        events that arrive before the answer are kept in `events`."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._read(deadline, method)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise CdpError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, event: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """The first event named `event` (already received, or the next to arrive)."""
        for seen in self.events:
            if seen.get("method") == event:
                return seen
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._read(deadline, event)
            if "method" in reply:
                self.events.append(reply)
                if reply["method"] == event:
                    return reply

    def _read(self, deadline: float, waiting_for: str) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise CdpError(f"no answer to {waiting_for} in time")
            ready, _, _ = select.select([self._from_browser], [], [], 0.5)
            if not ready:
                continue
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise CdpError(f"the browser closed the pipe while waiting for {waiting_for}")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    # -- what tests use ---------------------------------------------------------------------
    def open(self, url: str, timeout_s: float = 60.0) -> float:
        """Load `url` with the console and errors watched; the seconds until its load event."""
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        started = time.monotonic()
        self.send("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired", timeout_s)
        return time.monotonic() - started

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise CdpError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def console_errors(self) -> list[str]:
        """What the page threw, and what its console or the browser logged as an error."""
        errors = []
        for event in self.events:
            params = event.get("params", {})
            if event["method"] == "Runtime.exceptionThrown":
                errors.append(json.dumps(params.get("exceptionDetails", {}))[:500])
            elif event["method"] == "Runtime.consoleAPICalled" and params.get("type") in (
                "error",
                "assert",
            ):
                errors.append(json.dumps(params.get("args", []))[:500])
            elif event["method"] == "Log.entryAdded":
                entry = params.get("entry", {})
                if entry.get("level") == "error":
                    errors.append(f"{entry.get('source')}: {entry.get('text')}")
        return errors

    def click(self, x: float, y: float) -> None:
        for kind in ("mousePressed", "mouseReleased"):
            self.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )

    def screenshot(self, clip: dict[str, float] | None = None) -> bytes:
        params: dict[str, Any] = {"format": "png"}
        if clip is not None:
            params["clip"] = {**clip, "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", params)["data"])


def png_pixels(png: bytes) -> list[bytes]:
    """The pixels of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes), each as
    its bytes: enough to tell a blank picture from a drawn one without an imaging library."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, chunks, header = 8, [], b""
    while position < len(png):
        length = int.from_bytes(png[position : position + 4], "big")
        kind = png[position + 4 : position + 8]
        data = png[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = data
        elif kind == b"IDAT":
            chunks.append(data)
        position += 12 + length
    width, height = int.from_bytes(header[0:4], "big"), int.from_bytes(header[4:8], "big")
    depth, color, interlace = header[8], header[9], header[12]
    assert depth == 8 and color in (2, 6) and interlace == 0, f"unsupported PNG {header!r}"
    size = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * size
    previous = bytearray(stride)
    pixels: list[bytes] = []
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - size] if i >= size else 0
            up = previous[i]
            corner = previous[i - size] if i >= size else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                estimate = left + up - corner
                pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
                nearest = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + nearest) & 0xFF
        pixels += [bytes(line[i : i + size]) for i in range(0, stride, size)]
        previous = line
    return pixels
