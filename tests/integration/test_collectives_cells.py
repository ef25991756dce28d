"""Real all-reduce cells of the collectives mode: torch-ddp with 2 processes on the host,
and over an emulated link (as root)."""

from __future__ import annotations

import pytest

from conftest import make_cell
from dpscale.analysis.results.collectives import (
    collectives_table,
)
from dpscale.launch import launcher
from dpscale.launch.emulation import netns
from dpscale.plan.cell import Cell, Collectives, Measure, Network
from dpscale.plan.remedies import Comm
from dpscale.plan.result import read_result


def ddp_collectives_cell(**fields) -> Cell:
    return make_cell(
        "torch-ddp",
        batch=0,
        mode="collectives",
        collectives=Collectives(4, 4 * 2**20, 32),  # 4 B, 128 B, 4 KiB, 128 KiB, 4 MiB
        **fields,
    )


def run_cell(cell: Cell, tmp_path, monkeypatch) -> dict:
    from dpscale.launch.setup.envs import ensure_env

    monkeypatch.setenv("DPSCALE_LOCK_DIR", str(tmp_path))
    out, log = cell.result_path(tmp_path / "results"), tmp_path / "cell.log"
    status = launcher.launch(cell, out, ensure_env("torch"), log)
    result = read_result(out)  # validates against the schema
    assert status == result["status"] == "ok", (result["reason"], log.read_text()[-3000:])
    return result


@pytest.mark.slow
def test_a_torch_ddp_all_reduce_cell_on_the_host(tmp_path, monkeypatch):
    cell = ddp_collectives_cell(devices=2)
    result = run_cell(cell, tmp_path, monkeypatch)
    record = result["collectives"]
    assert record["backend"] == "gloo"
    checksums = record["rank_param_checksums"]  # after rank 0's initial broadcast
    assert len(checksums) == 2 and len(set(checksums)) == 1
    sizes = record["sizes"]
    assert [s["message_bytes"] for s in sizes] == cell.collectives.message_sizes()
    for size in sizes:
        assert len(size["per_rank_window_seconds"]) == 2
        assert len(size["window_seconds"]) == cell.measure.windows
    # a million times the bytes: the largest all-reduce takes longer than the smallest
    assert sizes[-1]["summary"]["median"] > sizes[0]["summary"]["median"]
    assert sizes[-1]["busbw_GB_s"] > sizes[0]["busbw_GB_s"]
    table = collectives_table([result])
    assert len(table) == len(sizes) and set(table["world_size"]) == {2}
    replay = record["gradient_replay"]  # one step's buckets: one float32 all-reduce each
    gradient_bytes = 4 * result["model_info"]["trainable_params"]
    assert replay["logical_bytes_per_step"] == replay["wire_bytes_per_step"] == gradient_bytes
    assert replay["collectives_per_step"] == replay["buckets"] >= 1
    assert len(replay["step_seconds"]) == cell.measure.windows


@pytest.mark.slow
def test_powersgds_replayed_traffic_is_what_its_training_steps_send(tmp_path, monkeypatch):
    """The PowerSGD collectives cell sends, per step, the bytes torch's hook counted in a
    synthetic cell's compressed steps (within 1%), in three collectives per bucket."""
    powersgd = Comm("powersgd", rank=2)
    (tmp_path / "c").mkdir(), (tmp_path / "s").mkdir()
    replay = run_cell(ddp_collectives_cell(devices=2, comm=powersgd), tmp_path / "c", monkeypatch)
    steps = make_cell("torch-ddp", devices=2, batch=4, comm=powersgd)
    trained = run_cell(steps, tmp_path / "s", monkeypatch)["system"]["comm"]
    sent = replay["collectives"]["gradient_replay"]
    assert sent["wire_bytes_per_step"] == pytest.approx(trained["wire_bytes_per_step"], rel=0.01)
    assert sent["logical_bytes_per_step"] / sent["wire_bytes_per_step"] == pytest.approx(
        trained["wire_ratio"], rel=0.01
    )
    assert sent["collectives_per_step"] == 3 * sent["buckets"]
    assert sent["buckets"] == trained["buckets"]  # as DDP rebuilt them after the first step


@pytest.mark.slow
@pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable()))
def test_an_all_reduce_over_an_emulated_link_stays_below_its_rate(tmp_path, monkeypatch):
    rate = "100mbit"
    cell = ddp_collectives_cell(nodes=2, network=Network("lan", rate=rate))
    cell = Cell.from_dict(
        {**cell.to_dict(), "measure": vars(Measure(1, 2, 1, 300, collective_timeout_s=120))}
    )
    result = run_cell(cell, tmp_path, monkeypatch)
    largest = result["collectives"]["sizes"][-1]
    link_bytes_s = Network("lan", rate=rate).link.bytes_per_s
    assert largest["busbw_GB_s"] * 1e9 <= 1.15 * link_bytes_s
