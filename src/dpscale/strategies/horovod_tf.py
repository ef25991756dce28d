"""horovod-tf: TensorFlow 2.15 (Keras 2) + Horovod, one process per device.

Launch kind ``horovod``: horovodrun --gloo locally, SLURM tasks around a Gloo rendezvous on
clusters; Gloo on CPU, NCCL on CUDA (where Horovod was built with it). Rank 0's weights and
optimizer state are broadcast before the first step, and ``hvd.DistributedGradientTape``
averages the gradients in every step. Each rank times its windows; rank 0 gathers them (the
slowest rank's time is the window's time) and every rank's parameter checksum. The
TensorFlow side (threads, model, SGD, step, training backend) is dpscale.frameworks.tf_ops,
the rank's Horovod side (HorovodRank, barrier, sums) dpscale.frameworks.horovod_ops.

Communication remedies (config ``comm``): ``fp16`` is Horovod's own ``hvd.Compression.fp16``
on the tape (and on the collectives mode's all-reduce); ``bucket_mb`` is Horovod's fusion
buffer (``HOROVOD_FUSION_THRESHOLD``, default 128 MiB) and ``cycle_ms`` how often its
background thread fuses the tensors that are ready (``HOROVOD_CYCLE_TIME``, default 1 ms).

Config ``horovod_timeline`` (default false): Horovod's own timeline (``HOROVOD_TIMELINE``,
written by rank 0) is kept beside the result, ``<cell>.horovod-timeline.json``, and the
result names it (``system.horovod_timeline``); dpscale.analysis.results.horovod_timeline reads how
much of each step's all-reduce ran before the step's last gradient was handed to Horovod.
Opt-in: Horovod's writer thread polls its queue without sleeping, a core's worth on rank 0.

Config ``tensorflow_onednn`` (default ``on``): CPU cells run TensorFlow's oneDNN kernels,
as TensorFlow's CPU guide advises (``TF_ENABLE_ONEDNN_OPTS=1``); TensorFlow 2.15 turns them
on by itself only on CPUs with AVX-512's neural-network extensions, and its Eigen kernels
were 2.9x slower on an AVX2 CPU (issue 74). ``tensorflow_default`` leaves TensorFlow's own
choice. TensorFlow reads the variable when it is imported, so the launcher sets it
(``onednn_environment``); the result records what ran (``system.cpu_kernels``).

Mode folder (config ``image_folder``): each rank reads its shard of the user's image folder
through tf.data (dpscale.frameworks.tf_folder) and trains on it.
"""

from __future__ import annotations

import os
from pathlib import Path

from dpscale.plan.cell import Cell
from dpscale.plan.controls import Control
from dpscale.plan.strategy import CellOption, CommSupport, Strategy, framework_imports
from dpscale.plan.traffic import RingAllReduce
from dpscale.runner import startup
from dpscale.runner.measure import run_cell
from dpscale.runner.support import exit_without_finalization, parse_runner_args

ONEDNN_ON = "on"
ONEDNN_OPTIONS = (ONEDNN_ON, "tensorflow_default")


def onednn_environment(cell: Cell) -> dict[str, str]:
    """``TF_ENABLE_ONEDNN_OPTS=1`` for a CPU cell whose ``tensorflow_onednn`` is ``on``;
    nothing otherwise (TensorFlow's own default, and CUDA cells, whose math is cuDNN's)."""
    if cell.accelerator != "cpu" or STRATEGY.option(cell, "tensorflow_onednn") != ONEDNN_ON:
        return {}
    return {"TF_ENABLE_ONEDNN_OPTS": "1"}


with framework_imports() as framework:
    import horovod.tensorflow as hvd
    import tensorflow as tf

    from dpscale.frameworks import horovod_ops, tf_ops

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
    cell_options=(
        CellOption(
            "horovod_timeline",
            {
                "description": (
                    "horovod-tf cells keep Horovod's own timeline (HOROVOD_TIMELINE, a Chrome "
                    "trace written by rank 0) beside their result, <cell>.horovod-timeline.json; "
                    "tables/horovod_timeline.csv reads from it how much of each step's "
                    "all-reduce ran before the step's last gradient reached Horovod. Off by "
                    "default: the trace's writer thread takes CPU from rank 0. Not part of "
                    "the cell id; cells without it carry no key, so turning it on reruns only "
                    "the horovod-tf cells."
                ),
                "type": "boolean",
                "default": False,
            },
            omit_at_default=True,  # the horovod-tf cells measured before it keep their params
        ),
        CellOption(
            "tensorflow_onednn",
            {
                "description": (
                    "horovod-tf CPU cells: 'on' runs TensorFlow's oneDNN kernels "
                    "(TF_ENABLE_ONEDNN_OPTS=1, as TensorFlow's CPU guide advises); "
                    "'tensorflow_default' leaves TensorFlow's own choice, which turns them "
                    "off on CPUs without AVX-512's neural-network extensions (2.9x slower on "
                    "an AVX2 CPU). Every result records what ran (system.cpu_kernels)."
                ),
                "enum": list(ONEDNN_OPTIONS),
                "default": ONEDNN_ON,
            },
        ),
    ),
    environment=onednn_environment,
    comm=CommSupport(
        remedies=("fp16",),
        collectives=("fp16",),
        bucket="HOROVOD_FUSION_THRESHOLD",
        cycle="HOROVOD_CYCLE_TIME",
    ),
    traffic=RingAllReduce(),  # Horovod all-reduces each fused buffer (NCCL, Gloo)
    # folder cells (dpscale.frameworks.tf_folder): each rank reads its own shard of the folder
    folder_pipeline="tf.data (map with AUTOTUNE or workers, prefetch), sharded per Horovod rank",
    # models named keras.<name> (config models): tf.keras.applications.<name>
    model_zoo="keras",
    # control cells (plan.controls): the loss split into its terms
    # (horovod_ops.HorovodRank.control_step)
    controls=(
        Control("local", "TensorFlow's own GradientTape instead of hvd.DistributedGradientTape"),
        Control("barrier", "as local, then Horovod's barrier (an all-reduce of one number)"),
    ),
)
# Horovod's defaults since 0.21 (horovod/common/operations.cc): fusion buffer 128 MiB,
# cycle time 1 ms
DEFAULT_FUSION_MB = 128.0
DEFAULT_CYCLE_MS = 1.0


