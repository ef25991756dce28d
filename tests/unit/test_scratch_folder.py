"""A cell's scratch folder: gone when its launch ends, and, where SIGKILL left it, removed by
the next launch beside it; only folders whose recorded launcher on this host is gone."""

from __future__ import annotations

import io
import json
import os
import socket
from pathlib import Path

from dpscale.launch import supervise
from dpscale.launch.emulation.netns import process_start


def left_folder(parent: Path, name: str, owner: object | None) -> Path:
    """A scratch folder as a launcher leaves it; ``owner``: its record (None: none)."""
    folder = parent / f"{supervise.SCRATCH_PREFIX}{name}"
    folder.mkdir()
    (folder / "cell.json").write_text("{}")
    if owner is not None:
        (folder / supervise.SCRATCH_OWNER).write_text(json.dumps(owner))
    return folder


def test_the_folder_records_its_launcher_and_is_gone_when_the_launch_ends(tmp_path):
    with supervise.scratch_folder(tmp_path, io.StringIO()) as scratch:
        assert scratch.parent == tmp_path and scratch.name.startswith(supervise.SCRATCH_PREFIX)
        owner = json.loads((scratch / supervise.SCRATCH_OWNER).read_text())
        assert owner == {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "start": process_start(os.getpid()),
        }
        assert supervise.reap_scratch(tmp_path) == []  # its launcher runs: kept
    assert not scratch.exists()


def test_only_folders_whose_launcher_on_this_host_is_gone_are_removed(tmp_path):
    host, me, started = socket.gethostname(), os.getpid(), process_start(os.getpid())
    # this pid with another start time: the launcher that had it is gone (the pid reused)
    gone = left_folder(tmp_path, "gone", {"host": host, "pid": me, "start": "0"})
    running = left_folder(tmp_path, "running", {"host": host, "pid": me, "start": started})
    elsewhere = left_folder(tmp_path, "elsewhere", {"host": host + "-x", "pid": me, "start": "0"})
    unrecorded = left_folder(tmp_path, "unrecorded", None)
    garbled = left_folder(tmp_path, "garbled", ["not", "a", "record"])
    other = tmp_path / "results-of-someone"
    other.mkdir()
    log = io.StringIO()
    with supervise.scratch_folder(tmp_path, log) as scratch:
        assert not gone.exists()
        assert all(f.exists() for f in (running, elsewhere, unrecorded, garbled, other, scratch))
    assert log.getvalue() == (
        f"[dpscale] removed scratch folders of launchers that died: ['{gone.name}']\n"
    )
