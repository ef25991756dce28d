"""A torch-ddp collectives cell and its launch, for the collectives tests on the host and
over an emulated link."""

from __future__ import annotations

from conftest import make_cell
from dpscale.launch import launcher
from dpscale.plan.cell import Cell, Collectives
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
