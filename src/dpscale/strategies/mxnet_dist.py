"""mxnet-dist: kvstore 'dist_sync', one worker process per device, parameter servers.

Started by dpscale.launch.starters.mxnet_ps (launch kind ``mxnet``), which runs this same
module as the ps-lite scheduler, the servers (``mxnet_servers`` in the config) and the workers:
in a scheduler or server process ``import mxnet`` serves until the job ends and exits, so only
workers get past the imports.

Across nodes the scheduler runs on the first node and server k on node k mod N, as MXNet's own
launcher deals them (dpscale.launch.kinds.server_nodes): with one server per node every
worker's pushes and pulls to the servers off its node cross the link; with the one server
of the default, only the other nodes' workers' do. The result records the servers' nodes
(``system.mxnet_server_nodes``) beside ``system.mxnet_servers``.

Synthetic and folder modes: the Trainer updates on the kvstore (Gluon's default for dist
kvstores, the classic parameter server): workers push gradients, the servers sum them over
workers and apply SGD, workers pull the new weights. Creating the Trainer's kvstore entries
broadcasts worker 0's initial parameters. The gradient is averaged over the global batch.

Training and collectives modes update on the workers instead
(``update_on_kvstore=False``): the servers only sum the gradients, each worker pulls the
sum and applies SGD itself. The learning rate changes every step, and
``trainer.set_learning_rate`` changes only the worker's optimizer: the servers' copy is
pickled once, when the Trainer sends it. All workers pull the same sum
and apply the same update, so their parameters stay bit-identical. With no optimizer on the
servers, the kvstore also carries the epoch sums and maxima (``KVStoreGather``) and, in
collectives mode, the timed all-reduces (``KVStoreAllreduce``).

Folder mode: as synthetic mode (the update on the kvstore), each step on the worker's next
batch from Gluon's ImageFolderDataset and DataLoader (dpscale.frameworks.mxnet_folder),
sharded by kvstore rank.

The kvstore's side of a worker (gathers, sums, timed all-reduces, the initial broadcast) is
dpscale.frameworks.mxnet_kvstore.
"""

from __future__ import annotations

import os
from typing import Any

from dpscale.plan.controls import Control
from dpscale.plan.remedies import parameter_server_ratio
from dpscale.plan.strategy import CellOption, CommSupport, Strategy, framework_imports
from dpscale.plan.traffic import ParameterServers
from dpscale.runner import startup
from dpscale.runner.measure import run_cell
from dpscale.runner.support import parse_runner_args, require_devices

with framework_imports() as framework:
    import mxnet as mx
    from mxnet import gluon

    from dpscale.frameworks import mxnet_kvstore, mxnet_ops

STRATEGY = Strategy(
    name="mxnet-dist",
    framework="mxnet",
    env="mxnet",
    launch="mxnet",
    runner=__name__,
    requires=("mxnet>=1.9,<2",),
    one_process=False,
    multi_node=True,
    cell_options=(
        CellOption(
            "mxnet_servers",
            {
                "description": (
                    "Parameter servers started for each mxnet-dist cell (beside its scheduler "
                    "and one worker per device). Across N nodes server k runs on node k mod N "
                    "and the scheduler on the first, as MXNet's launcher places them: the node "
                    "count has every worker's traffic cross the link (with 1 server, the "
                    "first node's workers never use it). Not part of the cell id; "
                    "Snakemake reruns the mxnet-dist cells when it changes, and no other cells."
                ),
                "type": "integer",
                "minimum": 1,
                "default": 1,
            },
        ),
    ),
    comm=CommSupport(
        remedies=("2bit", "push-pull"),
        collectives=("2bit", "push-pull"),
        not_in_training=(
            (
                "2bit",
                "MXNet compresses every key a worker pushes, and the training mode's epoch "
                "sums and maxima travel through the same kvstore",
            ),
        ),
    ),
    # every worker pushes to and pulls from the servers (mxnet_servers, server k on node
    # k mod N)
    traffic=ParameterServers(servers=1, option="mxnet_servers"),
    # folder cells (dpscale.frameworks.mxnet_folder): each worker loads its share of the
    # folder, every num_workers-th sample of each shuffled epoch from its kvstore rank
    folder_pipeline="Gluon ImageFolderDataset, DataLoader, a sampler sharding by kvstore rank",
    # models named gluon.<name> (config models): gluon.model_zoo.vision.get_model
    model_zoo="gluon",
    # control cells (plan.controls): the loss split into its terms
    # (mxnet_kvstore.KVStoreRank.control_step)
    controls=(
        Control("local", "a Gluon Trainer without the kvstore: no push, no pull"),
        Control("barrier", "as local, then the kvstore's barrier after every step"),
    ),
)


