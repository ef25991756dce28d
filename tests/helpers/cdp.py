"""A small Chrome DevTools Protocol client for the report test: Debian's headless Chromium,
driven over its debugging websocket (websocket-client), the network cut off, every event
recorded, and the browser always killed afterwards (its whole process group)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import websocket

LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:", "chrome-error:", "devtools:")
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_browser() -> str | None:
    return next((shutil.which(n) for n in BROWSER_NAMES if shutil.which(n)), None)


class Page:
    """One page target; ``call`` waits for its reply, every event is kept in ``events``."""

    def __init__(self, ws_url: str, timeout: float) -> None:
        self.socket = websocket.create_connection(ws_url, timeout=timeout, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        self.timeout = timeout

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        ident = self.next_id
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            message = json.loads(self.socket.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)
        raise TimeoutError(f"{method}: no reply in {self.timeout} s")

    def pump(self, seconds: float) -> None:
        """Collect events for a while (lets the page run its scripts)."""
        deadline = time.monotonic() + seconds
        self.socket.settimeout(0.2)
        try:
            while time.monotonic() < deadline:
                try:
                    self.events.append(json.loads(self.socket.recv()))
                except websocket.WebSocketTimeoutException:
                    continue
        finally:
            self.socket.settimeout(self.timeout)

    def evaluate(self, expression: str, context_id: int | None = None) -> Any:
        params: dict[str, Any] = {"expression": expression, "returnByValue": True}
        if context_id is not None:
            params["contextId"] = context_id
        reply = self.call("Runtime.evaluate", **params)
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression[:60]}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def frame_contexts(self, since: int = 0) -> dict[str, int]:
        """Frame id -> its default execution context, for contexts created after event number
        ``since`` and not destroyed since."""
        contexts: dict[str, int] = {}
        for event in self.events[since:]:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.executionContextCreated":
                aux = params["context"].get("auxData", {})
                if aux.get("isDefault"):
                    contexts[aux["frameId"]] = params["context"]["id"]
            elif method == "Runtime.executionContextDestroyed":
                gone = params["executionContextId"]
                contexts = {k: v for k, v in contexts.items() if v != gone}
            elif method == "Runtime.executionContextsCleared":
                contexts = {}
        return contexts

    def problems(self) -> list[str]:
        """JavaScript errors, console errors, failed loads and any request that leaves the file."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                text = details.get("exception", {}).get("description") or details.get("text")
                found.append(f"JavaScript exception: {text}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                args = [a.get("value", a.get("description")) for a in params.get("args", [])]
                found.append(f"console.error: {args}")
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                found.append(f"browser error: {params['entry'].get('text')}")
            elif method == "Network.requestWillBeSent":
                url = params["request"]["url"]
                if not url.startswith(LOCAL_SCHEMES):
                    found.append(f"request outside the file: {url}")
            elif method == "Network.loadingFailed" and not params.get("canceled"):
                found.append(f"failed load: {params.get('errorText')}")
        return found

    def close(self) -> None:
        self.socket.close()


def _devtools_port(process: subprocess.Popen, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    assert process.stderr is not None
    os.set_blocking(process.stderr.fileno(), False)
    text = ""
    while time.monotonic() < deadline:
        chunk = process.stderr.read()
        text += chunk.decode(errors="replace") if chunk else ""
        match = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", text)
        if match:
            return int(match.group(1))
        if process.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"chromium did not start: {text[-2000:]}")


@contextmanager
def headless_page(browser: str, profile: Path, timeout: float = 30.0) -> Iterator[Page]:
    """A fresh headless Chromium with no network (unresolvable hosts, a dead proxy, and the
    page's network emulated offline); killed, with its children, on exit."""
    command = [
        browser,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=http://127.0.0.1:9",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        "about:blank",
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    page = None
    try:
        port = _devtools_port(process, timeout)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as r:
            targets = json.load(r)
        target = next(t for t in targets if t["type"] == "page")
        page = Page(target["webSocketDebuggerUrl"], timeout)
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.call(f"{domain}.enable")
        page.call(
            "Network.emulateNetworkConditions",
            offline=True,
            latency=0,
            downloadThroughput=-1,
            uploadThroughput=-1,
        )
        yield page
    finally:
        if page is not None:
            page.close()
        _kill(process)
        _remove_singleton_folder(profile)


def _remove_singleton_folder(profile: Path) -> None:
    """Chromium keeps its single-instance socket in a folder of the temporary folder
    (org.chromium.Chromium.*, linked from the profile's SingletonSocket) and leaves it there
    when it is killed: removed here, as the profile is removed with the test's folder."""
    with suppress(OSError):
        folder = Path(os.readlink(profile / "SingletonSocket")).parent
        if folder.name.startswith("org.chromium.Chromium."):
            shutil.rmtree(folder, ignore_errors=True)


def _kill(process: subprocess.Popen) -> None:
    """End the browser we started: the main process first, so that it reaps its renderers and
    helpers, then anything left in its process group."""
    try:
        process.terminate()
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    if process.stderr is not None:
        process.stderr.close()
