"""Command lines that start a runner's processes for one cell on one node.

Each launcher returns the argv to run; the runner module receives ``--cell-file`` and
``--out``.  Multi-node launch under SLURM is added per launcher kind.
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


LAUNCHERS: dict[str, Launcher] = {
    "single": single_process,
    "torchrun": torchrun,
}
