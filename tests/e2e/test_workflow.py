"""End to end through Snakemake on CPU: dry run, full run, report, rerun of one cell."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ONE_PROCESS, REPO, built_envs
from dpscale.registry import STRATEGIES

# side_by_side: no test here asserts a measured speed or quality, and the tiny study measures
# each cell once (again: []), so a busy machine changes no count (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.side_by_side]
TINY = REPO / "tests" / "data" / "tiny.yaml"
NAMES = yaml.safe_load(TINY.read_text(encoding="utf-8"))["strategies"]
ONE = [name for name in NAMES if name in ONE_PROCESS]  # skipped beyond one device on CPU
PROBES = yaml.safe_load(TINY.read_text(encoding="utf-8"))["drift"]["probes"]
# config.yaml's controls (auto, at the largest batch): each strategy that runs them splits its
# 2-device layout with local and barrier, and measures one device's local
SPLIT = [name for name in NAMES if STRATEGIES[name].controls]
CONTROLS = 3 * len(SPLIT)


def snakemake(*args: str, results: Path, timeout: int = 1200) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--configfile",
        str(TINY),
        "--config",
        f"results_dir={results}",
        *args,
    ]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run


def job_counts(dry_run_output: str) -> dict[str, int]:
    table = dry_run_output.split("Job stats:")[1].split("Reasons:")[0]
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)
        if m.group(1) != "total"
    }


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    built_envs(NAMES)
    dry = snakemake("-n", results=results)
    run = snakemake(results=results)
    (results / "snakemake.out").write_text(run.stdout + run.stderr)
    return results, dry.stdout + dry.stderr


def test_dry_run_lists_one_benchmark_job_per_cell(study):
    _, dry = study
    # strategies x batches x devices, the control cells and the 2 drift probes
    assert job_counts(dry)["bench_cell"] == len(NAMES) * 2 * 2 + CONTROLS + PROBES


def test_every_finished_cell_prints_its_line_with_the_cells_left(study):
    """A line per cell as it ends (id, status, img/s with its interval or the reason), and
    how many of the study's cells are done and what is left."""
    results, _ = study
    lines = [
        line
        for line in (results / "snakemake.out").read_text().splitlines()
        if line.startswith("dpscale: ") and " cells done" in line
    ]
    planned = len(NAMES) * 2 * 2 + CONTROLS + PROBES
    assert len(lines) >= planned, lines
    assert any(re.search(r": ok, [\d.]+ img/s ±[\d.]+ \(95%, \d+ windows\); ", x) for x in lines)
    assert any(f"{planned} of {planned} cells done" in line for line in lines), lines[-3:]


def test_every_cell_has_a_result_and_impossible_ones_say_why(study):
    results, _ = study
    everything = sorted((results / "tiny" / "cells").rglob("*.json"))
    assert not [p for p in everything if ".again" in p.suffixes]  # again: [], one result each
    cells = [p for p in everything if p.parent.name == "synthetic"]
    statuses = {
        str(p.relative_to(results / "tiny" / "cells")): json.loads(p.read_text())["status"]
        for p in cells
    }
    assert len(statuses) == len(NAMES) * 2 * 2
    skipped = {k for k, v in statuses.items() if v == "skipped"}
    assert skipped == {
        f"{strategy}/resnet18-imagenet32-c10/synthetic/n1-d2-b{batch}-r0.json"
        for strategy in ONE
        for batch in (2, 4)
    }
    assert all(v == "ok" for k, v in statuses.items() if k not in skipped), statuses


def test_tables_and_figures_come_from_the_run(study):
    import pandas as pd

    results, _ = study
    tables = results / "tiny" / "tables"
    cells = pd.read_csv(tables / "cells.csv")
    assert set(cells["status"]) == {"ok", "skipped"}
    fit_table = pd.read_csv(tables / "fits.csv")
    # one fit row per strategy and layout with ok cells (whether noisy tiny cells can be
    # fitted is a matter of timing, not behaviour)
    assert len(fit_table) == 2 * len(NAMES) - len(ONE)
    assert set(fit_table["status"]) <= {"ok", "not fitted"}
    for name in ("throughput", "speedup", "residuals", "frameworks", "startup"):
        assert (results / "tiny" / "figures" / f"{name}.png").is_file()


