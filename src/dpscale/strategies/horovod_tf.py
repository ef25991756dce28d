"""horovod-tf: TensorFlow 2.15 (Keras 2) + Horovod, one process per device.

Launch kind ``horovod``: horovodrun --gloo locally, SLURM tasks around a Gloo rendezvous on
clusters; Gloo on CPU, NCCL on CUDA (where Horovod was built with it). Rank 0's weights and
optimizer state are broadcast before the first step, and ``hvd.DistributedGradientTape``
averages the gradients in every step. Each rank times its windows; rank 0 gathers them (the
slowest rank's time is the window's time) and every rank's parameter checksum. The
TensorFlow side (threads, model, SGD, step, training backend) is dpscale.frameworks.tf_ops.

Communication remedies (config ``comm``): ``fp16`` is Horovod's own ``hvd.Compression.fp16``
on the tape (and on the collectives mode's all-reduce); ``bucket_mb`` is Horovod's fusion
buffer (``HOROVOD_FUSION_THRESHOLD``, default 64 MiB).
"""

from __future__ import annotations

import functools
import os
from typing import Any

from dpscale.plan.cell import Cell
from dpscale.plan.strategy import CommSupport, Strategy, framework_imports
from dpscale.runner import startup
from dpscale.runner.measure import run_cell
from dpscale.runner.support import parse_runner_args
from dpscale.runner.timing import Step, Sync

with framework_imports() as framework:
    import horovod
    import horovod.tensorflow as hvd
    import tensorflow as tf

    from dpscale.frameworks import tf_ops

STRATEGY = Strategy(
    name="horovod-tf",
    framework="tensorflow",
    env="tf-horovod",
    launch="horovod",
    runner=__name__,
    requires=("tensorflow>=2.9,<2.16", "horovod>=0.28"),
    one_process=False,
    multi_node=True,
    oom_patterns=("ResourceExhaustedError", "CUDNN_STATUS_ALLOC_FAILED"),
    comm=CommSupport(remedies=("fp16",), collectives=("fp16",), bucket="HOROVOD_FUSION_THRESHOLD"),
)
# Horovod's default fusion buffer (HOROVOD_FUSION_THRESHOLD), in MiB
DEFAULT_FUSION_MB = 64.0


def set_fusion_buffer(cell: Cell) -> float:
    """Before hvd.init(): the cell's fusion buffer, in MiB (Horovod reads it at init)."""
    if cell.comm.bucket_mb is not None:
        os.environ["HOROVOD_FUSION_THRESHOLD"] = str(int(cell.comm.bucket_mb * 1024 * 1024))
    threshold = os.environ.get("HOROVOD_FUSION_THRESHOLD")
    return int(threshold) / 1024 / 1024 if threshold else DEFAULT_FUSION_MB


def compression(cell: Cell) -> Any:
    """Horovod's compressor for the cell's remedy (hvd.Compression.none without one)."""
    return hvd.Compression.fp16 if cell.comm.name == "fp16" else hvd.Compression.none


def broadcast_initial_state(model: tf.keras.Model, optimizer: tf_ops.SGDOptimizer) -> None:
    """Rank 0's weights, batch-norm statistics and (freshly built) optimizer slots."""
    optimizer.build(model.trainable_variables)
    hvd.broadcast_variables(model.variables, root_rank=0)  # [distributed]
    hvd.broadcast_variables(optimizer.variables, root_rank=0)  # [distributed]


def barrier() -> None:
    """horovod.tensorflow has no barrier: an all-reduce of one number waits for every rank."""
    hvd.allreduce(tf.constant(0.0), name="dpscale_barrier").numpy()  # [distributed]


def allreduce_floats(values: list[float], op: str) -> list[float]:
    """The training backend's sums ("sum") and maxima ("max") over the ranks
    (horovod.tensorflow has Max; its Keras module has not)."""
    if hvd.size() == 1:
        return list(values)
    tensor = tf.constant(values, dtype=tf.float64)
    reduce_op = {"sum": hvd.Sum, "max": hvd.Max}[op]
    # [distributed] the same name on every rank, one per operation
    return hvd.allreduce(tensor, op=reduce_op, name=f"dpscale_reduce_{op}").numpy().tolist()


