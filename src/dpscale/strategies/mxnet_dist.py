"""mxnet-dist: kvstore 'dist_sync', one worker process per device, parameter servers.

Started by dpscale.launch.mxnet_ps (launch kind ``mxnet``), which runs this same module as the
ps-lite scheduler, the servers (``mxnet_servers`` in the config) and the workers: in a
scheduler or server process ``import mxnet`` serves until the job ends and exits, so only
workers get past the imports.

Synthetic mode: the Trainer updates on the kvstore (Gluon's default for dist kvstores, the
classic parameter server): workers push gradients, the servers sum them over workers and
apply SGD, workers pull the new weights. Creating the Trainer's kvstore entries broadcasts
worker 0's initial parameters. The gradient is averaged over the global batch.

Training and collectives modes update on the workers instead
(``update_on_kvstore=False``): the servers only sum the gradients, each worker pulls the
sum and applies SGD itself. The learning rate changes every step, and
``trainer.set_learning_rate`` changes only the worker's optimizer: the servers' copy is
pickled once, when the Trainer sends it. All workers pull the same sum
and apply the same update, so their parameters stay bit-identical. With no optimizer on the
servers, the kvstore also carries the epoch sums and maxima (``KVStoreGather``) and, in
collectives mode, the timed all-reduces (``KVStoreAllreduce``).

What rank 0 gathers for the result (windows, checksums) goes through files next to the
result, not the kvstore: with the optimizer on the servers, anything pushed is updated.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from dpscale.plan.comm import parameter_server_ratio
from dpscale.plan.result import write_json_atomic
from dpscale.plan.strategy import CellOption, CommSupport, Strategy, framework_imports
from dpscale.runner import startup
from dpscale.runner.measure import run_cell
from dpscale.runner.support import parse_runner_args, require_devices

with framework_imports() as framework:
    import mxnet as mx
    from mxnet import gluon

    from dpscale.frameworks import mxnet_ops

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
                    "and one worker per device). Not part of the cell id; Snakemake reruns "
                    "the mxnet-dist cells when it changes, and no other cells."
                ),
                "type": "integer",
                "minimum": 1,
                "default": 1,
            },
        ),
    ),
    comm=CommSupport(
        remedies=("2bit",),
        collectives=("2bit",),
        not_in_training=(
            (
                "2bit",
                "MXNet compresses every key a worker pushes, and the training mode's epoch "
                "sums and maxima travel through the same kvstore",
            ),
        ),
    ),
)


def compression_params(cell: Any) -> dict[str, Any] | None:
    """MXNet's 2-bit gradient compression (worker to server traffic) for comm ``2bit``."""
    if cell.comm.name != "2bit":
        return None
    return {"type": "2bit", "threshold": cell.comm.threshold}


def applied(cell: Any) -> dict[str, Any]:
    hook = "kvstore.set_gradient_compression(2bit), push then pull"
    return {
        "remedy": cell.comm.key,
        "hook": hook if cell.comm.name == "2bit" else "kvstore pushpull",
        "threshold": cell.comm.threshold,
        # only the workers' pushes are compressed; the servers' replies are float32
        "wire_ratio": parameter_server_ratio(cell.comm.nominal_ratio or 1.0),
    }


def push_then_pull(trainer: gluon.Trainer) -> None:
    """Gluon's Trainer pushpulls dense gradients, which a compressing kvstore refuses
    ("Compression not supported with PushPull"): this Trainer's gradients go as a push,
    then a pull, as Gluon sends sparse ones."""

    def allreduce_grads() -> None:
        kv = trainer._kvstore
        for i, param in enumerate(trainer._params):
            if param.grad_req == "null":
                continue
            kv.push(i, param.list_grad(), priority=-i)  # [distributed] compressed
            pulled = param.list_data() if trainer._update_on_kvstore else param.list_grad()
            kv.pull(i, pulled, priority=-i)  # [distributed]

    trainer._allreduce_grads = allreduce_grads  # private: Gluon has no hook for this


# First kvstore key of the collectives mode's buffers: above the parameters' indices and the
# few keys KVStoreGather adds after them.
COLLECTIVE_KEYS = 1_000_000


class KVStoreGather:
    """Every worker's values, as rows in rank order, through a dist kvstore without optimizer.

    Each worker pushes a zero matrix with its values in its own row; the servers sum the
    pushes (adding zeros is exact) and every worker pulls the same matrix. One key per row
    length, above the Trainer's keys (its parameters' indices); every worker calls in the
    same order, as for any collective.
    """

    def __init__(self, kv: mx.kvstore.KVStore, first_key: int) -> None:
        self.kv, self.next_key, self.keys = kv, first_key, {}

    def __call__(self, values: list[float]) -> np.ndarray:
        shape = (self.kv.num_workers, len(values))
        key = self.keys.get(len(values))
        if key is None:
            key = self.keys[len(values)] = self.next_key
            self.next_key += 1
            self.kv.init(key, mx.nd.zeros(shape, dtype="float64"))
        rows = np.zeros(shape, dtype=np.float64)
        rows[self.kv.rank] = values
        gathered = mx.nd.zeros(shape, dtype="float64")
        self.kv.pushpull(key, mx.nd.array(rows, dtype="float64"), out=gathered)  # [distributed]
        return gathered.asnumpy()


