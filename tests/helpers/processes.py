"""Processes a test started: every one inherits the test's mark (an environment variable),
so a test can find them, break them, and check that none is left when it ends."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from dpscale.launch.supervise import TERM_GRACE_S

GRACE_S = TERM_GRACE_S + 30  # a launcher's own teardown, and start-up
MARK = "DPSCALE_TEST_MARK"


def environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def marked(mark: str) -> list[int]:
    """Every process started by this test (they all inherit its mark)."""
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    return [pid for pid in pids if environ(pid).get(MARK) == mark]


def wait_for(predicate: Callable[[], object], timeout_s: float, what: str) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout_s} s")


@pytest.fixture
def mark(tmp_path, monkeypatch):
    """A mark every process of the test inherits; none may be left when the test ends."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(MARK, value)
    monkeypatch.setenv("DPSCALE_LOCK_DIR", str(tmp_path))  # not the machine's bench lock
    yield value
    leftovers = marked(value)
    for pid in leftovers:  # never leave them running, even when the test failed
        subprocess.run(["kill", "-9", str(pid)], check=False)
    assert not leftovers, [cmdline(pid) for pid in leftovers]
