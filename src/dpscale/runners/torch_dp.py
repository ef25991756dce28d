"""torch-dp: nn.DataParallel in one process over the node's devices.

The loader batch is the per-device batch times the number of devices (post 004: keeping
the loader batch fixed only splits the same work and gains little).
"""

from __future__ import annotations

import torch
from torch import nn

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
    threads = tc.configure_threads(cell)
    on_cuda = cell.accelerator == "cuda"
    require_devices(cell, torch.cuda.device_count() if on_cuda else 1)
    device = torch.device("cuda:0" if on_cuda else "cpu")

    model, params = tc.build_model(cell, device)
    device_ids = list(range(cell.devices_per_node)) if on_cuda else None
    model = nn.DataParallel(model, device_ids=device_ids)
    loader_batch = cell.batch_per_device * cell.devices_per_node
    if cell.mode == "train":
        backend = tc.TorchTrainingBackend(cell, model, device, distributed=False)
        training = run_training(cell, backend, 0, 1, loader_batch, progress)
        write_training_result(
            cell,
            out,
            started_at=started_at,
            training=training,
            framework="torch",
            framework_versions=tc.versions(),
            threads_used=threads,
            trainable_params=params,
            rank_param_checksums=[tc.trained_param_checksum(model)],
        )
        return
    step = tc.make_train_step(cell, model, device, loader_batch)

    progress(
        f"{cell.cell_id}: DataParallel over {cell.devices_per_node} device(s), batch {loader_batch}"
    )
    m = cell.measure
    windows = time_windows(
        step,
        tc.synchronizer(device),
        m.warmup_steps,
        m.windows,
        m.steps_per_window,
        progress,
        **m.adaptive_kwargs(processes=1),  # one process drives every device
    )
    write_synthetic_result(
        cell,
        out,
        started_at=started_at,
        per_rank_windows=[windows],
        framework="torch",
        framework_versions=tc.versions(),
        threads_used=threads,
        trainable_params=params,
        system_extra={"gpu_names_seen": tc.gpu_names(cell.devices_per_node) if on_cuda else []},
        rank_param_checksums=[tc.trained_param_checksum(model)],
    )


if __name__ == "__main__":
    main()
