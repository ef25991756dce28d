"""mxnet-dist: kvstore 'dist_sync', one worker process per device, parameter servers.

Started by dpscale.mxnet_ps, which runs this same module as the ps-lite scheduler, the
servers (``mxnet_servers`` in the config) and the workers: in a scheduler or server process
``import mxnet`` serves until the job ends and exits, so only workers get past the imports.

The Trainer updates on the kvstore (Gluon's default for dist kvstores, the classic parameter
server): workers push gradients, the servers sum them over workers and apply SGD, workers
pull the new weights. Creating the Trainer's kvstore entries broadcasts worker 0's initial
parameters. The gradient is averaged over the global batch (``trainer.step(global_batch)``).

Each worker times its windows and writes them, with its parameter checksum, to a file next
to ``--out``; after a kvstore barrier worker 0 merges them (the slowest rank's time is the
window's time) and writes the result. The kvstore itself cannot carry them: the servers
would apply the optimizer to anything pushed.

Training mode (mxnet_common.GluonTrainingBackend) updates on the workers instead
(``update_on_kvstore=False``): the servers only sum the gradients, each worker pulls the
sum and applies SGD itself. The learning rate changes every step, and
``trainer.set_learning_rate`` changes only the worker's optimizer: the servers' copy is
pickled once, when the Trainer sends it. All workers pull the same sum and apply the same
update, so their parameters stay bit-identical. With no optimizer on the servers, the
kvstore also carries the epoch sums, maxima and final checksums (``KVStoreGather``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import mxnet as mx
import numpy as np
from mxnet import gluon

from dpscale.core.result import now_iso, write_json_atomic
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


def rank_file(out: Path, rank: int) -> Path:
    return out.with_name(f".{out.name}.rank{rank}.json")


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
        self.kv.pushpull(key, mx.nd.array(rows, dtype="float64"), out=gathered)
        return gathered.asnumpy()

    def checksums(self, checksum: str) -> list[str]:
        """Every worker's hex sha256, carried as 32 byte values."""
        rows = self(list(bytes.fromhex(checksum)))
        return [bytes(int(b) for b in row).hex() for row in rows]


def train(cell, out: Path, started_at: str, kv: mx.kvstore.KVStore, ctxs, log) -> None:
    net, params = mc.build_net(cell, ctxs)
    trainer = gluon.Trainer(
        net.collect_params(),
        mc.OPTIMIZER,
        mc.optimizer_params(cell),
        kvstore=kv,
        update_on_kvstore=False,
    )
    gather = KVStoreGather(kv, first_key=len(net.collect_params().keys()))
    backend = mc.GluonTrainingBackend(net, trainer, ctxs, kv.num_workers, gather)
    training = run_training(cell, backend, kv.rank, kv.num_workers, cell.batch_per_device, log)
    checksums = gather.checksums(mc.trained_param_checksum(net, ctxs[0]))
    if kv.rank == 0:
        write_training_result(
            cell,
            out,
            started_at=started_at,
            training=training,
            framework="mxnet",
            framework_versions=mc.versions(),
            threads_used=mc.threads_used(cell),
            trainable_params=params,
            system_extra={"mxnet_servers": cell.mxnet_servers},
            rank_param_checksums=checksums,
        )
    kv._barrier()  # rank 0 has written the result before any worker exits


def main(argv: list[str] | None = None) -> None:
    cell, out = parse_runner_args(argv)
    started_at = now_iso()
    mc.check_supported(cell)
    kv = mx.kv.create("dist_sync")
    rank, local_rank = kv.rank, int(os.environ.get("DPSCALE_LOCAL_RANK", 0))
    if kv.num_workers != cell.world_size:
        raise RuntimeError(f"{kv.num_workers} workers != cell's world size {cell.world_size}")
    on_cuda = cell.accelerator == "cuda"
    require_devices(cell, mx.context.num_gpus() if on_cuda else 1)
    ctxs = mc.contexts(cell, first=local_rank, count=1)

    def log(message: str) -> None:
        progress(message, rank)

    if cell.mode == "train":
        log(f"{cell.cell_id}: dist_sync worker {rank}/{kv.num_workers} on {ctxs[0]}, training")
        train(cell, out, started_at, kv, ctxs, log)
        return
    net, params = mc.build_net(cell, ctxs)
    trainer = gluon.Trainer(
        net.collect_params(),
        mc.OPTIMIZER,
        dict(mc.OPTIMIZER_PARAMS),
        kvstore=kv,
        update_on_kvstore=True,
    )
    images, labels = mc.synthetic_batch(cell, cell.batch_per_device, ctxs)
    step = mc.make_train_step(net, trainer, images, labels, cell.global_batch)
    log(f"{cell.cell_id}: dist_sync worker {rank}/{kv.num_workers} on {ctxs[0]}")
    m = cell.measure
    windows = time_windows(step, mc.synchronize, m.warmup_steps, m.windows, m.steps_per_window, log)
    mine = {"windows": windows, "checksum": mc.trained_param_checksum(net, ctxs[0])}
    write_json_atomic(rank_file(out, rank), mine)
    kv._barrier()  # every worker's file is complete
    if rank == 0:
        ranks = [json.loads(rank_file(out, r).read_text()) for r in range(kv.num_workers)]
        write_synthetic_result(
            cell,
            out,
            started_at=started_at,
            per_rank_windows=[r["windows"] for r in ranks],
            framework="mxnet",
            framework_versions=mc.versions(),
            threads_used=mc.threads_used(cell),
            trainable_params=params,
            system_extra={"mxnet_servers": cell.mxnet_servers},
            rank_param_checksums=[r["checksum"] for r in ranks],
        )
        for r in range(kv.num_workers):
            rank_file(out, r).unlink(missing_ok=True)


if __name__ == "__main__":
    main()
