"""horovod-tf: TensorFlow 2.15 (Keras 2) + Horovod, one process per device (launch kind
``horovod``: horovodrun --gloo locally, SLURM tasks around a Gloo rendezvous on clusters).

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

Optimiser (synthetic and training mode alike, plan.cell.SGD): Keras' SGD with the cell's
momentum; Keras' own SGD(weight_decay=...) is decoupled decay, torch's is L2 added to the
gradient, so the optimizer gets none and ``weight_decay * w`` is added to each averaged
gradient (:func:`apply_sgd`). Training mode (real data, runner.training drives it):
``KerasTrainingBackend`` below, the learning rate assigned to the optimizer's variable
before every step, the summed cross-entropy returned and its batch mean differentiated
(gradients averaged over ranks by DistributedGradientTape, like DDP). One difference from
torch is left: Keras' momentum buffer holds lr-scaled steps (v = m v - lr g;
w += v) where torch's holds gradients (b = m b + g; w -= lr b); the two agree while the rate
is constant and differ slightly while it warms up or decays.

Precision: fp32; on CUDA amp_bf16 and amp_fp16 set Keras' mixed-precision policy
(amp_fp16 with dynamic loss scaling); the logits are cast to fp32 for the loss. Layout:
TensorFlow's CPU convolutions exist only in NHWC, so CPU cells are NHWC whatever
memory_format says; on CUDA, contiguous means NCHW (PyTorch's default layout) and
channels_last NHWC.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from dpscale.plan.cell import SGD, Cell
from dpscale.plan.strategy import Strategy, framework_imports
from dpscale.runner.measure import run_cell
from dpscale.runner.support import param_checksum, parse_runner_args, require_devices

with framework_imports() as framework:
    import horovod
    import horovod.tensorflow as hvd
    import numpy as np
    import tensorflow as tf

    from dpscale.frameworks.keras_resnet import build_keras_resnet, trainable_param_count

STRATEGY = Strategy(
    name="horovod-tf",
    framework="tensorflow",
    env="tf-horovod",
    launch="horovod",
    runner=__name__,
    one_process=False,
    multi_node=True,
)
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


class FusedSGD:
    """SGD with momentum and L2 weight decay (plan.cell.SGD) in two fused in-place kernels
    per variable, for fp32.

    Keras 2's SGD runs momentum and decay as separate element-wise ops with temporaries:
    on ResNet-18 on one CPU thread its update took 93-143 ms of a 0.45 s step against 55 ms
    for Horovod's reference benchmark's plain SGD and 63 ms fused
    (benchmarks/keras_optimizer_cost.py): that was horovod-tf's gap to the reference.
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
        self.build(variables)  # before the first tf.function trace (broadcast_initial_state)
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


def make_sgd(cell: Cell):
    """The cell's SGD (plan.cell.SGD): fused kernels in fp32; Keras' SGD under mixed
    precision (the loss-scale optimizer wraps a Keras optimizer), decay then added to the
    gradients (:func:`apply_sgd`)."""
    if cell.precision == "fp32":
        return FusedSGD(cell.sgd)
    optimizer = tf.keras.optimizers.SGD(learning_rate=cell.sgd.lr, momentum=cell.sgd.momentum)
    if cell.precision == "amp_fp16":
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    return optimizer


def apply_sgd(optimizer, sgd: SGD, grads: list[tf.Tensor], variables: list[tf.Variable]) -> None:
    """One SGD step with L2 weight decay added to the (averaged) gradients, as torch does."""
    if isinstance(optimizer, FusedSGD):
        optimizer.apply(grads, variables)
        return
    if sgd.weight_decay:
        grads = [g + sgd.weight_decay * v for g, v in zip(grads, variables, strict=True)]
    optimizer.apply_gradients(zip(grads, variables, strict=True))


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
    sgd = cell.sgd
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    scaled = cell.precision == "amp_fp16"

    @tf.function(jit_compile=False)
    def train_step() -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = tf.cast(model(images, training=True), tf.float32)
            loss = loss_fn(labels, logits)
            target = optimizer.get_scaled_loss(loss) if scaled else loss
        tape = hvd.DistributedGradientTape(tape)  # [distributed] averages the gradients
        grads = tape.gradient(target, model.trainable_variables)
        if scaled:
            grads = optimizer.get_unscaled_gradients(grads)
        apply_sgd(optimizer, sgd, grads, model.trainable_variables)
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
    """One optimiser step or evaluation on numpy NHWC batches (see runner.training).

    Both steps are tf.functions over any batch size (the last validation batch is smaller)
    that return their sums to the host, so a returned step has finished: ``sync`` has
    nothing left to wait for. Reductions are Horovod allreduces (horovod.tensorflow, which
    has Max; its Keras module has not).
    """

    def __init__(self, cell: Cell, model: tf.keras.Model, optimizer) -> None:
        train = cell.training
        assert train is not None
        self.model, self.optimizer, self.sgd = model, optimizer, cell.sgd
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
        # [distributed] DistributedGradientTape averages the gradients over the ranks
        grads = hvd.DistributedGradientTape(tape).gradient(target, variables)
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

    def sync(self) -> None:
        pass  # every step's results were read on the host

    def _reduce(self, values: list[float], op, name: str) -> list[float]:
        if hvd.size() == 1:
            return list(values)
        tensor = tf.constant(values, dtype=tf.float64)
        return hvd.allreduce(tensor, op=op, name=name).numpy().tolist()  # [distributed]

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


