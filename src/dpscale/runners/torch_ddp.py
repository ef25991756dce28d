"""torch-ddp: DistributedDataParallel, one process per device, started by torchrun.

gloo on CPU, nccl on CUDA. Each rank times its own windows; rank 0 gathers them and the
slowest rank's time is the window's time.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from dpscale.core.result import now_iso
from dpscale.core.runner_support import (
    parse_runner_args,
    progress,
    require_devices,
    write_synthetic_result,
)
from dpscale.core.timing import time_windows
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
    step = tc.make_train_step(cell, model, device, cell.batch_per_device)

    def log(message: str) -> None:
        progress(message, rank)

    log(f"{cell.cell_id}: DDP rank {rank}/{cell.world_size}, batch {cell.batch_per_device}")
    m = cell.measure
    windows = time_windows(
        step, tc.synchronizer(device), m.warmup_steps, m.windows, m.steps_per_window, log
    )
    gathered: list[list[float] | None] = [None] * cell.world_size
    dist.all_gather_object(gathered, windows)
    names = [torch.cuda.get_device_name(local_rank)] if on_cuda else []
    all_names: list[list[str] | None] = [None] * cell.world_size
    dist.all_gather_object(all_names, names)
    if rank == 0:
        write_synthetic_result(
            cell,
            out,
            started_at=started_at,
            per_rank_windows=gathered,  # type: ignore[arg-type]
            framework="torch",
            framework_versions=tc.versions(),
            threads_used=threads,
            trainable_params=params,
            system_extra={"gpu_names_seen": [n for names_ in all_names for n in names_ or []]},
        )
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
