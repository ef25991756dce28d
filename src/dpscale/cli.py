"""``dpscale`` command line: the analysis steps the workflow runs, usable by hand too."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

CELL_COLUMNS = [
    "cell_id",
    "comm",
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
    "peak_tflop_s",
    "mfu",
    "host",
]


def aggregate(args: argparse.Namespace) -> None:
    from dpscale.analysis import tables as analysis

    results = analysis.load_results(args.results)
    cells = analysis.cells_table(results)
    windows = analysis.windows_table(results)
    fit_table = analysis.add_fit_mfu(analysis.fits_table(windows), cells)
    scaling = analysis.scaling_table(cells)
    break_even = analysis.break_even_table(fit_table, cells)
    repeatability = analysis.repeatability_table(cells)
    for frame, path in (
        (cells, args.cells),
        (windows, args.windows),
        (fit_table, args.fits),
        (scaling, args.scaling),
        (break_even, args.break_even),
        (repeatability, args.repeatability),
    ):
        _csv(frame, path)
    counts = cells["status"].value_counts().to_dict() if not cells.empty else {}
    excluded = int(fit_table["excluded_points"].fillna(0).sum())
    print(
        f"[dpscale] {len(cells)} cells {counts}; {int((fit_table['status'] == 'ok').sum())} "
        f"fits ({excluded} windows of contaminated cells left out)"
    )


def _csv(frame: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


def figures(args: argparse.Namespace) -> None:
    from dpscale.registry import STRATEGIES
    from dpscale.render import plots

    known = list(STRATEGIES)
    cells, fit_table = _plain(args.cells), _plain(args.fits)
    windows, scaling = _plain(args.windows), _plain(args.scaling)
    kinds = {
        "throughput": lambda p: plots.throughput_figure(cells, fit_table, p, known),
        "speedup": lambda p: plots.speedup_figure(scaling, p, known),
        "residuals": lambda p: plots.residuals_figure(windows, fit_table, p),
        "frameworks": lambda p: plots.framework_figure(cells, p, known),
    }
    for kind, draw in kinds.items():
        path = getattr(args, kind)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            draw(path)


def html_tables(args: argparse.Namespace) -> None:
    from dpscale.analysis import tables as analysis
    from dpscale.render.html import write_table_html

    cells = pd.read_csv(args.cells[0])
    write_table_html(
        cells.reindex(columns=["strategy", "model", *CELL_COLUMNS]),
        args.cells[1],
        "Every cell",
        "One row per cell, status included. img/s are global (all devices), "
        "mean of the timed windows with the half-width of its 95% confidence interval. "
        "quality: ok, noisy or contaminated, from the CPU other processes used while the "
        "cell measured (foreign_cpu_cores_mean, in cores); contaminated cells are left out "
        "of the fits.",
    )
    if args.systems:
        write_table_html(
            analysis.systems_table(cells),
            args.systems,
            "Systems",
            "What ran the cells: host, interpreter (built: the environment dpscale built from "
            "envs/; configured: the config's interpreters), the container the ranks ran in "
            "(image, and digest when the runtime reports one), framework versions.",
        )
    repeatability = pd.read_csv(args.repeatability[0])
    if repeatability.empty:  # the report says so instead of showing an empty table
        repeatability = pd.DataFrame(
            {"repeatability": ["not measured: every configuration ran once (measure.repeats)"]}
        )
    write_table_html(
        repeatability,
        args.repeatability[1],
        "Repeatability across repeats",
        "Configurations measured more than once (measure.repeats): the mean, sd and "
        "coefficient of variation (img_s_cv = sd / mean) of the repeats' mean img/s, and "
        "each repeat's quality verdict. Empty when every configuration ran once.",
    )
    write_table_html(
        pd.read_csv(args.fits[0]),
        args.fits[1],
        "Throughput-law fits",
        "T(b) = b/v0 + t_c fitted by least squares to every timed window of each group "
        "except those of contaminated cells (excluded_points counts them); v0 is "
        "per device (img/s), t_c the constant step time (s), b90 = 9 v0 t_c the per-device batch "
        "at which throughput reaches 90% of its ceiling N v0; _se are standard errors.",
    )
    write_table_html(
        pd.read_csv(args.break_even[0]),
        args.break_even[1],
        "Break-even global batch (strong scaling)",
        "From the fitted laws: the global batch B above which N devices finish a step sooner than "
        "one (B/v0_1 + t_1 > B/(N v0_N) + t_N), and the ring all-reduce bus bandwidth that would "
        "explain the extra constant time t_N - t_1 for fp32 gradients (2(N-1)/N S / beta).",
    )
    write_table_html(
        pd.read_csv(args.scaling[0]),
        args.scaling[1],
        "Weak-scaling speedup and efficiency",
        "Speedup = global img/s at N devices over the same strategy's 1-device img/s at the same "
        "per-device batch; efficiency = speedup / N; intervals by first-order error propagation.",
    )


def accuracy(args: argparse.Namespace) -> None:
    """Training cells -> tidy tables, accuracy and epoch-time figures, HTML tables."""
    from dpscale.analysis import accuracy as acc
    from dpscale.analysis import tables as analysis
    from dpscale.render import training_plots
    from dpscale.render.html import write_table_html

    results = acc.training_results(analysis.load_results(args.results))
    runs, epochs = acc.runs_table(results), acc.epochs_table(results)
    summary, deltas = acc.summary_table(runs), acc.delta_table(runs)
    tta = acc.time_to_accuracy_table(runs)
    for frame, path in (
        (runs, args.runs),
        (epochs, args.epochs),
        (summary, args.summary),
        (deltas, args.deltas),
        (tta, args.tta),
    ):
        _csv(frame, path)
    for path in (args.curves, args.epoch_time):
        path.parent.mkdir(parents=True, exist_ok=True)
    # the remedies' runs are in the tables and on their own page (dpscale remedies)
    training_plots.accuracy_curves(analysis.without_remedies(epochs), args.curves)
    training_plots.epoch_time_figure(analysis.without_remedies(runs), args.epoch_time)
    write_table_html(
        deltas,
        args.deltas_html,
        "Accuracy against the 1-device baseline",
        "Final and best validation accuracy minus the same strategy's 1-device run at the base "
        "batch (unscaled learning rate), mean over seeds, with Welch 95% intervals "
        "(empty with fewer than two seeds on either side). Final and best means over seeds "
        "with their sd are in accuracy.csv.",
    )
    write_table_html(
        tta,
        args.tta_html,
        "Time to accuracy",
        "Mean wall time (training plus validation, slowest rank) to the first epoch whose "
        "validation accuracy reaches the target, over the seeds that reached it; empty when "
        "not every seed did. Speedup is against the 1-device baseline.",
    )
    print(f"[dpscale] {len(runs)} training cells, {int((runs['status'] == 'ok').sum())} ok")


def _plain(path: str | Path) -> pd.DataFrame:
    """A table without the rows of cells with a communication remedy (those have their own
    table and page, ``dpscale remedies``): the analyses of layouts and networks read these."""
    from dpscale.analysis.tables import without_remedies

    return without_remedies(pd.read_csv(path))


def _read_optional(path: str | Path | None) -> pd.DataFrame:
    """A table the study may not have (training tables without mode train): empty if absent
    (or written without a single column)."""
    if not path or not Path(path).is_file():
        return pd.DataFrame()
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def findings(args: argparse.Namespace) -> None:
    """Tables -> findings.csv, its HTML page and the top findings (one per line)."""
    import json

    from dpscale.analysis import findings as fnd
    from dpscale.analysis import remedies
    from dpscale.analysis.answer import answer_paragraph
    from dpscale.analysis.cost import Prices, cost_table
    from dpscale.analysis.tables import without_remedies
    from dpscale.render import findings_page

    cells = _plain(args.cells)
    prices = Prices.from_config(json.loads(args.prices))
    costs = fnd.with_network(_read_optional(args.cost) if args.cost else cost_table(cells, prices))
    table = fnd.findings_table(
        cells,
        _plain(args.scaling),
        _plain(args.fits),
        _plain(args.break_even),
        without_remedies(_read_optional(args.accuracy_delta)),
        without_remedies(_read_optional(args.time_to_accuracy)),
        _read_optional(args.predictions),
        cells_dir=args.cells_dir,
        costs=costs,
        to_target=without_remedies(_read_optional(args.cost_to_target)),
    )
    if args.remedies:
        table = remedies.findings_columns(
            table, _read_optional(args.remedies), _read_optional(args.remedies_accuracy)
        )
    table.drop(columns=["contaminated"], errors="ignore").to_csv(args.findings, index=False)
    Path(args.html).write_text(findings_page.findings_html(table, args.title), encoding="utf-8")
    answer = answer_paragraph(table, costs, prices, fnd.quality_line(cells))
    remedy_lines = json.loads(Path(args.remedies_top).read_text()) if args.remedies_top else []
    top = [answer, *remedy_lines, *fnd.top_findings(table)]
    Path(args.top).write_text(json.dumps(top, indent=1) + "\n", encoding="utf-8")
    print(f"[dpscale] {len(table)} findings rows")


def add_findings_parser(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("findings", help="tables -> findings (the answer first)")
    for name in ("cells", "scaling", "fits", "break-even"):
        cmd.add_argument(f"--{name}", required=True, help=f"{name}.csv")
    cmd.add_argument("--accuracy-delta", help="accuracy_delta.csv (training studies)")
    cmd.add_argument("--time-to-accuracy", help="time_to_accuracy.csv (training studies)")
    cmd.add_argument("--predictions", help="predictions.csv (the communication model)")
    cmd.add_argument("--cells-dir", default="", help="the cells' results, for rerun commands")
    cmd.add_argument("--cost", help="cost.csv (start-up, node-hours and money per layout)")
    cmd.add_argument("--cost-to-target", help="cost_to_target.csv (training studies)")
    cmd.add_argument("--prices", default="null", help="the config's cost section (JSON)")
    cmd.add_argument("--remedies", help="remedies.csv (comm remedies beside none)")
    cmd.add_argument("--remedies-accuracy", help="remedies_accuracy.csv")
    cmd.add_argument("--remedies-top", help="remedies_top.json (the remedies in words)")
    cmd.add_argument("--findings", required=True, help="output: findings.csv")
    cmd.add_argument("--html", required=True, help="output: findings.html")
    cmd.add_argument("--top", required=True, help="output: top findings, a JSON list")
    cmd.add_argument("--title", default="Findings")
    cmd.set_defaults(func=findings)


def interactive_figures(args: argparse.Namespace) -> None:
    """Tables -> interactive (Vega-Lite) throughput and speedup pages, self-contained."""
    from dpscale.render import interactive

    cells, scaling = _plain(args.cells), _plain(args.scaling)
    chart = interactive.throughput_chart(cells, _plain(args.fits))
    interactive.save_inline(chart, Path(args.throughput))
    interactive.save_inline(interactive.speedup_chart(scaling), Path(args.speedup))


def mfu_figure(args: argparse.Namespace) -> None:
    from dpscale.render.mfu_plot import mfu_figure as draw

    draw(_plain(args.cells), Path(args.out))


def drift(args: argparse.Namespace) -> None:
    """cells.csv -> the drift probes' table and trace."""
    from dpscale.analysis.drift import drift_sentence, drift_table
    from dpscale.render.drift_plot import drift_figure

    table = drift_table(pd.read_csv(args.cells))
    table.to_csv(args.table, index=False)
    drift_figure(table, Path(args.figure))
    print(drift_sentence(table))


