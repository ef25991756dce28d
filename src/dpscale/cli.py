"""``dpscale`` command line: the analysis steps the workflow runs, usable by hand too."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

CELL_COLUMNS = [
    "cell_id",
    "status",
    "reason",
    "quality",
    "foreign_cpu_cores_mean",
    "world_size",
    "batch_per_device",
    "global_batch",
    "img_s_mean",
    "img_s_ci95",
    "img_s_median",
    "img_s_p10",
    "img_s_p90",
    "img_s_cv",
    "img_s_per_device_mean",
    "step_time_s_mean",
    "achieved_tflop_s",
    "host",
]


def aggregate(args: argparse.Namespace) -> None:
    from dpscale.core import analysis

    results = analysis.load_results(args.results)
    cells = analysis.cells_table(results)
    windows = analysis.windows_table(results)
    fit_table = analysis.fits_table(windows)
    scaling = analysis.scaling_table(cells)
    repeatability = analysis.repeatability_table(cells)
    out = Path(args.tables)
    out.mkdir(parents=True, exist_ok=True)
    cells.to_csv(out / "cells.csv", index=False)
    windows.to_csv(out / "windows.csv", index=False)
    fit_table.to_csv(out / "fits.csv", index=False)
    scaling.to_csv(out / "scaling.csv", index=False)
    repeatability.to_csv(out / "repeatability.csv", index=False)
    analysis.break_even_table(fit_table, cells).to_csv(out / "break_even.csv", index=False)
    counts = cells["status"].value_counts().to_dict() if not cells.empty else {}
    excluded = int(fit_table["excluded_points"].fillna(0).sum())
    print(
        f"[dpscale] {len(cells)} cells {counts}; {int((fit_table['status'] == 'ok').sum())} "
        f"fits ({excluded} windows of contaminated cells left out)"
    )


def figures(args: argparse.Namespace) -> None:
    from dpscale.core import plots

    tables, out = Path(args.tables), Path(args.figures)
    out.mkdir(parents=True, exist_ok=True)
    cells = pd.read_csv(tables / "cells.csv")
    fit_table = pd.read_csv(tables / "fits.csv")
    windows = pd.read_csv(tables / "windows.csv")
    scaling = pd.read_csv(tables / "scaling.csv")
    kinds = {
        "throughput": lambda p: plots.throughput_figure(cells, fit_table, p),
        "speedup": lambda p: plots.speedup_figure(scaling, p),
        "residuals": lambda p: plots.residuals_figure(windows, fit_table, p),
        "frameworks": lambda p: plots.framework_figure(cells, p),
    }
    for kind in args.kinds:
        kinds[kind](out / f"{kind}.png")


def html_tables(args: argparse.Namespace) -> None:
    from dpscale.core.html import write_table_html

    tables = Path(args.tables)
    cells = pd.read_csv(tables / "cells.csv")
    write_table_html(
        cells.reindex(columns=["strategy", "model", *CELL_COLUMNS]),
        tables / "cells.html",
        "Every cell",
        "One row per cell, status included. img/s are global (all devices), "
        "mean of the timed windows with the half-width of its 95% confidence interval. "
        "quality: ok, noisy or contaminated, from the CPU other processes used while the "
        "cell measured (foreign_cpu_cores_mean, in cores); contaminated cells are left out "
        "of the fits.",
    )
    write_table_html(
        pd.read_csv(tables / "repeatability.csv"),
        tables / "repeatability.html",
        "Repeatability across repeats",
        "Configurations measured more than once (measure.repeats): the mean, sd and "
        "coefficient of variation (img_s_cv = sd / mean) of the repeats' mean img/s, and "
        "each repeat's quality verdict. Empty when every configuration ran once.",
    )
    write_table_html(
        pd.read_csv(tables / "fits.csv"),
        tables / "fits.html",
        "Throughput-law fits",
        "T(b) = b/v0 + t_c fitted by least squares to every timed window of each group "
        "except those of contaminated cells (excluded_points counts them); v0 is "
        "per device (img/s), t_c the constant step time (s), b90 = 9 v0 t_c the per-device batch "
        "at which throughput reaches 90% of its ceiling N v0; _se are standard errors.",
    )
    write_table_html(
        pd.read_csv(tables / "break_even.csv"),
        tables / "break_even.html",
        "Break-even global batch (strong scaling)",
        "From the fitted laws: the global batch B above which N devices finish a step sooner than "
        "one (B/v0_1 + t_1 > B/(N v0_N) + t_N), and the ring all-reduce bus bandwidth that would "
        "explain the extra constant time t_N - t_1 for fp32 gradients (2(N-1)/N S / beta).",
    )
    scaling = pd.read_csv(tables / "scaling.csv")
    write_table_html(
        scaling,
        tables / "scaling.html",
        "Weak-scaling speedup and efficiency",
        "Speedup = global img/s at N devices over the same strategy's 1-device img/s at the same "
        "per-device batch; efficiency = speedup / N; intervals by first-order error propagation.",
    )


def accuracy(args: argparse.Namespace) -> None:
    """Training cells -> tidy tables, accuracy and epoch-time figures, HTML tables."""
    from dpscale.core import accuracy as acc
    from dpscale.core import analysis, training_plots
    from dpscale.core.html import write_table_html

    results = acc.training_results(analysis.load_results(args.results))
    tables, figures = Path(args.tables), Path(args.figures)
    tables.mkdir(parents=True, exist_ok=True)
    figures.mkdir(parents=True, exist_ok=True)
    runs, epochs = acc.runs_table(results), acc.epochs_table(results)
    summary, deltas = acc.summary_table(runs), acc.delta_table(runs)
    tta = acc.time_to_accuracy_table(runs)
    for name, frame in (
        ("training_runs", runs),
        ("training_epochs", epochs),
        ("accuracy", summary),
        ("accuracy_delta", deltas),
        ("time_to_accuracy", tta),
    ):
        frame.to_csv(tables / f"{name}.csv", index=False)
    training_plots.accuracy_curves(epochs, figures / "accuracy.png")
    training_plots.epoch_time_figure(runs, figures / "epoch_time.png")
    write_table_html(
        deltas,
        tables / "accuracy_delta.html",
        "Accuracy against the 1-device baseline",
        "Final and best validation accuracy minus the same strategy's 1-device run at the base "
        "batch (unscaled learning rate), mean over seeds, with Welch 95% intervals "
        "(empty with fewer than two seeds on either side). Final and best means over seeds "
        "with their sd are in accuracy.csv.",
    )
    write_table_html(
        tta,
        tables / "time_to_accuracy.html",
        "Time to accuracy",
        "Mean wall time (training plus validation, slowest rank) to the first epoch whose "
        "validation accuracy reaches the target, over the seeds that reached it; empty when "
        "not every seed did. Speedup is against the 1-device baseline.",
    )
    print(f"[dpscale] {len(runs)} training cells, {int((runs['status'] == 'ok').sum())} ok")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="dpscale")
    commands = parser.add_subparsers(dest="command", required=True)
    agg = commands.add_parser("aggregate", help="cell results -> tidy tables and fits")
    agg.add_argument("--tables", required=True, help="output folder for the CSV tables")
    agg.add_argument("results", nargs="+", help="cell result JSON files")
    agg.set_defaults(func=aggregate)
    fig = commands.add_parser("figures", help="tables -> report figures")
    fig.add_argument("--tables", required=True)
    fig.add_argument("--figures", required=True)
    fig.add_argument(
        "kinds", nargs="+", choices=["throughput", "speedup", "residuals", "frameworks"]
    )
    fig.set_defaults(func=figures)
    tab = commands.add_parser("html-tables", help="tables -> HTML tables for the report")
    tab.add_argument("--tables", required=True)
    tab.set_defaults(func=html_tables)
    acc = commands.add_parser("accuracy", help="training cells -> accuracy tables and figures")
    acc.add_argument("--tables", required=True)
    acc.add_argument("--figures", required=True)
    acc.add_argument("results", nargs="*", help="cell result JSON files (others are ignored)")
    acc.set_defaults(func=accuracy)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
