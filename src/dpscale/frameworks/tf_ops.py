"""TensorFlow 2.15 (Keras 2) code of the horovod-tf adapter: threads, device, the model, the
SGD update, the synthetic and image-folder steps, the training backend, checksums and versions.

Plain TensorFlow: what talks to other ranks (the tape that averages the gradients, the
reductions) is passed in by the adapter, and every call of it here is marked
``[distributed]``. Why a custom tf.function step, one inter-op thread and :class:`FusedSGD`:
docs/decisions/tf-custom-training-loop.md, tf-one-inter-op-thread.md and tf-fused-sgd.md.

Precision: fp32; on CUDA amp_bf16 and amp_fp16 set Keras' mixed-precision policy (amp_fp16
with dynamic loss scaling); the logits are cast to fp32 for the loss. Layout: TensorFlow's
CPU convolutions exist only in NHWC, so CPU cells are NHWC whatever memory_format says; on
CUDA, contiguous means NCHW (PyTorch's default layout) and channels_last NHWC.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeAlias

import numpy as np
import tensorflow as tf

from dpscale.frameworks import keras_zoo
from dpscale.frameworks.keras_resnet import build_keras_resnet, trainable_param_count
from dpscale.plan.cell import SGD, Cell
from dpscale.runner.rank import ModelCounts
from dpscale.runner.support import param_checksum, require_devices
from dpscale.runner.timing import Step, Sync

POLICIES = {"amp_bf16": "mixed_bfloat16", "amp_fp16": "mixed_float16"}
INTER_OP_THREADS = 1

# Wraps a tape so that its gradients are averaged over the ranks (hvd.DistributedGradientTape)
DistributedTape = Callable[[tf.GradientTape], tf.GradientTape]
# Sums ("sum") or maxima ("max") of every rank's values, element by element
AllReduce = Callable[[list[float], str], list[float]]


def configure_threads(cell: Cell) -> int:
    """Intra-op = the cell's threads per device, inter-op = 1; before TensorFlow runs anything."""
    tf.config.threading.set_intra_op_parallelism_threads(cell.threads_per_device)
    tf.config.threading.set_inter_op_parallelism_threads(INTER_OP_THREADS)
    return cell.threads_per_device


def pin_device(cell: Cell, local_rank: int) -> None:
    """Only this rank's GPU is visible (with memory growth), or none on CPU."""
    gpus = tf.config.list_physical_devices("GPU")
    require_devices(cell, len(gpus) if cell.accelerator == "cuda" else 1)
    if cell.accelerator == "cuda":
        tf.config.set_visible_devices(gpus[local_rank], "GPU")
        tf.config.experimental.set_memory_growth(gpus[local_rank], True)
    else:
        tf.config.set_visible_devices([], "GPU")


def channels_last(cell: Cell) -> bool:
    return cell.accelerator == "cpu" or cell.memory_format == "channels_last"


def build_model(cell: Cell) -> tuple[tf.keras.Model, ModelCounts]:
    """The cell's model in its layout: a shared ResNet from its spec, or a Keras application
    by name (keras_zoo), whose FLOPs are counted here."""
    if cell.precision != "fp32":
        if cell.accelerator != "cuda":
            raise ValueError(f"precision {cell.precision!r} needs accelerator 'cuda'")
        tf.keras.mixed_precision.set_global_policy(POLICIES[cell.precision])
    # Not tf.random.set_seed alone: Keras 2's unseeded initializers draw their seeds from
    # Python's random module, so only this makes the initial weights a function of the seed.
    tf.keras.utils.set_random_seed(cell.seed)
    if cell.model.zoo is None:
        model = build_keras_resnet(cell.model.spec(), channels_last=channels_last(cell))
        return model, ModelCounts(trainable_param_count(model))
    model = keras_zoo.build_zoo_model(cell.model, channels_last(cell))
    flops = keras_zoo.count_forward_flops(model)
    return model, ModelCounts(trainable_param_count(model), flops)


