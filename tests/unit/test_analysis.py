"""Tables and figures from synthetic cell results with a known throughput law."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import aggregate, make_cell
from dpscale.analysis.laws import fits, scaling
from dpscale.analysis.results import tables as analysis
from dpscale.plan.result import make_result, now_iso, write_result
from dpscale.runner.timing import throughput_measurement
from dpscale.steps import tables as steps

SYSTEM = {"host": "h", "cpu_model": "c", "python": "3.11"}
LAW = {1: (100.0, 0.02), 2: (100.0, 0.05)}  # world size -> (v0, t_c)


def measured(cell, rng):
    v0, t_c = LAW[cell.world_size]
    steps = 2
    seconds = [
        steps * fits.step_time(cell.batch_per_device, v0, t_c) * (1 + rng.normal(0, 0.01))
        for _ in range(4)
    ]
    return throughput_measurement(seconds, steps, cell.batch_per_device, cell.world_size)


def figures(tables: Path, out: Path, kinds) -> None:
    inputs = {n: tables / f"{n}.csv" for n in ("cells", "windows", "fits", "scaling")}
    steps.figures(inputs, {k: out / f"{k}.png" for k in kinds}, {})


def html_tables(tables: Path) -> None:
    names = ("cells", "fits", "scaling", "break_even", "repeatability")
    outputs = {f"{name}_html": tables / f"{name}.html" for name in (*names, "systems")}
    steps.html_tables({name: tables / f"{name}.csv" for name in names}, outputs, {})


@pytest.fixture
def results_dir(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for devices in (1, 2):
        for batch in (4, 8, 16, 32):
            cell = make_cell(devices=devices, batch=batch)
            result = make_result(
                cell, "ok", started_at=now_iso(), system=SYSTEM, measurement=measured(cell, rng)
            )
            paths.append(write_result(cell.result_path(tmp_path), result))
    skipped = make_cell(strategy="torch-dp", devices=2)
    paths.append(
        write_result(
            skipped.result_path(tmp_path),
            make_result(
                skipped, "skipped", started_at=now_iso(), system=SYSTEM, reason="one process"
            ),
        )
    )
    return tmp_path, paths


def test_tables_recover_the_law_and_keep_every_cell(results_dir):
    root, paths = results_dir
    aggregate(root / "tables", paths)
    cells = pd.read_csv(root / "tables" / "cells.csv")
    assert len(cells) == 9
    assert cells.set_index("strategy").loc["torch-dp", "reason"] == "one process"
    fit_table = pd.read_csv(root / "tables" / "fits.csv").set_index("world_size")
    for world, (v0, t_c) in LAW.items():
        assert fit_table.loc[world, "v0"] == pytest.approx(v0, rel=0.05)
        assert fit_table.loc[world, "t_c"] == pytest.approx(t_c, rel=0.2)
    windows = pd.read_csv(root / "tables" / "windows.csv")
    assert len(windows) == 8 * 4
    scaling = pd.read_csv(root / "tables" / "scaling.csv")
    two = scaling[scaling["world_size"] == 2].set_index("batch_per_device")
    expected = fits.throughput(32, *LAW[2], 2) / fits.throughput(32, *LAW[1], 1)
    assert two.loc[32, "speedup"] == pytest.approx(expected, rel=0.05)
    assert two.loc[32, "efficiency"] == pytest.approx(expected / 2, rel=0.05)
    break_even = pd.read_csv(root / "tables" / "break_even.csv")
    assert break_even.loc[0, "break_even_global_batch"] == pytest.approx(100 * 0.03 * 2, rel=0.3)


def test_figures_and_html_are_written(results_dir):
    root, paths = results_dir
    tables = root / "tables"
    aggregate(tables, paths)
    figures(tables, root / "figures", ["throughput", "speedup", "residuals"])
    html_tables(tables)
    for name in ("throughput", "speedup", "residuals"):
        assert (root / "figures" / f"{name}.png").stat().st_size > 10_000
    html = (tables / "cells.html").read_text()
    assert "status-skipped" in html and "one process" in html
    assert "<table>" in (tables / "fits.html").read_text()


def test_only_failed_cells_still_give_tables_and_figures(tmp_path):
    cell = make_cell()
    path = write_result(
        cell.result_path(tmp_path),
        make_result(cell, "failed", started_at=now_iso(), system=SYSTEM, reason="boom"),
    )
    tables = tmp_path / "tables"
    aggregate(tables, [path])
    figures(tables, tmp_path / "figures", ["throughput", "speedup", "residuals"])
    html_tables(tables)
    assert (tmp_path / "figures" / "speedup.png").is_file()
    assert analysis.cells_table(analysis.load_results([path])).loc[0, "status"] == "failed"


def test_a_truncated_result_is_left_out_with_one_line_and_the_rest_aggregated(tmp_path, capsys):
    good = make_cell()
    path = write_result(
        good.result_path(tmp_path),
        make_result(good, "failed", started_at=now_iso(), system=SYSTEM, reason="boom"),
    )
    truncated = make_cell(batch=16).result_path(tmp_path)
    truncated.write_text(path.read_text()[:150])  # what a crash mid-write by an old run left
    aggregate(tmp_path / "tables", [path, truncated])
    errors = [line for line in capsys.readouterr().err.splitlines() if "left out" in line]
    assert len(errors) == 1 and str(truncated) in errors[0]
    assert f"--forcerun {truncated}" in errors[0]
    assert len(pd.read_csv(tmp_path / "tables" / "cells.csv")) == 1


def _result(cell, measurement, quality=None):
    result = make_result(cell, "ok", started_at=now_iso(), system=SYSTEM, measurement=measurement)
    if quality is not None:
        result["quality"], result["quality_reason"] = quality, "test"
        result["system"]["contention"] = {
            "interval_s": 0.5,
            "samples": 10,
            "cpus": 2,
            "cpus_used_by_cell": 2,
            "foreign_cpu_cores_mean": 1.0 if quality == "contaminated" else 0.0,
        }
    return result


def test_contaminated_cells_are_left_out_of_the_fits_and_counted():
    rng = np.random.default_rng(0)
    results = [
        _result(cell, measured(cell, rng), "ok")
        for cell in (make_cell(batch=b) for b in (4, 8, 16, 32))
    ]
    slow = make_cell(batch=64, repeat=0)
    halved = throughput_measurement([2.0] * 4, 2, 64, 1)  # far off the law
    clean = scaling.fits_table(analysis.windows_table(results))
    dirty = scaling.fits_table(analysis.windows_table([*results, _result(slow, halved, "ok")]))
    flagged = [*results, _result(slow, halved, "contaminated")]
    cells = analysis.cells_table(flagged)
    assert cells.set_index("batch_per_device").loc[64, "quality"] == "contaminated"
    assert cells.set_index("batch_per_device").loc[64, "foreign_cpu_cores_mean"] == 1.0
    excluded = scaling.fits_table(analysis.windows_table(flagged))
    assert excluded.loc[0, "excluded_points"] == 4
    assert excluded.loc[0, "points"] == clean.loc[0, "points"]
    assert excluded.loc[0, "v0"] == pytest.approx(clean.loc[0, "v0"])
    assert dirty.loc[0, "v0"] != pytest.approx(clean.loc[0, "v0"], rel=0.05)


def test_repeatability_is_the_cv_of_the_repeats_means():
    results = []
    for repeat, seconds in enumerate((1.0, 1.1, 0.9)):
        cell = make_cell(batch=8, repeat=repeat)
        results.append(_result(cell, throughput_measurement([seconds] * 3, 2, 8, 1), "ok"))
    single = make_cell(batch=16)
    results.append(_result(single, throughput_measurement([1.0] * 3, 2, 16, 1)))
    table = scaling.repeatability_table(analysis.cells_table(results))
    assert list(table["batch_per_device"]) == [8]  # one repeat is no repeatability
    rates = np.array([16 / s for s in (1.0, 1.1, 0.9)])
    assert table.loc[0, "repeats"] == 3
    assert table.loc[0, "img_s_cv"] == pytest.approx(rates.std(ddof=1) / rates.mean())
    assert table.loc[0, "qualities"] == "ok;ok;ok"


def test_the_systems_table_has_a_row_per_interpreter_and_container_with_its_cells():
    import pandas as pd

    from dpscale.analysis.results.tables import systems_table

    site = {"interpreter": "apptainer exec /i.sif python3", "container_image": "/i.sif"}
    built = {"interpreter": ".envs/torch-f1969e946bca/bin/python", "container_image": None}
    rows = [
        {"strategy": "torch-ddp", "status": "ok", "env_file_sha256": "f1969e946bca6c5e", **built},
        {"strategy": "torch-ddp", "status": "ok", "env_file_sha256": "configured", **site},
        {"strategy": "torch-ddp", "status": "failed", "env_file_sha256": "configured", **site},
        {"strategy": "torch-dp", "status": "skipped", "env_file_sha256": None, **built},
    ]
    table = systems_table(pd.DataFrame(rows)).set_index("interpreter")
    assert table["cells"].to_dict() == {site["interpreter"]: 2, built["interpreter"]: 1}
    assert table.loc[site["interpreter"], "container_image"] == "/i.sif"
    assert table.loc[built["interpreter"], "env_file_sha256"] == "f1969e946bca"
