"""Debian's ``chromium``, headless, driven over its DevTools protocol (tests): open a page
with cookies, read its text, take a screenshot. Nothing is downloaded: the system
browser, and the ``websockets`` client the environment has.

The flags are those that let it run as root in a container without reaching for hosts
this network refuses (see the stack notes); each browser gets a fresh profile folder,
removed on :meth:`HeadlessChromium.stop`, and runs in its own process group.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

from devtools.local_mariadb import free_port

__all__ = ["CHROMIUM", "HeadlessChromium"]

CHROMIUM = "/usr/bin/chromium"
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--window-size=1400,900",
)


class HeadlessChromium:
    """One headless browser with one page (a context manager)."""

    def __init__(self) -> None:
        self._profile = Path(tempfile.mkdtemp(prefix="cdc-chromium-"))
        self._port = free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: ClientConnection | None = None
        self._ids = itertools.count(1)

    @staticmethod
    def available() -> bool:
        return os.access(CHROMIUM, os.X_OK)

    def start(self, timeout: float = 30.0) -> HeadlessChromium:
        self._process = subprocess.Popen(
            [
                CHROMIUM,
                *_FLAGS,
                f"--user-data-dir={self._profile}",
                f"--remote-debugging-port={self._port}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            # Its own temp folders (org.chromium.Chromium.*) inside the profile, removed with it.
            env={**os.environ, "TMPDIR": str(self._profile)},
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                targets = self._json("/json/list")
                page = next(t for t in targets if t.get("type") == "page")
                break
            except (OSError, StopIteration):
                if time.monotonic() > deadline or self._process.poll() is not None:
                    raise RuntimeError("chromium did not open its DevTools port") from None
                time.sleep(0.2)
        self._socket = connect(page["webSocketDebuggerUrl"], max_size=None)
        self.call("Page.enable")
        self.call("Network.enable")
        return self

    def _json(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self._port}{path}", timeout=5) as r:
            return json.loads(r.read())

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command; its result (events meanwhile are dropped)."""
        assert self._socket is not None, "start() first"
        call_id = next(self._ids)
        self._socket.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv(timeout=60))
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def open(self, url: str, cookies: Mapping[str, str] | None = None) -> None:
        """Load ``url`` with ``cookies`` set for it, and wait until it has loaded."""
        for name, value in (cookies or {}).items():
            self.call("Network.setCookie", name=name, value=value, url=url)
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + 30
        while self.evaluate("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load")
            time.sleep(0.1)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def text(self) -> str:
        return str(self.evaluate("document.body ? document.body.innerText : ''"))

    def screenshot(self, path: Path) -> Path:
        """The page as a PNG file at ``path``."""
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def stop(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(Exception):
                self._socket.close()
            self._socket = None
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
            self._process = None
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> HeadlessChromium:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