class FusedSGD:
    """SGD with momentum and L2 weight decay (plan.cell.SGD) in two fused in-place kernels
    per variable, for fp32 (docs/decisions/tf-fused-sgd.md).

    Keras' momentum kernel keeps lr-scaled steps (a = m a - lr g; w += a); L2 decay
    (g + wd w) enters it as ``a -= (lr wd / m) w`` first, so a = m a - lr (g + wd w)
    exactly. Rank 0's slots are broadcast like Keras' (``build``, ``variables``).
    """

    def __init__(self, sgd: SGD) -> None:
        self.learning_rate = tf.Variable(sgd.lr, trainable=False, dtype=tf.float32)
        self.momentum, self.weight_decay = sgd.momentum, sgd.weight_decay
        self.slots: list[tf.Variable] = []

    def build(self, var_list: list[tf.Variable]) -> None:
        if not self.slots:
            self.slots = [tf.Variable(tf.zeros_like(v), trainable=False) for v in var_list]

    @property
    def variables(self) -> list[tf.Variable]:
        return list(self.slots)

    def apply(self, grads: list[tf.Tensor], variables: list[tf.Variable]) -> None:
        self.build(variables)  # if not yet built (the adapter builds them to broadcast them)
        lr = self.learning_rate
        for grad, var, slot in zip(grads, variables, self.slots, strict=True):
            if self.weight_decay and self.momentum:
                decay = lr * (self.weight_decay / self.momentum)
                tf.raw_ops.ResourceApplyGradientDescent(var=slot.handle, alpha=decay, delta=var)
            elif self.weight_decay:
                grad = grad + self.weight_decay * var
            tf.raw_ops.ResourceApplyKerasMomentum(
                var=var.handle,
                accum=slot.handle,
                lr=lr,
                grad=grad,
                momentum=self.momentum,
                use_nesterov=False,
            )


# FusedSGD in fp32; Keras' SGD (in a LossScaleOptimizer for amp_fp16) under mixed precision
SGDOptimizer: TypeAlias = "FusedSGD | tf.keras.optimizers.Optimizer"


def make_sgd(cell: Cell) -> SGDOptimizer:
    """The cell's SGD (plan.cell.SGD): fused kernels in fp32; Keras' SGD under mixed
    precision (the loss-scale optimizer wraps a Keras optimizer), decay then added to the
    gradients (:func:`apply_sgd`)."""
    if cell.precision == "fp32":
        return FusedSGD(cell.sgd)
    optimizer = tf.keras.optimizers.SGD(learning_rate=cell.sgd.lr, momentum=cell.sgd.momentum)
    if cell.precision == "amp_fp16":
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    return optimizer


def apply_sgd(
    optimizer: SGDOptimizer, sgd: SGD, grads: list[tf.Tensor], variables: list[tf.Variable]
) -> None:
    """One SGD step with L2 weight decay added to the (averaged) gradients, as torch does
    (Keras' own SGD(weight_decay=...) is decoupled decay, so its optimizer gets none)."""
    if isinstance(optimizer, FusedSGD):
        optimizer.apply(grads, variables)
        return
    if sgd.weight_decay:
        grads = [g + sgd.weight_decay * v for g, v in zip(grads, variables, strict=True)]
    optimizer.apply_gradients(zip(grads, variables, strict=True))


def step_function(function: Callable, **options: Any) -> Callable:
    """A traced step, without AutoGraph or XLA. The steps have no Python control flow that
    depends on a tensor; AutoGraph's conversion of Horovod's DistributedGradientTape took
    about 3 s of every horovod-tf cell's start-up (docs/measurements/2026-11-24-study-length.md)."""
    return tf.function(function, autograph=False, jit_compile=False, **options)


