"""A real all-reduce cell of the collectives mode over an emulated link (as root): its bus
bandwidth stays below the link's rate. The cells on the host run side by side, in
tests/integration/test_collectives_host.py."""

from __future__ import annotations

import pytest

from dpscale.launch.emulation import netns
from dpscale.plan.cell import Cell, Measure, Network
from helpers.collectives_cell import ddp_collectives_cell, run_cell


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
