"""horovod-tf: TensorFlow 2.15 (Keras 2) + Horovod, one process per device, via horovodrun.

Gloo on CPU (NCCL where Horovod was built with it). Rank 0's initial weights and optimizer
state are broadcast before the first step; gradients are averaged by
``hvd.DistributedGradientTape``. Each rank times its windows; rank 0 gathers them (the
slowest rank's time is the window's time) and every rank's parameter checksum.

Training path: a custom ``tf.function`` step, not Keras ``fit``. Both were measured on the
same cell (resnet18, imagenet stem, 64 px, batch 16 per device, 2 processes on 2 CPU cores,
benchmarks/keras_fit_vs_loop.py, two alternating rounds): fit 84.8 and 87.8 img/s, the loop
86.5 and 85.6 img/s, the same within the 95% intervals (+/- 3 to 9). So the choice is by
structure: the loop is what the core protocol drives step by step (fit would need timing
callbacks, with epochs as windows), its device synchronisation is an explicit host read of
the step's loss, and it is the structure of Horovod's own TF2 synthetic benchmark.

Threads: intra-op = the cell's threads per device (each op's parallelism), inter-op = 1
(one op at a time). A CPU device is threads_per_device cores; with 2 inter-op threads a
process runs two ops at once, each with the full intra-op pool, so it uses more cores than
it was given: on the cell above with 1 thread per device, one process ran at 107 img/s with
inter-op 2 against 70 with inter-op 1 (it used the idle second core), while two processes
(4 threads on 2 cores) gained little (98 against 93). The 1-device baseline would then be
measured on more cores than the N-device cells get per device, and speedups understated.
Well beyond the cores, spinning thread pools collapse throughput (see the README).

Training mode (real data, core.training drives it): ``KerasTrainingBackend`` below, SGD
with the cell's momentum and weight decay, the learning rate assigned to the optimizer's
variable before every step, the summed cross-entropy returned and its batch mean
differentiated (gradients averaged over ranks by DistributedGradientTape, like DDP). Keras'
SGD(weight_decay=...) is decoupled decay; torch's is L2 added to the gradient, so the
optimizer gets none and ``weight_decay * w`` is added to each averaged gradient. One
difference from torch is left: Keras' momentum buffer holds lr-scaled steps (v = m v - lr g;
w += v) where torch's holds gradients (b = m b + g; w -= lr b); the two agree while the rate
is constant and differ slightly while it warms up or decays.

Precision: fp32; on CUDA amp_bf16 and amp_fp16 set Keras' mixed-precision policy
(amp_fp16 with dynamic loss scaling); the logits are cast to fp32 for the loss. Layout:
TensorFlow's CPU convolutions exist only in NHWC, so CPU cells are NHWC whatever
memory_format says; on CUDA, contiguous means NCHW (PyTorch's default layout) and
channels_last NHWC.
"""

from __future__ import annotations

from collections.abc import Callable

import horovod
import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

from dpscale.builders.keras_resnet import build_keras_resnet, trainable_param_count
from dpscale.core.cell import Cell
from dpscale.core.result import now_iso
from dpscale.core.runner_support import (
    param_checksum,
    parse_runner_args,
    progress,
    require_devices,
    write_synthetic_result,
    write_training_result,
)
from dpscale.core.timing import time_windows
from dpscale.core.training import run_training

POLICIES = {"amp_bf16": "mixed_bfloat16", "amp_fp16": "mixed_float16"}
INTER_OP_THREADS = 1


def configure_threads(cell: Cell) -> int:
    """Must run before TensorFlow executes anything."""
    tf.config.threading.set_intra_op_parallelism_threads(cell.threads_per_device)
    tf.config.threading.set_inter_op_parallelism_threads(INTER_OP_THREADS)
    return cell.threads_per_device


def pin_device(cell: Cell, local_rank: int) -> None:
    gpus = tf.config.list_physical_devices("GPU")
    require_devices(cell, len(gpus) if cell.accelerator == "cuda" else 1)
    if cell.accelerator == "cuda":
        tf.config.set_visible_devices(gpus[local_rank], "GPU")
        tf.config.experimental.set_memory_growth(gpus[local_rank], True)
    else:
        tf.config.set_visible_devices([], "GPU")


def channels_last(cell: Cell) -> bool:
    return cell.accelerator == "cpu" or cell.memory_format == "channels_last"


