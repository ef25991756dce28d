"""torch-ddp: DistributedDataParallel, one process per device, started by torchrun.

gloo on CPU, nccl on CUDA. DDP broadcasts rank 0's parameters and buffers when it wraps the
model. Each rank times its own windows; rank 0 gathers them (the slowest rank's time is the
window's time) and every rank's parameter checksum, which must all be equal.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from dpscale.core.result import now_iso
from dpscale.core.runner_support import (
    parse_runner_args,
    progress,
    require_devices,
    write_synthetic_result,
    write_training_result,
)
from dpscale.core.timing import time_windows
from dpscale.core.training import run_training
from dpscale.runners import torch_common as tc


def main(argv: list[str] | None = None) -> None:
    cell, out = parse_runner_args(argv)
    started_at = now_iso()
    on_cuda = cell.accelerator == "cuda"
    dist.init_process_group(backend="nccl" if on_cuda else "gloo")
    rank, local_rank = dist.get_rank(), int(os.environ.get("LOCAL_RANK", 0))
    if dist.get_world_size() != cell.world_size:
        raise RuntimeError(f"world size {dist.get_world_size()} != cell's {cell.world_size}")
    threads = tc.configure_threads(cell)
    require_devices(cell, torch.cuda.device_count() if on_cuda else 1)
    if on_cuda:
        torch.cuda.set_device(local_rank)
    device = torch.device(f"cuda:{local_rank}" if on_cuda else "cpu")

    model, params = tc.build_model(cell, device)
    model = DistributedDataParallel(model, device_ids=[local_rank] if on_cuda else None)

    def log(message: str) -> None:
        progress(message, rank)

    log(f"{cell.cell_id}: DDP rank {rank}/{cell.world_size}, batch {cell.batch_per_device}")
    common = {
        "started_at": started_at,
        "framework": "torch",
        "framework_versions": tc.versions(),
        "threads_used": threads,
        "trainable_params": params,
    }
    if cell.mode == "train":
        backend = tc.TorchTrainingBackend(cell, model, device, distributed=True)
        training = run_training(cell, backend, rank, cell.world_size, cell.batch_per_device, log)
        checksums = gather(tc.trained_param_checksum(model), cell.world_size)
        if rank == 0:
            write_training_result(
                cell, out, training=training, rank_param_checksums=checksums, **common
            )
    else:
        step = tc.make_train_step(cell, model, device, cell.batch_per_device)
        m = cell.measure
        windows = time_windows(
            step, tc.synchronizer(device), m.warmup_steps, m.windows, m.steps_per_window, log
        )
        gathered = gather(windows, cell.world_size)
        names = gather([torch.cuda.get_device_name(local_rank)] if on_cuda else [], cell.world_size)
        checksums = gather(tc.trained_param_checksum(model), cell.world_size)
        if rank == 0:
            write_synthetic_result(
                cell,
                out,
                per_rank_windows=gathered,
                system_extra={"gpu_names_seen": [n for rank_names in names for n in rank_names]},
                rank_param_checksums=checksums,
                **common,
            )
    dist.barrier()
    dist.destroy_process_group()


def gather(value: Any, world_size: int) -> list[Any]:
    """Every rank's ``value``, in rank order, on every rank."""
    values: list[Any] = [None] * world_size
    dist.all_gather_object(values, value)
    return values


if __name__ == "__main__":
    main()
