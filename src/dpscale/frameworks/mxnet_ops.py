"""MXNet Gluon code shared by the mxnet-device and mxnet-dist adapters: contexts, the
network, the synthetic step, the training backend and :class:`MXNetRank` (whose folder-mode
steps read a user's image folder through dpscale.frameworks.mxnet_folder).

fp32 in NCHW only: MXNet 1.9's mixed precision (contrib.amp) and NHWC layers are not wired
into the Gluon builder, so other precisions and memory formats fail with a clear message
instead of silently measuring something else.

Threads: MKL-DNN kernels use OpenMP with ``OMP_NUM_THREADS`` (the cell's threads per
device, set by the launcher before the process starts, as MXNet reads it at import); the
engine keeps its default of one CPU worker thread, so ops run one after the other, each
using those threads.

Training mode (real data, runner.training drives it): ``GluonTrainingBackend`` below. SGD with
the cell's momentum and weight decay, the rate set with ``trainer.set_learning_rate`` before
every step. MXNet's ``wd`` is L2 added to the gradient (grad + wd * w, on every parameter:
Gluon parameters have wd_mult 1), as in torch, so it is passed as is. As in Keras, MXNet's
momentum buffer holds lr-scaled steps (v = m v + lr (g + wd w); w -= v) where torch's holds
gradients (b = m b + g + wd w; w -= lr b): the same while the rate is constant, slightly
different while it warms up or decays. The gradient is that of the batch-mean loss over
the global batch (``trainer.step(global batch)`` rescales the summed gradient).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from dpscale.frameworks import gluon_zoo, mxnet_folder
from dpscale.frameworks.gluon_resnet import (
    build_gluon_resnet,
    count_conv_dense_flops,
    trainable_param_count,
)
from dpscale.plan.cell import SGD, Cell
from dpscale.runner.rank import ModelCounts, Rank
from dpscale.runner.support import param_checksum

OPTIMIZER = "sgd"


def optimizer_params(sgd: SGD) -> dict[str, float]:
    """MXNet's ``wd`` adds wd * w to the gradient: the convention of plan.cell.SGD."""
    return {"learning_rate": sgd.lr, "momentum": sgd.momentum, "wd": sgd.weight_decay}


def check_supported(cell: Cell) -> None:
    if cell.precision != "fp32" or cell.memory_format != "contiguous":
        raise ValueError(
            "MXNet runners measure precision 'fp32' with memory_format 'contiguous' (NCHW) "
            f"only; the cell asks for precision {cell.precision!r}, memory_format "
            f"{cell.memory_format!r}"
        )


def threads_used(cell: Cell) -> int:
    return int(os.environ.get("OMP_NUM_THREADS", cell.threads_per_device))


def contexts(cell: Cell, first: int, count: int) -> list[mx.Context]:
    if cell.accelerator == "cuda":
        return [mx.gpu(first + i) for i in range(count)]
    return [mx.cpu()]


def build_net(cell: Cell, ctxs: list[mx.Context]) -> tuple[gluon.HybridBlock, ModelCounts]:
    """The cell's network, initialised identically on every context, hybridized: a shared
    ResNet from its spec, or a Gluon model zoo's by name (gluon_zoo), counted after a
    first forward pass gives its layers their shapes."""
    mx.random.seed(cell.seed)
    if cell.model.zoo is None:
        net = build_gluon_resnet(cell.model.spec())
        counts = ModelCounts(trainable_param_count(net))
        net.initialize(ctx=ctxs)
    else:
        net = gluon_zoo.build_zoo_model(cell.model)
        net.initialize(ctx=ctxs)
        flops = count_conv_dense_flops(net, cell.model.image_size, ctxs[0])
        counts = ModelCounts(trainable_param_count(net), flops)
    net.hybridize(static_alloc=True, static_shape=True)
    return net, counts


def synthetic_batch(
    cell: Cell, batch: int, ctxs: list[mx.Context]
) -> tuple[list[mx.nd.NDArray], list[mx.nd.NDArray]]:
    """Random images and labels created once, split over the contexts (no input pipeline)."""
    mx.random.seed(cell.seed)
    size = cell.model.image_size
    images = mx.nd.random.normal(shape=(batch, 3, size, size))
    labels = mx.nd.random.randint(0, cell.model.classes, shape=(batch,)).astype("float32")
    return (
        gluon.utils.split_and_load(images, ctxs, even_split=True),
        gluon.utils.split_and_load(labels, ctxs, even_split=True),
    )