def build_model(cell: Cell) -> tuple[tf.keras.Model, int]:
    if cell.precision != "fp32":
        if cell.accelerator != "cuda":
            raise ValueError(f"precision {cell.precision!r} needs accelerator 'cuda'")
        tf.keras.mixed_precision.set_global_policy(POLICIES[cell.precision])
    # Not tf.random.set_seed alone: Keras 2's unseeded initializers draw their seeds from
    # Python's random module, so only this makes the initial weights a function of the seed.
    tf.keras.utils.set_random_seed(cell.seed)
    model = build_keras_resnet(cell.model.spec(), channels_last=channels_last(cell))
    return model, trainable_param_count(model)


class FusedMomentumSGD:
    """Keras' ``SGD(lr, momentum, weight_decay=wd)`` (decoupled decay: ``w -= lr wd w``,
    then ``m = momentum m - lr g; w += m``) in two fused in-place kernels per variable.

    Keras 2's SGD runs each of those steps as separate element-wise ops with temporaries,
    about four passes over every parameter more than Horovod's reference benchmark's plain
    SGD: on ResNet-18 on one CPU thread the update took 93-143 ms against 55 (reference)
    and 63 for this (benchmarks/keras_optimizer_cost.py), of a step of about 0.45 s.
    The same maths; rank 0's slots are broadcast like Keras' (``build``, ``variables``).
    """

    def __init__(self, learning_rate: float, momentum: float, weight_decay: float) -> None:
        self.learning_rate, self.momentum, self.weight_decay = learning_rate, momentum, weight_decay
        self.slots: list[tf.Variable] = []

    def build(self, var_list: list[tf.Variable]) -> None:
        if not self.slots:
            self.slots = [tf.Variable(tf.zeros_like(v), trainable=False) for v in var_list]

    @property
    def variables(self) -> list[tf.Variable]:
        return list(self.slots)

    def apply_gradients(self, grads_and_vars) -> None:
        decay = self.learning_rate * self.weight_decay
        for (grad, var), slot in zip(grads_and_vars, self.slots, strict=True):
            if decay:
                tf.raw_ops.ResourceApplyGradientDescent(var=var.handle, alpha=decay, delta=var)
            tf.raw_ops.ResourceApplyKerasMomentum(
                var=var.handle,
                accum=slot.handle,
                lr=self.learning_rate,
                grad=grad,
                momentum=self.momentum,
                use_nesterov=False,
            )


def make_optimizer(cell: Cell):
    if cell.training is not None:  # weight decay is added to the gradients (see the top)
        train = cell.training
        optimizer = tf.keras.optimizers.SGD(learning_rate=train.base_lr, momentum=train.momentum)
    elif cell.precision == "fp32":
        return FusedMomentumSGD(learning_rate=0.01, momentum=0.9, weight_decay=5e-5)
    else:
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.01, momentum=0.9, weight_decay=5e-5)
    if cell.precision == "amp_fp16":
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    return optimizer


def broadcast_initial_state(model: tf.keras.Model, optimizer) -> None:
    """Rank 0's weights, batch-norm statistics and (freshly built) optimizer slots."""
    optimizer.build(model.trainable_variables)
    hvd.broadcast_variables(model.variables, root_rank=0)
    hvd.broadcast_variables(optimizer.variables, root_rank=0)