class KVStoreAllreduce:
    """Sum all-reduce of float32 arrays through a dist kvstore without optimizer (mode
    collectives): each worker pushes its array, the servers sum the pushes, every worker
    pulls the sum (one pushpull). One key per message size, from ``first_key`` on, clear of
    the Trainer's and :class:`KVStoreGather`'s keys; every worker calls in the same order."""

    def __init__(
        self, kv: mx.kvstore.KVStore, first_key: int, ctx: mx.Context, compressed: bool
    ) -> None:
        self.kv, self.keys, self.ctx = kv, itertools.count(first_key), ctx
        self.compressed = compressed

    def __call__(self, nbytes: int) -> tuple[Any, Any]:
        key, shape = next(self.keys), (nbytes // 4,)
        self.kv.init(key, mx.nd.zeros(shape, dtype="float32"))  # [distributed]
        buffer = mx.nd.ones(shape, ctx=self.ctx, dtype="float32")
        summed = mx.nd.zeros(shape, ctx=self.ctx, dtype="float32")

        def step() -> None:
            if self.compressed:  # a compressing kvstore refuses pushpull
                self.kv.push(key, buffer)  # [distributed] 2-bit to the servers
                self.kv.pull(key, out=summed)  # [distributed]
            else:
                self.kv.pushpull(key, buffer, out=summed)  # [distributed]

        return step, mxnet_ops.synchronize


class FileGather:
    """Every worker's JSON value on worker 0: a file per worker, then a kvstore barrier."""

    def __init__(self, kv: mx.kvstore.KVStore, out: Path) -> None:
        self.kv, self.out, self.calls = kv, out, itertools.count()

    def _file(self, call: int, rank: int) -> Path:
        return self.out.with_name(f".{self.out.name}.gather{call}.rank{rank}.json")

    def __call__(self, value: Any) -> list[Any]:
        call = next(self.calls)
        write_json_atomic(self._file(call, self.kv.rank), {"value": value})
        self.kv._barrier()  # [distributed] every worker's file is complete
        if self.kv.rank != 0:
            return []
        files = [self._file(call, r) for r in range(self.kv.num_workers)]
        values = [json.loads(f.read_text())["value"] for f in files]
        for f in files:
            f.unlink(missing_ok=True)
        return values


def broadcast_initial_parameters(trainer: gluon.Trainer) -> None:
    """Create the Trainer's kvstore entries now, and wait until worker 0's parameters are here.

    Gluon does this lazily inside the first ``trainer.step``: ``kv.broadcast`` (init, then a
    pull into the parameters) and, right after it, the first gradient push. The engine does
    not order that pull before the push (they share no array), so a worker's push can reach
    the servers first; once every worker has pushed, the servers hold the summed gradient,
    and the late pull copies it into the parameters. With ``update_on_kvstore=False`` nothing
    repairs that: the ranks end with different parameters (seen once in CI, mxnet-dist
    training on 2 workers). Initialising before any backward pass and waiting closes the race.
    With the update on the kvstore (synthetic mode) the race is harmless, since every pull
    then brings the servers' weights, and early initialisation would fix the optimizer's
    gradient scale before ``step(batch)`` sets it (Gluon then refuses the step).
    """
    trainer._init_kvstore()  # private: Gluon has no public call for this
    trainer._init_params()  # [distributed] init + pull of worker 0's values
    mx.nd.waitall()


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
        # synthetic mode only: collectives time the servers' sum, which an optimizer on
        # the servers would turn into an update
        update_on_kvstore=cell.mode == "synthetic",
        compression_params=compression,
    )
    if cell.comm.name == "2bit":
        push_then_pull(trainer)
    if cell.mode == "train":
        broadcast_initial_parameters(trainer)
        startup.mark("broadcast")  # synthetic mode: inside the first step (Gluon's lazy init)
    rank = mxnet_ops.MXNetRank(
        cell,
        net,
        trainer,
        ctxs,
        params,
        rank=kv.rank,
        size=kv.num_workers,
        gather=FileGather(kv, out.resolve()),
        reduce=KVStoreGather(kv, first_key=len(net.collect_params().keys())),
        allreduce=KVStoreAllreduce(
            kv, first_key=COLLECTIVE_KEYS, ctx=ctxs[0], compressed=compression is not None
        ),
        finish=kv._barrier,  # [distributed] rank 0 has written the result
        system_extra={
            "mxnet_servers": STRATEGY.option(cell, "mxnet_servers"),
            "comm": applied(cell),
        },
    )
    run_cell(cell, out, rank)


if __name__ == "__main__":
    main()
