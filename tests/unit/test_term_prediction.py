"""dpscale predict --calibrate and the config's clusters carry a small run's loss term by
term (answers.term_prediction), on the tables of the 2-core check's study
(docs/measurements/2026-11-28-term-calibration.md, tests/data/term_calibration/)."""

from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO
from dpscale.steps.predict import _predicted, predict

STUDY = REPO / "tests" / "data" / "term_calibration"


def cluster(tmp_path: Path, one_host: bool = True) -> Path:
    path = tmp_path / "emulated.yaml"
    path.write_text(
        "name: emulated-3gbit\ninter_node: {rate: 3gbit, latency: 0us}\n"
        f"devices_per_node: 1\none_host: {str(one_host).lower()}\nnodes: [4, 8]\n"
        "model: resnet18-imagenet64-c10\nstrategy: torch-ddp\nbatch_per_device: 16\n"
    )
    return path


def small_run(tmp_path: Path) -> Path:
    cells = pd.read_csv(STUDY / "tables" / "cells.csv")
    (tmp_path / "small" / "tables").mkdir(parents=True)
    cells[cells["nodes"] <= 2].to_csv(tmp_path / "small" / "tables" / "cells.csv", index=False)
    return tmp_path / "small"


def test_the_small_runs_controls_carry_its_loss_term_by_term(tmp_path):
    out = tmp_path / "predicted.csv"
    printed = predict(STUDY, cluster(tmp_path), out, small_run(tmp_path), "3gbit")
    table = pd.read_csv(out).set_index("nodes")
    assert "term by term" in printed
    assert "Term by term from the small run's control cells" in printed
    # four ranks on two cores: the law time-shares the compute the calibrated law cannot see
    assert table.loc[4, "terms_efficiency"] < table.loc[4, "calibrated_efficiency"]
    assert table.loc[8, "terms_contention_s"] > 2 * table.loc[4, "terms_contention_s"]
    assert (table["terms_efficiency_lo"] <= table["terms_efficiency"]).all()
    assert (table["terms_efficiency"] <= table["terms_efficiency_hi"]).all()
    assert table["terms_kind"].str.startswith("extrapolated").all()
    assert "2 nodes x 1 device over 3gbit" in table.loc[4, "terms_basis"]


def test_nodes_of_their_own_keep_the_contention_as_measured(tmp_path):
    out = tmp_path / "predicted.csv"
    predict(STUDY, cluster(tmp_path, one_host=False), out, small_run(tmp_path), "3gbit")
    table = pd.read_csv(out).set_index("nodes")
    assert table.loc[8, "terms_contention_s"] == pytest.approx(table.loc[4, "terms_contention_s"])


def test_a_small_run_without_control_cells_says_the_calibrated_law_stands_alone(tmp_path):
    small = small_run(tmp_path)
    cells = pd.read_csv(small / "tables" / "cells.csv")
    cells[~cells["mode"].str.startswith("control-")].to_csv(
        small / "tables" / "cells.csv", index=False
    )
    out = tmp_path / "predicted.csv"
    printed = predict(STUDY, cluster(tmp_path), out, small, "3gbit")
    table = pd.read_csv(out)
    assert table["terms_efficiency"].isna().all()
    assert table["terms_basis"].str.contains("the calibrated law stands alone").all()
    assert "the calibrated law stands alone" in printed


def test_the_config_clusters_take_the_studys_own_control_cells(tmp_path):
    cells = pd.read_csv(STUDY / "tables" / "cells.csv")
    buckets = pd.read_csv(STUDY / "tables" / "bucket_timeline.csv")
    table, sentence = _predicted(cells, buckets, str(cluster(tmp_path)), "this study")
    assert table is not None and table["terms_efficiency"].notna().all()
    assert table["terms_kind"].str.startswith("interpolated").all()  # measured up to 8
