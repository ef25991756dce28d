"""Learning-rate rules for data-parallel training.

Scaling with the global batch ``B`` against the batch ``B0`` the base rate was tuned for:

- ``linear``: ``lr = base * B / B0`` (Goyal et al. 2017, "Accurate, Large Minibatch SGD").
- ``sqrt``: ``lr = base * sqrt(B / B0)`` (Krizhevsky 2014, "One weird trick"), which keeps
  the variance of the update constant.
- ``none``: the base rate unchanged.

Schedule, per step, with ``W = round(warmup_epochs * steps_per_epoch)`` warm-up steps:

- steps ``0..W``: linear ramp from ``start_lr`` at step 0 to ``peak_lr`` at step ``W``.
  ``start_lr`` defaults to ``peak_lr / max(1, W)``, so the first step takes one W-th of the
  peak (the per-step form of Goyal's gradual warm-up; pass the unscaled base rate as
  ``start_lr`` to start exactly where Goyal does).
- after warm-up, ``cosine``: half a cosine from ``peak_lr`` at step ``W`` to 0 at the end of
  the last epoch; ``step``: ``peak_lr * gamma**k`` with ``k`` the milestone epochs passed
  (counted from the start of training, like torch's MultiStepLR; default milestones at 50%
  and 75% of training, as in He et al. 2016's CIFAR runs); ``constant``: ``peak_lr``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

LR_RULES = ("none", "linear", "sqrt")
SCHEDULES = ("cosine", "step", "constant")


def scaled_lr(base_lr: float, base_batch: int, global_batch: int, rule: str) -> float:
    if rule not in LR_RULES:
        raise ValueError(f"lr_scaling must be one of {', '.join(LR_RULES)}, got {rule!r}")
    if base_batch <= 0 or global_batch <= 0:
        raise ValueError(f"batch sizes must be positive, got {base_batch} and {global_batch}")
    ratio = global_batch / base_batch
    if rule == "linear":
        return base_lr * ratio
    if rule == "sqrt":
        return base_lr * math.sqrt(ratio)
    return base_lr


def warmup_steps(warmup_epochs: float, steps_per_epoch: int) -> int:
    return int(round(warmup_epochs * steps_per_epoch))


def default_milestones(total_epochs: float) -> tuple[float, float]:
    return (0.5 * total_epochs, 0.75 * total_epochs)


def lr_at(
    step: int,
    steps_per_epoch: int,
    peak_lr: float,
    warmup_epochs: float,
    total_epochs: float,
    schedule: str,
    start_lr: float | None = None,
    milestones: Sequence[float] | None = None,
    gamma: float = 0.1,
) -> float:
    """The learning rate for (0-based) optimiser ``step``; see the module docstring."""
    _check_schedule(step, steps_per_epoch, warmup_epochs, total_epochs, schedule)
    warmup = warmup_steps(warmup_epochs, steps_per_epoch)
    if step < warmup:
        start = peak_lr / warmup if start_lr is None else start_lr
        return start + (peak_lr - start) * step / warmup
    if schedule == "cosine":
        total = total_epochs * steps_per_epoch
        progress = min(1.0, (step - warmup) / max(1.0, total - warmup))
        return 0.5 * peak_lr * (1.0 + math.cos(math.pi * progress))
    if schedule == "step":
        epoch = step / steps_per_epoch
        marks = default_milestones(total_epochs) if milestones is None else milestones
        return peak_lr * gamma ** sum(1 for mark in marks if epoch >= mark)
    return peak_lr


def _check_schedule(
    step: int, steps_per_epoch: int, warmup_epochs: float, total_epochs: float, schedule: str
) -> None:
    if schedule not in SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    if step < 0 or steps_per_epoch < 1:
        raise ValueError(f"need step >= 0 and steps_per_epoch >= 1, got {step}, {steps_per_epoch}")
    if total_epochs <= 0 or not 0 <= warmup_epochs <= total_epochs:
        raise ValueError(
            f"need 0 <= warmup_epochs <= total_epochs and total_epochs > 0, "
            f"got {warmup_epochs} and {total_epochs}"
        )
