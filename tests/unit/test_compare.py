"""dpscale compare: two studies side by side, ratios with intervals, ties named as ties."""

from __future__ import annotations

import pandas as pd
import pytest

from dpscale import cli
from dpscale.analysis.answers import compare as cmp
from dpscale.plan.columns import POINT

BASE = {
    "strategy": "torch-ddp",
    "model": "resnet18-imagenet64-c10",
    "mode": "synthetic",
    "nodes": 2,
    "network": "1gbe",
    "comm": "none",
    "devices_per_node": 1,
    "world_size": 2,
    "status": "ok",
    "host": "node1",
    "cpu_model": "cpu",
}


def cells(rates: dict[int, tuple[float, float]], host: str = "node1") -> pd.DataFrame:
    """One ok cell per batch: (mean img/s, 95% half-width)."""
    return pd.DataFrame(
        [
            {**BASE, "host": host, "batch_per_device": b, "img_s_mean": m, "img_s_ci95": h}
            for b, (m, h) in rates.items()
        ]
    )


def study(name: str, rates: dict, host: str = "node1") -> cmp.Study:
    return cmp.Study(name, cells(rates, host), pd.DataFrame(), pd.DataFrame())


def test_faster_slower_and_tie_follow_the_ratio_intervals():
    before = study("old-nics", {16: (100.0, 2.0), 32: (100.0, 2.0), 64: (100.0, 2.0)})
    after = study("new-nics", {16: (120.0, 2.0), 32: (101.0, 2.0), 64: (90.0, 2.0), 128: (5, 1)})
    ratios, only = cmp.point_ratios(before, after)
    by_batch = ratios.set_index("batch_per_device")
    assert by_batch.loc[16, "ratio"] == pytest.approx(1.2)
    assert list(by_batch["verdict"].loc[[16, 32, 64]]) == ["faster", "tie", "slower"]
    assert by_batch.loc[16, "ratio_ci95"] == pytest.approx(1.2 * ((2 / 120) ** 2 + 0.02**2) ** 0.5)
    assert list(only["batch_per_device"]) == [128] and list(only["measured_in"]) == ["new-nics"]
    text = cmp.compare_paragraph(before, after, ratios, only, pd.DataFrame())
    assert text.startswith("new-nics against old-nics, over the 3 points measured ok in both: ")
    assert (
        "faster at 1, slower at 1, a tie (the 95% interval of the img/s ratio holds 1) at 1" in text
    )
    assert "Most faster: torch-ddp 2x1 over 1gbe at batch 16: 1.20x (±0.03)" in text
    assert "Measured in one only: 1 in new-nics" in text


def test_laws_and_links_changes_carry_intervals():
    fit = {k: BASE[k] for k in ("strategy", "model", "mode", "nodes", "network", "comm")}
    fit.update(devices_per_node=1, world_size=2, status="ok")
    laws_a = pd.DataFrame([{**fit, "v0": 100.0, "v0_se": 1.0, "t_c": 0.20, "t_c_se": 0.01}])
    laws_b = pd.DataFrame([{**fit, "v0": 110.0, "v0_se": 1.0, "t_c": 0.10, "t_c_se": 0.01}])
    link = {k: BASE[k] for k in cmp.LINK_KEY} | {"status": "ok", "alpha_s": 1e-4}
    links_a = pd.DataFrame(
        [{**link, "beta_GB_s": 0.11, "beta_lo_GB_s": 0.10, "beta_hi_GB_s": 0.12}]
    )
    links_b = pd.DataFrame([{**link, "beta_GB_s": 1.1, "beta_lo_GB_s": 1.0, "beta_hi_GB_s": 1.2}])
    a = cmp.Study("a", cells({16: (1.0, 0.1)}), laws_a, links_a)
    b = cmp.Study("b", cells({16: (1.0, 0.1)}), laws_b, links_b)
    [law] = cmp.fit_changes(a, b).to_dict("records")
    assert law["v0_ratio"] == pytest.approx(1.1) and law["t_c_change_s"] == pytest.approx(-0.1)
    assert law["t_c_change_ci95"] == pytest.approx(1.959964 * 0.01 * 2**0.5)
    [moved] = cmp.link_changes(a, b).to_dict("records")
    assert moved["beta_verdict"] == "faster" and moved["beta_b_range"] == "1-1.2"


def test_no_shared_point_says_so():
    text = cmp.compare_paragraph(
        study("a", {16: (1.0, 0.1)}),
        study("b", {32: (1.0, 0.1)}),
        *cmp.point_ratios(study("a", {16: (1.0, 0.1)}), study("b", {32: (1.0, 0.1)})),
        pd.DataFrame(),
    )
    assert "share no point measured ok in both, so nothing is compared" in text


def write_study(folder, rates, host):
    (folder / "tables").mkdir(parents=True)
    cells(rates, host).to_csv(folder / "tables" / "cells.csv", index=False)