def synthetic_batch(cell: Cell, batch: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Random images and labels, created once on the device (no input pipeline)."""
    generator = tf.random.Generator.from_seed(cell.seed)
    size = cell.model.image_size
    shape = (batch, size, size, 3) if channels_last(cell) else (batch, 3, size, size)
    images = generator.normal(shape)
    labels = generator.uniform((batch,), 0, cell.model.classes, dtype=tf.int64)
    return images, labels


def batch_step_body(
    cell: Cell, model: tf.keras.Model, optimizer: SGDOptimizer, distributed_tape: DistributedTape
) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """One training step on (images in the model's layout, labels), returning the loss; the
    synthetic and the folder steps trace it."""
    sgd = cell.sgd
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    scaled = cell.precision == "amp_fp16"

    def train_on(images: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = tf.cast(model(images, training=True), tf.float32)
            loss = loss_fn(labels, logits)
            target = optimizer.get_scaled_loss(loss) if scaled else loss
        tape = distributed_tape(tape)  # [distributed] averages the gradients
        grads = tape.gradient(target, model.trainable_variables)
        if scaled:
            grads = optimizer.get_unscaled_gradients(grads)
        apply_sgd(optimizer, sgd, grads, model.trainable_variables)
        return loss

    return train_on


def make_train_step(
    cell: Cell,
    model: tf.keras.Model,
    optimizer: SGDOptimizer,
    batch: int,
    distributed_tape: DistributedTape,
) -> tuple[Step, Sync]:
    """(step, sync): sync reads the last step's loss on the host, which waits for the step.

    A tf.function returns only after all its stateful ops (the weight updates) have run (on
    a GPU: were queued, on the one compute stream, before the host read's copy is)."""
    images, labels = synthetic_batch(cell, batch)
    train_on = batch_step_body(cell, model, optimizer, distributed_tape)

    @step_function
    def train_step() -> tf.Tensor:
        return train_on(images, labels)

    last: list[tf.Tensor] = []

    def step() -> None:
        last[:] = [train_step()]

    def sync() -> None:
        last[0].numpy()

    return step, sync


def make_folder_step(
    cell: Cell,
    model: tf.keras.Model,
    optimizer: SGDOptimizer,
    batch: int,
    distributed_tape: DistributedTape,
    next_batch: Callable[[], tuple[tf.Tensor, tf.Tensor]],
) -> tuple[Step, Sync]:
    """Mode folder: (step, sync) as :func:`make_train_step`'s, each step on ``next_batch()``
    (NHWC float32 images and int64 labels on the host, copied in by the traced step and
    transposed there where the model is NCHW)."""
    train_on = batch_step_body(cell, model, optimizer, distributed_tape)
    size, nchw = cell.model.image_size, not channels_last(cell)
    signature = (
        tf.TensorSpec((batch, size, size, 3), tf.float32),
        tf.TensorSpec((batch,), tf.int64),
    )

    def on_batch(images: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        return train_on(tf.transpose(images, (0, 3, 1, 2)) if nchw else images, labels)

    train_step = step_function(on_batch, input_signature=signature)
    last: list[tf.Tensor] = []

    def step() -> None:
        last[:] = [train_step(*next_batch())]  # waits for the pipeline when it is behind

    return step, lambda: last[0].numpy()


def summed_loss_and_correct(labels: tf.Tensor, logits: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    right = tf.equal(tf.argmax(logits, axis=1, output_type=tf.int64), labels)
    return tf.reduce_sum(losses), tf.reduce_sum(tf.cast(right, tf.int64))


class KerasTrainingBackend:
    """One optimiser step or evaluation on numpy NHWC batches (see runner.training).

    Both steps are tf.functions over any batch size (the last validation batch is smaller)
    that return their sums to the host, so a returned step has finished: ``sync`` has
    nothing left to wait for. The learning rate is assigned to the optimizer's variable
    before every step; the summed cross-entropy is returned and its batch mean
    differentiated, the gradients averaged over the ranks by ``distributed_tape`` (like
    DDP). The reductions are the adapter's ``allreduce``.
    """

    def __init__(
        self,
        cell: Cell,
        model: tf.keras.Model,
        optimizer: SGDOptimizer,
        distributed_tape: DistributedTape,
        allreduce: AllReduce,
    ) -> None:
        train = cell.training
        assert train is not None
        self.model, self.optimizer, self.sgd = model, optimizer, cell.sgd
        self.distributed_tape, self.allreduce = distributed_tape, allreduce
        self.nchw = not channels_last(cell)
        self.scaled = cell.precision == "amp_fp16"
        size = cell.model.image_size
        signature = (
            tf.TensorSpec((None, size, size, 3), tf.float32),
            tf.TensorSpec((None,), tf.int64),
        )
        self._train = step_function(self._train_step, input_signature=signature)
        self._evaluate = step_function(self._evaluate_step, input_signature=signature)

    def _logits(self, images: tf.Tensor, training: bool) -> tf.Tensor:
        x = tf.transpose(images, (0, 3, 1, 2)) if self.nchw else images
        return tf.cast(self.model(x, training=training), tf.float32)

    def _train_step(self, images: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            logits = self._logits(images, training=True)  # batch-norm: batch statistics
            loss, right = summed_loss_and_correct(labels, logits)
            mean = loss / tf.cast(tf.shape(labels)[0], tf.float32)
            target = self.optimizer.get_scaled_loss(mean) if self.scaled else mean
        # [distributed] the distributed tape averages the gradients over the ranks
        grads = self.distributed_tape(tape).gradient(target, variables)
        if self.scaled:
            grads = self.optimizer.get_unscaled_gradients(grads)
        apply_sgd(self.optimizer, self.sgd, grads, variables)
        return loss, right

    def _evaluate_step(self, images: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return summed_loss_and_correct(labels, self._logits(images, training=False))

    def set_lr(self, lr: float) -> None:
        self.optimizer.learning_rate.assign(lr)

    def train_step(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, int]:
        loss, right = self._train(images, labels)
        return float(loss.numpy()), int(right.numpy())

    def evaluate(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, int]:
        loss, right = self._evaluate(images, labels)
        return float(loss.numpy()), int(right.numpy())

    def planned(self, total_steps: int, warmup_steps: int) -> None:
        """Nothing keys on the training's length here."""

    def sync(self) -> None:
        pass  # every step's results were read on the host

    def reduce_sum(self, values: list[float]) -> list[float]:
        return self.allreduce(values, "sum")  # [distributed]

    def reduce_max(self, values: list[float]) -> list[float]:
        return self.allreduce(values, "max")  # [distributed]


def matmul_step(n: int, dtype: str) -> tuple[Step, Sync]:
    """An n x n x n product of ``dtype`` (the matrix-multiply peak); sync reads it back."""
    a, b = (tf.cast(tf.random.normal((n, n)), dtype) for _ in range(2))
    last: list[tf.Tensor] = []

    def step() -> None:
        last[:] = [tf.linalg.matmul(a, b)]

    return step, lambda: last[0].numpy()


def ones_on_device(cell: Cell, count: int) -> tf.Tensor:
    """A float32 buffer of ``count`` ones on the cell's device (a collective's message)."""
    with tf.device("/GPU:0" if cell.accelerator == "cuda" else "/CPU:0"):
        return tf.ones((count,), dtype=tf.float32)


def trained_param_checksum(model: tf.keras.Model) -> str:
    return param_checksum(v.numpy() for v in model.trainable_variables)


def device_names() -> list[str]:
    return [
        tf.config.experimental.get_device_details(gpu).get("device_name", "")
        for gpu in tf.config.get_visible_devices("GPU")
    ]


def system_extra(cell: Cell) -> dict[str, Any]:
    return {
        "data_format": "NHWC" if channels_last(cell) else "NCHW",
        "inter_op_threads": INTER_OP_THREADS,
    }


# TensorFlow reads it once, when it is imported: set by the launcher (the horovod-tf
# adapter's ``tensorflow_onednn`` option), never by the rank itself
ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"


def cpu_kernels() -> dict[str, Any]:
    """The CPU kernels this TensorFlow runs: oneDNN on or off, and why. TensorFlow 2.15 turns
    oneDNN on by default only on CPUs with AVX-512's neural-network extensions; elsewhere its
    own Eigen kernels run unless ``TF_ENABLE_ONEDNN_OPTS=1`` (TensorFlow's CPU guide)."""
    from tensorflow.python.util import _pywrap_util_port  # TensorFlow's own check

    on = bool(_pywrap_util_port.IsMklEnabled())
    setting = os.environ.get(ONEDNN_VARIABLE)
    why = (
        f"{ONEDNN_VARIABLE}={setting}"
        if setting is not None
        else "TensorFlow's default on this CPU"
    )
    return {"library": "oneDNN" if on else "Eigen", "onednn": on, "why": why}


def versions(**libraries: str) -> dict[str, str]:
    """TensorFlow's version, then the given libraries' (the adapter's), then TF's CUDA build."""
    build = tf.sysconfig.get_build_info()
    found = {"tensorflow": tf.__version__, **libraries}
    found.update({k: str(build[k]) for k in ("cuda_version", "cudnn_version") if k in build})
    return found
