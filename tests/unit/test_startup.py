"""Start-up phases (runner.startup): the cell's boundaries, phases that add up, the queue wait."""

import time

import pytest

from dpscale.launch.slurm import allocation as slurm
from dpscale.runner import startup, timing

LAUNCH = 1000.0


def readings(**offsets: float | None) -> dict[str, float | None]:
    """One rank's readings, given as seconds after the launch (None: not passed)."""
    every = dict.fromkeys(startup.BOUNDARIES)
    every.update({k: (LAUNCH + v if v is not None else None) for k, v in offsets.items()})
    return {"launch": LAUNCH, **every}


def test_each_boundary_is_its_last_rank_and_the_phases_add_up_to_the_first_window():
    rank0 = readings(
        started=0.5, imported=2.0, initialised=3.0, built=3.5, broadcast=4.0,
        first_step=5.0, window=5.5,
    )  # fmt: skip
    rank1 = readings(
        started=0.7, imported=2.5, initialised=3.0, built=3.4, broadcast=4.0,
        first_step=5.0, window=5.5,
    )  # fmt: skip
    cell = startup.phases([rank0, rank1])
    assert cell["phases_s"] == pytest.approx(
        {"launch": 0.7, "import": 1.8, "init": 0.5, "build": 0.5, "broadcast": 0.5,
         "first_step": 1.0, "warmup": 0.5}
    )  # fmt: skip
    assert sum(cell["phases_s"].values()) == pytest.approx(cell["to_first_window_s"], abs=1e-9)
    assert cell["to_first_window_s"] == pytest.approx(5.5)
    assert cell["per_rank_s"][1]["imported"] == pytest.approx(2.5)
    assert cell["launch_time"] == LAUNCH and cell["launch_time_known"]
    assert cell["mlperf_s"] == pytest.approx({"init_stop": 4.0, "run_start": 5.5})


def test_a_step_a_strategy_does_not_have_is_a_phase_of_length_zero():
    one_process = readings(started=0.1, imported=1.0, built=1.2, first_step=2.0, window=2.2)
    phases = startup.phases([one_process])["phases_s"]
    assert phases["init"] == 0.0 and phases["broadcast"] == 0.0
    assert phases["build"] == pytest.approx(0.2)
    assert sum(phases.values()) == pytest.approx(2.2)


def test_a_rank_stalled_in_initialisation_shows_in_the_init_phase_only():
    quick = readings(
        started=0.1, imported=1.0, initialised=1.5, built=1.6, broadcast=1.7,
        first_step=2.0, window=2.1,
    )  # fmt: skip
    # rank 1 sleeps before the first barrier; rank 0 waits in it: every later boundary moves
    stalled = {b: (v + 3.0 if v is not None and b not in ("launch", "started", "imported")
                      else v) for b, v in quick.items()}  # fmt: skip
    phases = startup.phases([quick, stalled])["phases_s"]
    assert phases["init"] == pytest.approx(3.5)
    assert phases["import"] == pytest.approx(0.9) and phases["build"] == pytest.approx(0.1)


def test_without_the_launchers_clock_the_first_process_start_is_the_origin():
    rank = readings(started=0.5, imported=1.5, window=3.0)
    rank["launch"] = None
    cell = startup.phases([rank])
    assert not cell["launch_time_known"]
    assert cell["phases_s"]["launch"] == 0.0
    assert cell["to_first_window_s"] == pytest.approx(2.5)


def test_the_timing_protocol_marks_the_first_step_and_the_first_window(monkeypatch):
    monkeypatch.setattr(startup, "_readings", {})
    steps: list[float] = []
    timing.time_windows(lambda: steps.append(0), lambda: None, 3, 2, 2)
    marks = startup.readings()
    assert marks["first_step"] <= marks["window"]
    assert marks["window"] == timing.last_timed_span()[0]  # the same clock reading
    assert len(steps) == 3 + 2 * 2
    timing.time_windows(lambda: None, lambda: None, 1, 1, 1)  # a later call (matmul peak)
    assert startup.readings()["window"] == marks["window"]


def test_an_unknown_boundary_is_an_error():
    with pytest.raises(ValueError, match="allowed"):
        startup.mark("compiled")


def test_process_start_time_is_in_the_past():
    started = startup.process_start_time()
    assert started is not None and 0 < started <= time.time()


def test_queue_wait_is_start_minus_submission_from_scontrol():
    line = "JobId=7 JobName=x SubmitTime=2026-11-24T10:00:05 StartTime=2026-11-24T10:01:17 Nodes=a"
    assert slurm.queue_wait_s("7", run=lambda command: line) == 72.0
    assert slurm.queue_wait_s("7", run=lambda command: None) is None
    unknown = "JobId=7 SubmitTime=2026-11-24T10:00:05 StartTime=Unknown"
    assert slurm.queue_wait_s("7", run=lambda command: unknown) is None


def test_mlperf_log_lines_mark_init_start_init_stop_and_run_start():
    import json

    rank0 = readings(
        started=0.5, imported=2.0, initialised=3.0, built=3.5, broadcast=4.0,
        first_step=5.0, window=5.5,
    )  # fmt: skip
    lines = startup.mllog_lines(startup.phases([rank0]))
    assert all(line.startswith(":::MLLOG {") for line in lines)
    events = [json.loads(line.removeprefix(":::MLLOG ")) for line in lines]
    assert [(e["key"], e["event_type"], e["time_ms"]) for e in events] == [
        ("init_start", "INTERVAL_START", 1_000_000),
        ("init_stop", "INTERVAL_END", 1_004_000),
        ("run_start", "INTERVAL_START", 1_005_500),
    ]
    assert all(
        e["namespace"] == "" and e["value"] is None and "file" in e["metadata"] for e in events
    )
