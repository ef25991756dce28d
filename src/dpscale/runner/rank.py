"""One process of a strategy as the core loop (runner.measure.run_cell) drives it.

A framework's Rank (frameworks/*_ops.py) subclasses :class:`Rank`. The defaults are those of
a strategy whose one process drives every device (torch-dp, mxnet-device): rank 0 of 1,
gathering is the identity, no all-reduce, nothing to tear down. A multi-process rank
overrides the handful of calls that talk to the other ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpscale.runner.timing import Step, Sync
from dpscale.runner.training import TrainingBackend


@dataclass(frozen=True)
class ModelCounts:
    """What a framework counted of the model it built: its trainable parameters and, for a
    zoo model (plan.cell.ModelConfig.zoo), its forward FLOPs per sample; a shared ResNet's
    FLOPs come from its spec instead (plan.result.model_info)."""

    trainable_params: int
    forward_flops: int | None = None


class Rank:
    framework = ""
    # whether the framework ends a collective that waits too long (its timeout is set from
    # measure.collective_timeout_s); where not, a step watchdog does (runner.faults)
    times_out_collectives = False
    rank = 0  # 0 .. size-1; rank 0 writes the result
    size = 1  # processes of the cell (1 for strategies that drive every device from one)
    batch: int  # samples this process feeds per step (per-device batch x its devices)
    trainable_params: int
    # a zoo model's forward FLOPs per sample, counted where it was built; a shared ResNet's
    # come from its spec (plan.result.model_info)
    forward_flops: int | None = None
    threads_used: int

    def synthetic_step(self) -> tuple[Step, Sync]:
        """One optimiser step on random data created once on the device, and a function
        that waits until the device has finished all queued work."""
        raise NotImplementedError

    def control_step(self, control: str) -> tuple[Step, Sync]:
        """A control cell's step (plan.controls): ``local``, the synthetic step on this
        rank's own gradients with nothing exchanged; ``barrier``, the same, then one barrier
        across the ranks. Only where the strategy declares the control."""
        raise NotImplementedError(f"{self.framework}: no control {control!r}")

    def folder_step(self) -> tuple[Step, Sync]:
        """Mode folder: one optimiser step on the image loader's next batch (loading it
        included), and the sync; only where the strategy declares a folder pipeline."""
        raise NotImplementedError(f"{self.framework}: no image-folder pipeline")

    def loader_step(self) -> tuple[Step, Sync]:
        """Mode folder, after :meth:`folder_step`'s windows: the same loader's next batch
        with no model, and the sync."""
        raise NotImplementedError(f"{self.framework}: no image-folder pipeline")

    def folder_record(self) -> dict[str, Any]:
        """Mode folder: what this rank's pipeline is and read (result
        ``system.image_folder``): its name, settings, images, classes, skipped files."""
        raise NotImplementedError(f"{self.framework}: no image-folder pipeline")

    def training_backend(self) -> TrainingBackend:
        raise NotImplementedError

    def matmul(self, n: int, dtype: str) -> tuple[Step, Sync]:
        """One dense n x n x n product on this rank's device (operands created once)."""
        raise NotImplementedError

    def param_checksums(self) -> list[str]:
        """sha256 of the trainable parameters of each model replica this process holds."""
        raise NotImplementedError

    def allreduce(self, nbytes: int) -> tuple[Step, Sync]:
        """One sum all-reduce of ``nbytes`` bytes of float32 over every rank, through the
        strategy's own communication path (buffers created once, here, outside any timing);
        collectives mode only, multi-process strategies only."""
        raise RuntimeError(f"{self.framework}: an all-reduce needs more than one process")

    def gradient_traffic(self) -> tuple[Step, Sync, dict[str, Any]] | None:
        """Collectives mode: one training step's gradient traffic (every bucket's
        collectives, as the strategy and its remedy send them), a sync, and what it sends
        (buckets, collectives_per_step, logical and wire bytes per step); None where the
        strategy cannot replay it."""
        return None

    def remedy_work(self) -> tuple[Step, Sync] | None:
        """Collectives mode: one step of the remedy's own work on the gradients (what it
        computes, not what it sends) and a sync; None where the remedy does none or the
        strategy cannot time it apart."""
        return None

    def bucket_timeline(self, steps: int) -> dict[str, Any] | None:
        """Synthetic mode, after the timed windows: ``steps`` more steps, each timed in its
        parts (forward, backward, optimiser), with each gradient bucket's ready time
        (result ``measurement.bucket_timeline``); None where the strategy has no buckets
        to time."""
        return None

    def allreduce_description(self) -> dict[str, str]:
        """What :meth:`allreduce` calls: ``op`` and ``backend`` (e.g. gloo, nccl, ps-lite)."""
        return {}

    def gather(self, value: Any) -> list[Any]:
        """Every rank's ``value`` in rank order (needed on rank 0 only)."""
        return [value]

    def agree(self, done: bool) -> bool:
        """Whether every rank is ``done`` (adaptive measuring: all ranks must run the same
        windows, since they step in lockstep through collectives); a collective."""
        if self.size == 1:
            return done
        raise NotImplementedError(f"{self.framework}: no agreement across ranks")

    def device_names(self) -> list[str]:
        """The accelerator names this rank's framework reports (empty on CPU)."""
        return []

    def versions(self) -> dict[str, str]:
        return {}

    def cpu_kernels(self) -> dict[str, Any]:
        """The CPU kernels its framework runs (result ``system.cpu_kernels``): ``library``,
        ``onednn`` (whether oneDNN / MKL-DNN runs), ``why`` (the setting or default that
        chose it), and where the framework says, ``isa``, ``version`` and ``blas``."""
        return {}

    def system_extra(self) -> dict[str, Any]:
        """What else the result's system description should say about this strategy."""
        return {}

    def finish(self) -> None:
        """After rank 0 has written the result: the last collective, teardown."""
