"""Real-data training, framework-free: data, shards, augmentation, learning rate, metrics.

Every framework runs the same loop; a runner only supplies a ``TrainingBackend`` that
performs one optimiser step or one evaluation on a numpy batch and reduces numbers across
ranks.  So all strategies read the same bytes in the same order, with the same
augmentation, the same learning-rate schedule and the same metric definitions.

Per epoch: each rank reads its disjoint shard of the training set (a permutation seeded by
(seed, epoch), identical on every rank, DistributedSampler-style with drop_last), in
per-rank batches of ``batch_per_process``; then the whole validation set is evaluated,
split across ranks, and the sums are reduced, so validation accuracy is exact for the whole
set.  Times are the slowest rank's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from dpscale.plan.cell import Cell
from dpscale.runner import startup
from dpscale.runner.datasets import Dataset, augment_batch, load_dataset, normalise, shard_indices
from dpscale.runner.lr import lr_at, scaled_lr


class TrainingBackend(Protocol):
    def planned(self, total_steps: int, warmup_steps: int) -> None:
        """How long this training is, before its first step (a remedy may key on it)."""

    def set_lr(self, lr: float) -> None: ...

    def train_step(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, int]:
        """One optimiser step on float32 NHWC images; returns (summed loss, correct)."""

    def evaluate(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, int]:
        """Forward pass in inference mode; returns (summed loss, correct)."""

    def sync(self) -> None: ...

    def reduce_sum(self, values: list[float]) -> list[float]: ...

    def reduce_max(self, values: list[float]) -> list[float]: ...


def schedule_for(cell: Cell, steps_per_epoch: int) -> Callable[[int], float]:
    """Learning rate at a global step: scaled by the cell's rule, warmed up from base_lr."""
    train = cell.training
    assert train is not None
    peak = scaled_lr(train.base_lr, train.base_batch, cell.global_batch, train.lr_rule)
    start = min(train.base_lr, peak)

    def lr(step: int) -> float:
        return lr_at(
            step,
            steps_per_epoch,
            peak,
            train.warmup_epochs,
            train.epochs,
            train.schedule,
            start_lr=start,
        )

    return lr


def _train_epoch(
    backend: TrainingBackend,
    data: Dataset,
    cell: Cell,
    rank: int,
    world: int,
    epoch: int,
    batch: int,
    lr: Callable[[int], float],
) -> tuple[list[float], float]:
    train = cell.training
    assert train is not None
    shard = shard_indices(len(data.y_train), rank, world, epoch, cell.seed)
    steps = len(shard) // batch
    rng = np.random.default_rng([cell.seed, epoch, rank])
    loss_sum, correct, seen = 0.0, 0, 0
    backend.sync()
    start = time.perf_counter()
    for step in range(steps):
        backend.set_lr(lr(epoch * steps + step))
        index = shard[step * batch : (step + 1) * batch]
        images = data.x_train[index]
        if train.augment:
            images = augment_batch(images, rng)
        loss, right = backend.train_step(
            normalise(images, data.mean, data.std), data.y_train[index]
        )
        startup.mark("first_step")  # its collective has finished when train_step returns
        loss_sum, correct, seen = loss_sum + loss, correct + right, seen + len(index)
    backend.sync()
    return [loss_sum, float(correct), float(seen)], time.perf_counter() - start


def _validate(backend: TrainingBackend, data: Dataset, rank: int, world: int, batch: int):
    mine = np.array_split(np.arange(len(data.y_val)), world)[rank]
    loss_sum, correct = 0.0, 0
    backend.sync()
    start = time.perf_counter()
    for begin in range(0, len(mine), batch):
        index = mine[begin : begin + batch]
        loss, right = backend.evaluate(
            normalise(data.x_val[index], data.mean, data.std), data.y_val[index]
        )
        loss_sum, correct = loss_sum + loss, correct + right
    backend.sync()
    return [loss_sum, float(correct), float(len(mine))], time.perf_counter() - start


def steps_per_epoch(n_train: int, world: int, batch: int) -> int:
    return (n_train // world) // batch


def run_training(
    cell: Cell,
    backend: TrainingBackend,
    rank: int,
    world: int,
    batch_per_process: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Train for the cell's epochs; return the per-epoch record (same on every rank)."""
    train = cell.training
    if train is None:
        raise ValueError("run_training needs a training cell (mode train)")
    data = load_dataset(train.dataset_file)
    steps = steps_per_epoch(len(data.y_train), world, batch_per_process)
    if steps < 1:
        raise ValueError(
            f"global batch {cell.global_batch} exceeds the {len(data.y_train)} training images"
        )
    lr = schedule_for(cell, steps)
    backend.planned(steps * train.epochs, round(steps * train.warmup_epochs))
    epochs, elapsed, time_to_target = [], 0.0, None
    for epoch in range(train.epochs):
        sums, train_seconds = _train_epoch(
            backend, data, cell, rank, world, epoch, batch_per_process, lr
        )
        loss, correct, seen = backend.reduce_sum(sums)
        val_sums, val_seconds = _validate(backend, data, rank, world, batch_per_process)
        val_loss, val_correct, val_seen = backend.reduce_sum(val_sums)
        train_seconds, val_seconds = backend.reduce_max([train_seconds, val_seconds])
        elapsed += train_seconds + val_seconds
        record = {
            "epoch": epoch + 1,
            "train_seconds": train_seconds,
            "val_seconds": val_seconds,
            "wall_seconds": elapsed,
            "train_loss": loss / seen,
            "train_accuracy": correct / seen,
            "val_loss": val_loss / val_seen,
            "val_accuracy": val_correct / val_seen,
            "lr_last": lr((epoch + 1) * steps - 1),
            "train_images": int(seen),
        }
        epochs.append(record)
        if time_to_target is None and record["val_accuracy"] >= train.target_accuracy:
            time_to_target = elapsed
        log(
            f"epoch {epoch + 1}/{train.epochs}: train {train_seconds:.1f} s, loss "
            f"{record['train_loss']:.3f}, val acc {record['val_accuracy']:.3f}"
        )
    return {
        "dataset": train.dataset,
        "dataset_sha256": data.meta.get("npz_sha256"),
        "n_train": int(len(data.y_train)),
        "n_val": int(len(data.y_val)),
        "steps_per_epoch": steps,
        "lr_rule": train.lr_rule,
        "peak_lr": scaled_lr(train.base_lr, train.base_batch, cell.global_batch, train.lr_rule),
        "epochs": epochs,
        "final_val_accuracy": epochs[-1]["val_accuracy"],
        "best_val_accuracy": max(e["val_accuracy"] for e in epochs),
        "target_accuracy": train.target_accuracy,
        "time_to_target_s": time_to_target,
        "train_images_per_s": sum(e["train_images"] for e in epochs)
        / sum(e["train_seconds"] for e in epochs),
    }