def startup(args: argparse.Namespace) -> None:
    """cells.csv -> start-up per layout (table and stacked bars)."""
    from dpscale.analysis.startup import startup_table
    from dpscale.render.startup_plot import startup_figure

    table = startup_table(_plain(args.cells))
    table.to_csv(args.table, index=False)
    startup_figure(table, Path(args.figure))
    print(f"[dpscale] start-up of {len(table)} layouts")


def remedies(args: argparse.Namespace) -> None:
    """scaling + cells + break-even (+ training runs) -> each remedy beside no remedy, its
    accuracy cost, the page and the findings in words."""
    import json

    from dpscale.analysis import remedies as rem
    from dpscale.render.findings_page import remedies_html

    table = rem.remedies_table(
        pd.read_csv(args.scaling),
        pd.read_csv(args.cells),
        pd.read_csv(args.break_even),
        _read_optional(args.collectives),
    )
    accuracy = rem.accuracy_table(_read_optional(args.runs))
    lines = rem.finding_lines(table, accuracy)
    _csv(table, args.table)
    _csv(accuracy, args.accuracy)
    Path(args.top).write_text(json.dumps(lines, indent=1) + "\n", encoding="utf-8")
    Path(args.html).write_text(remedies_html(table, accuracy, lines, args.title), encoding="utf-8")
    print(f"[dpscale] {len(table)} remedy points, {len(accuracy)} with training runs")