def synthetic_batch(cell: Cell, batch: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Random images and labels, created once on the device (no input pipeline)."""
    generator = tf.random.Generator.from_seed(cell.seed)
    size = cell.model.image_size
    shape = (batch, size, size, 3) if channels_last(cell) else (batch, 3, size, size)
    images = generator.normal(shape)
    labels = generator.uniform((batch,), 0, cell.model.classes, dtype=tf.int64)
    return images, labels


def make_train_step(
    cell: Cell, model: tf.keras.Model, optimizer, batch: int
) -> tuple[Callable[[], None], Callable[[], None]]:
    """(step, sync): sync reads the last step's loss on the host, which waits for the step.

    A tf.function returns only after all its stateful ops (the weight updates) have run (on
    a GPU: were queued, on the one compute stream, before the host read's copy is)."""
    images, labels = synthetic_batch(cell, batch)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    scaled = cell.precision == "amp_fp16"

    @tf.function(jit_compile=False)
    def train_step() -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = tf.cast(model(images, training=True), tf.float32)
            loss = loss_fn(labels, logits)
            target = optimizer.get_scaled_loss(loss) if scaled else loss
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(target, model.trainable_variables)
        if scaled:
            grads = optimizer.get_unscaled_gradients(grads)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    last: list[tf.Tensor] = []

    def step() -> None:
        last[:] = [train_step()]

    def sync() -> None:
        last[0].numpy()

    return step, sync


def summed_loss_and_correct(labels: tf.Tensor, logits: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    right = tf.equal(tf.argmax(logits, axis=1, output_type=tf.int64), labels)
    return tf.reduce_sum(losses), tf.reduce_sum(tf.cast(right, tf.int64))


class KerasTrainingBackend:
    """One optimiser step or evaluation on numpy NHWC batches (see core.training).

    Both steps are tf.functions over any batch size (the last validation batch is smaller)
    that return their sums to the host, so a returned step has finished: ``sync`` has
    nothing left to wait for. Reductions are Horovod allreduces (horovod.tensorflow, which
    has Max; its Keras module has not).
    """

    def __init__(self, cell: Cell, model: tf.keras.Model, optimizer) -> None:
        train = cell.training
        assert train is not None
        self.model, self.optimizer = model, optimizer
        self.weight_decay = train.weight_decay
        self.nchw = not channels_last(cell)
        self.scaled = cell.precision == "amp_fp16"
        size = cell.model.image_size
        signature = (
            tf.TensorSpec((None, size, size, 3), tf.float32),
            tf.TensorSpec((None,), tf.int64),
        )
        self._train = tf.function(self._train_step, input_signature=signature)
        self._evaluate = tf.function(self._evaluate_step, input_signature=signature)

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
        grads = hvd.DistributedGradientTape(tape).gradient(target, variables)
        if self.scaled:
            grads = self.optimizer.get_unscaled_gradients(grads)
        if self.weight_decay:
            grads = [g + self.weight_decay * v for g, v in zip(grads, variables, strict=True)]
        self.optimizer.apply_gradients(zip(grads, variables, strict=True))
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

    def sync(self) -> None:
        pass  # every step's results were read on the host

    def _reduce(self, values: list[float], op, name: str) -> list[float]:
        if hvd.size() == 1:
            return list(values)
        tensor = tf.constant(values, dtype=tf.float64)
        return hvd.allreduce(tensor, op=op, name=name).numpy().tolist()

    def reduce_sum(self, values: list[float]) -> list[float]:
        return self._reduce(values, hvd.Sum, "dpscale_reduce_sum")

    def reduce_max(self, values: list[float]) -> list[float]:
        return self._reduce(values, hvd.Max, "dpscale_reduce_max")


def trained_param_checksum(model: tf.keras.Model) -> str:
    return param_checksum(v.numpy() for v in model.trainable_variables)


def versions() -> dict[str, str]:
    build = tf.sysconfig.get_build_info()
    found = {"tensorflow": tf.__version__, "horovod": horovod.__version__}
    found.update({k: str(build[k]) for k in ("cuda_version", "cudnn_version") if k in build})
    return found


def main(argv: list[str] | None = None) -> None:
    cell, out = parse_runner_args(argv)
    started_at = now_iso()
    threads = configure_threads(cell)
    hvd.init()
    rank = hvd.rank()
    if hvd.size() != cell.world_size:
        raise RuntimeError(f"world size {hvd.size()} != cell's {cell.world_size}")
    pin_device(cell, hvd.local_rank())

    model, params = build_model(cell)
    optimizer = make_optimizer(cell)
    broadcast_initial_state(model, optimizer)

    def log(message: str) -> None:
        progress(message, rank)

    log(f"{cell.cell_id}: Horovod rank {rank}/{hvd.size()}, batch {cell.batch_per_device}")
    if cell.mode == "train":
        backend = KerasTrainingBackend(cell, model, optimizer)
        training = run_training(cell, backend, rank, hvd.size(), cell.batch_per_device, log)
    else:
        step, sync = make_train_step(cell, model, optimizer, cell.batch_per_device)
        m = cell.measure
        windows = time_windows(step, sync, m.warmup_steps, m.windows, m.steps_per_window, log)
        gathered = hvd.allgather_object(windows)
    checksums = hvd.allgather_object(trained_param_checksum(model))
    gpu_names = hvd.allgather_object(
        [
            tf.config.experimental.get_device_details(g).get("device_name", "")
            for g in tf.config.get_visible_devices("GPU")
        ]
    )
    if rank != 0:
        return
    common = {
        "started_at": started_at,
        "framework": "tensorflow",
        "framework_versions": versions(),
        "threads_used": threads,
        "trainable_params": params,
        "system_extra": {
            "gpu_names_seen": [n for names in gpu_names for n in names],
            "data_format": "NHWC" if channels_last(cell) else "NCHW",
            "inter_op_threads": INTER_OP_THREADS,
        },
        "rank_param_checksums": checksums,
    }
    if cell.mode == "train":
        write_training_result(cell, out, training=training, **common)
    else:
        write_synthetic_result(cell, out, per_rank_windows=gathered, **common)


if __name__ == "__main__":
    main()
