"""The config's clusters as a workflow rule (issue 50 item 3): each cluster file checked
before any job with one line naming ``clusters[i]`` and its field, predicted by the step
through ``dpscale predict``'s own function (one table, every row extrapolated with its
collective basis), a sentence each on the landing page, and nothing for a study without
clusters."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_cluster_link import SLINGSHOT, logged_seconds, nccl_log
from test_cluster_prediction import (
    EVIDENCE,
    GOOD,
    INTRA,
    MODEL,
    cluster_file,
    nvlink_law,
    results,
)

from conftest import REPO
from dpscale import cli
from dpscale.analysis.answers import cluster_prediction as cp
from dpscale.analysis.laws.cluster_link import MEASURED
from dpscale.analysis.results.import_logs import parse_all_reduce, read_lines
from dpscale.plan import cluster_file as cf
from dpscale.plan.errors import ConfigError
from dpscale.plan.remedies import NO_REMEDY
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES
from dpscale.steps import step_of
from helpers.report_text import LANDING, render

RUN = "a-strategy"
TINY = "resnet18-imagenet32-c10"
BUCKET = 8 * 2**20  # a size the GH200 log lists at its 8 ranks


def outputs(folder) -> dict[str, str]:
    names = {"table": "cluster_predictions.csv", "top": "cluster_predictions_top.json"}
    return {**{k: str(folder / v) for k, v in names.items()}, "html": str(folder / "page.html")}


def run_step(tables, paths: list[str], folder) -> tuple[pd.DataFrame, list[str], str]:
    """The rule's step on a study's tables and cluster files: table, sentences, page."""
    inputs = {"cells": str(tables / "cells.csv"), "timeline": str(tables / "bucket_timeline.csv")}
    out = outputs(folder)
    step_of("cluster_predictions")(inputs, out, {"clusters": json.dumps(paths)})
    top = json.loads(Path(out["top"]).read_text(encoding="utf-8"))
    page = Path(out["html"]).read_text(encoding="utf-8")
    return pd.read_csv(out["table"]), top, page


def synthetic_tables(folder):
    """One device at batch 64 and 640 img/s (0.1 s a step), one 8 MiB bucket ready when the
    backward pass ends: each prediction adds the log's own time at that size."""
    tables = folder / "tables"
    tables.mkdir(parents=True)
    cell = {"strategy": RUN, "model": TINY, "world_size": 1, "batch_per_device": 64}
    cells = {**cell, "status": "ok", "comm": NO_REMEDY, "img_s_mean": 640.0, "img_s_ci95": 6.4}
    pd.DataFrame([{**cells, "trainable_params": BUCKET // 4}]).to_csv(
        tables / "cells.csv", index=False
    )
    timeline = {
        **cell,
        "cell_id": "c1",
        "comm": NO_REMEDY,
        "forward_s": 0.03,
        "backward_s": 0.06,
        "optimizer_s": 0.01,
        "bucket": 0,
        "ready_s": 0.06,
        "bucket_bytes": BUCKET,
    }
    pd.DataFrame([timeline]).to_csv(tables / "bucket_timeline.csv", index=False)
    return tables


# -- the config key --------------------------------------------------------------------------


def test_a_missing_file_is_one_line_naming_clusters_0(tmp_path):
    with pytest.raises(ConfigError) as error:
        cf.check_clusters({"clusters": [str(tmp_path / "none.yaml")]})
    message = str(error.value)
    assert message.startswith("clusters[0]: ") and "is not a file" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"nodes": [0]}, "nodes[0]: 0 is not an integer >= 1"),
        ({"devices_per_node": None}, "devices_per_node: missing"),
        ({"inter_node": {"nccl_tests_log": "nowhere.log", "ranks": 8}}, "nccl_tests_log"),
    ],
)
def test_a_bad_field_is_one_line_naming_the_entry_the_file_and_the_field(tmp_path, changes, field):
    path = cluster_file(tmp_path, **changes)
    with pytest.raises(ConfigError) as error:
        cf.check_clusters({"clusters": [path]})
    message = str(error.value)
    assert message.startswith(f"clusters[0]: {path}: ") and field in message
    assert "\n" not in message


def test_two_clusters_of_one_name_are_refused(tmp_path):
    path = cluster_file(tmp_path)
    with pytest.raises(ConfigError, match=r"^clusters\[1\]: .*name: 'gh200-slingshot' is also"):
        cf.check_clusters({"clusters": [path, path]})


