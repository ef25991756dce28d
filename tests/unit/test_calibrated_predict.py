"""dpscale predict --calibrate: a small run's cells calibrate the link-only prediction
(through the same path as a cluster), every bad input is one line, and without a small run
each multi-device row carries the published band below its link-only figure."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO
from dpscale import cli
from dpscale.analysis.results import step_spread

STUDY = REPO / "evidence" / "2026-11-26-nvidia-h100" / "cpu16_torch_ddp_nodes_two_links"


def cluster(tmp_path: Path, rate: str = "1gbit", per_node: int = 1) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        f"name: emulated\ninter_node: {{rate: {rate}, latency: 0us}}\n"
        f"devices_per_node: {per_node}\nnodes: [2, 4, 8]\nmodel: resnet18-imagenet64-c10\n"
        "strategy: torch-ddp\nbatch_per_device: 32\n",
        encoding="utf-8",
    )
    return path


def small(tmp_path: Path, up_to: int = 2, spread: tuple[float, ...] = ()) -> Path:
    """The evidence study's cells up to ``up_to`` nodes, as a small run's results folder;
    ``spread``: its one-device cells' step spread and interval, as one-step windows give."""
    cells = pd.read_csv(STUDY / "tables" / "cells.csv")
    if spread:
        one = cells["world_size"] == 1
        for column, value in zip(step_spread.COLUMNS, spread, strict=True):
            cells[column] = float("nan")
            cells.loc[one, column] = value
    (tmp_path / "small" / "tables").mkdir(parents=True)
    cells[cells["nodes"] <= up_to].to_csv(tmp_path / "small" / "tables" / "cells.csv")
    return tmp_path / "small"


def run(*words: str) -> None:
    cli.main(["predict", "--results", str(STUDY), *words])


def test_the_small_run_calibrates_and_says_how_far_it_reaches(tmp_path, capsys):
    out = tmp_path / "p.csv"
    run("--cluster", str(cluster(tmp_path)), "--calibrate", str(small(tmp_path)),
        "--network", "1gbit", "--out", str(out))  # fmt: skip
    table = pd.read_csv(out).set_index("nodes")
    assert table.loc[2, "calibrated_kind"].startswith("interpolated (calibrated up to 2")
    assert table.loc[8, "calibrated_kind"].startswith("extrapolated")
    for n in (2, 4, 8):
        lo, eff, hi = table.loc[n, ["calibrated_efficiency_lo", "calibrated_efficiency",
                                    "calibrated_efficiency_hi"]]  # fmt: skip
        assert 0 < lo <= eff <= hi and eff < table.loc[n, "efficiency"]  # below link-only
    printed = capsys.readouterr().out
    assert "Calibrated on the small run:" in printed and "upper bound" in printed


def test_arithmetic_on_the_same_points_and_the_laws_record_stand_beside_it(tmp_path, capsys):
    """Beyond the small run's largest scale, the two baselines (the largest point's
    efficiency held; its drop from one device repeated per doubling) and how the law fared
    against them on the published series."""
    out = tmp_path / "p.csv"
    run("--cluster", str(cluster(tmp_path)), "--calibrate", str(small(tmp_path)),
        "--network", "1gbit", "--out", str(out))  # fmt: skip
    table = pd.read_csv(out).set_index("nodes")
    assert table.loc[2, ["hold_efficiency", "repeat_efficiency"]].isna().all()  # measured
    held = table.loc[4, "hold_efficiency"]
    assert table.loc[8, "hold_efficiency"] == held and 0 < held < 1
    # one measured scale (2 nodes): the drop from one device (100%) repeats per doubling
    assert table.loc[4, "repeat_efficiency"] == pytest.approx(max(2 * held - 1, 0))
    assert table.loc[8, "repeat_efficiency"] == pytest.approx(max(3 * held - 2, 0))
    printed = capsys.readouterr().out
    assert f"the largest one's efficiency held, {100 * held:.0f}%" in printed
    assert "published series (calibrated on each one's smallest scales" in printed


def test_a_one_device_step_spread_enters_as_stragglers_with_its_interval(tmp_path, capsys):
    out = tmp_path / "p.csv"
    folder = small(tmp_path, spread=(0.05, 0.03, 0.08))
    run("--cluster", str(cluster(tmp_path)), "--calibrate", str(folder), "--network", "1gbit",
        "--out", str(out))  # fmt: skip
    table = pd.read_csv(out)
    assert table["calibration"].str.contains(r"step's spread \(5\.0%, 3\.0-8\.0%\)").all()


@pytest.mark.parametrize(
    "words, said",
    [
        ((), "network: the small run measured ['10gbit', '1gbit']; name one (--network)"),
        (("--network", "100gbit"), "network: '100gbit' is not in the small run; allowed:"),
    ],
)
def test_the_network_must_be_named_where_the_small_run_has_several(tmp_path, words, said):
    with pytest.raises(SystemExit) as stop:
        run("--cluster", str(cluster(tmp_path)), "--calibrate", str(small(tmp_path)), *words)
    assert said in str(stop.value) and "\n" not in str(stop.value)


def test_a_small_run_of_another_shape_is_one_line(tmp_path):
    with pytest.raises(SystemExit) as stop:
        run("--cluster", str(cluster(tmp_path, per_node=4)), "--calibrate",
            str(small(tmp_path)), "--network", "1gbit")  # fmt: skip
    assert "calibrate:" in str(stop.value) and "devices per node [1]" in str(stop.value)


def test_a_small_run_without_tables_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="has no tables/cells.csv"):
        run("--cluster", str(cluster(tmp_path)), "--calibrate", str(tmp_path))


def test_without_a_small_run_rows_carry_the_published_band(tmp_path, capsys):
    out = tmp_path / "p.csv"
    run("--cluster", str(cluster(tmp_path, rate="10gbit")), "--out", str(out))
    table = pd.read_csv(out)
    assert (table["efficiency_band_lo"] < table["efficiency_band_hi"]).all()
    assert (table["efficiency_band_hi"] <= table["efficiency"]).all()
    assert table["band_basis"].str.contains("published cases of").all()
    # each row carries the band of its own scale group (one node, or across nodes)
    expected = ["within one node" if n == 1 else "across nodes" for n in table["nodes"]]
    assert list(table["band_group"]) == expected
    assert all(g in b for g, b in zip(table["band_group"], table["band_basis"], strict=True))
    printed = capsys.readouterr().out
    # the first line is the band, the link-only figure after it as its upper bound
    first = printed.splitlines()[0]
    assert "% efficient, speed-up " in first and "(without a small run on the cluster: " in first
    band = table.sort_values("world_size").iloc[-1]
    low, high = 100 * band["efficiency_band_lo"], 100 * band["efficiency_band_hi"]
    assert f": {low:.0f}-{high:.0f}% efficient" in first
    assert f"at most {100 * band['efficiency']:.0f}%" in first and "an upper bound" in first
