"""Headless Chromium driven over the DevTools protocol on a pipe: load a page, read errors, count, shoot.

No browser automation package is needed: Chromium started with `--remote-debugging-pipe` reads
DevTools commands (JSON, each ended by a NUL byte) on file descriptor 3 and writes replies and
events on descriptor 4. `load_page(path)` opens a local file, waits for the load event and for
the page to settle, and returns the console errors and uncaught exceptions it saw; `evaluate`
runs JavaScript in the page; `screenshot` writes a PNG of the page from its top.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-pipe",
]


def chromium_executable() -> str | None:
    """The Chromium binary on PATH (Debian's `chromium`), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    """One headless browser with one page; use as a context manager."""

    def __init__(self, executable: str, profile_dir: Path, width: int = 1280, height: int = 900) -> None:
        to_browser_read, to_browser_write = (_high_fd(fd) for fd in os.pipe())
        from_browser_read, from_browser_write = (_high_fd(fd) for fd in os.pipe())

        def wire_descriptors() -> None:  # runs in the child, before exec
            os.dup2(to_browser_read, 3)
            os.dup2(from_browser_write, 4)

        self.process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={profile_dir}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=wire_descriptors,  # NOTE: the child only calls os.dup2 before exec
            close_fds=False,
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._out = os.fdopen(to_browser_write, "wb", buffering=0)
        self._messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, args=(from_browser_read,), daemon=True)
        self._reader.start()
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session = ""
        self.width = width

    def __enter__(self) -> Chromium:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=self.session)
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.send("Browser.close", timeout=5)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._out.close()

    def send(self, method: str, params: dict | None = None, session: str = "", timeout: float = 30) -> dict:
        """Sends one command and returns its result (events seen meanwhile are kept in `events`)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._out.write(json.dumps(message).encode() + b"\0")
        reply = self._wait(lambda m: m.get("id") == self._next_id, timeout, method)
        if "error" in reply:
            raise RuntimeError(f"{method} failed: {reply['error']}")
        return reply.get("result", {})

    def load_page(self, path: Path, settle_s: float = 1.0, timeout: float = 60) -> list[str]:
        """Opens `path`, waits for the load event and `settle_s` more; returns the errors the page logged."""
        self.send("Page.navigate", {"url": path.resolve().as_uri()}, session=self.session)
        self._wait(lambda m: m.get("method") == "Page.loadEventFired", timeout, "the load event")
        self.settle(settle_s)
        return self.errors()

    def errors(self) -> list[str]:
        """Uncaught exceptions, console.error/assert calls and error log entries seen so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                found.append(f"exception: {details.get('exception', {}).get('description') or details.get('text')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                found.append(f"log: {entry.get('text')} ({entry.get('url', '')})")
        return found

    def settle(self, seconds: float) -> None:
        """Lets the page run for `seconds` (charts re-laying out), keeping the events it sends."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._drain(0.1)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, self.session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r} threw: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def screenshot(self, path: Path, max_height: int = 12000) -> Path:
        """A PNG of the page from its top, `max_height` CSS pixels tall at most."""
        height = min(int(self.evaluate("document.documentElement.scrollHeight")), max_height)
        metrics = {"width": self.width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.send("Emulation.setDeviceMetricsOverride", metrics, self.session)
        self.settle(0.5)  # NOTE: responsive plotly charts re-layout after the resize
        clip = {"x": 0, "y": 0, "width": self.width, "height": height, "scale": 1}
        shot = {"format": "png", "captureBeyondViewport": True, "clip": clip}
        data = self.send("Page.captureScreenshot", shot, self.session)
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def _wait(self, matches: Any, timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.process.poll() is not None:
                stderr = self.process.stderr.read().decode(errors="replace")[-2000:] if self.process.poll() else ""
                raise TimeoutError(f"Chromium did not answer {what} within {timeout} s {stderr}")
            try:
                message = self._messages.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if matches(message):
                return message
            self.events.append(message)

    def _drain(self, seconds: float) -> None:
        with contextlib.suppress(queue.Empty):
            self.events.append(self._messages.get(timeout=seconds))

    def _read(self, fd: int) -> None:
        buffer = b""
        with os.fdopen(fd, "rb", buffering=0) as stream:
            while chunk := stream.read(1 << 16):
                buffer += chunk
                *complete, buffer = buffer.split(b"\0")
                for raw in complete:
                    if raw:
                        self._messages.put(json.loads(raw))


def _high_fd(fd: int) -> int:
    """`fd` moved to a number above 4 (close-on-exec), so wiring descriptors 3 and 4 cannot clobber it."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high