class HorovodRank:
    """What the core loop (runner.measure.run_cell) needs from a Horovod rank."""

    framework = "tensorflow"
    times_out_collectives = True  # HOROVOD_GLOO_TIMEOUT_SECONDS, set in main()

    def __init__(
        self,
        cell: Cell,
        model: tf.keras.Model,
        optimizer: tf_ops.SGDOptimizer,
        params: int,
        fusion_mb: float,
    ) -> None:
        self.cell, self.model, self.optimizer = cell, model, optimizer
        self.trainable_params, self.threads_used = params, cell.threads_per_device
        self.rank, self.size, self.batch = hvd.rank(), hvd.size(), cell.batch_per_device
        self.compression, self.fusion_mb = compression(cell), fusion_mb
        # [distributed] averages the gradients over the ranks, compressed by the remedy
        self.tape = functools.partial(hvd.DistributedGradientTape, compression=self.compression)

    def synthetic_step(self) -> tuple[Step, Sync]:
        return tf_ops.make_train_step(self.cell, self.model, self.optimizer, self.batch, self.tape)

    def training_backend(self) -> tf_ops.KerasTrainingBackend:
        # [distributed] gradients averaged as above; sums and maxima by allreduce_floats
        return tf_ops.KerasTrainingBackend(
            self.cell, self.model, self.optimizer, self.tape, allreduce_floats
        )

    def matmul(self, n: int, dtype: str) -> tuple[Step, Sync]:
        return tf_ops.matmul_step(n, dtype)

    def allreduce(self, nbytes: int) -> tuple[Step, Sync]:
        buffer = tf_ops.ones_on_device(self.cell, nbytes // 4)
        name = f"dpscale_allreduce_{nbytes}"  # the same name on every rank, one per size
        last: list[tf.Tensor] = []

        def step() -> None:
            last[:] = [
                hvd.allreduce(buffer, op=hvd.Sum, name=name, compression=self.compression)
            ]  # [distributed]

        return step, lambda: last[0].numpy()

    def allreduce_description(self) -> dict[str, str]:
        if self.cell.accelerator == "cuda" and hvd.nccl_built():
            backend = "nccl"
        else:
            backend = "gloo" if hvd.gloo_enabled() else "mpi"
        op = "horovod.tensorflow.allreduce(Sum)"
        if self.cell.comm.name != "none":
            op = f"{self.cell.comm.key}: {op}"
        return {"op": op, "backend": backend}

    def gather(self, value: Any) -> list[Any]:
        return hvd.allgather_object(value)  # [distributed] every rank's value, rank order

    def param_checksums(self) -> list[str]:
        return [tf_ops.trained_param_checksum(self.model)]

    def device_names(self) -> list[str]:
        return tf_ops.device_names()

    def versions(self) -> dict[str, str]:
        return tf_ops.versions(horovod=horovod.__version__)

    def system_extra(self) -> dict[str, Any]:
        applied = {
            "remedy": self.cell.comm.key,
            "hook": f"horovod hvd.Compression.{self.cell.comm.name}",
            "bucket_mb": self.fusion_mb,
            "wire_ratio": self.cell.comm.nominal_ratio,
        }
        return {**tf_ops.system_extra(self.cell), "comm": applied}

    def finish(self) -> None:
        hvd.join()  # [distributed] rank 0 has written the result


def main(argv: list[str] | None = None) -> None:
    framework.require()
    cell, out = parse_runner_args(argv)
    tf_ops.configure_threads(cell)

    # Gloo's timeout (rendezvous and collectives); runner.faults names a rank that misses the
    # first collective earlier
    os.environ.setdefault(
        "HOROVOD_GLOO_TIMEOUT_SECONDS", str(2 * cell.measure.collective_timeout_s)
    )
    fusion_mb = set_fusion_buffer(cell)
    hvd.init()  # [distributed] rank, size and the Gloo (or NCCL) context from the launcher
    if os.environ.get("HOROVOD_CONTROLLER") == "gloo" and not hvd.gloo_enabled():
        # horovodrun's own check before the launch is left to this (dpscale.launch.horovodrun)
        raise RuntimeError("Horovod was not built with Gloo: see `horovodrun --check-build`")
    if hvd.size() != cell.world_size:
        raise RuntimeError(f"world size {hvd.size()} != cell's {cell.world_size}")
    tf_ops.pin_device(cell, hvd.local_rank())
    startup.first_barrier(hvd.rank(), barrier)  # [distributed] every rank has joined

    model, params = tf_ops.build_model(cell)
    optimizer = tf_ops.make_sgd(cell)
    startup.mark("built")
    broadcast_initial_state(model, optimizer)  # [distributed] rank 0's weights to every rank
    startup.mark("broadcast")

    run_cell(cell, out, HorovodRank(cell, model, optimizer, params, fusion_mb))


if __name__ == "__main__":
    main()
