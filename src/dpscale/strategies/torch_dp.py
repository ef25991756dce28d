"""torch-dp: nn.DataParallel in one process over the node's devices.

The loader batch is the per-device batch times the number of devices (post 004: keeping
the loader batch fixed only splits the same work and gains little). DataParallel scatters
the batch over the devices, replicates the model on every forward pass and gathers the
gradients on the first device; there is no other process to talk to.
"""

from __future__ import annotations

from dpscale.plan.strategy import Strategy, framework_imports
from dpscale.plan.traffic import ParameterServers
from dpscale.runner import startup
from dpscale.runner.measure import run_cell
from dpscale.runner.support import exit_without_finalization, parse_runner_args

with framework_imports() as framework:
    from torch import nn

    from dpscale.frameworks import torch_ops

STRATEGY = Strategy(
    name="torch-dp",
    framework="torch",
    env="torch",
    launch="single",
    runner=__name__,
    requires=("torch>=2.0",),
    one_process=True,
    multi_node=False,
    oom_patterns=("OutOfMemoryError", "CUDNN_STATUS_ALLOC_FAILED"),
    # DataParallel sums the replicas' gradients onto device 0 and copies the weights back
    # out each step: one shard, held by a device
    traffic=ParameterServers(servers=1, on_workers=True),
    # folder cells (dpscale.frameworks.torch_folder): one loader feeds every device's share
    folder_pipeline="torchvision ImageFolder, DataLoader",
    # models named torchvision.<name> (config models): torchvision.models.get_model
    model_zoo="torchvision",
    no_controls=(
        "nn.DataParallel scatters the batch, replicates the module and sums the replicas' "
        "gradients onto device 0 inside every forward and backward: it has no step "
        "without the exchange to time apart"
    ),
)


def main(argv: list[str] | None = None) -> None:
    framework.require()
    cell, out = parse_runner_args(argv)
    threads = torch_ops.configure_threads(cell)
    device = torch_ops.pin_device(cell)

    model, params = torch_ops.build_model(cell, device)
    startup.mark("built")  # one process: nothing to join; DataParallel replicates per step
    device_ids = list(range(cell.devices_per_node)) if device.type == "cuda" else None
    model = nn.DataParallel(model, device_ids=device_ids)  # splits each batch over the devices

    loader_batch = cell.batch_per_device * cell.devices_per_node
    run_cell(cell, out, torch_ops.TorchRank(cell, model, device, params, threads, loader_batch))
    exit_without_finalization()  # the result is written


if __name__ == "__main__":
    main()
