"""The framework-free training loop and the accuracy tables, with a fake backend."""

import numpy as np
import pandas as pd
import pytest

from conftest import make_cell
from dpscale.analysis.laws import accuracy as acc
from dpscale.launch.setup.dataprep import prepare_digits
from dpscale.plan.cell import Training
from dpscale.plan.result import make_result, now_iso, validate_result
from dpscale.runner.lr import scaled_lr
from dpscale.runner.training import run_training


class RecordingBackend:
    """Learns nothing; records what it is given. Predicts the label of the image's mean
    brightness class to have a deterministic accuracy."""

    def __init__(self):
        self.lrs, self.train_batches, self.val_labels, self.syncs = [], [], [], 0
        self.plans = []

    def planned(self, total_steps, warmup_steps):
        self.plans.append((total_steps, warmup_steps))

    def set_lr(self, lr):
        self.lrs.append(lr)

    def train_step(self, images, labels):
        assert images.dtype == np.float32 and images.ndim == 4
        self.train_batches.append(labels.copy())
        return float(len(labels)), int((labels == 0).sum())

    def evaluate(self, images, labels):
        self.val_labels.append(labels.copy())
        return 0.5 * len(labels), int((labels == 1).sum())

    def sync(self):
        self.syncs += 1

    def reduce_sum(self, values):
        return list(values)

    def reduce_max(self, values):
        return list(values)


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return prepare_digits(tmp_path_factory.mktemp("data"), image_size=16)


def training_cell(digits, devices=1, rule="linear", epochs=2, batch=32):
    training = Training(
        "digits", str(digits), epochs, rule, 0.025, 32, 1.0, "cosine", 0.9, 5e-4, True, 0.05
    )
    return make_cell(devices=devices, batch=batch, mode="train", training=training)


def test_each_rank_reads_its_share_of_the_epoch(digits):
    cell = training_cell(digits, devices=2)
    seen = []
    for rank in (0, 1):
        backend = RecordingBackend()
        record = run_training(cell, backend, rank, 2, 32, lambda _: None)
        seen.append(np.concatenate(backend.train_batches[: record["steps_per_epoch"]]))
    assert len(seen[0]) == len(seen[1]) == record["steps_per_epoch"] * 32
    assert record["n_train"] // 2 // 32 == record["steps_per_epoch"]


def test_learning_rate_follows_the_rule_and_warm_up(digits):
    cell = training_cell(digits, devices=2, rule="linear")
    backend = RecordingBackend()
    record = run_training(cell, backend, 0, 2, 32, lambda _: None)
    steps = record["steps_per_epoch"]
    peak = scaled_lr(0.025, 32, 64, "linear")
    assert record["peak_lr"] == pytest.approx(peak) == pytest.approx(0.05)
    assert backend.lrs[0] == pytest.approx(0.025)  # warm-up starts at the unscaled rate
    assert max(backend.lrs) == pytest.approx(peak, rel=1e-6)
    assert backend.lrs[steps] == pytest.approx(peak, rel=1e-6)  # end of the 1-epoch warm-up
    assert backend.lrs[-1] < backend.lrs[steps]  # cosine decay afterwards
    # the backend hears the training's length before its first step (PowerSGD's start)
    assert backend.plans == [(2 * steps, steps)] and len(backend.lrs) == 2 * steps


def test_validation_covers_the_whole_set_once_per_epoch(digits):
    cell = training_cell(digits, epochs=2)
    backend = RecordingBackend()
    record = run_training(cell, backend, 0, 1, 32, lambda _: None)
    per_epoch = np.concatenate(backend.val_labels)
    assert len(per_epoch) == 2 * record["n_val"]
    assert record["epochs"][0]["val_loss"] == pytest.approx(0.5)
    assert record["epochs"][0]["val_accuracy"] == pytest.approx(np.mean(per_epoch == 1))
    assert record["time_to_target_s"] == pytest.approx(record["epochs"][0]["wall_seconds"])


def test_training_result_passes_the_schema(digits):
    cell = training_cell(digits)
    record = run_training(cell, RecordingBackend(), 0, 1, 32, lambda _: None)
    record["rank_param_checksums"] = ["abc"]
    result = make_result(
        cell,
        "ok",
        started_at=now_iso(),
        system={"host": "h", "cpu_model": "c", "python": "3"},
        training=record,
    )
    validate_result(result)


def fake_result(digits, devices, rule, seed, final):
    cell = training_cell(digits, devices=devices, rule=rule)
    cell = type(cell)(**{**cell.__dict__, "seed": seed, "repeat": seed})
    epochs = [
        {
            "epoch": 1,
            "train_seconds": 2.0 / devices,
            "val_seconds": 0.1,
            "wall_seconds": 2.1,
            "train_loss": 1.0,
            "train_accuracy": 0.5,
            "val_loss": 1.0,
            "val_accuracy": final - 0.1,
            "lr_last": 0.1,
            "train_images": 100,
        },
        {
            "epoch": 2,
            "train_seconds": 2.0 / devices,
            "val_seconds": 0.1,
            "wall_seconds": 4.2,
            "train_loss": 0.5,
            "train_accuracy": 0.8,
            "val_loss": 0.5,
            "val_accuracy": final,
            "lr_last": 0.0,
            "train_images": 100,
        },
    ]
    training = {
        "dataset": "digits",
        "epochs": epochs,
        "final_val_accuracy": final,
        "best_val_accuracy": final,
        "time_to_target_s": 4.2 if final >= 0.9 else None,
        "peak_lr": 0.05,
        "train_images_per_s": 50.0,
        "rank_param_checksums": ["x"] * devices,
    }
    return make_result(cell, "ok", started_at=now_iso(), system={"host": "h"}, training=training)


def test_delta_and_time_to_accuracy_tables(digits):
    results = [
        fake_result(digits, 1, "none", 0, 0.95),
        fake_result(digits, 1, "none", 1, 0.93),
        fake_result(digits, 2, "linear", 0, 0.92),
        fake_result(digits, 2, "linear", 1, 0.90),
        fake_result(digits, 2, "none", 0, 0.80),
        fake_result(digits, 2, "none", 1, 0.84),
    ]
    runs = acc.runs_table(results)
    assert runs["ranks_consistent"].all()
    deltas = acc.delta_table(runs).set_index(["world_size", "lr_rule"])
    assert deltas.loc[(2, "linear"), "final_delta"] == pytest.approx(0.91 - 0.94)
    assert deltas.loc[(1, "none"), "final_delta"] == pytest.approx(0.0)
    half = deltas.loc[(2, "linear"), "final_delta_ci95"]
    assert 0 < half < 1
    tta = acc.time_to_accuracy_table(runs).set_index(["world_size", "lr_rule"])
    assert tta.loc[(2, "linear"), "speedup"] == pytest.approx(1.0)
    assert np.isnan(tta.loc[(2, "none"), "time_to_target_s"])  # not every seed reached it
    epochs = acc.epochs_table(results)
    assert len(epochs) == 12 and set(epochs["epoch"]) == {1, 2}
    summary = acc.summary_table(runs)
    assert isinstance(summary, pd.DataFrame) and summary["seeds"].eq(2).all()


def test_welch_interval_matches_scipy():
    from scipy import stats

    a, b = np.array([0.9, 0.92, 0.95]), np.array([0.85, 0.9])
    delta, half = acc.welch_interval(a, b)
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert delta - half == pytest.approx(ci.low)
    assert delta + half == pytest.approx(ci.high)