class HorovodRank:
    """What the core loop (runner.measure.run_cell) needs from a Horovod rank."""

    framework = "tensorflow"

    def __init__(self, cell: Cell, model: tf.keras.Model, optimizer, params: int) -> None:
        self.cell, self.model, self.optimizer = cell, model, optimizer
        self.trainable_params, self.threads_used = params, cell.threads_per_device
        self.rank, self.size, self.batch = hvd.rank(), hvd.size(), cell.batch_per_device

    def synthetic_step(self) -> tuple[Callable[[], None], Callable[[], None]]:
        return make_train_step(self.cell, self.model, self.optimizer, self.batch)

    def training_backend(self) -> KerasTrainingBackend:
        return KerasTrainingBackend(self.cell, self.model, self.optimizer)

    def matmul(self, n: int, dtype: str) -> tuple[Callable[[], None], Callable[[], None]]:
        a, b = (tf.cast(tf.random.normal((n, n)), dtype) for _ in range(2))
        last: list[tf.Tensor] = []

        def step() -> None:
            last[:] = [tf.linalg.matmul(a, b)]

        return step, lambda: last[0].numpy()

    def allreduce(self, nbytes: int) -> tuple[Callable[[], None], Callable[[], None]]:
        with tf.device("/GPU:0" if self.cell.accelerator == "cuda" else "/CPU:0"):
            buffer = tf.ones((nbytes // 4,), dtype=tf.float32)
        name = f"dpscale_allreduce_{nbytes}"  # the same name on every rank, one per size
        last: list[tf.Tensor] = []

        def step() -> None:
            last[:] = [hvd.allreduce(buffer, op=hvd.Sum, name=name)]  # [distributed]

        return step, lambda: last[0].numpy()

    def allreduce_description(self) -> dict[str, str]:
        if self.cell.accelerator == "cuda" and hvd.nccl_built():
            backend = "nccl"
        else:
            backend = "gloo" if hvd.gloo_enabled() else "mpi"
        return {"op": "horovod.tensorflow.allreduce(Sum)", "backend": backend}

    def gather(self, value: Any) -> list[Any]:
        return hvd.allgather_object(value)  # [distributed] every rank's value, rank order

    def param_checksums(self) -> list[str]:
        return [trained_param_checksum(self.model)]

    def device_names(self) -> list[str]:
        return [
            tf.config.experimental.get_device_details(gpu).get("device_name", "")
            for gpu in tf.config.get_visible_devices("GPU")
        ]

    def versions(self) -> dict[str, str]:
        return versions()

    def system_extra(self) -> dict[str, Any]:
        return {
            "data_format": "NHWC" if channels_last(self.cell) else "NCHW",
            "inter_op_threads": INTER_OP_THREADS,
        }

    def finish(self) -> None:
        hvd.join()  # [distributed] rank 0 has written the result


def main(argv: list[str] | None = None) -> None:
    framework.require()
    cell, out = parse_runner_args(argv)
    configure_threads(cell)

    # Gloo's timeout (rendezvous and collectives); runner.faults names a rank that misses the
    # first collective earlier
    os.environ.setdefault(
        "HOROVOD_GLOO_TIMEOUT_SECONDS", str(2 * cell.measure.collective_timeout_s)
    )
    hvd.init()  # [distributed] rank, size and the Gloo (or NCCL) context from the launcher
    if hvd.size() != cell.world_size:
        raise RuntimeError(f"world size {hvd.size()} != cell's {cell.world_size}")
    pin_device(cell, hvd.local_rank())

    model, params = build_model(cell)
    optimizer = make_sgd(cell)
    broadcast_initial_state(model, optimizer)  # [distributed] rank 0's weights to every rank

    run_cell(cell, out, HorovodRank(cell, model, optimizer, params))


if __name__ == "__main__":
    main()
