"""Steps that answer the study's question: cost, remedies, findings, the post beside this
run, answer and MFU figures (rules in workflow/rules/findings.smk)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from dpscale.analysis.answers import cost as costs
from dpscale.analysis.answers import findings as fnd
from dpscale.analysis.answers import posts as pst
from dpscale.analysis.answers import remedy_accuracy, remedy_gains, remedy_ranking, remedy_words
from dpscale.analysis.answers.answer import (
    answer_paragraph,
    chosen_layouts,
    landing_notes,
    model_coverage,
)
from dpscale.analysis.answers.answer_table import SLOWER, answer_table, below_table
from dpscale.analysis.answers.input_pipeline import pipeline_findings
from dpscale.analysis.answers.loss_words import chosen_line
from dpscale.analysis.answers.verdicts import top_findings
from dpscale.analysis.results.measurement_quality import quality_line
from dpscale.registry import STRATEGIES
from dpscale.render import findings_page
from dpscale.render.answer_cost import cost_chart
from dpscale.render.answer_remedies import remedies_chart
from dpscale.render.answer_speedup import speedup_chart
from dpscale.render.answer_views import View, save_view
from dpscale.render.bounds import ROW_LIMIT, too_many_rows
from dpscale.render.html import write_table_html
from dpscale.render.mfu_plot import mfu_figure as draw_mfu
from dpscale.steps.io import figure_path, read, read_lines, read_optional, write, write_lines

Files = Mapping[str, Any]


def cost(inputs: Files, outputs: Files, params: Files) -> str:
    """cells.csv (and training runs) + the config's prices -> cost tables and page."""
    prices = costs.Prices.from_config(json.loads(params["prices"]))
    table = costs.cost_table(read(inputs["cells"]), prices)
    write(table, outputs["cost"])
    runs = read_optional(inputs.get("training_runs"))
    to_target = costs.cost_to_target(runs, prices, params["accelerator"])
    write(to_target, outputs["cost_to_target"])
    title = f"Cost: study {params['study']}"
    page = findings_page.cost_html(table, prices, title, to_target, source=outputs["cost"])
    Path(outputs["cost_html"]).write_text(page, encoding="utf-8")
    return f"[dpscale] cost of {len(table)} layouts and batches"


def remedies(inputs: Files, outputs: Files, params: Files) -> str:
    """Each communication remedy beside no remedy, its accuracy cost, its page and the
    findings in words."""
    table = remedy_gains.remedies_table(
        read(inputs["scaling"]),
        read(inputs["cells"]),
        read(inputs["break_even"]),
        read_optional(inputs["collectives"]),
    )
    accuracy = remedy_accuracy.accuracy_table(read_optional(inputs.get("training_runs")))
    lines = remedy_words.finding_lines(table, accuracy)
    write(table, outputs["remedies"])
    write(accuracy, outputs["remedies_accuracy"])
    write_lines(lines, outputs["remedies_top"])
    title = f"Communication remedies: study {params['study']}"
    page = findings_page.remedies_html(table, accuracy, lines, title)
    Path(outputs["remedies_html"]).write_text(page, encoding="utf-8")
    return f"[dpscale] {len(table)} remedy points, {len(accuracy)} with training runs"


