"""A bug of the launcher's own still leaves a result: the cell ends failed with the
exception's last line and the log's path, and the job itself succeeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import make_cell
from dpscale.launch import launcher
from dpscale.plan.result import read_result


def broken_launch(*args, **kwargs):
    raise KeyError("torch-ddp launch kind")  # a bug in a launch kind, as seen while rooms moved


def test_an_exception_in_the_launcher_ends_the_cell_failed_with_its_last_line(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(launcher, "_launch", broken_launch)
    cell, log = make_cell(), tmp_path / "cell.log"
    out = cell.result_path(tmp_path / "results")
    assert launcher.launch(cell, out, Path("/no/env"), log) == "failed"
    result = read_result(out)
    assert result["status"] == "failed"
    assert "KeyError: 'torch-ddp launch kind'" in result["reason"]
    assert str(log) in result["reason"]
    assert "Traceback" in log.read_text() and "broken_launch" in log.read_text()


def test_the_launcher_s_command_line_exits_0_after_recording_the_failure(tmp_path, monkeypatch):
    monkeypatch.setattr(launcher, "_launch", broken_launch)
    cell = make_cell()
    out = cell.result_path(tmp_path / "results")
    argv = [f"--cell={cell.to_json()}", "--env=/no/env", f"--out={out}"]
    launcher.main([*argv, f"--log={tmp_path / 'cell.log'}"])  # no SystemExit
    assert read_result(out)["status"] == "failed"


def test_a_failed_amendment_keeps_the_measured_result(tmp_path, monkeypatch):
    cell, log = make_cell(), tmp_path / "cell.log"
    out = cell.result_path(tmp_path / "results")

    def measured(*args, **kwargs):
        out.parent.mkdir(parents=True)
        out.write_text("{}")
        return "ok", None, None

    def broken_amendment(*args, **kwargs):
        raise ValueError("bad footprint")

    monkeypatch.setattr(launcher, "_launch", measured)
    monkeypatch.setattr(launcher, "finish_result", broken_amendment)
    assert launcher.launch(cell, out, Path("/no/env"), log) == "ok"
    assert out.read_text() == "{}"
    assert "ValueError: bad footprint" in log.read_text()


@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_is_not_recorded_as_a_failure(tmp_path, monkeypatch, error):
    def interrupted(*args, **kwargs):
        raise error

    monkeypatch.setattr(launcher, "_launch", interrupted)
    cell = make_cell()
    out = cell.result_path(tmp_path / "results")
    with pytest.raises(error):
        launcher.launch(cell, out, Path("/no/env"), tmp_path / "cell.log")
    assert not out.exists()