def compression_params(cell: Any) -> dict[str, Any] | None:
    """MXNet's 2-bit gradient compression (worker to server traffic) for comm ``2bit``."""
    if cell.comm.name != "2bit":
        return None
    return {"type": "2bit", "threshold": cell.comm.threshold}


# the modes whose servers run the optimizer (the classic parameter server); in the others
# the workers update, so the kvstore can carry their sums and timed all-reduces
UPDATE_ON_SERVERS = ("synthetic", "folder")

# remedies whose gradients go as a push, then a pull: a compressing kvstore refuses pushpull,
# and push-pull sends the same way uncompressed, so 2-bit is compared like with like
SPLIT = ("2bit", "push-pull")
HOOKS = {
    "2bit": "kvstore.set_gradient_compression(2bit), push then pull",
    "push-pull": "push then pull, uncompressed (2-bit's path)",
}


def applied(cell: Any) -> dict[str, Any]:
    return {
        "remedy": cell.comm.key,
        "hook": HOOKS.get(cell.comm.name, "kvstore pushpull"),
        "threshold": cell.comm.threshold,
        # only the workers' pushes are compressed; the servers' replies are float32
        "wire_ratio": parameter_server_ratio(cell.comm.nominal_ratio or 1.0),
    }


def server_nodes(cell: Any) -> list[int]:
    """Each server's node index, as the launch kind placed them (its
    ``DPSCALE_MXNET_SERVER_NODES``, e.g. ``0,1``); started on this machine alone: all on it."""
    placed = os.environ.get("DPSCALE_MXNET_SERVER_NODES")
    if placed:
        return [int(node) for node in placed.split(",")]
    return [0] * STRATEGY.option(cell, "mxnet_servers")


def main(argv: list[str] | None = None) -> None:
    framework.require()
    cell, out = parse_runner_args(argv)
    mxnet_ops.check_supported(cell)

    kv = mx.kv.create("dist_sync")  # [distributed] join the ps-lite job as a worker
    compression = compression_params(cell)
    if compression and cell.mode == "collectives":  # the Trainer sets it in the other modes
        kv.set_gradient_compression(compression)
    if kv.num_workers != cell.world_size:
        raise RuntimeError(f"{kv.num_workers} workers != cell's world size {cell.world_size}")
    require_devices(cell, mx.context.num_gpus() if cell.accelerator == "cuda" else 1)
    ctxs = mxnet_ops.contexts(cell, first=int(os.environ.get("DPSCALE_LOCAL_RANK", 0)), count=1)
    startup.first_barrier(kv.rank, kv._barrier)  # [distributed] every worker has joined

    net, params = mxnet_ops.build_net(cell, ctxs)
    startup.mark("built")
    # [distributed] the Trainer's kvstore entries broadcast worker 0's initial parameters;
    # every step pushes gradients to the servers and pulls the result
    trainer = gluon.Trainer(
        net.collect_params(),
        mxnet_ops.OPTIMIZER,
        mxnet_ops.optimizer_params(cell.sgd),
        kvstore=kv,
        # synthetic and folder modes only: collectives time the servers' sum, which an
        # optimizer on the servers would turn into an update
        update_on_kvstore=cell.mode in UPDATE_ON_SERVERS,
        compression_params=compression,
    )
    if cell.comm.name in SPLIT:
        mxnet_kvstore.push_then_pull(trainer)  # [distributed] (compressed) pushes, then pulls
    if cell.mode == "train":
        mxnet_kvstore.broadcast_initial_parameters(trainer)
        startup.mark("broadcast")  # other modes: inside the first step (Gluon's lazy init)
    # [distributed] gathers, sums and the timed all-reduces go through the kvstore; the last
    # call is a kvstore barrier
    rank = mxnet_kvstore.KVStoreRank(
        cell,
        net,
        trainer,
        ctxs,
        params,
        kv=kv,
        out=out.resolve(),
        split=cell.comm.name in SPLIT,
        system_extra={
            "mxnet_servers": STRATEGY.option(cell, "mxnet_servers"),
            "mxnet_server_nodes": server_nodes(cell),
            "comm": applied(cell),
        },
    )
    run_cell(cell, out, rank)


if __name__ == "__main__":
    main()