def set_fusion(cell: Cell) -> tuple[float, float]:
    """Before hvd.init(), which reads them: the cell's fusion buffer (MiB) and cycle time
    (ms), set where the cell asks; both as Horovod will use them."""
    if cell.comm.bucket_mb is not None:
        os.environ["HOROVOD_FUSION_THRESHOLD"] = str(int(cell.comm.bucket_mb * 1024 * 1024))
    if cell.comm.cycle_ms is not None:
        os.environ["HOROVOD_CYCLE_TIME"] = f"{cell.comm.cycle_ms:g}"
    threshold = os.environ.get("HOROVOD_FUSION_THRESHOLD")
    cycle = os.environ.get("HOROVOD_CYCLE_TIME")
    return (
        int(threshold) / 1024 / 1024 if threshold else DEFAULT_FUSION_MB,
        float(cycle) if cycle else DEFAULT_CYCLE_MS,
    )


# beside the result: <cell>.json -> <cell>.horovod-timeline.json (<cell>.again.json, measured
# once more, -> <cell>.again.horovod-timeline.json)
TIMELINE_SUFFIX = ".horovod-timeline.json"


def timeline_path(out: Path) -> Path:
    """Where a cell whose result is ``out`` keeps Horovod's timeline."""
    return out.with_name(out.stem + TIMELINE_SUFFIX)


def set_timeline(cell: Cell, out: Path) -> Path | None:
    """Before hvd.init(), which reads it on every rank (the coordinator, rank 0, writes the
    file; every rank's response cache sizes its state by it): the timeline's path where the
    cell asks for one (config ``horovod_timeline``), else None."""
    if not STRATEGY.option(cell, "horovod_timeline"):
        return None
    path = timeline_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)  # Horovod opens it, it makes no folder
    os.environ["HOROVOD_TIMELINE"] = str(path)
    return path


def broadcast_initial_state(model: tf.keras.Model, optimizer: tf_ops.SGDOptimizer) -> None:
    """Rank 0's weights, batch-norm statistics and (freshly built) optimizer slots."""
    optimizer.build(model.trainable_variables)
    hvd.broadcast_variables(model.variables, root_rank=0)  # [distributed]
    hvd.broadcast_variables(optimizer.variables, root_rank=0)  # [distributed]


def main(argv: list[str] | None = None) -> None:
    framework.require()
    cell, out = parse_runner_args(argv)
    tf_ops.configure_threads(cell)

    # Gloo's timeout (rendezvous and collectives); runner.faults names a rank that misses the
    # first collective earlier
    os.environ.setdefault(
        "HOROVOD_GLOO_TIMEOUT_SECONDS", str(2 * cell.measure.collective_timeout_s)
    )
    fusion_mb, cycle_ms = set_fusion(cell)
    timeline = set_timeline(cell, out)
    hvd.init()  # [distributed] rank, size and the Gloo (or NCCL) context from the launcher
    if os.environ.get("HOROVOD_CONTROLLER") == "gloo" and not hvd.gloo_enabled():
        # horovodrun's own check before the launch is left to this
        # (dpscale.launch.starters.horovodrun)
        raise RuntimeError("Horovod was not built with Gloo: see `horovodrun --check-build`")
    if hvd.size() != cell.world_size:
        raise RuntimeError(f"world size {hvd.size()} != cell's {cell.world_size}")
    tf_ops.pin_device(cell, hvd.local_rank())
    startup.first_barrier(hvd.rank(), horovod_ops.barrier)  # [distributed] every rank has joined

    model, params = tf_ops.build_model(cell)
    optimizer = tf_ops.make_sgd(cell)
    startup.mark("built")
    broadcast_initial_state(model, optimizer)  # [distributed] rank 0's weights to every rank
    startup.mark("broadcast")

    rank = horovod_ops.HorovodRank(
        cell, model, optimizer, params, fusion_mb, cycle_ms, timeline=timeline
    )
    run_cell(cell, out, rank)  # ends with every rank joined and Horovod shut down
    exit_without_finalization()


if __name__ == "__main__":
    main()
