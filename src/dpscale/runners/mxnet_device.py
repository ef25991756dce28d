"""mxnet-device: one process drives the node's devices, Gluon Trainer with kvstore 'device'.

The batch (per-device batch x devices) is split over the devices with split_and_load; the
'device' kvstore sums the gradients on the devices and every device applies the update.
On CPU there is one device (the registry skips more), so this is the 1-device baseline.
In training mode (mxnet_common.GluonTrainingBackend) the one process's reductions are the
identity.
"""

from __future__ import annotations

import mxnet as mx
from mxnet import gluon

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
from dpscale.runners import mxnet_common as mc


def main(argv: list[str] | None = None) -> None:
    cell, out = parse_runner_args(argv)
    started_at = now_iso()
    mc.check_supported(cell)
    on_cuda = cell.accelerator == "cuda"
    require_devices(cell, mx.context.num_gpus() if on_cuda else 1)
    ctxs = mc.contexts(cell, first=0, count=cell.devices_per_node)

    net, params = mc.build_net(cell, ctxs)
    trainer = gluon.Trainer(
        net.collect_params(), mc.OPTIMIZER, mc.optimizer_params(cell), kvstore="device"
    )
    loader_batch = cell.batch_per_device * cell.devices_per_node
    if cell.mode == "train":
        backend = mc.GluonTrainingBackend(net, trainer, ctxs)
        training = run_training(cell, backend, 0, 1, loader_batch, progress)
        write_training_result(
            cell,
            out,
            started_at=started_at,
            training=training,
            framework="mxnet",
            framework_versions=mc.versions(),
            threads_used=mc.threads_used(cell),
            trainable_params=params,
            system_extra={"mxnet_contexts": [str(c) for c in ctxs]},
            rank_param_checksums=[mc.trained_param_checksum(net, ctxs[0])],
        )
        return
    images, labels = mc.synthetic_batch(cell, loader_batch, ctxs)
    step = mc.make_train_step(net, trainer, images, labels, loader_batch)

    progress(f"{cell.cell_id}: kvstore 'device' over {ctxs}, batch {loader_batch}")
    m = cell.measure
    windows = time_windows(
        step,
        mc.synchronize,
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
        framework="mxnet",
        framework_versions=mc.versions(),
        threads_used=mc.threads_used(cell),
        trainable_params=params,
        system_extra={"mxnet_contexts": [str(c) for c in ctxs]},
        rank_param_checksums=[mc.trained_param_checksum(net, ctx) for ctx in ctxs],
    )


if __name__ == "__main__":
    main()
