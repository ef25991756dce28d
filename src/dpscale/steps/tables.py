"""Steps from the tidy tables (and the collectives' and training cells' results) to tables,
HTML pages and figures (rules in workflow/rules/analysis.smk, report.smk, collectives.smk)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from dpscale.analysis.answers import input_pipeline
from dpscale.analysis.answers.startup import startup_table
from dpscale.analysis.laws import accuracy as acc
from dpscale.analysis.laws import comm_fits as cfit
from dpscale.analysis.laws.drift import (
    drift_sentence,
    drift_table,
    repeatability_sentence,
    repeatability_with_drift,
)
from dpscale.analysis.results import bucket_tables as buckets
from dpscale.analysis.results import collectives as coll
from dpscale.analysis.results import horovod_timeline as hvd_timeline
from dpscale.analysis.results import loss_breakdown as loss
from dpscale.analysis.results import tables as tbl
from dpscale.plan.layout import plural
from dpscale.registry import STRATEGIES
from dpscale.render import plots, training_plots
from dpscale.render.bounds import KEYS
from dpscale.render.drift_plot import drift_figure
from dpscale.render.html import table_with_lines, write_table_html
from dpscale.render.loss_plot import loss_figure
from dpscale.render.pipeline_plot import pipeline_figure
from dpscale.render.startup_plot import startup_figure
from dpscale.steps.io import figure_path, or_message, read, read_optional, write

Files = Mapping[str, Any]


def html_tables(inputs: Files, outputs: Files, params: Files) -> str:
    """The tidy tables as the report's HTML pages (captions: report/*.rst)."""
    cells = read(inputs["cells"])
    shown = tbl.cell_columns(cells)
    # a summary (above ROW_LIMIT cells) groups by what ran and where: columns the page has not
    keys = [key for key in KEYS if key in cells.columns and key not in shown.columns]
    raw = pd.concat([cells[keys], shown], axis=1)
    write_table_html(shown, outputs["cells_html"], "Every cell", raw=raw)
    write_table_html(tbl.systems_table(cells), outputs["systems_html"], "Systems")
    repeats = read(inputs["repeatability"])
    repeatability = or_message(
        repeats, "repeatability", "not measured: every configuration ran once (measure.repeats)"
    )
    write_table_html(
        repeatability,
        outputs["repeatability_html"],
        "Repeatability across repeats",
        note=repeatability_sentence(repeats) if not repeats.empty else "",
    )
    write_table_html(read(inputs["fits"]), outputs["fits_html"], "Throughput-law fits")
    write_table_html(
        read(inputs["break_even"]),
        outputs["break_even_html"],
        "Break-even global batch (strong scaling)",
    )
    write_table_html(
        read(inputs["scaling"]), outputs["scaling_html"], "Weak-scaling speedup and efficiency"
    )
    if "timeline_html" in outputs:
        timelines = buckets.timeline_summary(
            read_optional(inputs["timeline"]), read_optional(inputs["replay"])
        )
        shown = or_message(
            timelines,
            "bucket timelines",
            "no cell recorded one (strategies with gradient buckets do)",
        )
        write_table_html(shown, outputs["timeline_html"], "Gradient bucket timelines")
    if "input_pipeline_html" in outputs:
        write_table_html(
            read_optional(inputs["input_pipeline"]),
            outputs["input_pipeline_html"],
            "Your image folder: its pipeline against synthetic data",
        )
    if "horovod_timeline_html" in outputs:
        overlap = or_message(
            hvd_timeline.shown(read_optional(inputs["horovod_timeline"])),
            "Horovod timelines",
            "no cell of this study kept Horovod's timeline (config horovod_timeline: true)",
        )
        write_table_html(
            overlap, outputs["horovod_timeline_html"], "All-reduce hidden behind backward (Horovod)"
        )
    return f"[dpscale] {plural(len(cells), 'cell')} as HTML"


def figures(inputs: Files, outputs: Files, params: Files) -> str:
    """Throughput, speedup, residuals, frameworks and input pipeline figures (those in
    ``outputs``)."""
    known = list(STRATEGIES)
    cells, fits = read(inputs["cells"]), read(inputs["fits"])
    kinds = {
        "throughput": lambda path: plots.throughput_figure(cells, fits, path, known),
        "speedup": lambda path: plots.speedup_figure(read(inputs["scaling"]), path, known),
        "residuals": lambda path: plots.residuals_figure(
            read(inputs["windows"]), fits, path, known
        ),
        "frameworks": lambda path: plots.framework_figure(cells, path, known),
        "input_pipeline_figure": lambda path: pipeline_figure(
            input_pipeline.pipeline_points(cells), path
        ),
    }
    drawn = [kind for kind in kinds if kind in outputs]
    for kind in drawn:
        kinds[kind](figure_path(outputs[kind]))
    return f"[dpscale] figures: {', '.join(drawn)}"