def findings(inputs: Files, outputs: Files, params: Files) -> str:
    """Tables -> findings.csv, its HTML page and the top findings (the answer first)."""
    cells, scaling = read(inputs["cells"]), read(inputs["scaling"])
    prices = costs.Prices.from_config(json.loads(params.get("prices", "null")))
    given = read_optional(inputs.get("cost"))
    layout_costs = fnd.with_network(given if "cost" in inputs else costs.cost_table(cells, prices))
    table = fnd.findings_table(
        cells,
        scaling,
        read(inputs["fits"]),
        read(inputs["break_even"]),
        read_optional(inputs.get("accuracy_delta")),
        read_optional(inputs.get("time_to_accuracy")),
        read_optional(inputs.get("predictions")),
        cells_dir=params.get("cells_dir", ""),
        costs=layout_costs,
        to_target=read_optional(inputs.get("cost_to_target")),
    )
    if "remedies" in inputs:
        remedies = read_optional(inputs["remedies"])
        table = remedy_ranking.findings_columns(
            table, remedies, read_optional(inputs.get("remedies_accuracy"))
        )
    table.drop(columns=["contaminated"], errors="ignore").to_csv(outputs["findings"], index=False)
    folder_lines = pipeline_findings(cells, scaling)  # a study's image folder, if it has one
    title = f"Findings: study {params['study']}" if "study" in params else "Findings"
    page = findings_page.findings_html(table, title, folder_lines, source=outputs["findings"])
    Path(outputs["findings_html"]).write_text(page, encoding="utf-8")
    # which strategies measured which models, where not all did, then the cells' quality
    quality = " ".join(filter(None, [model_coverage(cells), quality_line(cells)]))
    answer = answer_paragraph(table, layout_costs, prices, quality)
    # where the chosen layout's loss goes, from its control cells (config controls)
    breakdown = read_optional(inputs.get("loss_breakdown"))
    loss_lines = [
        line
        for chosen in chosen_layouts(table, layout_costs)
        if (line := chosen_line(breakdown, chosen)) is not None
    ]
    answer = " ".join([answer, *loss_lines])
    remedies_lines = read_lines(inputs.get("remedies_top"))
    write_lines(
        [answer, *folder_lines, *remedies_lines, *top_findings(table)], outputs["findings_top"]
    )
    if "answer" in outputs:  # the landing page: the table, the lines under it, the notes
        landing, left_out = landing_rows(
            answer_table(table, layout_costs, cells, prices), outputs["findings"]
        )
        Path(outputs["answer"]).write_text(
            json.dumps(
                {
                    "columns": list(landing.columns),
                    "rows": landing.to_numpy().tolist(),
                    # where the chosen layout's loss goes: first under the table
                    "below": [*left_out, *loss_lines, *below_table(table, cells)],
                    "notes": [
                        *landing_notes(table, layout_costs, prices, quality),
                        *folder_lines,
                        *remedies_lines,
                    ],
                },
                indent=1,
            )
            + "\n",
            encoding="utf-8",
        )
    return f"[dpscale] {len(table)} findings rows"


def landing_rows(landing: pd.DataFrame, findings_csv: str) -> tuple[pd.DataFrame, list[str]]:
    """The answer table as the landing page shows it: whole up to ROW_LIMIT rows (see
    render.bounds); above, without the layouts slower than their model's choice (then its
    first ROW_LIMIT rows), and a line under it saying how many rows it has and where every
    layout's verdict is."""
    if not too_many_rows(len(landing)):
        return landing, []
    shown = landing[landing["answer"] != SLOWER]
    shown = shown.head(ROW_LIMIT) if too_many_rows(len(shown)) else shown
    line = (
        f"The answer table has {len(landing):,} rows, more than the {ROW_LIMIT:,} the report "
        f"shows: the {len(landing) - len(shown):,} left out are layouts slower than their "
        f"model's choice. Every layout's verdict: 0. Findings, and {findings_csv}."
    )
    return shown.reset_index(drop=True), [line]


def post_vs_run(inputs: Files, outputs: Files, params: Files) -> str:
    """The study's reference section (the post's numbers) beside this run's tables."""
    reference = json.loads(params["reference"])
    tables = {name: read_optional(inputs[name]) for name in pst.RUN_TABLES if name in inputs}
    table = pst.post_vs_run(reference, tables)
    write(table, outputs["post_vs_run"])
    write_table_html(
        pst.display_table(table),
        outputs["post_vs_run_html"],
        "The post vs this run",
        pst.page_note(reference),
    )
    return f"[dpscale] {len(table)} post-vs-run rows"


def _both_views(chart: Callable[[View], Any], outputs: Files, name: str) -> None:
    """One figure's static PNG and interactive page (outputs <name>_static, _interactive)."""
    for view in ("static", "interactive"):
        save_view(chart(view), figure_path(outputs[f"{name}_{view}"]), view)


def answer_figures(inputs: Files, outputs: Files, params: Files) -> str:
    """Predictions, scaling and cost -> the predicted speedup per network and the cost per
    layout, each in both views."""
    predictions, scaling = read_optional(inputs["predictions"]), read(inputs["scaling"])
    cost = read_optional(inputs["cost"])
    _both_views(lambda view: speedup_chart(predictions, scaling, view), outputs, "speedup")
    _both_views(lambda view: cost_chart(cost, view), outputs, "cost")
    return "[dpscale] speedup and cost figures, static and interactive"


def remedies_figure(inputs: Files, outputs: Files, params: Files) -> str:
    """remedies.csv -> each remedy's gain and fraction recovered, in both views."""
    remedies = read_optional(inputs["remedies"])
    _both_views(lambda view: remedies_chart(remedies, view), outputs, "remedies")
    return f"[dpscale] remedies figure of {len(remedies)} remedy points, static and interactive"


def mfu_figure(inputs: Files, outputs: Files, params: Files) -> str:
    draw_mfu(read(inputs["cells"]), figure_path(outputs["mfu_figure"]), list(STRATEGIES))
    return "[dpscale] MFU figure drawn"