def make_train_step(
    net: gluon.HybridBlock,
    trainer: gluon.Trainer,
    images: list[mx.nd.NDArray],
    labels: list[mx.nd.NDArray],
    global_batch: int,
) -> Callable[[], None]:
    """One synchronous step; the gradients are averaged over the global batch."""
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step() -> None:
        with autograd.record():
            losses = [loss_fn(net(x), y) for x, y in zip(images, labels, strict=True)]
        autograd.backward(losses)
        trainer.step(global_batch)

    return step


def local_trainer(net: gluon.HybridBlock, cell: Cell) -> gluon.Trainer:
    """A control cell's Trainer: no kvstore, so each worker updates on its own gradients."""
    return gluon.Trainer(net.collect_params(), OPTIMIZER, optimizer_params(cell.sgd), kvstore=None)


def synchronize() -> None:
    mx.nd.waitall()


class GluonTrainingBackend:
    """One optimiser step or evaluation on numpy NHWC batches (see runner.training).

    Batches are transposed to NCHW and split over the contexts. ``world`` is the number of
    processes whose gradients the trainer's kvstore sums (the gradient is rescaled by the
    global batch); ``gather`` returns every process's values as rows (rank order), or is
    None in a one-process strategy, where reductions are the identity.
    """

    def __init__(
        self,
        net: gluon.HybridBlock,
        trainer: gluon.Trainer,
        ctxs: list[mx.Context],
        world: int = 1,
        gather: Callable[[list[float]], np.ndarray] | None = None,
    ) -> None:
        self.net, self.trainer, self.ctxs = net, trainer, ctxs
        self.world, self.gather = world, gather
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def _split(self, images: np.ndarray, labels: np.ndarray):
        x = mx.nd.array(np.ascontiguousarray(images.transpose(0, 3, 1, 2)), dtype="float32")
        y = mx.nd.array(labels, dtype="float32")
        ctxs = self.ctxs[: min(len(self.ctxs), len(labels))]
        return (
            gluon.utils.split_and_load(x, ctxs, even_split=False),
            gluon.utils.split_and_load(y, ctxs, even_split=False),
        )

    def _sums(self, outputs, losses, labels) -> tuple[float, int]:
        loss = sum(float(part.sum().asscalar()) for part in losses)
        right = sum(
            int((out.argmax(axis=1) == y).sum().asscalar())
            for out, y in zip(outputs, labels, strict=True)
        )
        return loss, right

    def set_lr(self, lr: float) -> None:
        self.trainer.set_learning_rate(lr)

    def train_step(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, int]:
        xs, ys = self._split(images, labels)
        with autograd.record():  # train mode: batch-norm uses batch statistics
            outputs = [self.net(x) for x in xs]
            losses = [self.loss_fn(out, y) for out, y in zip(outputs, ys, strict=True)]
        autograd.backward(losses)
        self.trainer.step(len(labels) * self.world)
        return self._sums(outputs, losses, ys)

    def evaluate(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, int]:
        xs, ys = self._split(images, labels)
        outputs = [self.net(x) for x in xs]  # predict mode: running statistics
        losses = [self.loss_fn(out, y) for out, y in zip(outputs, ys, strict=True)]
        return self._sums(outputs, losses, ys)

    def planned(self, total_steps: int, warmup_steps: int) -> None:
        """Nothing keys on the training's length here."""

    def sync(self) -> None:
        synchronize()

    def reduce_sum(self, values: list[float]) -> list[float]:
        if self.gather is None:
            return list(values)
        return self.gather(values).sum(axis=0).tolist()

    def reduce_max(self, values: list[float]) -> list[float]:
        if self.gather is None:
            return list(values)
        return self.gather(values).max(axis=0).tolist()


def trained_param_checksum(net: gluon.HybridBlock, ctx: mx.Context) -> str:
    """Checksum of the trainable parameters held on one context."""
    params = net.collect_params().values()
    return param_checksum(p.data(ctx).asnumpy() for p in params if p.grad_req != "null")


def versions() -> dict[str, str]:
    features = mx.runtime.Features()
    wanted = ("CUDA", "CUDNN", "NCCL", "MKLDNN", "DIST_KVSTORE")
    return {
        "mxnet": mx.__version__,
        "mxnet_features": ",".join(name for name in wanted if features.is_enabled(name)),
    }


