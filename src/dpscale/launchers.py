"""Command lines that start a runner's processes for one cell on one node.

Each launcher returns the argv to run; the runner module receives ``--cell-file`` and
``--out``.  ``python`` is the framework environment's interpreter; tools that come with the
framework (horovodrun) are taken from the same environment.  Inside a SLURM job the
multi-process kinds start their ranks as SLURM tasks instead (dpscale.slurm.render).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dpscale.core.cell import Cell

Launcher = Callable[[Cell, Path, str, Path, Path], list[str]]


def _runner_args(module: str, cell_file: Path, out: Path) -> list[str]:
    return ["-m", module, "--cell-file", str(cell_file), "--out", str(out)]


def single_process(cell: Cell, python: Path, module: str, cell_file: Path, out: Path) -> list[str]:
    return [str(python), *_runner_args(module, cell_file, out)]


def torchrun(cell: Cell, python: Path, module: str, cell_file: Path, out: Path) -> list[str]:
    return [
        str(python),
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={cell.devices_per_node}",
        *_runner_args(module, cell_file, out),
    ]


def horovodrun(cell: Cell, python: Path, module: str, cell_file: Path, out: Path) -> list[str]:
    """One process per device over Gloo (no MPI needed)."""
    n = cell.devices_per_node
    return [
        str(python.parent / "horovodrun"),
        "-np",
        str(n),
        "-H",
        f"localhost:{n}",
        "--gloo",
        str(python),
        *_runner_args(module, cell_file, out),
    ]


def mxnet_dist(cell: Cell, python: Path, module: str, cell_file: Path, out: Path) -> list[str]:
    """A ps-lite job: scheduler, servers and one worker per device (dpscale.mxnet_ps)."""
    return [
        str(python),
        "-m",
        "dpscale.mxnet_ps",
        f"--workers={cell.devices_per_node}",
        f"--servers={cell.mxnet_servers}",
        f"--timeout={cell.measure.timeout_s}",
        "--",
        str(python),
        *_runner_args(module, cell_file, out),
    ]


LAUNCHERS: dict[str, Launcher] = {
    "single": single_process,
    "torchrun": torchrun,
    "horovodrun": horovodrun,
    "mxnet-dist": mxnet_dist,
}
