"""torch-ddp: DistributedDataParallel, one process per device.

Started by torchrun (locally) or as SLURM tasks (launch kind ``torch``): gloo on CPU, nccl
on CUDA. DDP broadcasts rank 0's parameters and buffers when it wraps the model, then
all-reduces (averages) the gradients during every backward pass.

Communication remedies (config ``comm``) are DDP communication hooks
(dpscale.frameworks.torch_remedies); ``bucket_mb`` is DDP's ``bucket_cap_mb``.
"""

from __future__ import annotations

import os
from datetime import timedelta

from dpscale.plan.controls import Control
from dpscale.plan.strategy import CommSupport, Strategy, framework_imports
from dpscale.plan.traffic import RingAllReduce
from dpscale.runner import startup
from dpscale.runner.measure import run_cell
from dpscale.runner.support import exit_without_finalization, parse_runner_args

with framework_imports() as framework:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from dpscale.frameworks import torch_ops, torch_remedies

STRATEGY = Strategy(
    name="torch-ddp",
    framework="torch",
    env="torch",
    launch="torch",
    runner=__name__,
    requires=("torch>=2.0",),
    one_process=False,
    multi_node=True,
    oom_patterns=("OutOfMemoryError", "CUDNN_STATUS_ALLOC_FAILED"),
    comm=CommSupport(
        remedies=("fp16", "bf16", "powersgd", "delayed", "delayed-fp16"),
        collectives=("fp16", "bf16", "powersgd"),
        bucket="DistributedDataParallel(bucket_cap_mb)",
        cuda_only=(
            (
                "bf16",
                "torch's bf16_compress_hook says 'BF16 all reduce communication hook "
                "required CUDA 11+ and NCCL 2.10+ or XPU and XCCL'",
            ),
        ),
    ),
    traffic=RingAllReduce(),  # DDP all-reduces each bucket (NCCL, Gloo)
    # folder cells (dpscale.frameworks.torch_folder): each rank loads its share of the folder
    folder_pipeline="torchvision ImageFolder, DataLoader, DistributedSampler",
    # models named torchvision.<name> (config models): torchvision.models.get_model
    model_zoo="torchvision",
    # control cells (plan.controls): the loss split into its terms
    # (torch_ops.DistributedTorchRank.control_step)
    controls=(
        Control("local", "every step inside DistributedDataParallel.no_sync(): no all-reduce"),
        Control("barrier", "as local, then torch.distributed.barrier() after every step"),
    ),
)


def main(argv: list[str] | None = None) -> None:
    framework.require()
    cell, out = parse_runner_args(argv)
    threads = torch_ops.configure_threads(cell)
    on_cuda = cell.accelerator == "cuda"

    # [distributed] join the group: RANK, WORLD_SIZE, MASTER_ADDR/PORT from the launcher;
    # a collective that waits longer than the timeout raises (runner.faults names a rank
    # that misses the first one earlier)
    dist.init_process_group(
        backend="nccl" if on_cuda else "gloo",
        timeout=timedelta(seconds=2 * cell.measure.collective_timeout_s),
    )
    if dist.get_world_size() != cell.world_size:
        raise RuntimeError(f"world size {dist.get_world_size()} != cell's {cell.world_size}")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch_ops.pin_device(cell, local_rank)
    # [distributed] a first barrier: nccl creates its communicator here, not in the first step
    startup.first_barrier(dist.get_rank(), dist.barrier)

    model, params = torch_ops.build_model(cell, device)
    startup.mark("built")
    # [distributed] broadcast rank 0's weights; all-reduce the gradients in every backward
    model = DistributedDataParallel(
        model,
        device_ids=[local_rank] if on_cuda else None,
        bucket_cap_mb=cell.comm.bucket_mb or torch_remedies.DEFAULT_BUCKET_MB,
    )
    remedy = torch_remedies.RemedyHooks(cell.comm)
    remedy.register(model)  # [distributed] the cell's remedy, if any, all-reduces the buckets
    startup.mark("broadcast")

    rank = torch_ops.DistributedTorchRank(cell, model, device, params, threads, remedy)
    run_cell(cell, out, rank)  # ends with the group destroyed and rank 0's result written
    exit_without_finalization()


if __name__ == "__main__":
    main()