def cpu_kernels() -> dict[str, Any]:
    """The CPU kernels this MXNet runs: MKL-DNN where it is built in and not turned off
    (``MXNET_MKLDNN_ENABLED=0``), and the BLAS it was built with."""
    features = mx.runtime.Features()
    built = features.is_enabled("MKLDNN")
    setting = os.environ.get("MXNET_MKLDNN_ENABLED")
    on = built and setting != "0"
    if not built:
        why = "this MXNet is built without MKL-DNN"
    else:
        why = f"MXNET_MKLDNN_ENABLED={setting}" if setting is not None else "MXNet's default"
    blas = next((name for key, name in BLAS if features.is_enabled(key)), None)
    return {"library": "MKL-DNN" if on else "MXNet's own", "onednn": on, "why": why, "blas": blas}


# MXNet's build features that name its BLAS
BLAS = (
    ("BLAS_MKL", "MKL"),
    ("BLAS_OPEN", "OpenBLAS"),
    ("BLAS_ATLAS", "ATLAS"),
    ("BLAS_APPLE", "Accelerate"),
)


class MXNetRank(Rank):
    """An MXNet process that drives every device of its node itself (mxnet-device): the
    one-process defaults of runner.rank.Rank, Gluon's step, training backend and checksums.
    ``reduce``: how the training backend sums and maximises numbers over the ranks (None:
    one process, the identity)."""

    framework = "mxnet"
    times_out_collectives = False  # ps-lite waits for a push forever

    def __init__(
        self,
        cell: Cell,
        net: gluon.HybridBlock,
        trainer: gluon.Trainer,
        ctxs: list[mx.Context],
        counts: ModelCounts,
    ) -> None:
        self.cell, self.net, self.trainer, self.ctxs = cell, net, trainer, ctxs
        self.trainable_params, self.forward_flops = counts.trainable_params, counts.forward_flops
        self.threads_used = threads_used(cell)
        self.batch = cell.batch_per_device * len(ctxs)  # split over the contexts
        self.reduce: Callable[[list[float]], np.ndarray] | None = None
        self._folder: mxnet_folder.FolderPipeline | None = None  # mode folder, made once

    def _pipeline(self) -> mxnet_folder.FolderPipeline:
        """The folder pipeline, made at first use (after the subclass knows its rank)."""
        if self._folder is None:
            self._folder = mxnet_folder.FolderPipeline(self.cell, self.batch, self.rank, self.size)
        return self._folder

    def folder_step(self) -> tuple[Callable[[], None], Callable[[], None]]:
        batches, global_batch = self._pipeline().batches, self.batch * self.size
        step = mxnet_folder.train_step(self.net, self.trainer, batches, self.ctxs, global_batch)
        return step, synchronize

    def loader_step(self) -> tuple[Callable[[], None], Callable[[], None]]:
        # the engine may still be stacking the last batch: the sync waits for it
        return self._pipeline().batches.next, synchronize

    def folder_record(self) -> dict[str, Any]:
        return self._pipeline().record()

    def synthetic_step(self) -> tuple[Callable[[], None], Callable[[], None]]:
        images, labels = synthetic_batch(self.cell, self.batch, self.ctxs)
        global_batch = self.batch * self.size
        return make_train_step(self.net, self.trainer, images, labels, global_batch), synchronize

    def training_backend(self) -> GluonTrainingBackend:
        return GluonTrainingBackend(self.net, self.trainer, self.ctxs, self.size, self.reduce)

    def matmul(self, n: int, dtype: str) -> tuple[Callable[[], None], Callable[[], None]]:
        ctx = self.ctxs[0]
        a, b = (mx.nd.random.normal(shape=(n, n), ctx=ctx).astype(dtype) for _ in range(2))
        c = mx.nd.empty((n, n), ctx=ctx, dtype=dtype)
        return (lambda: mx.nd.dot(a, b, out=c)), synchronize

    def param_checksums(self) -> list[str]:
        return [trained_param_checksum(self.net, ctx) for ctx in self.ctxs]

    def device_names(self) -> list[str]:
        return [str(ctx) for ctx in self.ctxs] if self.cell.accelerator == "cuda" else []

    def versions(self) -> dict[str, str]:
        return versions()

    def cpu_kernels(self) -> dict[str, Any]:
        return cpu_kernels()

    def system_extra(self) -> dict[str, Any]:
        return {"mxnet_contexts": [str(c) for c in self.ctxs]}
