"""MXNet's dist_sync kvstore as the collectives of a worker (mxnet-dist): every worker's
values on worker 0 through files, sums and maxima and the timed all-reduces through the
kvstore, push then pull for a compressing kvstore, the initial broadcast, and
:class:`KVStoreRank`, the worker the core loop drives.

What rank 0 gathers for the result (windows, checksums) goes through files next to the
result, not the kvstore: with the optimizer on the servers (synthetic and folder modes),
anything pushed is updated.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import gluon

from dpscale.frameworks import mxnet_ops
from dpscale.frameworks.mxnet_ops import MXNetRank, synchronize
from dpscale.plan.cell import Cell
from dpscale.plan.controls import BARRIER, LOCAL
from dpscale.plan.result import write_json_atomic
from dpscale.runner.rank import ModelCounts


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
        self, kv: mx.kvstore.KVStore, first_key: int, ctx: mx.Context, split: bool
    ) -> None:
        self.kv, self.keys, self.ctx = kv, itertools.count(first_key), ctx
        self.split = split

    def __call__(self, nbytes: int) -> tuple[Any, Any]:
        key, shape = next(self.keys), (nbytes // 4,)
        self.kv.init(key, mx.nd.zeros(shape, dtype="float32"))  # [distributed]
        buffer = mx.nd.ones(shape, ctx=self.ctx, dtype="float32")
        summed = mx.nd.zeros(shape, ctx=self.ctx, dtype="float32")

        def step() -> None:
            if self.split:  # a compressing kvstore refuses pushpull (push-pull: the same path)
                self.kv.push(key, buffer)  # [distributed] (2-bit) to the servers
                self.kv.pull(key, out=summed)  # [distributed]
            else:
                self.kv.pushpull(key, buffer, out=summed)  # [distributed]

        return step, synchronize


class FileGather:
    """Every worker's JSON value on worker 0: a file per worker, then a kvstore barrier."""

    def __init__(self, kv: mx.kvstore.KVStore, out: Path) -> None:
        self.kv, self.out, self.calls = kv, out, itertools.count()

    def _file(self, call: int, rank: int) -> Path:
        return self.out.with_name(f".{self.out.name}.gather{call}.rank{rank}.json")

    def __call__(self, value: Any, everyone: bool = False) -> list[Any]:
        """Every worker's value on worker 0 (``everyone``: on every worker, with a second
        barrier so that no file goes before every worker has read it)."""
        call = next(self.calls)
        write_json_atomic(self._file(call, self.kv.rank), {"value": value})
        self.kv._barrier()  # [distributed] every worker's file is complete
        if self.kv.rank != 0 and not everyone:
            return []
        files = [self._file(call, r) for r in range(self.kv.num_workers)]
        values = [json.loads(f.read_text())["value"] for f in files]
        if everyone:
            self.kv._barrier()  # [distributed] every worker has read every file
        if self.kv.rank == 0:
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


class KVStoreRank(MXNetRank):
    """One worker of a dist_sync job (mxnet-dist): rank and size from the kvstore, every
    worker's values on worker 0 through files, sums and maxima and the timed all-reduces
    through the kvstore (no optimizer on the servers outside synthetic and folder modes), and a
    last kvstore barrier. ``split``: pushes, then pulls, instead of pushpull (comm ``2bit``, whose
    kvstore compresses the pushes, and ``push-pull``)."""

    def __init__(
        self,
        cell: Cell,
        net: gluon.HybridBlock,
        trainer: gluon.Trainer,
        ctxs: list[mx.Context],
        counts: ModelCounts,
        *,
        kv: mx.kvstore.KVStore,
        out: Path,
        split: bool,
        system_extra: dict[str, Any],
    ) -> None:
        super().__init__(cell, net, trainer, ctxs, counts)
        self.kv, self.rank, self.size = kv, kv.rank, kv.num_workers
        self._gather = FileGather(kv, out)
        self.reduce = KVStoreGather(kv, first_key=len(net.collect_params().keys()))
        self._allreduce = KVStoreAllreduce(kv, COLLECTIVE_KEYS, ctxs[0], split)
        self._system_extra = system_extra

    def control_step(self, control: str) -> tuple[Callable[[], None], Callable[[], None]]:
        """``local``: the synthetic step with a Trainer without the kvstore (each worker
        applies SGD to its own gradients; nothing pushed or pulled); ``barrier``: the same,
        the engine waited for, then the kvstore's barrier."""
        images, labels = mxnet_ops.synthetic_batch(self.cell, self.batch, self.ctxs)
        local_trainer = mxnet_ops.local_trainer(self.net, self.cell)
        step = mxnet_ops.make_train_step(self.net, local_trainer, images, labels, self.batch)

        def local_then_barrier() -> None:
            step()
            synchronize()  # the barrier waits for this worker's step
            self.kv._barrier()  # [distributed] every worker has finished its step

        return {LOCAL: step, BARRIER: local_then_barrier}[control], synchronize

    def gather(self, value: Any) -> list[Any]:
        return self._gather(value)  # [distributed] files, then a kvstore barrier

    def agree(self, done: bool) -> bool:
        # files and barriers, not the kvstore: in synthetic and folder modes the servers run it
        return all(self._gather(done, everyone=True))  # [distributed] done only if all are

    def allreduce(self, nbytes: int) -> tuple[Callable[[], None], Callable[[], None]]:
        return self._allreduce(nbytes)  # [distributed] a pushpull per message size

    def allreduce_description(self) -> dict[str, str]:
        if self.cell.comm.name == "2bit":
            op = f"{self.cell.comm.key}: kvstore.push (compressed), pull (servers sum)"
        elif self._allreduce.split:
            op = f"{self.cell.comm.key}: kvstore.push, pull (servers sum)"
        else:
            op = "kvstore.pushpull (servers sum)"
        return {"op": op, "backend": "ps-lite dist_sync"}

    def system_extra(self) -> dict[str, Any]:
        return {**super().system_extra(), **self._system_extra}

    def finish(self) -> None:
        self.kv._barrier()  # [distributed] rank 0 has written the result
