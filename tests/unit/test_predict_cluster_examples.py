"""`dpscale predict` takes a model as a study config names it (``resnet50``) as well as the
id the results write, and the cluster file shipped under studies/clusters/ runs as written
on the H100 evidence tables."""

from __future__ import annotations

import pandas as pd
import pytest
from test_cluster_prediction import MODEL, cluster_file, results

from conftest import REPO
from dpscale import cli

SHIPPED = REPO / "studies" / "clusters" / "gh200-slingshot.yaml"


def predict(results_dir, cluster: str) -> None:
    cli.main(["predict", "--results", str(results_dir), "--cluster", cluster])


def refusal(results_dir, cluster: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        predict(results_dir, cluster)
    message = str(exit_.value.code)
    assert message.startswith(f"dpscale: {cluster}: ") and "\n" not in message
    return message


@pytest.mark.parametrize("named", ["resnet50", MODEL])
def test_predict_takes_the_config_s_model_name_or_the_results_id(tmp_path, capsys, named):
    predict(results(tmp_path), cluster_file(tmp_path, model=named))
    printed = capsys.readouterr().out
    assert printed.startswith(f"gh200-slingshot: torch-ddp {MODEL}, one-device step ")
    assert "On gh200-slingshot, 32 devices at per-device batch 256 are predicted" in printed


def test_a_model_the_results_do_not_time_lists_the_names_allowed(tmp_path):
    message = refusal(results(tmp_path), cluster_file(tmp_path, model="resnet18"))
    assert message.endswith(
        f"model: 'resnet18' is not a model the results time; allowed: ['resnet50', '{MODEL}']"
    )


def test_a_name_of_two_models_in_the_results_asks_for_the_id(tmp_path):
    folder = results(tmp_path)
    timeline = pd.read_csv(folder / "tables" / "bucket_timeline.csv")
    small = timeline.assign(model="resnet50-cifar32-c10", cell_id=timeline["cell_id"] + "-small")
    pd.concat([timeline, small]).to_csv(folder / "tables" / "bucket_timeline.csv", index=False)
    message = refusal(folder, cluster_file(tmp_path, model="resnet50"))
    assert message.endswith(
        f"model: resnet50 names 2 models in the results (resnet50-cifar32-c10, {MODEL}); "
        "name one of them"
    )


def test_the_shipped_cluster_file_predicts_as_written_without_a_rate_warning(tmp_path, capsys):
    predict(results(tmp_path), str(SHIPPED))
    printed = capsys.readouterr().out
    assert printed.startswith(f"gh200-slingshot: torch-ddp {MODEL}, one-device step ")
    assert "above the link" not in printed and "not a plain ring" not in printed
    assert "On gh200-slingshot, 128 devices at per-device batch 256" in printed
