from __future__ import annotations

import math

import pytest

from dpscale.runner.lr import lr_at, scaled_lr

SPE = 10  # steps per epoch


@pytest.mark.parametrize(
    ("rule", "expected"),
    [("none", 0.1), ("linear", 0.8), ("sqrt", 0.1 * math.sqrt(8))],
)
def test_scaled_lr(rule: str, expected: float) -> None:
    assert scaled_lr(0.1, 128, 1024, rule) == pytest.approx(expected)


def test_linear_rule_matches_post_004() -> None:
    # lr 0.1 at batch 128 corresponds to lr 0.2 at batch 256
    assert scaled_lr(0.1, 128, 256, "linear") == pytest.approx(0.2)


def test_bad_rule_names_field_and_choices() -> None:
    with pytest.raises(ValueError, match=r"lr_scaling must be one of none, linear, sqrt.*'cubic'"):
        scaled_lr(0.1, 128, 256, "cubic")


def test_bad_batch_is_rejected() -> None:
    with pytest.raises(ValueError, match="positive"):
        scaled_lr(0.1, 0, 256, "linear")


def test_warmup_start_middle_end() -> None:
    args = dict(steps_per_epoch=SPE, peak_lr=1.0, warmup_epochs=2, total_epochs=10)
    warmup = 2 * SPE
    assert lr_at(0, schedule="cosine", **args) == pytest.approx(1.0 / warmup)
    middle = 1.0 / warmup + (1.0 - 1.0 / warmup) * 0.5
    assert lr_at(warmup // 2, schedule="cosine", **args) == pytest.approx(middle)
    assert lr_at(warmup, schedule="cosine", **args) == pytest.approx(1.0)
    assert lr_at(warmup, schedule="step", **args) == pytest.approx(1.0)
    ramp = [lr_at(s, schedule="step", **args) for s in range(warmup + 1)]
    assert all(a < b for a, b in zip(ramp, ramp[1:], strict=False))


def test_warmup_from_explicit_start() -> None:
    args = dict(steps_per_epoch=SPE, peak_lr=0.8, warmup_epochs=5, total_epochs=10)
    assert lr_at(0, schedule="cosine", start_lr=0.1, **args) == pytest.approx(0.1)
    assert lr_at(25, schedule="cosine", start_lr=0.1, **args) == pytest.approx(0.45)


def test_no_warmup_starts_at_peak() -> None:
    assert lr_at(0, SPE, 0.5, 0, 10, "cosine") == pytest.approx(0.5)


def test_cosine_ends_at_zero_and_is_monotone() -> None:
    total = 10 * SPE
    values = [lr_at(s, SPE, 1.0, 1, 10, "cosine") for s in range(SPE, total + 1)]
    assert values[0] == pytest.approx(1.0)
    assert values[-1] == pytest.approx(0.0, abs=1e-12)
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))
    halfway = SPE + (total - SPE) // 2
    assert lr_at(halfway, SPE, 1.0, 1, 10, "cosine") == pytest.approx(0.5, abs=0.02)


def test_step_milestones() -> None:
    def lr(epoch: float) -> float:
        return lr_at(int(epoch * SPE), SPE, 1.0, 1, 90, "step", milestones=(30, 60, 80))

    assert lr(29.9) == pytest.approx(1.0)
    assert lr(30) == pytest.approx(0.1)
    assert lr(59.9) == pytest.approx(0.1)
    assert lr(60) == pytest.approx(0.01)
    assert lr(80) == pytest.approx(0.001)


def test_step_default_milestones_and_gamma() -> None:
    assert lr_at(49, 1, 1.0, 0, 100, "step", gamma=0.5) == pytest.approx(1.0)
    assert lr_at(50, 1, 1.0, 0, 100, "step", gamma=0.5) == pytest.approx(0.5)
    assert lr_at(75, 1, 1.0, 0, 100, "step", gamma=0.5) == pytest.approx(0.25)


def test_constant_after_warmup() -> None:
    assert lr_at(99, SPE, 0.3, 1, 10, "constant") == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(schedule="linear"), "lr_schedule must be one of cosine, step, constant"),
        (dict(warmup_epochs=11), "warmup_epochs"),
        (dict(step=-1), "step"),
    ],
)
def test_bad_schedule_arguments(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = dict(
        step=0, steps_per_epoch=SPE, peak_lr=1.0, warmup_epochs=1, total_epochs=10
    )
    args.setdefault("schedule", "cosine")
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        lr_at(**args)  # type: ignore[arg-type]
