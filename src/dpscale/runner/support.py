"""What every framework runner shares: its command line, progress lines, the device check
and the parameter checksum (its result records: runner.records)."""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn

import numpy as np

from dpscale.plan.cell import Cell
from dpscale.plan.gpu_support import runs_on
from dpscale.runner import startup
from dpscale.runner.faults import exit_with_parent
from dpscale.runner.temporary import keep_temporary_files_in_scratch


def parse_runner_args(argv: list[str] | None = None) -> tuple[Cell, Path]:
    """The runner's cell and result path; from here on the runner exits if its parent
    (launcher) dies (runner.faults.exit_with_parent), and its Python temporary files go to
    the launch's scratch folder (runner.temporary). The adapter has imported its
    framework by now: the start-up's import phase ends here (runner.startup)."""
    startup.mark("imported")
    exit_with_parent()
    keep_temporary_files_in_scratch()  # autograph's sources go with the cell's scratch folder
    parser = argparse.ArgumentParser(description="Measure one dpscale cell")
    parser.add_argument("--cell-file", required=True, type=Path, help="cell JSON")
    parser.add_argument("--out", required=True, type=Path, help="result JSON to write")
    args = parser.parse_args(argv)
    return Cell.from_json(args.cell_file.read_text()), args.out


def exit_without_finalization() -> NoReturn:
    """End a runner whose result is written and whose group is shut down: flush stdout and
    stderr and leave with ``os._exit(0)``, without Python's finalization.

    That finalization frees a framework's modules and tensors: 0.7-1.4 s of both cores a
    process on 2 cores (TensorFlow's longest), on every cell; in torch's gloo ranks it also
    aborts about one exit in 30 (docs/decisions/runner-exit.md)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def progress(message: str, rank: int = 0) -> None:
    print(f"[dpscale rank {rank}] {message}", file=sys.stderr, flush=True)


class DeviceShortage(RuntimeError):
    """The job sees fewer devices than the cell asks for."""


def require_devices(cell: Cell, visible: int) -> None:
    if cell.accelerator == "cuda" and visible < cell.devices_per_node:
        raise DeviceShortage(
            f"cell asks for {cell.devices_per_node} GPUs per node, the process sees {visible}"
        )


class UnsupportedGpu(RuntimeError):
    """The framework's build carries no GPU code this GPU can run."""


def require_gpu_code(build: str, capability: tuple[int, int], arch_list: list[str]) -> None:
    """Fail in one line where ``arch_list`` (the framework's ``sm_XY``/``compute_XY``, as
    torch.cuda.get_arch_list() gives them) has neither machine code nor PTX for a GPU of
    ``capability`` (plan.gpu_support.runs_on), instead of a kernel error mid-step. An empty
    list (a framework that does not say) passes."""
    sass = [int(a[3:]) for a in arch_list if a.startswith("sm_") and a[3:].isdigit()]
    ptx = [int(a[8:]) for a in arch_list if a.startswith("compute_") and a[8:].isdigit()]
    if not arch_list or runs_on({"sass": sass, "ptx": ptx}, capability):
        return
    raise UnsupportedGpu(
        f"{build} carries GPU code for {', '.join(arch_list)}: this GPU (compute capability "
        f"{capability[0]}.{capability[1]}) cannot run it; use a build for it (envs/, or "
        "interpreters: the site's own)"
    )


def param_checksum(arrays: Iterable[np.ndarray]) -> str:
    """sha256 of parameter arrays (in model order): equal only if every value is bit-equal.

    Runners pass their trainable parameters; batch-norm running statistics are per-rank
    state in Horovod and MXNet (not synchronised), so they are left out everywhere.
    """
    digest = hashlib.sha256()
    for array in arrays:
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()