def test_every_run_cell_records_its_start_up_and_the_answer_comes_first(study):
    import json

    import pandas as pd

    results, _ = study
    tables = results / "tiny" / "tables"
    cells = pd.read_csv(tables / "cells.csv")
    ran = cells[cells["status"] == "ok"]
    phases = ran.filter(regex=r"^startup_(?!s$).*_s$")
    assert len(phases.columns) == 7 and phases.notna().all().all()
    assert (phases.sum(axis=1) - ran["startup_s"]).abs().max() < 1e-6
    layouts = pd.read_csv(tables / "startup.csv")
    assert set(layouts["strategy"]) == set(ran.loc[ran["mode"] == "synthetic", "strategy"])
    costs = pd.read_csv(tables / "cost.csv")  # the tiny study gives no prices
    assert costs["cost_per_epoch"].isna().all() and set(costs["currency"]) == {"no price given"}
    answer = json.loads((tables / "findings_top.json").read_text())[0]
    assert answer.startswith("For ResNet-18 (") and "no price given" in answer


def test_control_cells_split_each_layouts_loss_and_the_answer_names_the_largest_term(study):
    import pandas as pd

    results, _ = study
    tables = results / "tiny" / "tables"
    cells = pd.read_csv(tables / "cells.csv")
    controls = cells[cells["mode"].str.startswith("control-")]
    assert len(controls) == CONTROLS and set(controls["status"]) == {"ok"}
    assert set(controls["strategy"]) == set(SPLIT) and set(controls["batch_per_device"]) == {4}
    breakdown = pd.read_csv(tables / "loss_breakdown.csv")
    # a strategy's row needs its parts undisturbed by other work (the suite runs this study
    # beside other tests: a disturbed cell stays out, as in any study)
    parts = cells[(cells["batch_per_device"] == 4) & cells["strategy"].isin(SPLIT)]
    parts = parts[parts["mode"].isin(["synthetic", "control-local", "control-barrier"])]
    quiet = {s for s, rows in parts.groupby("strategy") if not rows["disturbed"].any()}
    assert set(breakdown["strategy"]) >= quiet and set(breakdown["strategy"]) <= set(SPLIT)
    complete = breakdown[breakdown["strategy"].isin(quiet)]
    assert set(complete["controls_run"]) <= {"one_local,local,barrier"}
    terms = ["contention_points", "waiting_points", "exposed_comm_points", "left_points"]
    total = breakdown[terms].sum(axis=1)
    assert ((total - breakdown["lost_points"]).abs() < 1e-6).all()  # they add up
    assert (results / "tiny" / "figures" / "loss_breakdown.png").is_file()
    answer = json.loads((tables / "findings_top.json").read_text())[0]
    landing = json.loads((tables / "answer.json").read_text())
    chosen = [row[1] for row in landing["rows"] if str(row[0]).startswith("choose")]
    split = {f"{s}, 1 node x 2 devices" for s in breakdown["strategy"]}
    if any(layout.startswith(tuple(split)) for layout in chosen):  # the breakdown has it
        assert "the largest is" in answer and "the largest is" in landing["below"][0]
    else:  # a one-device layout, or one whose parts were disturbed: nothing to name
        assert not any("the largest is" in line for line in landing["below"])


def test_drift_probes_run_first_and_last_and_stay_out_of_the_fits(study):
    import pandas as pd

    results, _ = study
    cells = pd.read_csv(results / "tiny" / "tables" / "cells.csv")
    measured = cells[cells["status"] == "ok"].sort_values("started_at")
    assert list(measured["mode"].iloc[[0, -1]]) == ["drift", "drift"]
    assert set(measured.loc[measured["mode"] == "drift", "cell_id"]) == {
        f"torch-dp/resnet18-imagenet32-c10/drift/n1-d1-b4-r{k}" for k in range(PROBES)
    }
    drift = pd.read_csv(results / "tiny" / "tables" / "drift.csv")
    assert list(drift["probe"]) == list(range(PROBES))
    assert drift.loc[0, "minutes"] == 0 and drift.loc[1, "minutes"] > 0
    assert (results / "tiny" / "figures" / "drift.png").is_file()
    repeats = pd.read_csv(results / "tiny" / "tables" / "repeatability.csv")
    assert repeats.empty  # the probes are no repeats of the study's cell


def test_report_is_one_self_contained_html(study):
    results, _ = study
    report = results / "report.html"
    snakemake("--report", str(report), results=results)
    text = report.read_text()
    pages = set(re.findall(r'"name": "([^"]+)", "filename"', text))  # the report's results
    assert {"throughput.png", "fits.html", "cells.html", "cost.html"} <= pages, pages
    assert {"frameworks.png", "drift.png", "startup.png"} <= pages
    assert {"answer_speedup.png", "answer_cost.png"} <= pages
    assert not {p for p in pages if p.endswith("_interactive.html")}  # beside it, in figures/
    # the study measures no remedy: no page of a header-only table, no empty figure
    assert not {"remedies.html", "answer_remedies.png"} & pages
    assert "dpscale study" in text