def test_the_study_config_checks_the_key_before_any_job(default_config, tmp_path):
    default_config["clusters"] = [cluster_file(tmp_path, nodes=[0])]
    with pytest.raises(ConfigError, match=r"^clusters\[0\]: .*nodes\[0\]"):
        plan_study(default_config, STRATEGIES)
    default_config["clusters"] = [7]
    with pytest.raises(ConfigError, match="clusters"):
        plan_study(default_config, STRATEGIES)
    default_config["clusters"] = [cluster_file(tmp_path)]
    checked = plan_study(default_config, STRATEGIES)[0]
    assert cf.cluster_inputs(checked) == [
        str(tmp_path / "cluster.yaml"),
        str((tmp_path / "slingshot.log").resolve()),
    ]


def test_the_default_has_no_clusters(default_config):
    assert plan_study(default_config, STRATEGIES)[0]["clusters"] == []


def test_a_file_is_read_once_per_version(tmp_path, monkeypatch):
    """The workflow plans once per job: the cluster file is read again only once changed."""
    reads = []
    real = cf.read_cluster
    monkeypatch.setattr(cf, "read_cluster", lambda path: reads.append(path) or real(path))
    cf._read_once.cache_clear()
    path = cluster_file(tmp_path)
    config = {"clusters": [path]}
    cf.check_clusters(config)
    cf.check_clusters(config)
    assert len(reads) == 1
    cluster_file(tmp_path, nodes=[2, 4, 8, 16])
    assert cf.check_clusters(config)[0].nodes == (2, 4, 8, 16)
    assert len(reads) == 2


# -- the step ----------------------------------------------------------------------------------


def test_synthetic_tables_and_the_gh200_log_give_the_known_step(tmp_path):
    tables = synthetic_tables(tmp_path / "study")
    path = cluster_file(tmp_path, model=TINY, batch_per_device=64, nodes=[2, 4])
    table, top, page = run_step(tables, [path], tmp_path)
    logged = logged_seconds(read_lines(SLINGSHOT))[BUCKET]
    two = table[table["nodes"] == 2].iloc[0]
    assert two["world_size"] == 8 and two["collective_basis"] == MEASURED
    assert two["step_time_s"] == pytest.approx(0.1 + logged, rel=1e-9)
    assert (table["kind"] == cp.KIND).all() and table["collective_basis"].str.len().min() > 0
    assert "ring law at 16 ranks" in table[table["nodes"] == 4]["collective_basis"].iloc[0]
    assert len(top) == 1 and top[0].startswith("On gh200-slingshot, 16 devices at per-device")
    assert "extrapolated from one device and the cluster's nccl-tests log" in top[0]
    assert f"this study's {RUN} {TINY} cells (" in top[0]
    # the range leads; the link-only figure follows as its upper bound
    assert top[0].index("% efficient, speed-up ") < top[0].index("The link-only figure, an upper")
    assert "<ul class='summary'><li>On gh200-slingshot" in page and "<td" in page


def test_the_step_and_the_command_give_the_same_table(tmp_path):
    folder = results(tmp_path)
    path = cluster_file(tmp_path)
    table, top, _ = run_step(folder / "tables", [path], tmp_path)
    out = tmp_path / "command.csv"
    cli.main(["predict", "--results", str(folder), "--cluster", path, "--out", str(out)])
    pd.testing.assert_frame_equal(table, pd.read_csv(out))
    assert top[0].startswith("On gh200-slingshot, 32 devices at per-device batch 256")
    assert "(measured" in top[0] or "ring law" in top[0]


def test_a_cluster_the_study_cannot_predict_says_why_and_adds_no_row(tmp_path):
    folder = results(tmp_path)
    good = cluster_file(tmp_path)
    for name in ("other", "no-model"):
        (tmp_path / name).mkdir()
    other = cluster_file(tmp_path / "other", name="other", batch_per_device=32)
    elsewhere = cluster_file(tmp_path / "no-model", name="no-model", model=TINY)
    (tmp_path / "no-run").mkdir()
    no_run = cluster_file(tmp_path / "no-run", name="no-run", model=TINY, strategy=RUN)
    paths = [good, other, elsewhere, no_run]
    table, top, page = run_step(folder / "tables", paths, tmp_path)
    assert set(table["cluster"]) == {"gh200-slingshot"}
    assert top[1].startswith(f"On other, nothing is predicted from this study ({other}: ")
    assert "batch_per_device: no ok one-device cell" in top[1]
    # a model the study does not time is refused with the names it allows, strategy or not
    allowed = "allowed: ['resnet50', 'resnet50-imagenet224-c1000']"
    for line in top[2:4]:
        assert f"model: '{TINY}' is not a model the results time; {allowed}" in line
    assert all("\n" not in line for line in top) and "nothing is predicted" in page


def test_no_cluster_predicted_keeps_the_header(tmp_path):
    path = cluster_file(tmp_path, batch_per_device=32)
    table, top, _ = run_step(results(tmp_path) / "tables", [path], tmp_path)
    assert table.empty and list(table.columns) == list(cp.COLUMNS)
    assert "nothing is predicted" in top[0]


