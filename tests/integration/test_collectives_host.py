"""Real all-reduce cells of the collectives mode on the host: torch-ddp with 2 processes, and
the PowerSGD replay against its training steps. Side by side: they check what was sent and
that the ranks agree, never a measured speed against a rate (the emulated link's cell does
that, in tests/integration/test_collectives_cells.py)."""

from __future__ import annotations

import pytest

from conftest import SIDE_BY_SIDE, make_cell
from dpscale.analysis.results.collectives import collectives_table
from dpscale.plan.remedies import Comm
from helpers.collectives_cell import ddp_collectives_cell, run_cell

pytestmark = SIDE_BY_SIDE


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
