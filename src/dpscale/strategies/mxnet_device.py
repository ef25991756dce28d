"""mxnet-device: one process drives the node's devices, Gluon Trainer with kvstore 'device'.

The batch (per-device batch x devices) is split over the devices with split_and_load; the
'device' kvstore sums the gradients on the devices and every device applies the update.
On CPU there is one device (more are skipped), so this is the 1-device baseline; in
training mode the one process's reductions are the identity. In folder mode one Gluon
loader (dpscale.frameworks.mxnet_folder) feeds the batch that is split over the devices.
"""

from __future__ import annotations

from dpscale.plan.strategy import Strategy, framework_imports
from dpscale.plan.traffic import ParameterServers
from dpscale.runner import startup
from dpscale.runner.measure import run_cell
from dpscale.runner.support import parse_runner_args, require_devices

with framework_imports() as framework:
    import mxnet as mx
    from mxnet import gluon

    from dpscale.frameworks import mxnet_ops

STRATEGY = Strategy(
    name="mxnet-device",
    framework="mxnet",
    env="mxnet",
    launch="single",
    runner=__name__,
    requires=("mxnet>=1.9,<2",),
    one_process=True,
    multi_node=False,
    # kvstore device: each key is summed on one of the devices, the keys dealt over them
    traffic=ParameterServers(servers=None, on_workers=True),
    # folder cells (dpscale.frameworks.mxnet_folder): one loader feeds every context
    folder_pipeline="Gluon ImageFolderDataset, DataLoader",
    # models named gluon.<name> (config models): gluon.model_zoo.vision.get_model
    model_zoo="gluon",
    no_controls=(
        "its one process sums every context's gradients through kvstore 'device' inside "
        "trainer.step; a local step (a Trainer without the kvstore) is not written yet, as "
        "no CPU layout of it has more than one device to check it on"
    ),
)


def main(argv: list[str] | None = None) -> None:
    framework.require()
    cell, out = parse_runner_args(argv)
    mxnet_ops.check_supported(cell)
    on_cuda = cell.accelerator == "cuda"
    require_devices(cell, mx.context.num_gpus() if on_cuda else 1)
    ctxs = mxnet_ops.contexts(cell, first=0, count=cell.devices_per_node)

    net, params = mxnet_ops.build_net(cell, ctxs)
    startup.mark("built")  # one process: nothing to join; the kvstore starts in the first step
    # the 'device' kvstore sums the contexts' gradients on the devices
    trainer = gluon.Trainer(
        net.collect_params(),
        mxnet_ops.OPTIMIZER,
        mxnet_ops.optimizer_params(cell.sgd),
        kvstore="device",
    )
    run_cell(cell, out, mxnet_ops.MXNetRank(cell, net, trainer, ctxs, params))


if __name__ == "__main__":
    main()