def test_the_cli_compares_two_results_folders_from_different_machines(tmp_path, capsys):
    write_study(tmp_path / "a" / "default", {16: (100.0, 2.0)}, "laptop")
    write_study(tmp_path / "b" / "default", {16: (150.0, 3.0)}, "cluster-node")
    out = tmp_path / "out"
    cli.main(
        [
            "compare",
            str(tmp_path / "a" / "default"),
            str(tmp_path / "b" / "default"),
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    # one study on two machines: the folders' own names are the same, their parents tell
    assert "B (b) against A (a)" in printed and "faster at 1" in printed
    assert "A (a) ran on laptop (cpu; no GPU); B (b) on cluster-node (cpu; no GPU)." in printed
    ratios = pd.read_csv(out / "ratios.csv")
    assert list(ratios.columns[: len(POINT)]) == POINT
    page = (out / "compare.html").read_text()
    assert page.count("<table>") == 5 and "data:image/png;base64," in page
    assert "<title>B (b) against A (a)</title>" in page
    sides = pd.read_csv(out / "sides.csv").set_index("side")
    assert sides.loc["A", "folder"] == str((tmp_path / "a" / "default").resolve())
    assert sides.loc["B", "host"] == "cluster-node" and sides.loc["B", "cells_ok"] == "1 of 1"


def test_each_side_is_named_by_its_machine_commit_and_date_and_by_its_label(tmp_path, capsys):
    for side, gpu, commit in (("h100", "NVIDIA H100", "a" * 40), ("h200", "NVIDIA H200", "b" * 40)):
        write_study(tmp_path / side / "default", {16: (100.0, 2.0)}, "vm")
        table = tmp_path / side / "default" / "tables" / "cells.csv"
        frame = pd.read_csv(table).assign(
            gpus=gpu,
            dpscale_commit=commit + "-dirty",
            cpu_vector_extensions="avx2 fma avx512f",
            started_at="2026-11-26T08:46:48+00:00",
        )
        frame.to_csv(table, index=False)
    folders = [str(tmp_path / side / "default") for side in ("h100", "h200")]
    cli.main(["compare", *folders, "--out", str(tmp_path / "out"), "--label", "A=old", "B=new"])
    printed = capsys.readouterr().out
    assert "new against old" in printed
    assert (
        "old ran on vm (cpu, avx2 fma avx512f; NVIDIA H100) at dpscale aaaaaaa-dirty, 2026-11-26; "
        "new on vm (cpu, avx2 fma avx512f; NVIDIA H200) at dpscale bbbbbbb-dirty, 2026-11-26."
    ) in printed
    page = (tmp_path / "out" / "compare.html").read_text()
    assert "Which side is which" in page
    assert "img/s per point measured in both (new over old)" in page
    with pytest.raises(SystemExit, match="--label 'C=x': give A=<name> and/or B=<name>"):
        cli.main(["compare", *folders, "--label", "C=x"])


def test_side_names_fall_back_to_the_parents_that_tell_two_same_named_folders_apart():
    from pathlib import PurePosixPath as P

    a, b = P("/e/2026-11-26-nvidia-h100/study"), P("/e/2026-11-26-nvidia-h200/study")
    assert cmp.side_names(a, b) == ("A (2026-11-26-nvidia-h100)", "B (2026-11-26-nvidia-h200)")
    assert cmp.side_names(P("/x/one"), P("/x/two")) == ("one", "two")
    assert cmp.side_names(a, b, {"A": "before"}) == ("before", "study")
    assert cmp.side_names(a, b, {"A": "same", "B": "same"}) == ("A (same)", "B (same)")


def test_a_folder_without_tables_gets_one_line(tmp_path):
    with pytest.raises(SystemExit, match="has no tables/cells.csv; give a study's results folder"):
        cli.main(["compare", str(tmp_path), str(tmp_path)])


@pytest.mark.parametrize(
    "content, said",
    [
        (b"point,img_s\n" + b"caf\xe9,1\n", "is not UTF-8 (byte 0xe9 at line 2)"),
        (b"\xff\xfeh\x00", "is not UTF-8 (UTF-16"),
        (None, "over the 256 MiB bound for a table"),
    ],
)
def test_a_table_compare_cannot_take_is_one_line_naming_it(tmp_path, content, said):
    write_study(tmp_path / "a" / "default", {16: (100.0, 2.0)}, "laptop")
    write_study(tmp_path / "b" / "default", {16: (150.0, 3.0)}, "laptop")
    table = tmp_path / "b" / "default" / "tables" / "fits.csv"
    if content is None:  # sparse: a huge file without writing it
        with open(table, "wb") as handle:
            handle.truncate(257 * 2**20)
    else:
        table.write_bytes(content)
    with pytest.raises(SystemExit) as stop:
        cli.main(["compare", str(tmp_path / "a" / "default"), str(tmp_path / "b" / "default")])
    line = str(stop.value)
    assert "\n" not in line and str(table) in line and said in line


def test_the_rule_compares_its_own_study_with_compare_with(tmp_path):
    from dpscale.steps.compare import compare

    write_study(tmp_path / "before", {16: (100.0, 2.0)}, "node")
    write_study(tmp_path / "after", {16: (80.0, 2.0)}, "node")
    out = tmp_path / "after" / "compare"
    outputs = {name: out / f"{name}.csv" for name in ("ratios", "only", "fits", "links")}
    outputs["html"] = out / "compare.html"
    inputs = {"cells": tmp_path / "after" / "tables" / "cells.csv"}
    message = compare(inputs, outputs, {"a": tmp_path / "before"})
    assert "after against before" in message and "slower at 1" in message