def dpscale(*args: str, results: Path, timeout: int = 1200) -> subprocess.CompletedProcess:
    """dpscale's own command on the tiny study in the checkout, as snakemake() runs it: a
    second study file points results_dir at the fixture's folder."""
    here = results / "results_dir.yaml"
    here.write_text(yaml.safe_dump({"results_dir": str(results)}))
    command = [sys.executable, "-m", "dpscale.cli", args[0], str(TINY), str(here), *args[1:]]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run


def test_dpscale_rerun_measures_one_cell_again_then_the_tables_and_the_report(study):
    """The cell named by its result's path, with --dry-run Snakemake's jobs (the cell and
    the analysis that reads it, nothing else), then for real: a new result, the earlier one
    kept under runs/, no other cell touched, and the report written after the tables."""
    results, _ = study
    tiny = results / "tiny"
    cell_id = "torch-ddp/resnet18-imagenet32-c10/synthetic/n1-d2-b4-r0"
    cell = tiny / "cells" / f"{cell_id}.json"
    dry = dpscale("rerun", str(cell), "--dry-run", results=results)
    counts = job_counts(dry.stdout + dry.stderr)
    downstream = ["aggregate", "figures_and_tables", "remedies", "findings"]
    # comm_model also predicts the multi-node cells from the one-process cells (the
    # exported-log check)
    downstream += ["comm_model", "drift", "all", "data_tables", "loss_breakdown"]
    # the quality review reads every cell again, and collectives waits for its list of cells
    # to measure again (measure.again)
    downstream += ["quality_review", "collectives"]
    assert counts == {"bench_cell": 1, **dict.fromkeys(downstream, 1)}
    others = {p: p.stat().st_mtime_ns for p in (tiny / "cells").rglob("*.json")}
    others.pop(cell)
    before = json.loads(cell.read_text())["finished_at"]
    runs = tiny / "runs" / cell_id
    earlier = set(runs.iterdir())
    report = tiny / "report.html"  # an old one: status says so, the rerun writes it again
    report.write_text("old")
    os.utime(report, ns=(1, 1))
    status = dpscale("status", results=results).stdout
    assert f"the report ({report}) is older than its tables" in status
    out = dpscale("rerun", cell_id, results=results).stdout
    assert f"dpscale: report: {report}" in out.splitlines()
    assert {p: p.stat().st_mtime_ns for p in others} == others
    assert json.loads(cell.read_text())["finished_at"] != before
    # the earlier measurement kept beside the new one, no second copy of it
    assert earlier < set(runs.iterdir()) and len(set(runs.iterdir()) - earlier) == 1
    assert report.stat().st_mtime_ns > 1 and "dpscale study" in report.read_text()
    assert "older than its tables" not in dpscale("status", results=results).stdout


def test_another_study_writes_its_own_folder(study, tmp_path):
    results, _ = study
    other = tmp_path / "other.yaml"
    other.write_text(
        TINY.read_text()
        .replace("study: tiny", "study: tiny2")
        .replace("batch_sizes: [2, 4]", "batch_sizes: [2]")
        .replace("drift: {probes: 2}", "drift: {probes: 0}")
        # one cell: another study's folder needs no more to show (the 2-process cell took
        # 15-22 s of this test's 47-64 s in CI, a second strategy's cell most of the rest)
        .replace("devices_per_node: [1, 2]", "devices_per_node: [1]")
        .replace(
            "strategies: [torch-dp, torch-ddp, horovod-tf, mxnet-device, mxnet-dist]",
            "strategies: [torch-ddp]",
        )
    )
    before = {p: p.stat().st_mtime_ns for p in (results / "tiny").rglob("*.json")}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "cells",
            "--configfile",
            str(TINY),
            str(other),
            "--config",
            f"results_dir={results}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(list((results / "tiny2" / "cells").rglob("*.json"))) == 1  # once: again: []
    assert {p: p.stat().st_mtime_ns for p in before} == before


def test_snakemake_stops_before_any_job_with_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"strategies": ["torch-ddp", "horovod-mpi"]}))
    run = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile", str(bad)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    errors = [line for line in run.stderr.splitlines() if "config error" in line]
    assert errors == [
        "dpscale: config error: strategies[1]: 'horovod-mpi' is not allowed; "
        f"allowed: {sorted(STRATEGIES)}"
    ]


def test_each_measured_cells_log_has_mlperfs_start_up_points(study):
    results, _ = study
    cells = results / "tiny" / "cells"
    measured = [p for p in cells.rglob("*.json") if json.loads(p.read_text())["status"] == "ok"]
    assert measured
    for result in measured:
        log = results / "tiny" / "logs" / "cells" / result.relative_to(cells).with_suffix(".log")
        keys = [
            json.loads(line.split(":::MLLOG ", 1)[1])["key"]
            for line in log.read_text().splitlines()
            if ":::MLLOG " in line
        ]
        assert keys[-3:] == ["init_start", "init_stop", "run_start"], log