# -- the landing page and the workflow ---------------------------------------------------------


def test_the_landing_page_gives_each_cluster_its_extrapolated_sentence(tmp_path):
    _, top, _ = run_step(results(tmp_path) / "tables", [cluster_file(tmp_path)], tmp_path)
    landing = render("workflow.rst", {**LANDING, "cluster_lines": top})
    assert "**Your clusters** (extrapolated" in landing and f"- {top[0]}" in landing
    assert "extrapolated" in top[0]
    assert "**Your clusters**" not in render("workflow.rst", {**LANDING, "cluster_lines": []})
    assert f"- {top[0]}" in render("cluster_predictions.rst", {"cluster_lines": top})


def dry_run_jobs(tmp_path, extra: dict) -> str:
    config = tmp_path / f"extra{len(extra)}.yaml"
    config.write_text(yaml.safe_dump({"results_dir": str(tmp_path / "r"), **extra}))
    command = [sys.executable, "-m", "snakemake", "-n", "--configfile"]
    command += [str(REPO / "tests" / "data" / "tiny.yaml"), str(config)]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout + run.stderr


def test_a_study_without_clusters_plans_no_cluster_job(tmp_path):
    assert "cluster_predictions" not in dry_run_jobs(tmp_path, {})


def test_a_study_with_clusters_plans_the_rule(tmp_path):
    shutil.copy(SLINGSHOT, tmp_path / "slingshot.log")
    entry = {**GOOD, "model": TINY, "batch_per_device": 4}
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(entry), encoding="utf-8")
    jobs = dry_run_jobs(tmp_path, {"clusters": [str(tmp_path / "cluster.yaml")]})
    assert "rule cluster_predictions:" in jobs


def test_the_evidence_tables_name_the_model_the_cluster_file_asks_for():
    assert MODEL in set(pd.read_csv(EVIDENCE / "tables" / "cells.csv")["model"])


# -- the intra-node log ------------------------------------------------------------------------


def test_predict_with_and_without_an_intra_node_log(tmp_path, capsys):
    """The synthetic study (one 8 MiB bucket ready at the end of the backward pass): one
    node's step adds the intra-node log's own time where the file gives one, the GH200
    log's fitted ring law at 4 ranks where not; two nodes are the same either way."""
    folder = tmp_path / "study"
    synthetic_tables(folder)
    tables = {}
    for name in ("without", "with"):
        (tmp_path / name).mkdir()
        given = {"intra_node": INTRA} if name == "with" else {}
        if given:
            (tmp_path / name / "nvlink.log").write_text("\n".join(nccl_log(nvlink_law, 4)))
        shape = {"model": TINY, "batch_per_device": 64, "nodes": [1, 2], **given}
        path = cluster_file(tmp_path / name, **shape)
        out = tmp_path / f"{name}.csv"
        cli.main(["predict", "--results", str(folder), "--cluster", path, "--out", str(out)])
        tables[name] = pd.read_csv(out)
    printed = capsys.readouterr().out
    assert printed.count("one-node rows: intra-node log nvlink.log at 4 ranks") == 1
    without, with_ = tables["without"], tables["with"]
    logged = {
        r.message_bytes: r.time_us * 1e-6 for r in parse_all_reduce(nccl_log(nvlink_law, 4), 4).rows
    }
    assert with_["step_time_s"].iloc[0] == pytest.approx(0.1 + logged[BUCKET], rel=1e-9)
    assert with_["step_time_s"].iloc[0] < without["step_time_s"].iloc[0]
    assert with_["collective_basis"].iloc[0] == f"{MEASURED}; one node: intra-node log (nvlink.log)"
    assert without["collective_basis"].iloc[0].endswith(cp.ONE_NODE)
    assert (with_["kind"] == cp.KIND).all() and (without["kind"] == cp.KIND).all()
    pd.testing.assert_series_equal(with_.iloc[1], without.iloc[1])


def test_the_step_names_the_intra_node_log_and_the_rule_reads_it(tmp_path):
    tables = synthetic_tables(tmp_path / "study")
    (tmp_path / "nvlink.log").write_text("\n".join(nccl_log(nvlink_law, 4)), encoding="utf-8")
    shape = {"model": TINY, "batch_per_device": 64, "nodes": [1], "intra_node": INTRA}
    path = cluster_file(tmp_path, **shape)
    _, top, page = run_step(tables, [path], tmp_path)
    assert top[0].startswith("On gh200-slingshot, 4 devices at per-device batch 64")
    assert "one node: intra-node log (nvlink.log)" in top[0] and "extrapolated" in top[0]
    assert "intra-node log (nvlink.log)" in page
    assert cf.cluster_inputs({"clusters": [path]}) == [
        path,
        str((tmp_path / "nvlink.log").resolve()),
        str((tmp_path / "slingshot.log").resolve()),
    ]