def accuracy(inputs: Files, outputs: Files, params: Files) -> str:
    """Training cells -> tidy tables, accuracy and epoch-time figures, HTML tables."""
    results = tbl.load_results(inputs["results"], inputs.get("again", ()))
    results = acc.training_results(results)
    runs, epochs = acc.runs_table(results), acc.epochs_table(results)
    deltas, tta = acc.delta_table(runs), acc.time_to_accuracy_table(runs)
    frames = {
        "runs": runs,
        "epochs": epochs,
        "summary": acc.summary_table(runs),
        "deltas": deltas,
        "tta": tta,
    }
    for name, frame in frames.items():
        write(frame, outputs[name])
    training_plots.accuracy_curves(epochs, figure_path(outputs["curves"]))
    training_plots.epoch_time_figure(runs, figure_path(outputs["epoch_time"]))
    write_table_html(deltas, outputs["deltas_html"], "Accuracy against the 1-device baseline")
    write_table_html(tta, outputs["tta_html"], "Time to accuracy")
    return f"[dpscale] {len(runs)} training cells, {int((runs['status'] == 'ok').sum())} ok"


def collectives(inputs: Files, outputs: Files, params: Files) -> str:
    """Collectives cells (and imported all_reduce_perf logs, rule imports) -> per-size table,
    alpha-beta fits, bus-bandwidth figure, HTML; every row says its source."""
    results = tbl.load_results(inputs["results"], inputs.get("again", ()))
    measured = coll.collectives_table(results)
    replay = coll.gradient_replay_table(results)
    sizes = coll.with_imported(measured, read_optional(inputs.get("imported")))
    comm_fits = cfit.comm_fits_table(sizes)
    ranks = cfit.rank_count_table(sizes, comm_fits)
    write(sizes, outputs["table"])
    write(comm_fits, outputs["fits"])
    write(ranks, outputs["ranks"])
    write(replay, outputs["replay"])
    write_table_html(
        or_message(
            replay,
            "gradient replay",
            "no collectives cell of this study replayed a training step's gradient traffic",
        ),
        outputs["replay_html"],
        "One training step's gradient traffic, replayed",
    )
    write_table_html(
        or_message(
            ranks,
            "rank-count checks",
            "no collectives cells at two rank counts of one placement (mode collectives)",
        ),
        outputs["ranks_html"],
        "The ring law fitted on the fewest ranks, checked on more",
    )
    plots.collectives_figure(sizes, comm_fits, figure_path(outputs["figure"]), list(STRATEGIES))
    shown = or_message(
        comm_fits,
        "alpha-beta fits",
        "no collective cells in this study (mode collectives) and no nccl-tests log in imports",
    )
    write_table_html(shown, outputs["fits_html"], "All-reduce latency and bandwidth (ring model)")
    fitted = int((comm_fits["status"] == "ok").sum())
    imported = len(sizes) - len(measured)
    return f"[dpscale] {len(sizes)} message sizes ({imported} imported); {fitted} fits"


def drift(inputs: Files, outputs: Files, params: Files) -> str:
    """cells.csv -> the drift probes' table and trace; the figure's title also gives the
    repeats' CV as measured and relative to the trace."""
    cells = read(inputs["cells"])
    table = drift_table(cells)
    repeats = repeatability_sentence(repeatability_with_drift(cells))
    write(table, outputs["table"])
    drift_figure(table, figure_path(outputs["figure"]), repeats)
    return f"[dpscale] {drift_sentence(table)}; {repeats}"


def startup(inputs: Files, outputs: Files, params: Files) -> str:
    """cells.csv -> start-up per layout (table and stacked bars)."""
    table = startup_table(read(inputs["cells"]))
    write(table, outputs["startup_table"])
    startup_figure(table, figure_path(outputs["startup_figure"]))
    return f"[dpscale] start-up of {len(table)} layouts"


def loss_breakdown(inputs: Files, outputs: Files, params: Files) -> str:
    """cells.csv -> where each layout's lost efficiency goes (its control cells): the table,
    its page led by a sentence per layout, and one waterfall per layout."""
    from dpscale.analysis.answers.loss_words import breakdown_sentences, shown_table

    table = loss.loss_breakdown(read(inputs["cells"]))
    write(table, outputs["table"])
    page = table_with_lines(shown_table(table), params["title"], breakdown_sentences(table))
    Path(outputs["html"]).write_text(page, encoding="utf-8")
    loss_figure(table, figure_path(outputs["figure"]))
    return f"[dpscale] loss breakdown of {len(table)} layouts"