def cost(args: argparse.Namespace) -> None:
    """cells.csv (and training runs) + the config's prices -> cost tables and page."""
    import json

    from dpscale.analysis import cost as costs
    from dpscale.analysis.tables import without_remedies
    from dpscale.render.findings_page import cost_html

    prices = costs.Prices.from_config(json.loads(args.prices))
    table = costs.cost_table(_plain(args.cells), prices)
    table.to_csv(args.table, index=False)
    runs = without_remedies(_read_optional(args.runs))
    to_target = costs.cost_to_target(runs, prices, args.accelerator)
    to_target.to_csv(args.to_target, index=False)
    page = cost_html(table, prices, args.title, to_target)
    Path(args.html).write_text(page, encoding="utf-8")
    print(f"[dpscale] cost of {len(table)} layouts and batches")


def add_cost_parsers(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("startup", help="cells.csv -> start-up per layout")
    cmd.add_argument("--cells", required=True)
    cmd.add_argument("--table", required=True, help="output: startup.csv")
    cmd.add_argument("--figure", required=True, help="output: stacked bars (PNG)")
    cmd.set_defaults(func=startup)
    cmd = commands.add_parser("cost", help="cells.csv + prices -> cost per layout")
    cmd.add_argument("--cells", required=True)
    cmd.add_argument("--runs", help="training_runs.csv (training studies)")
    cmd.add_argument("--prices", default="null", help="the config's cost section (JSON)")
    cmd.add_argument("--accelerator", default="cpu", help="the study's accelerator kind")
    cmd.add_argument("--table", required=True, help="output: cost.csv")
    cmd.add_argument("--to-target", required=True, help="output: cost_to_target.csv")
    cmd.add_argument("--html", required=True, help="output: cost page")
    cmd.add_argument("--title", default="Cost")
    cmd.set_defaults(func=cost)


def add_remedies_parser(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("remedies", help="tables -> each comm remedy beside none")
    for name in ("scaling", "cells", "break-even"):
        cmd.add_argument(f"--{name}", required=True, help=f"{name}.csv")
    cmd.add_argument("--runs", help="training_runs.csv (training studies)")
    cmd.add_argument("--collectives", help="collectives.csv (the remedies' own all-reduce)")
    for name in ("table", "accuracy", "top", "html"):
        cmd.add_argument(f"--{name}", type=Path, required=True, help=f"output: {name}")
    cmd.add_argument("--title", default="Remedies")
    cmd.set_defaults(func=remedies)


def add_figure_parsers(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("interactive-figures", help="tables -> interactive HTML figures")
    for name in ("cells", "fits", "scaling"):
        cmd.add_argument(f"--{name}", required=True, help=f"{name}.csv")
    cmd.add_argument("--throughput", required=True, help="output: throughput HTML")
    cmd.add_argument("--speedup", required=True, help="output: speedup HTML")
    cmd.set_defaults(func=interactive_figures)
    mfu = commands.add_parser("mfu-figure", help="cells.csv -> MFU figure (PNG)")
    mfu.add_argument("--cells", required=True)
    mfu.add_argument("--out", required=True, help="output PNG")
    mfu.set_defaults(func=mfu_figure)
    trace = commands.add_parser("drift", help="cells.csv -> drift probes' table and trace")
    trace.add_argument("--cells", required=True)
    trace.add_argument("--table", required=True, help="output: drift.csv")
    trace.add_argument("--figure", required=True, help="output: drift trace (PNG)")
    trace.set_defaults(func=drift)


def posts(args: argparse.Namespace) -> None:
    """The study's reference section (the post's numbers) beside this run's tables."""
    import json

    from dpscale.analysis import posts as pst
    from dpscale.analysis.tables import without_remedies
    from dpscale.render.html import write_table_html

    reference = json.loads(args.reference)
    tables = {}
    for item in args.table:
        name, _, path = item.partition("=")
        table = _read_optional(path)
        tables[name] = table if name.startswith("remedies") else without_remedies(table)
    table = pst.post_vs_run(reference, tables)
    table.to_csv(args.csv, index=False)
    write_table_html(
        pst.display_table(table), Path(args.html), args.title, pst.page_note(reference)
    )
    print(f"[dpscale] {len(table)} post-vs-run rows")


def add_posts_parser(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("posts", help="the source post's numbers beside this run's")
    cmd.add_argument("--reference", required=True, help="the study's reference section, JSON")
    cmd.add_argument(
        "--table", action="append", default=[], help="NAME=PATH of a table (cells, fits, ...)"
    )
    cmd.add_argument("--csv", required=True, help="output: post_vs_run.csv")
    cmd.add_argument("--html", required=True, help="output: post_vs_run.html")
    cmd.add_argument("--title", default="The post vs this run")
    cmd.set_defaults(func=posts)


def collectives(args: argparse.Namespace) -> None:
    """Collectives cells -> per-size table, alpha-beta fits, bus-bandwidth figure, HTML."""
    from dpscale.analysis import collectives as tables
    from dpscale.analysis import tables as analysis
    from dpscale.registry import STRATEGIES
    from dpscale.render import plots
    from dpscale.render.html import write_table_html

    sizes = tables.collectives_table(analysis.load_results(args.results))
    comm_fits = tables.comm_fits_table(sizes)
    _csv(sizes, args.table)
    _csv(comm_fits, args.fits)
    args.figure.parent.mkdir(parents=True, exist_ok=True)
    # the frameworks' own all-reduce; the remedies' rows are in the tables (comm column)
    plain_sizes, plain_fits = analysis.without_remedies(sizes), analysis.without_remedies(comm_fits)
    plots.collectives_figure(plain_sizes, plain_fits, args.figure, list(STRATEGIES))
    shown = (
        comm_fits
        if not comm_fits.empty
        else pd.DataFrame(
            {"alpha-beta fits": ["no collective cells in this study (mode collectives)"]}
        )
    )
    write_table_html(
        shown,
        args.fits_html,
        "All-reduce latency and bandwidth (ring model)",
        "t(S) = 2(N-1) alpha + 2(N-1)/N S/beta fitted per strategy, network and layout to "
        "the median per-call all-reduce time of every message size (relative errors, "
        "alpha and beta >= 0); _lo/_hi: 95% intervals (beta's is the inverse of 1/beta's; "
        "inf: not bounded above by the data); r2 on log times.",
    )
    print(f"[dpscale] {len(sizes)} message sizes; {int((comm_fits['status'] == 'ok').sum())} fits")


def add_collectives_parser(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("collectives", help="collectives cells -> tables, fits, figure")
    cmd.add_argument("--table", type=Path, required=True, help="output: collectives.csv")
    cmd.add_argument("--fits", type=Path, required=True, help="output: comm_fits.csv")
    cmd.add_argument("--fits-html", type=Path, required=True, help="output: comm_fits.html")
    cmd.add_argument("--figure", type=Path, required=True, help="output: bus bandwidth (PNG)")
    cmd.add_argument("results", nargs="*", help="cell result JSON files (others are ignored)")
    cmd.set_defaults(func=collectives)


def comm_model(args: argparse.Namespace) -> None:
    """windows + cells (+ comm_fits) -> the communication model's parameters, held-out
    validation, predictions, their HTML pages and figures."""
    import json

    from dpscale.analysis import commmodel
    from dpscale.analysis.commmodel import remedies
    from dpscale.analysis.tables import without_remedies
    from dpscale.render import commmodel_plots
    from dpscale.render.html import write_table_html

    study = json.loads(args.study_config)
    all_windows, all_cells = _read_optional(args.windows), _read_optional(args.cells)
    windows, cells = without_remedies(all_windows), without_remedies(all_cells)
    params = {}
    if "trainable_params" in cells:
        params = cells.groupby("model")["trainable_params"].first().to_dict()
    comm_fits = without_remedies(_read_optional(args.comm_fits)) if args.comm_fits else None
    groups, parameters, validation, summary = commmodel.analyse(
        windows, params, study["networks"], comm_fits
    )
    table = commmodel.predictions(
        groups, study["predict"], study["devices_per_node"], study["batch_sizes"]
    )
    fitted, remedy_table, remedy_validation = remedies.fit_remedies(
        groups, all_windows, all_cells, params
    )
    remedy_table_ = remedies.remedy_predictions(
        fitted, study["predict"], study["devices_per_node"], study["batch_sizes"]
    )
    for frame, path in (
        (parameters, args.parameters),
        (validation, args.validation),
        (summary, args.summary),
        (table, args.predictions),
        (remedy_table, args.remedies),
        (remedy_validation, args.remedy_validation),
        (remedy_table_, args.remedy_predictions),
    ):
        _csv(frame, path)
    remedy_lines = remedies.remedy_lines(remedy_table_, remedy_table)
    write_table_html(
        remedy_table if not remedy_table.empty else pd.DataFrame({"remedies": ["no remedy cells"]}),
        args.remedies_html,
        "Communication model: remedies",
        " ".join(remedy_lines) + " Rows: per remedy, the fitted encode time per step, the "
        "recorded wire ratio, and the held-out median error (each cell held out; the remedy "
        "left out: predicted from its bytes alone). Predictions: remedy_predictions.csv.",
    )
    lines = commmodel.summary_lines(groups, summary) + remedy_lines
    Path(args.top).write_text(json.dumps(lines, indent=1) + "\n", encoding="utf-8")
    for path in (args.validation_figure, args.throughput_figure):
        path.parent.mkdir(parents=True, exist_ok=True)
    commmodel_plots.validation_figure(validation, args.validation_figure)
    commmodel_plots.throughput_figure(windows, groups, args.throughput_figure)
    chosen = validation[validation["chosen"].astype(bool)] if not validation.empty else validation

    def shown(frame: pd.DataFrame) -> pd.DataFrame:  # the report says why, not "No rows"
        return frame if not frame.empty else pd.DataFrame({"communication model": lines})

    write_table_html(
        shown(chosen),
        args.validation_html,
        "Communication model: held-out prediction errors",
        " ".join(lines) + " Rows: every held-out configuration, chosen overlap form (step "
        "time in s, measured vs predicted with its 95% prediction interval; relative_error = "
        "predicted / measured - 1). Every form: model_validation.csv and "
        "model_validation_summary.csv.",
    )
    write_table_html(
        shown(parameters),
        args.parameters_html,
        "Communication model: fitted parameters",
        "Per strategy and model and overlap form: the parameters with 95% intervals (fitted: "
        "false means held fixed, no measurement informs it), the held-out median error that "
        "chose the form (chosen), and the fit's rms error of log step time.",
    )
    write_table_html(
        shown(table),
        args.predictions_html,
        "Communication model: predictions",
        "Step time, img/s and weak-scaling speedup over one rank at the same per-device batch "
        "(95% prediction intervals) for configurations of real clusters (c = devices per node "
        "ranks share a machine), and the global batch from which the configuration beats one "
        "rank (strong scaling; 0: always, inf: never).",
    )
    print(f"[dpscale] comm model: {' '.join(lines)}")


def add_comm_model_parser(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("comm-model", help="fit, validate and use the communication model")
    cmd.add_argument("--windows", required=True, help="windows.csv")
    cmd.add_argument("--cells", required=True, help="cells.csv (trainable parameters)")
    cmd.add_argument("--comm-fits", help="comm_fits.csv of the collective benchmark, if any")
    cmd.add_argument(
        "--study-config",
        required=True,
        help="JSON: networks, predict, devices_per_node, batch_sizes",
    )
    for name in ("parameters", "validation", "summary", "predictions", "top"):
        cmd.add_argument(f"--{name}", type=Path, required=True, help=f"output: {name}")
    for name in ("remedies", "remedy-validation", "remedy-predictions", "remedies-html"):
        cmd.add_argument(f"--{name}", type=Path, required=True, help=f"output: {name}")
    for name in ("validation-html", "parameters-html", "predictions-html"):
        cmd.add_argument(f"--{name}", type=Path, required=True, help=f"output: {name}")
    for name in ("validation-figure", "throughput-figure"):
        cmd.add_argument(f"--{name}", type=Path, required=True, help=f"output PNG: {name}")
    cmd.set_defaults(func=comm_model)


def check_config_files(args: argparse.Namespace) -> None:
    """config.yaml, then each study file over it, as the workflow merges them."""
    from dpscale.plan.config import ConfigError, check_config, load_yaml, merged
    from dpscale.plan.paths import REPO_ROOT
    from dpscale.registry import STRATEGIES

    config: dict = {}
    try:
        for path in [REPO_ROOT / "config.yaml", *args.files]:
            config = merged(config, load_yaml(path))
        check_config(config, STRATEGIES)
    except ConfigError as error:
        raise SystemExit(f"dpscale: config error: {error}") from None
    print(f"dpscale: config ok: {', '.join(map(str, args.files)) or 'config.yaml'}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="dpscale")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser(
        "check-config", help="check study files as the workflow merges them over config.yaml"
    )
    check.add_argument("files", nargs="*", type=Path, help="study files (YAML)")
    check.set_defaults(func=check_config_files)
    agg = commands.add_parser("aggregate", help="cell results -> tidy tables and fits")
    for name in ("cells", "windows", "fits", "scaling", "break-even", "repeatability"):
        agg.add_argument(f"--{name}", type=Path, required=True, help=f"{name} table (CSV)")
    agg.add_argument("results", nargs="+", help="cell result JSON files")
    agg.set_defaults(func=aggregate)
    fig = commands.add_parser("figures", help="tables -> report figures (those given)")
    for name in ("cells", "windows", "fits", "scaling"):
        fig.add_argument(f"--{name}", type=Path, required=True, help=f"{name} table (CSV)")
    for name in ("throughput", "speedup", "residuals", "frameworks"):
        fig.add_argument(f"--{name}", type=Path, dest=name, help=f"{name} figure (PNG)")
    fig.set_defaults(func=figures)
    tab = commands.add_parser("html-tables", help="tables -> HTML tables for the report")
    for name in ("cells", "fits", "scaling", "break-even", "repeatability"):
        tab.add_argument(f"--{name}", type=Path, nargs=2, required=True, metavar=("CSV", "HTML"))
    tab.add_argument("--systems", type=Path, help="systems table (HTML), from the cells table")
    tab.set_defaults(func=html_tables)
    acc = commands.add_parser("accuracy", help="training cells -> accuracy tables and figures")
    for name in ("runs", "epochs", "summary", "deltas", "tta"):
        acc.add_argument(f"--{name}", type=Path, required=True, help=f"{name} table (CSV)")
    for name in ("deltas-html", "tta-html", "curves", "epoch-time"):
        acc.add_argument(f"--{name}", type=Path, required=True)
    acc.add_argument("results", nargs="*", help="cell result JSON files (others are ignored)")
    acc.set_defaults(func=accuracy)
    add_findings_parser(commands)
    add_figure_parsers(commands)
    add_cost_parsers(commands)
    add_remedies_parser(commands)
    add_posts_parser(commands)
    add_collectives_parser(commands)

    add_comm_model_parser(commands)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
