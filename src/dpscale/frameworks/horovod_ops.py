"""Horovod on TensorFlow, the horovod-tf adapter's rank side: the remedy's compressor, a
barrier, sums and maxima over the ranks, and :class:`HorovodRank`, the rank the core loop
drives (every call that talks to other ranks marked ``[distributed]``); in folder cells it
reads its shard of the image folder (dpscale.frameworks.tf_folder)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import horovod
import horovod.tensorflow as hvd
import tensorflow as tf

from dpscale.frameworks import tf_folder, tf_ops
from dpscale.plan.cell import Cell
from dpscale.plan.controls import BARRIER, LOCAL
from dpscale.plan.remedies import NO_REMEDY
from dpscale.runner.rank import ModelCounts, Rank
from dpscale.runner.timing import Step, Sync


def compression(cell: Cell) -> Any:
    """Horovod's compressor for the cell's remedy (hvd.Compression.none without one)."""
    return hvd.Compression.fp16 if cell.comm.name == "fp16" else hvd.Compression.none


def barrier() -> None:
    """horovod.tensorflow has no barrier: an all-reduce of one number waits for every rank."""
    hvd.allreduce(tf.constant(0.0), name="dpscale_barrier").numpy()  # [distributed]


def own_gradients(tape: tf.GradientTape) -> tf.GradientTape:
    """A control cell's tape: TensorFlow's own, its gradients this rank's alone."""
    return tape


def allreduce_floats(values: list[float], op: str) -> list[float]:
    """The training backend's sums ("sum") and maxima ("max") over the ranks
    (horovod.tensorflow has Max; its Keras module has not)."""
    if hvd.size() == 1:
        return list(values)
    tensor = tf.constant(values, dtype=tf.float64)
    reduce_op = {"sum": hvd.Sum, "max": hvd.Max}[op]
    # [distributed] the same name on every rank, one per operation
    return hvd.allreduce(tensor, op=reduce_op, name=f"dpscale_reduce_{op}").numpy().tolist()


class HorovodRank(Rank):
    """What the core loop (runner.measure.run_cell) needs from a Horovod rank."""

    framework = "tensorflow"
    times_out_collectives = True  # HOROVOD_GLOO_TIMEOUT_SECONDS, set in main()

    def __init__(
        self,
        cell: Cell,
        model: tf.keras.Model,
        optimizer: tf_ops.SGDOptimizer,
        counts: ModelCounts,
        fusion_mb: float,
        cycle_ms: float,
        timeline: Path | None = None,
    ) -> None:
        self.cell, self.model, self.optimizer = cell, model, optimizer
        self.timeline = timeline  # Horovod's timeline beside the result, if the cell keeps one
        self.trainable_params, self.forward_flops = counts.trainable_params, counts.forward_flops
        self.threads_used = cell.threads_per_device
        self.rank, self.size, self.batch = hvd.rank(), hvd.size(), cell.batch_per_device
        self.compression, self.fusion_mb = compression(cell), fusion_mb
        self.cycle_ms = cycle_ms
        # [distributed] averages the gradients over the ranks, compressed by the remedy
        self.tape = functools.partial(hvd.DistributedGradientTape, compression=self.compression)
        self._folder: tf_folder.FolderPipeline | None = None  # mode folder, made once

    def _pipeline(self) -> tf_folder.FolderPipeline:
        """Mode folder: this rank's shard of the image folder, made at first use."""
        if self._folder is None:
            self._folder = tf_folder.FolderPipeline(self.cell, self.batch, self.rank, self.size)
        return self._folder

    def synthetic_step(self) -> tuple[Step, Sync]:
        return tf_ops.make_train_step(self.cell, self.model, self.optimizer, self.batch, self.tape)

    def control_step(self, control: str) -> tuple[Step, Sync]:
        """``local``: the synthetic step with TensorFlow's own tape, not Horovod's (this
        rank's gradients, nothing all-reduced); ``barrier``: the same, its loss read (the step
        has run), then Horovod's barrier (an all-reduce of one number)."""
        step, sync = tf_ops.make_train_step(
            self.cell, self.model, self.optimizer, self.batch, own_gradients
        )

        def local_then_barrier() -> None:
            step()
            sync()  # the barrier waits for this rank's step
            barrier()  # [distributed] every rank has finished its step

        return {LOCAL: step, BARRIER: local_then_barrier}[control], sync

    def folder_step(self) -> tuple[Step, Sync]:
        batches = self._pipeline().batches
        return tf_ops.make_folder_step(
            self.cell, self.model, self.optimizer, self.batch, self.tape, batches.next
        )

    def loader_step(self) -> tuple[Step, Sync]:
        # the batches are made by the time next() returns them: nothing to wait for
        return self._pipeline().batches.next, lambda: None

    def folder_record(self) -> dict[str, Any]:
        return self._pipeline().record()

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
        if self.cell.comm.name != NO_REMEDY:
            op = f"{self.cell.comm.key}: {op}"
        return {"op": op, "backend": backend}

    def gather(self, value: Any) -> list[Any]:
        return hvd.allgather_object(value)  # [distributed] every rank's value, rank order

    def agree(self, done: bool) -> bool:
        return all(hvd.allgather_object(done))  # [distributed] done only if all are

    def param_checksums(self) -> list[str]:
        return [tf_ops.trained_param_checksum(self.model)]

    def device_names(self) -> list[str]:
        return tf_ops.device_names()

    def versions(self) -> dict[str, str]:
        return tf_ops.versions(horovod=horovod.__version__)

    def cpu_kernels(self) -> dict[str, Any]:
        return tf_ops.cpu_kernels()

    def system_extra(self) -> dict[str, Any]:
        applied = {
            "remedy": self.cell.comm.key,
            "hook": f"horovod hvd.Compression.{self.cell.comm.name}",
            "bucket_mb": self.fusion_mb,
            "cycle_ms": self.cycle_ms,
            "wire_ratio": self.cell.comm.nominal_ratio,
        }
        extra = {**tf_ops.system_extra(self.cell), "comm": applied}
        if self.timeline is not None:  # its name: it lies beside the result
            extra["horovod_timeline"] = self.timeline.name
        return extra

    def finish(self) -> None:
        hvd.join()  # [distributed] rank 0 has written the result
        hvd.shutdown()  # [distributed] what Horovod's atexit hook would do, before the exit
