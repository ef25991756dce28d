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
    assert printed.startswith("On gh200-slingshot, 32 devices at per-device batch 256")
    assert f"\ngh200-slingshot: torch-ddp {MODEL}; one-device profile: " in printed


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
    assert printed.startswith("On gh200-slingshot, 128 devices at per-device batch 256")
    assert f"\ngh200-slingshot: torch-ddp {MODEL}; one-device profile: " in printed
    assert "above the link" not in printed and "not a plain ring" not in printed
    assert "On gh200-slingshot, 128 devices at per-device batch 256" in printed


def test_every_prediction_names_the_profile_s_device_and_host_in_its_text_and_csv(tmp_path):
    out = tmp_path / "p.csv"
    cli.main(
        [
            "predict",
            "--results",
            str(results(tmp_path)),
            "--cluster",
            cluster_file(tmp_path),
            "--out",
            str(out),
        ]
    )
    table = pd.read_csv(out)
    assert set(table["profile_device"]) == {"NVIDIA H100 80GB HBM3"}
    assert set(table["profile_host"]) == {"vm"}


def test_a_cluster_naming_another_device_is_refused_in_one_line_or_labelled(tmp_path, capsys):
    folder = results(tmp_path)
    message = refusal(folder, cluster_file(tmp_path, device="NVIDIA GH200"))
    assert message.endswith(
        "device: the cluster file names 'NVIDIA GH200', but the one-device profile is NVIDIA "
        "H100 80GB HBM3 on host vm; measure one device of the cluster's kind (or give "
        "--other-device to predict from this profile anyway, every row labelled)"
    )
    path = cluster_file(tmp_path, device="NVIDIA GH200")
    cli.main(["predict", "--results", str(folder), "--cluster", path, "--other-device"])
    printed = capsys.readouterr().out
    assert "(not the cluster's 'NVIDIA GH200': predicted anyway, as asked)" in printed
    # the same device named as people write it reads as that device
    cli.main(
        ["predict", "--results", str(folder), "--cluster", cluster_file(tmp_path, device="h100")]
    )
    assert "not the cluster's" not in capsys.readouterr().out


def test_a_cpu_profile_says_so_and_is_refused_for_a_cluster_naming_its_gpu(tmp_path, capsys):
    folder = results(tmp_path)
    cells = pd.read_csv(folder / "tables" / "cells.csv")
    cpu = cells.assign(accelerator="cpu", gpus="", cpu_model="AMD EPYC 7B13", threads_per_device=1)
    cpu.to_csv(folder / "tables" / "cells.csv", index=False)
    predict(folder, cluster_file(tmp_path))
    printed = capsys.readouterr().out
    assert "one-device profile: one CPU process of 1 thread (AMD EPYC 7B13) on host vm; a CPU " in (
        printed
    )
    message = refusal(folder, cluster_file(tmp_path, device="H100"))
    assert "but the one-device profile is one CPU process of 1 thread (AMD EPYC 7B13)" in message
    predict(folder, cluster_file(tmp_path, device="cpu"))
    assert "a CPU profile" not in capsys.readouterr().out


def test_a_node_s_fabric_takes_a_nominal_rate_and_latency_without_a_log(tmp_path, capsys):
    out = tmp_path / "p.csv"
    path = cluster_file(tmp_path, nodes=[1, 2], intra_node={"rate": "2400gbit", "latency": "1us"})
    cli.main(["predict", "--results", str(results(tmp_path)), "--cluster", path, "--out", str(out)])
    table = pd.read_csv(out).set_index("nodes")
    assert "nominal rate and latency (no log)" in table.loc[1, "collective_basis"]
    assert "nominal rate and latency" not in table.loc[2, "collective_basis"]
    assert "one-node rows: intra-node link 2400 Gbit/s, 1 us latency" in capsys.readouterr().out
